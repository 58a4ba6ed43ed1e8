// The hardening, checked from inside a real container.
//
// Backend: Docker (the attacks need the isolation and the limits); under rootless Podman too.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../../src/queue/client.js";
import {
  reply,
  startFakeAnthropic,
  text,
  toolResults,
  toolResultText,
  toolUse,
  type FakeAnthropic,
} from "../../support/fake-anthropic.js";
import { startRedis, startWorkerProc, type WorkerProc } from "../../support/cluster.js";
import { useSandbox } from "../../support/sandbox.js";
import { podman } from "../../support/engine-kind.js";
import { engineInfo, hostUid } from "../../../src/backend/engine.js";
import { docker } from "../../../src/backend/docker.js";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { backendOf } from "../../../src/backend/index.js";
import { seccompProfile, type SeccompProfile } from "../../../src/backend/seccomp.js";
import type { BoxSpec, Backend } from "../../../src/backend/types.js";
import { POOL_LABEL, SandboxPool } from "../../../src/sandbox/pool.js";
import { Sandbox } from "../../../src/sandbox/sandbox.js";
import { PTRACE_PROBE, probe, probeCommand, probeResult, probeTarget, procProbe } from "../../support/ptrace-probe.js";
import { closeScripted, runScripted } from "../../support/scripted-job.js";
import { landlockCheck, landlockDetail } from "../../../src/cli/doctor.js";
import { loadConfig } from "../../../src/core/config/config.js";

// Set before any sandbox of this file exists: a sandbox that inherited this process's environment
// would show it.
const CANARY = `canary-${process.pid}-7f3a`;
process.env.PATCHBAY_SECRET_CANARY = CANARY;
const CLAMP = new URL("../../../examples/clamp", import.meta.url).pathname;

