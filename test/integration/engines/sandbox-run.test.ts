// Sandbox.exec runs commands through the file agent (a child of the root python process, no
// docker exec): as the uid asked for, in the cwd asked for, with stdin, bounded stdout, stderr's
// head and tail, the exit code, a timeout, and a left-behind process that cannot hold the reply
// up. A tar stream goes in frames; a source that fails mid-stream fails the load with its own
// error and leaves the agent in step. An agent that cannot run commands (not root, as on gVisor)
// sends the worker back to docker exec; one without setpriv takes the uid through Popen itself.
//
// Backend: Docker (the hardened container and its image).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RepoError } from "../../../src/job/repo/load.js";
import { docker } from "../../../src/backend/docker.js";
import { AGENT_SCRIPT, agentArgv, FileAgent } from "../../../src/sandbox/file-agent.js";
import { Sandbox } from "../../../src/sandbox/sandbox.js";

let box: Sandbox | undefined;
const sb = () => box!;
beforeAll(async () => {
  box = await Sandbox.create({ labels: { "patchbay.test": "sandbox-run" } });
});
afterAll(async () => {
  await box?.destroy();
});

const ROOT = { user: "0:0" } as const;

describe("Sandbox.exec through the file agent (real engine)", () => {
  it("runs as the uid asked for, in its cwd, with its env and stdin, as a child of the agent", async () => {
    const root = await sb().exec(
      ["bash", "-c", 'echo "$(id -u):$(id -g) $(pwd) $FOO $(cat) $(cat /proc/$PPID/comm)"'],
      { ...ROOT, cwd: "/patchbay", env: ["FOO=bar"], stdin: "in" },
    );
    expect(root.exitCode, root.stderr).toBe(0);
    expect(root.stdout.toString()).toBe("0:0 /patchbay bar in file_agent.py\n");
    const agent = await sb().exec(["bash", "-c", 'echo "$(id -u):$(id -g) $(id -G) $(pwd) $HOME"; ls /patchbay'], {});
    expect(agent.stdout.toString()).toBe("1000:1000 1000 /workspace /home/agent\n");
    expect(agent.exitCode).not.toBe(0);
    expect(agent.stderr).toMatch(/Permission denied/);
  });

  it("put: files written first from the body, as root, 0600 under 0700 parents, only under /patchbay; the same by docker exec", async () => {
    const data = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7) % 256)); // binary, NULs included
    const show =
      'stat -c "%U %a %s" /patchbay/p/q/one.bin /patchbay/two.bin && stat -c "%U %a" /patchbay/p/q && sha256sum < /patchbay/p/q/one.bin && cat /patchbay/two.bin && cat';
    const expected = (await import("node:crypto")).createHash("sha256").update(data).digest("hex");
    // The second time as where the agent cannot run commands: docker exec, the files split off stdin by head.
    const lane = (sb() as unknown as { agent: { canRun: boolean } }).agent;
    for (const canRun of [true, false]) {
      lane.canRun = canRun;
      try {
        const parent = await sb().exec(["bash", "-c", "cat /proc/$PPID/comm"], ROOT);
        expect(parent.stdout.toString()).toBe(canRun ? "file_agent.py\n" : "timeout\n");
        await sb().exec(["rm", "-rf", "/patchbay/p", "/patchbay/two.bin"], ROOT);
        const r = await sb().exec(["bash", "-c", show], {
          ...ROOT,
          stdin: "rest",
          put: [
            { path: "/patchbay/p/q/one.bin", data },
            { path: "/patchbay/two.bin", data: Buffer.from("two\n") },
          ],
        });
        expect(r.exitCode, r.stderr).toBe(0);
        expect(r.stdout.toString()).toBe(`root 600 70000\nroot 600 4\nroot 700\n${expected}  -\ntwo\nrest`);
      } finally {
        lane.canRun = true;
      }
    }
    for (const path of ["/workspace/x", "/patchbay/../workspace/x", "/patchbayx/y", '/patchbay/a"b']) {
      await expect(sb().exec(["true"], { ...ROOT, put: [{ path, data }] })).rejects.toThrow(/put path not allowed/);
    }
    // The agent holds to it too, whoever asks: refused, nothing written, and still in step.
    const agent = (sb() as unknown as { agent: FileAgent }).agent;
    await expect(
      agent.run(["true"], { uid: 0, gid: 0, timeoutSec: 10, maxBytes: 100, put: [{ path: "/workspace/evil", data }] }),
    ).rejects.toThrow(/put outside \/patchbay/);
    expect((await sb().exec(["test", "-e", "/workspace/evil"], ROOT)).exitCode).toBe(1);
    expect((await sb().exec(["echo", "ok"], ROOT)).stdout.toString()).toBe("ok\n");
  });

  it("keeps stdout to maxBytes, keeps stderr's head and tail, and gives the exit code", async () => {
    const r = await sb().exec(
      [
        "bash",
        "-c",
        "head -c 100000 /dev/zero; echo first >&2; head -c 50000 /dev/zero | tr '\\0' x >&2; echo last >&2; exit 3",
      ],
      { maxBytes: 1000 },
    );
    expect(r.exitCode).toBe(3);
    expect(r.stdout.length).toBe(1000);
    expect(r.truncated).toBe(true);
    expect(r.stderr.startsWith("first\n")).toBe(true);
    expect(r.stderr.endsWith("xxxlast\n")).toBe(true);
    expect(r.stderr.length).toBeLessThan(20_000);
  });

  it("kills a command at its timeout, and a process left holding the output does not hold the reply", async () => {
    const slow = await sb().exec(["sleep", "60"], { timeoutSec: 1 });
    expect(slow.exitCode).toBe(137);
    const left = await sb().exec(["bash", "-c", "sleep 60 & echo started"], { timeoutSec: 30 });
    expect(left.stdout.toString()).toBe("started\n");
    expect((await sb().exec(["bash", "-c", "pgrep -f '^sleep 60' | wc -l"], ROOT)).stdout.toString().trim()).toBe("0");
  }, 30_000);

  it("a process that holds the command's stdin without reading it cannot hold the reply up", async () => {
    const r = await sb().exec(["bash", "-c", "setsid sleep 60 <&0 >/dev/null 2>&1 & echo left"], {
      stdin: Buffer.alloc(4 * 1024 * 1024, 1),
      timeoutSec: 120,
    });
    expect(r.stdout.toString()).toBe("left\n");
    expect(await sb().killAgentProcesses()).toBeGreaterThan(0); // the setsid'd sleep, out of the command's session
  }, 60_000);

  it("an agent that dies under a command it was sent is an error, and the command is not run again", async () => {
    await expect(
      sb().exec(["bash", "-c", "echo ran >> /tmp/ran; kill -9 $PPID; sleep 5"], { user: "0:0" }),
    ).rejects.toThrow(/file agent stopped/);
    const r = await sb().exec(["cat", "/tmp/ran"], { user: "0:0" }); // a new agent
    expect(r.stdout.toString()).toBe("ran\n");
  });

  it("a tar stream whose source fails mid-way fails with the source's error, and the agent stays in step", async () => {
    async function* failing() {
      yield Buffer.alloc(512 * 1024, 0x41); // not a tar either way; then the source breaks
      throw new RepoError("the archive changed while it was read");
    }
    await expect(sb().putTarStream("/tmp", (await import("node:stream")).Readable.from(failing()))).rejects.toThrow(
      RepoError,
    );
    const r = await sb().exec(["echo", "in step"]);
    expect(r.stdout.toString()).toBe("in step\n");
    expect((await sb().files.read("/etc/hostname")).length).toBeGreaterThan(0);
  });
  it("kill sweeps while the agent's commands start and end stop and kill only the agent's uid: never root's processes", async () => {
    // The worker's git runs as uid 1000 through the agent; the supervisor sweeps uid 1000 before a
    // patch. A process that died while a sweep read its status once left its "Uid: 1000" line in
    // bash's read buffer, and the next pid checked (the supervisor, the agent) was stopped.
    const s = await Sandbox.create({ labels: { "patchbay.test": "sandbox-run" } });
    try {
      let stop = false;
      let runs = 0;
      const runner = (async () => {
        while (!stop) {
          await s.exec(["bash", "-c", "true"], { timeoutSec: 20 }); // a sweep may kill it (137): not an error
          runs++;
        }
      })();
      let sweeps = 0;
      let slowest = 0;
      for (const t0 = Date.now(); Date.now() - t0 < 20_000; sweeps++) {
        const a = Date.now();
        await s.shell.killAgent({ keepShell: sweeps % 2 === 0 });
        slowest = Math.max(slowest, Date.now() - a);
      }
      stop = true;
      await runner;
      expect(runs).toBeGreaterThan(50);
      expect(sweeps).toBeGreaterThan(50);
      expect(slowest).toBeLessThan(5000); // a stopped supervisor answers only at its 10 s timeout
      const top = await docker().getContainer(s.name).top({ ps_args: "-eo pid,user,stat,args" });
      const stopped = (top.Processes ?? []).filter((p: string[]) => /^T/.test(p[2]!));
      expect(stopped, JSON.stringify(top.Processes)).toEqual([]);
      expect((await s.exec(["echo", "ok"])).stdout.toString()).toBe("ok\n");
      expect((await s.shell.run("echo still")).output).toBe("still\n");
    } finally {
      await s.destroy();
    }
  }, 60_000);

  it("a supervisor that dies (the agent can signal it in the moment it has the agent's uid) is replaced, and the kill is done", async () => {
    const s = sb();
    await s.shell.run("sleep 1000 & echo started");
    const supervisor = async () =>
      (await s.exec(["pgrep", "-x", "supervisor.py"], { user: "0:0" })).stdout.toString().trim();
    const before = await supervisor();
    expect(before).toMatch(/^\d+$/);
    await s.exec(["kill", "-KILL", before], { user: "0:0" });
    expect(await s.killAgentProcesses({ keepShell: true })).toBeGreaterThanOrEqual(1);
    expect((await s.exec(["pgrep", "-u", "1000", "-c", "sleep"], { user: "0:0" })).stdout.toString().trim()).toBe("0");
    const after = await supervisor();
    expect(after).toMatch(/^\d+$/);
    expect(after).not.toBe(before);
    expect((await s.shell.run("echo alive")).output).toMatch(/Killed.*sleep 1000\nalive\n$/s); // bash tells of its job first
  });
});

