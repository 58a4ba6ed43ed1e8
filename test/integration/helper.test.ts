// The in-sandbox helper (src/sandbox/helper.ts, py/helper.py): every process of a sandbox is its
// child, its stdio a channel of one stream. The framing alone (pure); the helper on the local
// backend (no Docker: uids, flow in both directions, many channels at once, a missing program, its
// own death); a helper that says what it never says (a stand-in box); and on Docker, that a whole
// job's sandbox makes exactly one exec.
//
// Backend: local (the helper's behaviour), but its one-exec count on Docker (the engine's exec
// events).
import { spawn } from "node:child_process";
import type { Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { computePatch } from "../../src/job/patch.js";
import { loadRepo } from "../../src/job/repo/load.js";
import { docker } from "../../src/backend/docker.js";
import { BOX_ENV_VAR, TRUSTED_ENV, type Attached, type Box } from "../../src/backend/types.js";
import { HELPER_SCRIPT, HelperBox } from "../../src/sandbox/helper.js";
import {
  CHUNK,
  frame,
  FrameReader,
  HELPER_VERSION,
  HelperProtocolError,
  spawnFrame,
  WINDOW,
} from "../../src/sandbox/helper-protocol.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";
import { localBackend } from "../support/backend.js";
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";

/** Starts argv on `box` and gathers its output; resolves with it, its stderr and exit status. */
async function run(box: Box, argv: string[], opts: { user?: string; stdin?: Buffer } = {}) {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const p = await box.attach(argv, (b, s) => (s === 1 ? out : err).push(Buffer.from(b)), { user: opts.user, cwd: "/" });
  if (opts.stdin) await p.send(opts.stdin);
  p.endInput();
  await p.ended;
  return { out: Buffer.concat(out).toString(), err: Buffer.concat(err).toString(), code: await p.exitCode() };
}

describe("the helper's frames (pure)", () => {
  it("read back whole however the stream is cut, and the helper program speaks the same version and sizes", () => {
    const wire = Buffer.concat([
      Buffer.from([0x4f, 0, 0, 0, 7, 0, 0, 0, 3]),
      Buffer.from("abc"),
      Buffer.from([0x5a, 0, 0, 0, 7, 0, 0, 0, 0]),
      Buffer.from([0x58, 0, 0, 0, 7, 0, 0, 0, 10]),
      Buffer.from('{"code":3}'),
    ]);
    for (let cut = 0; cut <= wire.length; cut++) {
      const r = new FrameReader();
      const frames = [...r.push(wire.subarray(0, cut)), ...r.push(wire.subarray(cut))];
      expect(frames.map((f) => [f.kind, f.channel, f.body.toString()])).toEqual([
        ["O", 7, "abc"],
        ["Z", 7, ""],
        ["X", 7, '{"code":3}'],
      ]);
    }
    expect(frame("D", 5, Buffer.from("hi"))).toEqual(Buffer.from([0x44, 0, 0, 0, 5, 0, 0, 0, 2, 0x68, 0x69]));
    expect(HELPER_SCRIPT).toMatch(new RegExp(`^VERSION = ${HELPER_VERSION}$`, "m"));
    expect(HELPER_SCRIPT).toMatch(new RegExp(`^WINDOW = 1 << ${Math.log2(WINDOW)}$`, "m"));
    expect(HELPER_SCRIPT).toMatch(new RegExp(`^CHUNK = 64 << 10$`, "m"));
    expect(CHUNK).toBe(64 << 10);
  });

  it("a kind it never sends, or a frame longer than any it sends, is a protocol error", () => {
    expect(() => new FrameReader().push(Buffer.from([0x53, 0, 0, 0, 1, 0, 0, 0, 0]))).toThrow(HelperProtocolError);
    expect(() => new FrameReader().push(Buffer.from([0x4f, 0, 0, 0, 1, 0, 1, 0, 1]))).toThrow(/never sends/);
  });
});

/** The system's python3, as in an image (a pyenv shim would put its own variables in). */
const PYTHON = "/usr/bin/python3";
/** What a backend gives the helper's exec (backend/types.ts TRUSTED_ENV). */
const ENV = Object.fromEntries(TRUSTED_ENV.map((kv) => kv.split("=")));

/** The helper program itself on this host (no box): spawns `argv` on channel 1, returns its frames' output and exit. */
async function rawHelper(
  argv: string[],
  env: Record<string, string>,
  user = `${process.getuid!()}:${process.getgid!()}`,
  extra: string[] = [],
) {
  const p = spawn(PYTHON, ["-I", "-S", "-B", "-u", "-c", HELPER_SCRIPT], { env, stdio: ["pipe", "pipe", "inherit"] });
  const reader = new FrameReader();
  let ready = false;
  let out = "";
  let err = "";
  const done = new Promise<number | undefined>((resolve) => {
    p.stdout.on("data", (b: Buffer) => {
      if (!ready) {
        const nl = b.indexOf(10);
        ready = true;
        b = b.subarray(nl + 1);
      }
      for (const f of reader.push(b)) {
        if (f.kind === "O") out += f.body.toString();
        if (f.kind === "e") err += f.body.toString();
        if (f.kind === "X") resolve(JSON.parse(f.body.toString()).code);
      }
    });
    p.once("exit", () => resolve(undefined));
  });
  p.stdin.write(spawnFrame(1, { argv, user, env: ["ODD", "SET=1", ...extra], cwd: "/" }));
  const code = await done;
  p.stdin.end();
  return { out, err, code };
}

/**
 * These run the helper as root on the host, so they need root; off CI a non-root developer skips
 * them, while in CI (CI=true) they run whatever the user and fail if not root, so a broken CI
 * machine cannot hide them.
 */
const asRoot = process.getuid!() === 0 || process.env.CI === "true";

describe("the helper program on this host", () => {
  it.runIf(asRoot)(
    "gives a root child the trusted environment and the box's in BOX_ENV_VAR, an agent's child the box's; drops an entry without '=', and bounds what it says of a name",
    async () => {
      // The exec's own environment is what a backend gives it: TRUSTED_ENV, the box's own (the
      // image's ENV, hostile) in BOX_ENV_VAR, and a variable of the image's it emptied.
      const box = ["PATH=/workspace/.venv/bin:/usr/bin:/bin", "LD_PRELOAD=/tmp/x.so", "HOME=/home/agent", "ODD=1"];
      const env = { ...ENV, [BOX_ENV_VAR]: JSON.stringify(box), LD_PRELOAD: "" };
      const root = await rawHelper(["env"], env);
      expect(root.code).toBe(0);
      expect(root.out.split("\n").filter(Boolean).sort()).toEqual(
        ["HOME=/root", ...TRUSTED_ENV, `${BOX_ENV_VAR}=${JSON.stringify(box)}`, "SET=1"].sort(),
      );
      // The agent's: the box's environment and the spawn's (HOME its passwd entry's), its program found on the box's PATH.
      const agent = await rawHelper(["env"], env, "1000:1000");
      expect(agent.code).toBe(0);
      expect(
        agent.out
          .split("\n")
          .filter((l) => l && !l.startsWith("HOME="))
          .sort(),
      ).toEqual(["PATH=/workspace/.venv/bin:/usr/bin:/bin", "LD_PRELOAD=/tmp/x.so", "ODD=1", "SET=1"].sort());
      const long = await rawHelper(["x".repeat(70_000)], env, "1000:1000");
      expect(long.code).toBe(126);
      expect(long.err).toMatch(/^patchbay helper: cannot start 'x{200}': File name too long\n$/);
    },
  );
  it.runIf(asRoot)(
    "starts a root program only where no other uid can write it or any directory above it; a relative path never",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "pb-trusted-"));
      try {
        writeFileSync(join(dir, "prog"), "#!/bin/sh\necho ran\n", { mode: 0o755 });
        // In a directory of uid 1000 (as /workspace), or under /tmp (mode 1777, sticky: anyone makes new names there).
        chownSync(dir, 1000, 1000);
        const owned = await rawHelper([join(dir, "prog")], ENV);
        expect(owned).toMatchObject({
          out: "",
          code: 126,
          err: expect.stringMatching(
            /as root: .*refused as a root program: in .*pb-trusted-.*, a directory of uid 1000/,
          ),
        });
        chownSync(dir, 0, 0);
        chmodSync(dir, 0o755);
        const inTmp = await rawHelper([join(dir, "prog")], ENV);
        expect(inTmp).toMatchObject({
          out: "",
          code: 126,
          err: expect.stringMatching(/a directory of uid 0 with mode 1777/),
        });
        expect(await rawHelper(["./prog"], ENV)).toMatchObject({
          code: 126,
          err: expect.stringMatching(/must be an absolute path or a bare name/),
        });
        expect(await rawHelper(["no-such-program-pb"], ENV)).toMatchObject({
          code: 127,
          err: expect.stringMatching(/no no-such-program-pb in \/usr\/sbin:/),
        });
        // The agent's uid: its own business, found on the box's PATH.
        expect(await rawHelper([join(dir, "prog")], ENV, "1000:1000")).toMatchObject({ out: "ran\n", code: 0 });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
  it.runIf(asRoot)(
    "runs a root `python3 -I -S -u -c` child as a fork of itself, as the exec would have run it; any other python is exec'd",
    async () => {
      const script = [
        "# probe.py: what an inline child sees",
        "import os, sys, signal, threading, atexit, time",
        "cmd = open('/proc/self/cmdline', 'rb').read().split(b'\\0')",
        "comm = open('/proc/self/comm').read().strip()",
        "print(sys.argv, sorted(os.environ), signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN, signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL, b'helper.py' in cmd[6], comm, sorted(os.listdir('/proc/self/fd')), sorted(k for k in vars(sys.modules['__main__']) if not k.startswith('__')))",
        "atexit.register(lambda: print('atexit'))",
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()",
        "sys.exit(int(sys.argv[2]))",
      ].join("\n");
      // The environment as an exec'd python has it: a root child's (TRUSTED_ENV, as the backend gave
      // the helper, the box's, and the spawn's).
      const exec = await rawHelper(["python3", "-I", "-S", "-c", "import os; print(sorted(os.environ))"], ENV);
      expect(exec).toEqual({ out: "['HOME', 'LANG', 'PATCHBAY_BOX_ENV', 'PATH', 'SET']\n", err: "", code: 0 });
      const inline = await rawHelper(["python3", "-I", "-S", "-u", "-c", script, "a b", "3"], ENV);
      expect({ code: inline.code, err: inline.err }).toEqual({ code: 3, err: "" });
      // Its argv as python -c gives it, SIGPIPE ignored as python leaves it, the helper's command
      // line (a fork, no new interpreter), its script's name, only its stdio open, a __main__ of its
      // own (nothing of the helper's); its thread waited for, then atexit, as python's exit does.
      expect(inline.out).toBe(
        "['-c', 'a b', '3'] ['HOME', 'LANG', 'PATCHBAY_BOX_ENV', 'PATH', 'SET'] True True True probe.py ['0', '1', '2', '3'] ['atexit', 'cmd', 'comm', 'os', 'signal', 'sys', 'threading', 'time']\nthread\natexit\n",
      );
      const raised = await rawHelper(["python3", "-I", "-S", "-B", "-u", "-c", "raise ValueError('no')"], ENV);
      expect(raised).toMatchObject({
        code: 1,
        err: expect.stringMatching(/^Traceback[\s\S]*File "<string>", line 1[\s\S]*ValueError: no\n$/),
      });
      expect(raised.err).not.toMatch(/run_inline/);
      expect(await rawHelper(["python3", "-I", "-S", "-u", "-c", "import sys; sys.exit('gone')"], ENV)).toEqual({
        out: "",
        err: "gone\n",
        code: 1,
      });
      expect((await rawHelper(["python3", "-I", "-S", "-u", "-c", "raise KeyboardInterrupt"], ENV)).code).toBe(130);
      // Exec'd, a new interpreter with its own command line: without -u; as any uid but root (a fork
      // would hold a copy of the helper's memory: other channels' bytes in flight); with the locale
      // variables changed (the interpreter's encodings come from them).
      const own = ["-c", "import sys; print(open('/proc/self/cmdline','rb').read().split(b'\\0')[-2].decode())"];
      expect((await rawHelper(["python3", "-I", "-S", ...own], ENV)).out).toBe(
        "import sys; print(open('/proc/self/cmdline','rb').read().split(b'\\0')[-2].decode())\n",
      );
      expect((await rawHelper(["python3", "-I", "-S", "-u", ...own], ENV, "1000:1000")).out).toMatch(/^import sys/);
      expect((await rawHelper(["python3", "-I", "-S", "-u", ...own], ENV, undefined, ["LANG=C"])).out).toMatch(
        /^import sys/,
      );
      expect((await rawHelper(["python3", "-I", "-S", "-u", ...own], ENV, undefined, ["LANGUAGE=C"])).out).toMatch(
        /^# helper\.py: /,
      ); // not a locale variable: a fork
    },
  );
});

describe("the helper on the local backend", () => {
  let sb: Sandbox;
  const box = () => sb.box as HelperBox;
  beforeAll(async () => {
    sb = await Sandbox.create({ backend: localBackend(), labels: { "patchbay.test": "helper" } });
  });
  afterAll(async () => {
    await sb?.destroy();
  });

  it("starts every process as its child, as the uid and gid asked, in its own session", async () => {
    const pid = await box().helperPid();
    const agent = await run(box(), ["bash", "-c", "echo $PPID $(id -u):$(id -g):$(id -G) $(ps -o sid= -p $$)=$$"], {
      user: "1000:1000",
    });
    expect(agent.out.trim()).toMatch(new RegExp(`^${pid} 1000:1000:1000 (\\d+)=\\1$`));
    const root = await run(box(), ["bash", "-c", "echo $PPID $(id -u):$(id -g)"], { user: "0:0" });
    expect(root.out.trim()).toBe(`${pid} 0:0`);
    // The sandbox's own processes are its children too: the shell, the file agent, the supervisor.
    await sb.shell.supervised();
    const tree = await run(box(), ["bash", "-c", `ps -o comm=,args= --ppid ${pid}`], { user: "0:0" });
    expect(tree.out).toMatch(/^bash +bash --noprofile --norc$/m);
    // The file agent and the supervisor are forks of the helper running their scripts (no new
    // interpreter): named by their scripts, with the helper's command line.
    expect(tree.out).toMatch(/^file_agent\.py +python3 -I -S -B -u -c # helper\.py/m);
    expect(tree.out).toMatch(/^supervisor\.py +python3 -I -S -B -u -c # helper\.py/m);
    // Nothing of the helper's or of another channel's is open in a child: only its own stdio.
    expect((await run(box(), ["ls", "/proc/self/fd"])).out).toBe("0\n1\n2\n3\n");
  });

  it("a program that cannot start: the reason on stderr, exit 127 (126 for one that cannot run)", async () => {
    expect(await run(box(), ["no-such-program"])).toEqual({
      out: "",
      err: expect.stringMatching(/cannot start 'no-such-program'.*No such file/),
      code: 127,
    });
    expect((await run(box(), ["/etc"])).code).toBe(126);
    // A request it cannot read is a channel that fails the same way: the helper goes on.
    expect((await run(box(), ["id"], { user: "agent" })).code).toBe(126);
    expect((await run(box(), ["echo", "still"])).out).toBe("still\n");
  });

  it("three channels at once carry 6.9 MB each, whole and in order, and 5 MiB of stdin arrive whole", async () => {
    const expected = Array.from({ length: 1_000_000 }, (_, i) => `${i + 1}\n`).join("");
    const outs = await Promise.all([1, 2, 3].map(() => run(box(), ["seq", "1", "1000000"])));
    for (const o of outs) expect(o.out === expected).toBe(true);
    const input = Buffer.alloc(5 << 20, 0x61);
    const r = await run(box(), ["bash", "-c", "wc -c; echo done >&2"], { stdin: input });
    expect(r).toEqual({ out: `${5 << 20}\n`, err: "done\n", code: 0 });
  });

  it("a process that stops reading its stdin does not hold the writer; a paused one is held at the window and the others go on", async () => {
    const r = await run(box(), ["head", "-c", "10"], { stdin: Buffer.alloc(8 << 20, 0x62) });
    expect(r).toEqual({ out: "b".repeat(10), err: "", code: 0 });

    let got = 0;
    const yes = await box().attach(["yes"], (b) => (got += b.length), { cwd: "/" });
    yes.pause();
    await sleep(500);
    expect((await run(box(), ["echo", "meanwhile"])).out).toBe("meanwhile\n");
    expect(got).toBeLessThanOrEqual(WINDOW + CHUNK);
    yes.resume();
    await sleep(200);
    expect(got).toBeGreaterThan(WINDOW);
    yes.destroy(); // its pipe closed: yes ends on SIGPIPE
    for (let i = 0; i < 50 && (await run(box(), ["pgrep", "-x", "yes"])).code === 0; i++) await sleep(100);
    expect((await run(box(), ["pgrep", "-x", "yes"])).code).toBe(1);
  });

  it("a process's stream ends when it exits: with its output closed early it still gives its status and reads its stdin; output a background process holds is let go 2 s after the exit", async () => {
    const closed = await run(box(), ["bash", "-c", "echo hi; exec >&- 2>&-; wc -c > /tmp/helper-wc; exit 3"], {
      stdin: Buffer.alloc(3 << 20, 0x63),
    });
    expect(closed).toEqual({ out: "hi\n", err: "", code: 3 });
    expect((await run(box(), ["cat", "/tmp/helper-wc"])).out).toBe(`${3 << 20}\n`);
    const t0 = Date.now();
    const held = await sb.runFresh("echo verify; sleep 30 & exit 1", { timeoutSec: 20 });
    expect(held).toMatchObject({ output: "verify\n", exitCode: 1 });
    expect(Date.now() - t0).toBeLessThan(6000);
    await sb.killAgentProcesses();
  });

  it("a child the agent stops before its exec stalls that child only: the helper goes on spawning", async () => {
    // The agent stops everything of its uid, over and over, while patchbay starts processes as it.
    const stopper = await box().attach(
      [
        "python3",
        "-c",
        "import os, signal\nwhile True:\n    try: os.kill(-1, signal.SIGSTOP)\n    except OSError: pass",
      ],
      () => {},
      { cwd: "/" },
    );
    const spawned = Array.from({ length: 30 }, () => box().attach(["true"], () => {}, { cwd: "/" }));
    await Promise.all(spawned);
    const t0 = Date.now();
    expect((await run(box(), ["echo", "root"], { user: "0:0" })).out).toBe("root\n");
    expect((await sb.files.stat("/workspace"))?.type).toBe("directory");
    expect(Date.now() - t0).toBeLessThan(5000);
    // (The agent's stops would catch the supervisor in the moment it has the agent's uid: root ends the stopper first.)
    await run(box(), ["pkill", "-KILL", "-u", "1000"], { user: "0:0" });
    stopper.destroy();
    for (const p of await Promise.all(spawned)) p.destroy();
    expect((await sb.shell.run("echo after")).output).toBe("after\n");
  });

  it("when the helper dies its processes' streams end, and the next start makes a new helper", async () => {
    const first = await box().helperPid();
    const sleeper = await box().attach(["sleep", "1000"], () => {}, { cwd: "/" });
    await run(box(), ["kill", "-9", String(first)], { user: "0:0" });
    await sleeper.ended;
    expect(sleeper.alive).toBe(false);
    expect(await sleeper.exitCode()).toBe(-1);
    expect((await run(box(), ["echo", "again"])).out).toBe("again\n");
    expect(await box().helperPid()).not.toBe(first);
    expect((await sb.shell.run("echo shell")).output).toBe("shell\n");
  });
});

describe("a helper that says what it never says", () => {
  it("is dropped: its channels end at once", async () => {
    // A stand-in box whose "helper" is ready and then sends a frame kind it never sends.
    const box: Box = {
      name: "stand-in",
      state: async () => ({ running: true }),
      attach: async (_argv, onData) => {
        const child = spawn(
          "bash",
          ["-c", `echo PBREADY:1; read -r -N 9; printf 'Q\\0\\0\\0\\1\\0\\0\\0\\0'; sleep 30`],
          { stdio: ["pipe", "pipe", "ignore"] },
        );
        child.stdout.on("data", (b: Buffer) => onData(b, 1));
        const ended = new Promise<void>((r) => child.once("close", () => r()));
        let alive = true;
        return {
          write: (d) => void child.stdin.write(d),
          send: async (d) => void child.stdin.write(d),
          endInput: () => child.stdin.end(),
          pipeIn: async () => {},
          ended: ended.then(() => void (alive = false)),
          get alive() {
            return alive;
          },
          pause: () => {},
          resume: () => {},
          destroy: () => (child.kill("SIGKILL"), (alive = false)),
          exitCode: async () => -1,
        } satisfies Attached;
      },
    };
    const helper = new HelperBox(box);
    const p = await helper.attach(["anything"], () => {});
    await p.ended;
    expect(await p.exitCode()).toBe(-1);
    helper.close();
  });
});

describe("a job's sandbox on Docker", () => {
  it("makes one exec from its start to its end: the helper's", async () => {
    const label = `patchbay.test.helper=${process.pid}`;
    // Each event is one JSON line; the helper's (its whole program on the command line, ~17 KB)
    // comes in more than one chunk.
    let text = "";
    const events = (await docker().getEvents({
      filters: { type: ["container"], event: ["exec_create"], label: [label] },
    })) as unknown as Readable;
    events.on("data", (d: Buffer) => (text += d.toString()));
    const execs = () =>
      text
        .split("\n")
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { Action: string }).Action);
    const repo = mkdtempSync(join(tmpdir(), "pb-helper-"));
    writeFileSync(join(repo, "a.py"), "print(1)\n");
    const sb = await Sandbox.create({ labels: { "patchbay.test.helper": String(process.pid) } });
    try {
      const { baseline } = await loadRepo(sb, { path: repo });
      await sb.files.write("/workspace/b.py", Buffer.from("print(2)\n"));
      expect((await sb.shell.run("python3 a.py && python3 b.py")).output).toBe("1\n2\n");
      expect((await sb.runFresh("true")).exitCode).toBe(0);
      await sb.killAgentProcesses();
      expect((await computePatch(sb, baseline)).patch).toMatch(/b\.py/);
      await sleep(500); // the engine's events are on their way
      expect(execs().map((a) => a.slice(0, 60))).toEqual([
        expect.stringMatching(/^exec_create: python3 -I -S -B -u -c # helper\.py/),
      ]);
    } finally {
      events.destroy();
      await sb.destroy();
      rmSync(repo, { recursive: true, force: true });
    }
  });
});