describe("sandbox hardening (real engine)", () => {
  const sb = useSandbox({ limits: { memoryMb: 512, pids: 128, diskMb: 64 } });

  it("has no network interface but lo, and no route out", async () => {
    const r = await sb().shell.run("ls /sys/class/net");
    expect(r.output.trim().split("\n")).toEqual(["lo"]);
    // With only lo there is no route to anything outside: connect fails at once with
    // ENETUNREACH, before a packet is sent (192.0.2.1 is TEST-NET-1, reserved for documentation).
    const tcp = await sb().shell.run("timeout 10 bash -c 'echo > /dev/tcp/192.0.2.1/80'; echo rc=$?");
    expect(tcp.output).toMatch(/Network is unreachable/);
    expect(tcp.output).toMatch(/rc=1\n$/);
    const udp = await sb().shell.run(
      "python3 -c \"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('192.0.2.1', 53))\" 2>&1 | tail -1",
    );
    expect(udp.output).toMatch(/Network is unreachable/);
  });

  it(
    podman
      ? "rootless: root in the container is the engine's unprivileged user on the host, uid 1000 a subordinate id"
      : "rootful Docker: root in the container is root on the host (what rootless Podman changes)",
    async () => {
      // Files written in the sandbox by its root and by the agent, seen from the host through the
      // container init's root (/proc/PID/root), and that process's own host uid.
      await sb().exec(["touch", "/workspace/by-root"], { user: "0:0" });
      await sb().exec(["touch", "/workspace/by-agent"]);
      const pid = (await docker().getContainer(sb().name).inspect()).State.Pid;
      const owner = (f: string) => statSync(`/proc/${pid}/root/workspace/${f}`).uid;
      const initUid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]);
      if (!podman) {
        expect([owner("by-root"), owner("by-agent"), initUid]).toEqual([0, 1000, 0]);
        return;
      }
      const engine = await engineInfo(docker());
      const root = hostUid(engine, 0)!;
      expect(root).toBeGreaterThan(0);
      expect(engine).toMatchObject({ name: "podman", rootless: true });
      expect([owner("by-root"), owner("by-agent"), initUid]).toEqual([root, hostUid(engine, 1000), root]);
      expect(hostUid(engine, 1000)).toBeGreaterThanOrEqual(100_000); // a subordinate id: no account of the host's
    },
  );

  it("runs as uid 1000 with no capabilities and no new privileges", async () => {
    const r = await sb().shell.run("id -u; grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status");
    expect(r.output).toMatch(/^1000\n/);
    expect(r.output).toMatch(/CapEff:\s+0000000000000000/);
    expect(r.output).toMatch(/CapPrm:\s+0000000000000000/);
    expect(r.output).toMatch(/NoNewPrivs:\s+1/);
  });

  it("has a read-only root filesystem and a writable, bounded /tmp and /workspace", async () => {
    const r = await sb().shell.run("touch /etc/x; echo rc=$?; touch /tmp/x /workspace/x && echo writable");
    expect(r.output).toMatch(/Read-only file system/);
    expect(r.output).toMatch(/rc=1/);
    expect(r.output).toMatch(/writable/);
  });

  it("stops a fork bomb at the pids limit and still answers", async () => {
    // The loop after the bomb is a builtin of the shell itself: the timeout must kill the bomb and
    // then replace the stuck shell.
    const r = await sb().shell.run(":(){ :|:& };: ; while :; do sleep 1; done", { timeoutSec: 4 });
    expect(r.timedOut).toBe(true);
    expect(r.output).toMatch(/Resource temporarily unavailable|retry/);
    const after = await sb().shell.run("echo alive; ps -e --no-headers | wc -l");
    expect(after.output).toMatch(/^alive\n/);
    expect(Number(after.output.split("\n")[1])).toBeLessThan(10);
    const limit = await sb().shell.run("cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max");
    expect(limit.output.trim()).toBe("128");
  });

  it("kills a 4 GB allocation, reports it, and still answers", async () => {
    const r = await sb().shell.run(
      "python3 -c \"b = bytearray(4 * 1024**3); b[::4096] = b'x' * (len(b) // 4096); print('survived')\"",
      { timeoutSec: 60 },
    );
    expect(r.exitCode).toBe(137);
    expect(r.output).not.toMatch(/^survived$/m);
    expect(r.output).toMatch(/out of memory/);
    expect((await sb().shell.run("echo alive")).output).toBe("alive\n");
  });

  it("stops filling /workspace at its bound with ENOSPC", async () => {
    const r = await sb().shell.run(
      "dd if=/dev/zero of=/workspace/fill bs=1M count=200 2>&1; echo rc=$?; df -m /workspace | tail -1",
      { timeoutSec: 60 },
    );
    expect(r.output).toMatch(/No space left on device/);
    expect(r.output).toMatch(/rc=1/);
    const size = await sb().shell.run("stat -c %s /workspace/fill; rm /workspace/fill");
    expect(Number(size.output.trim())).toBeLessThanOrEqual(64 * 1024 * 1024);
  });

  it("passes nothing of this process's environment into the container", async () => {
    expect(process.env.PATCHBAY_SECRET_CANARY).toBe(CANARY); // set before the sandbox was created
    const r = await sb().shell.run("env");
    expect(r.output).toMatch(/^PATH=/m); // env ran
    expect(r.output).not.toMatch(new RegExp(CANARY));
    expect(r.output).not.toMatch(/ANTHROPIC|REDIS_URL|DOCKER_HOST|PATCHBAY_/);
    // The container's own environment (pid 1's) is root's: not readable by the agent at all.
    const init = await sb().shell.run("cat /proc/1/environ");
    expect(init.output).toMatch(/Permission denied/);
    const probe = await sb().exec(["env"]);
    expect(probe.stdout.toString()).toMatch(/^PATH=/m);
    expect(probe.stdout.toString()).not.toMatch(new RegExp(CANARY));
  });

  it("runs the agent's shell and what it starts at oom_score_adj 1000: the kernel's first pick when memory runs out", async () => {
    const r = await sb().shell.run(
      "cat /proc/$$/oom_score_adj; cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'",
    );
    expect(r.output.trim().split("\n")).toEqual(["1000", "1000", "1000"]);
    // The root helpers keep the image's default: the agent's processes go first.
    const root = await sb().exec(
      ["sh", "-c", "for p in $(pgrep -u 0 -f 'python3 -I -S'); do cat /proc/$p/oom_score_adj; done | sort -u"],
      { user: "0:0" },
    );
    expect(root.stdout.toString().trim().split("\n")).not.toContain("1000");
  });

  it("the agent's kill -9 -1 ends only its own processes: the container's init and the root helpers live on, and the next command runs", async () => {
    const container = docker().getContainer(sb().name);
    const before = (await container.inspect()).State;
    // The pids of root's processes, but the ps that lists them.
    const roots = async () => {
      const ps = (
        await sb().exec(["ps", "-e", "--no-headers", "-o", "pid=,user=,args="], { user: "0:0" })
      ).stdout.toString();
      return ps
        .split("\n")
        .map((l) => l.trim().split(/\s+/))
        .filter(([pid, user, cmd]) => pid && user === "root" && cmd !== "ps")
        .map(([pid]) => pid!);
    };
    const rootsBefore = await roots();
    expect(rootsBefore.length).toBeGreaterThanOrEqual(3); // tini, its sleep and the helper, at least
    // kill(-1) reaches every process the caller may signal but itself: the shell lives, its
    // background sleep does not, and nothing of root's is touched.
    await sb().shell.run("sleep 1000 &");
    const r = await sb().shell.run("kill -9 -1; sleep 0.5; pgrep -u 1000 -c sleep; id -u; echo alive");
    expect(r.output).toMatch(/Killed[^\n]*sleep 1000\n0\n1000\nalive\n$/);
    expect((await container.inspect()).State).toMatchObject({
      Running: true,
      Pid: before.Pid,
      StartedAt: before.StartedAt,
    });
    // Every root process of before is still there (the new command may have added its own).
    expect(await roots()).toEqual(expect.arrayContaining(rootsBefore));
  });
});