describe("an image without setpriv", () => {
  it("the agent takes the uid itself (Popen's user and group): the same ids, groups and output", async () => {
    // setpriv hidden from the agent's lookup: it falls back to Popen(user=, group=, extra_groups=).
    const hide = `import os.path\n_exists = os.path.exists\nos.path.exists = lambda p: False if str(p).endswith("/setpriv") else _exists(p)\n`;
    const noSetpriv = new FileAgent(sb().box, { argv: agentArgv(`${hide}${AGENT_SCRIPT}`) });
    try {
      const r = await noSetpriv.run(
        [
          "bash",
          "-c",
          'echo "$(id -u):$(id -g) $(id -G) $(cat)"; grep -E "^(CapEff|NoNewPrivs)" /proc/self/status | tr -s "\t " " "',
        ],
        { uid: 1000, gid: 1000, cwd: "/workspace", stdin: Buffer.from("in"), timeoutSec: 10, maxBytes: 1000 },
      );
      expect(r?.exitCode, r?.stderr).toBe(0);
      expect(r!.stdout.toString()).toMatch(/^1000:1000 1000 in\nCapEff: 0+\n/);
      const root = await noSetpriv.run(["id", "-u"], { uid: 0, gid: 0, timeoutSec: 10, maxBytes: 100 });
      expect(root!.stdout.toString()).toBe("0\n");
    } finally {
      noSetpriv.close();
    }
  });
});

describe("an agent that cannot run commands", () => {
  it("answers run with nothing (the caller uses docker exec) and keeps serving files", async () => {
    const notRoot = new FileAgent(sb().box, {
      argv: agentArgv(`import os\nos.getuid = lambda: 1000\n${AGENT_SCRIPT}`),
    });
    try {
      expect(await notRoot.run(["id", "-u"], { uid: 0, gid: 0, timeoutSec: 10, maxBytes: 100 })).toBeUndefined();
      expect(
        await notRoot.run(["id", "-u"], {
          uid: 0,
          gid: 0,
          timeoutSec: 10,
          maxBytes: 100,
          stream: (async function* () {
            yield Buffer.from("x");
          })(),
        }),
      ).toBeUndefined();
      const st = await notRoot.request({ op: "stat", path: "/workspace" });
      expect(st?.reply && "type" in st.reply && st.reply.type).toBe("directory");
    } finally {
      notRoot.close();
    }
  });
});