describe("a worker's environment stays out of its jobs (worker process, real job)", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let worker: WorkerProc;
  let client: PatchbayClient;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeAnthropic([reply(toolUse("bash", { command: "env; echo ENV-DONE" })), reply(text("done"))]);
    // The canary is in the worker's environment from its start, next to its secrets.
    worker = startWorkerProc({
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: "env-leak",
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key-secret",
      PATCHBAY_SECRET_CANARY: CANARY,
      PATCHBAY_CONCURRENCY: "1",
    });
    // Its start line names the engine (under Podman: rootless, its uid map, gVisor handed on).
    await worker.waitFor(
      podman
        ? /ready: queue env-leak, concurrency 1; engine podman [\d.]+, rootless \(container root = host uid [1-9]\d*; uid 1000 = host uid [1-9]\d*\), cgroup v[12]; gVisor \(runsc\) jobs are handed to other workers/
        : /ready: queue env-leak, concurrency 1; engine docker /,
    );
    client = new PatchbayClient({ redisUrl: redis.url, queueName: "env-leak" });
  });
  afterAll(async () => {
    await client?.close();
    await worker?.stop("SIGTERM");
    await fake?.close();
    await redis?.stop();
  });

  it("`env` run by the model shows none of the worker's variables", async () => {
    const id = await client.enqueue({ task: "print the environment", repo: { path: CLAMP } });
    const result = await client.waitForResult(id, { timeoutMs: 120_000 });
    expect(result.status).toBe("completed");
    const seen = toolResultText(toolResults(fake.requests[1])[0]);
    expect(seen).toMatch(/ENV-DONE/);
    expect(seen).toMatch(/^PATH=/m);
    expect(seen).not.toMatch(new RegExp(CANARY));
    expect(seen).not.toMatch(/test-key-secret|ANTHROPIC|REDIS_URL|PATCHBAY_/);
  });
});

describe("no process of the agent's can trace another (seccomp: ptrace and its relatives denied)", () => {
  const sb = useSandbox({ limits: { memoryMb: 512, pids: 128, diskMb: 64 } });
  const traced = useSandbox({ limits: { memoryMb: 512, pids: 128, diskMb: 64 }, allowPtrace: true });

  it("the agent cannot attach to a sibling, seize its own shell, read or write another's memory, take its fds: EPERM", async () => {
    expect(await probe(sb())).toEqual({
      attach: "EPERM",
      seize: "EPERM",
      process_vm_readv: "EPERM",
      process_vm_writev: "EPERM",
      pidfd_open: "ok", // signalling by pidfd stays, as kill does
      pidfd_getfd: "EPERM",
      kcmp: "EPERM",
      perf_event_open: "EPERM",
      io_uring_setup: "EPERM",
    });
    // The shell it seized and the sibling it attached to were never stopped; the box answers.
    expect((await sb().shell.run("echo alive")).output).toBe("alive\n");
  });

  it("the agent's ordinary tools still work under the profile: the shell, git, python, threads and subprocesses", async () => {
    const r = await sb().shell.run(
      "cd /tmp && rm -rf g && git init -q g && cd g && echo x > f && git add f && git -c user.email=a@b -c user.name=a commit -qm m && git log --oneline | wc -l && python3 -c \"import subprocess, threading; t = threading.Thread(target=print, args=('thread',)); t.start(); t.join(); print(subprocess.run(['true']).returncode)\" && grep -E '^Seccomp:' /proc/self/status",
      { timeoutSec: 60 },
    );
    expect(r.output).toBe("1\nthread\n0\nSeccomp:\t2\n");
  });

  it("with the worker's PATCHBAY_ALLOW_PTRACE=1 (allowPtrace) ptrace and process_vm_readv/writev work again (strace, gdb); their relatives stay denied", async () => {
    expect(await probe(traced())).toEqual({
      attach: "ok",
      seize: "ok",
      process_vm_readv: "ok",
      process_vm_writev: "ok",
      pidfd_open: "ok",
      pidfd_getfd: "EPERM",
      kcmp: "EPERM",
      perf_event_open: "EPERM",
      io_uring_setup: "EPERM",
    });
  });
});

// /proc/PID/mem and /proc/PID/environ need no syscall the profile denies: the kernel's
// ptrace_may_access lets the same uid through, unless Landlock scopes it. The helper puts every
// spawn of the agent's uid into a Landlock domain of its own (src/sandbox/py/helper.py), so the
// agent's shell reaches only its own descendants. This machine's kernel has Landlock (ABI >= 1);
// on one without it the sibling's rows would be "ok" (see `patchbay doctor`'s landlock line).
describe("no process of the agent's can read or write another's memory or environment through /proc (Landlock: a domain per spawn)", () => {
  const sb = useSandbox({ limits: { memoryMb: 512, pids: 128, diskMb: 64 } });

  it("the agent's shell cannot open a sibling's /proc/PID/mem (read or write) or read its environ; its own child's stay open to it", async () => {
    expect(await procProbe(sb())).toEqual({
      sibling: { mem_read: "EACCES", mem_write: "EACCES", environ: "EACCES" },
      // The same domain: the test cannot pass by everything failing.
      own_child: { mem_read: "ok", mem_write: "ok", environ: "ok" },
    });
  });

  it("doctor's landlock line says what a box of the image finds: yes and the ABI here; no, and what it costs, where the kernel has none", async () => {
    const engine = await engineInfo(docker());
    const c = await landlockCheck(loadConfig({}).image, engine);
    expect(c).toMatchObject({ name: "landlock", ok: true, required: false });
    expect(c.detail).toMatch(/^landlock: yes \(ABI [1-9]\d*\)$/);
    expect(landlockDetail("-38")).toEqual({
      ok: false,
      detail:
        "landlock: no: a job's processes can read each other's memory through /proc (the kernel has no Landlock (ENOSYS))",
    });
    expect(landlockDetail("-95").detail).toContain("EOPNOTSUPP");
  });
});

/** The profile a container was created with: Docker holds its text, Podman the path it was given. */
function profileOf(securityOpt: string[] | undefined): SeccompProfile {
  const v = (securityOpt ?? []).find((o) => o.startsWith("seccomp="))?.slice("seccomp=".length);
  if (!v) throw new Error(`no seccomp profile in SecurityOpt ${JSON.stringify(securityOpt)}`);
  return JSON.parse(v.startsWith("{") ? v : readFileSync(v, "utf8")) as SeccompProfile;
}

// A minimal MCP server (stdio, JSON-RPC lines) in python3, which the sandbox image has: one tool.
const MCP_SERVER = String.raw`
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m: continue
    method = m.get("method")
    if method == "initialize": r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "fixture", "version": "1"}}
    elif method == "tools/list": r = {"tools": [{"name": "hello", "description": "says hello", "inputSchema": {"type": "object"}}]}
    else: r = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n"); sys.stdout.flush()
`;

describe("every box gets the profile: a job's own (where its MCP servers run), its verify box, a warm pool's", () => {
  let repo = "";
  const made: { spec: BoxSpec; securityOpt?: string[] }[] = [];
  // The Docker backend, recording each box it makes and the SecurityOpt its container was created with.
  const real = backendOf("docker");
  const recording: Backend = Object.assign(Object.create(real) as Backend, {
    create: async (spec: BoxSpec) => {
      const box = await real.create(spec);
      made.push({
        spec,
        securityOpt: (await docker().getContainer(spec.name).inspect()).HostConfig.SecurityOpt ?? undefined,
      });
      return box;
    },
  });
  beforeAll(() => {
    repo = mkdtempSync(join(tmpdir(), "pb-seccomp-job-"));
    writeFileSync(join(repo, "mcp_fixture.py"), MCP_SERVER);
    writeFileSync(join(repo, "ptrace_probe.py"), PTRACE_PROBE);
  });
  afterAll(async () => {
    await closeScripted();
    if (repo) rmSync(repo, { recursive: true, force: true });
  });

  it("the model's shell cannot attach to the job's MCP server; verify's command cannot trace either; both boxes carry the profile", async () => {
    // Verify passes only where the probe in its box is denied.
    const verify =
      'sleep 300 & S=$!; python3 ptrace_probe.py $S $$ > /tmp/p; kill $S; cat /tmp/p; grep -q \'"attach": "EPERM", "seize": "EPERM", "process_vm_readv": "EPERM"\' /tmp/p';
    const { result, fake } = await runScripted(
      [
        reply(
          toolUse("bash", { command: `echo changed > b.txt; ${probeCommand("$(pgrep -f mcp_fixture.py | head -1)")}` }),
        ),
        reply(text("done")),
      ],
      { repo: { path: repo }, mcp: { servers: { fx: { command: "python3", args: ["mcp_fixture.py"] } } }, verify },
      `seccomp-every-box-${process.pid}`,
      recording,
    );
    expect(result.error).toBeUndefined();
    expect(result.status).toBe("completed");
    const out = toolResultText(toolResults(fake.requests[1])[0]);
    expect(probeTarget(out)).toBe("python3 mcp_fixture.py");
    const seen = probeResult(out);
    expect(seen).toMatchObject({ attach: "EPERM", seize: "EPERM", process_vm_readv: "EPERM", pidfd_getfd: "EPERM" });
    expect(result.verified).toBe(true);
    // The job's box and one verify box, each created with the profile.
    expect(made.length).toBe(2);
    for (const m of made) {
      expect(m.securityOpt).toContain("no-new-privileges");
      expect(profileOf(m.securityOpt)).toEqual(seccompProfile());
    }
  }, 180_000);

  it("a warm pool's box carries the worker's profile, and the pool hands it only to a job asking the same", async () => {
    made.length = 0;
    const pool = new SandboxPool({
      size: 1,
      backend: recording,
      labels: { "patchbay.test": `seccomp-pool-${process.pid}` },
    });
    try {
      for (let i = 0; i < 600 && pool.size < 1; i++) await new Promise((r) => setTimeout(r, 100));
      expect(made.map((m) => m.spec.labels[POOL_LABEL])).toEqual(["1"]);
      expect(profileOf(made[0]!.securityOpt)).toEqual(seccompProfile());
      expect(pool.take({ allowPtrace: true }, 0)).toBeUndefined();
      const warm = pool.take({}, 0);
      expect(warm?.name).toBe(made[0]!.spec.name);
      await warm?.destroy();
    } finally {
      await pool.close();
    }
  }, 120_000);

  it("a pool's bare box carries the worker's profile too, and goes only to a job asking the same", async () => {
    made.length = 0;
    const pool = new SandboxPool({
      size: 1,
      backend: recording,
      labels: { "patchbay.test": `seccomp-bare-${process.pid}` },
      freeSlots: () => 0,
      slotsToVerify: () => [["a-job", {}]],
    });
    try {
      for (let i = 0; i < 600 && pool.bareSize < 1; i++) await new Promise((r) => setTimeout(r, 100));
      expect(made.map((m) => m.spec.labels[POOL_LABEL])).toEqual(["1", "1"]); // the spare, then the bare box
      for (const m of made) expect(profileOf(m.securityOpt)).toEqual(seccompProfile());
      expect(pool.takeBare({ allowPtrace: true }, 0)).toBeUndefined();
      const b = pool.takeBare({}, 0);
      expect(b?.name).toBe(made[1]!.spec.name);
      const sb = await Sandbox.create({}, b);
      await sb.destroy();
    } finally {
      await pool.close();
    }
  }, 120_000);
});
