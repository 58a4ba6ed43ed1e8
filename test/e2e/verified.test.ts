// "Verified means verified" (issue 23), each attack run as an attacker would, through a real worker
// process (dist/), Redis, Docker and git, with the scripted model. Stock repo: examples/clamp, whose
// clamp() returns lo above the cap; verify: python3 -m unittest -q.
//
// Backend: Docker (the attacks need the isolation and the limits).
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import type { JobResult, TranscriptEvent } from "../../src/core/spec/spec.js";
import { removeQueueSandboxes, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic, type Reply } from "../support/fake-anthropic.js";
import { byTurn, taskOf } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const VERIFY = "python3 -m unittest -q";
const bash = (command: string) => reply(toolUse("bash", { command }));
const FIX =
  "sed -i '0,/return lo/! s/        return lo/        return hi/' /workspace/clamp.py && grep -c 'return hi' /workspace/clamp.py";

// The attack 1: a package that shadows unittest, ignored (so not in the patch) and on disk.
const PLANT =
  "mkdir unittest; echo 'import sys; sys.exit(0)' > unittest/__main__.py; : > unittest/__init__.py; printf '.gitignore\\nunittest/\\n' > .gitignore; echo planted";

// Attack 2: a process whose main thread exits with the raw exit syscall while another thread lives
// (State Z in /proc), waiting for its shell to be killed, then writing into the workspace.
const ZOMBIE_PY = `
import ctypes, os, threading, time
ppid = os.getppid()
def after_kill():
    while os.getppid() == ppid: time.sleep(0.005)
    for i in range(400):
        try:
            with open("/workspace/after-kill.txt", "a") as f: f.write("written after the kill %d\\n" % i)
        except OSError: pass
        time.sleep(0.01)
threading.Thread(target=after_kill).start()
time.sleep(0.3)
ctypes.CDLL(None).syscall(60, 0)
`;

// Each job's task names its script.
const SCRIPTS: Record<string, Reply[]> = {
  planted: [bash(`cd /workspace && ${PLANT}`), reply(text("Tests pass."))],
  // Everything the patch leaves out and verify could see: an ignored dir, .git, /tmp, $HOME (read-only here).
  siblings: [
    bash(
      `cd /workspace && ${FIX} && mkdir -p build && echo x > build/planted && printf 'build/\\n' >> .gitignore && echo x > .git/planted && echo x > /tmp/planted && (echo x > $HOME/planted || true)`,
    ),
    reply(text("Fixed.")),
  ],
  // A verify round's own leftovers: the first round leaves a mark, the second passes on seeing it.
  leftovers: [reply(text("Done.")), reply(text("Done, really."))],
  zombie: [
    bash(
      `cd /workspace && ${FIX} && cat > /tmp/z.py <<'EOF'\n${ZOMBIE_PY}\nEOF\npython3 /tmp/z.py & sleep 1; grep -E '^(State|Threads)' /proc/$!/status`,
    ),
    reply(text("Fixed.")),
    bash("ls -a /workspace; echo round2 > /workspace/notes.txt"),
    reply(text("Noted.")),
  ],
};

/** A private Redis, the scripted model and one real worker process (dist/) on a queue of its own. */
function useWorker(name: string, policy: Parameters<typeof byTurn>[0], env: Record<string, string> = {}) {
  const ctx = {} as {
    redis: Awaited<ReturnType<typeof startRedis>>;
    fake: FakeAnthropic;
    worker: WorkerProc;
    client: PatchbayClient;
  };
  const queue = `${name}-${process.pid}`;
  beforeAll(async () => {
    ctx.redis = await startRedis();
    ctx.fake = await startFakeAnthropic(byTurn(policy));
    ctx.worker = startWorkerProc({
      REDIS_URL: ctx.redis.url,
      PATCHBAY_QUEUE: queue,
      ANTHROPIC_BASE_URL: ctx.fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_CONCURRENCY: "2",
      ...env,
    });
    await ctx.worker.waitFor(/ready/);
    ctx.client = new PatchbayClient({ redisUrl: ctx.redis.url, queueName: queue });
  });
  afterAll(async () => {
    await ctx.client?.close();
    await ctx.worker?.stop();
    await ctx.fake?.close();
    await ctx.redis?.stop();
    await removeQueueSandboxes(queue);
  });
  return ctx;
}

describe("verified means verified (real worker, Docker, git)", () => {
  const w = useWorker("verified", (body) => SCRIPTS[/attack=(\w+)/.exec(taskOf(body))?.[1] ?? ""] ?? []);

  async function run(
    attack: string,
    spec: Record<string, unknown> = {},
  ): Promise<{ result: JobResult; events: TranscriptEvent[] }> {
    const id = await w.client.enqueue({
      task: `attack=${attack}`,
      repo: { path: CLAMP },
      verify: VERIFY,
      verifyRounds: 0,
      ...spec,
    });
    const result = await w.client.waitForResult(id, { timeoutMs: 180_000 });
    const events: TranscriptEvent[] = [];
    for await (const e of w.client.watch(id)) events.push(e);
    return { result, events };
  }
  const toolOutputs = (events: TranscriptEvent[]) =>
    events.flatMap((e) => (e.type === "tool_result" ? [e.output] : []));

  it("an ignored package planted to shadow unittest: verify_failed, not a verified empty patch", async () => {
    const { result, events } = await run("planted");
    expect(toolOutputs(events)[0]).toMatch(/planted/);
    expect(result.patch).toBe(""); // the package and the .gitignore that hides it are both ignored
    expect(result.status).toBe("verify_failed");
    expect(result.verified).toBe(false);
    expect(result.verify?.outputTail).toMatch(/FAILED \(failures=1\)/);
  });

  it("what the patch leaves out is not there for verify: an ignored dir, .git, /tmp", async () => {
    const verify = `for f in build/planted .git/planted /tmp/planted $HOME/planted; do if [ -e $f ]; then echo "SAW $f"; exit 1; fi; done; ${VERIFY}`;
    const { result } = await run("siblings", { verify });
    expect(result.verify?.outputTail).not.toMatch(/SAW/);
    expect(result).toMatchObject({ status: "completed", verified: true });
    expect([...result.filesChanged].sort()).toEqual([".gitignore", "clamp.py"]);
  });

  it("a verify round's leftovers are gone for the next round", async () => {
    const verify = `if [ -e .verified-once ]; then echo SAW-LEFTOVER; exit 0; fi; touch .verified-once; ${VERIFY}`;
    const { result, events } = await run("leftovers", { verify, verifyRounds: 1 });
    expect(events.filter((e) => e.type === "verify").map((e) => (e as { exitCode: number }).exitCode)).toEqual([1, 1]);
    expect(result.verify?.outputTail).not.toMatch(/SAW-LEFTOVER/);
    expect(result).toMatchObject({ status: "verify_failed", verified: false });
  });

  it("a zombie leader's live thread dies at the end of the agent phase: its file is in no patch and gone before the next round", async () => {
    const { result, events } = await run("zombie", {
      verify: `${VERIFY} && grep -q round2 notes.txt`,
      verifyRounds: 1,
    });
    const outputs = toolOutputs(events);
    expect(outputs[0]).toMatch(/State:\s+Z[\s\S]*Threads:\s+2/); // the attack is set up as described
    expect(outputs[1]).not.toMatch(/after-kill/); // round 2: nothing wrote after the first kill
    expect(result.patch).not.toMatch(/after-kill/);
    expect(result).toMatchObject({ status: "completed", verified: true });
    expect([...result.filesChanged].sort()).toEqual(["clamp.py", "notes.txt"]);
  });
});

describe("a background fork bomb, then 20 commands (real worker, under load)", () => {
  const load: ChildProcess[] = [];
  const squares = Array.from({ length: 20 }, (_, i) => i + 3);
  // The bomb; and one a sweep that skips zombies never stops: a zombie leader's live thread
  // forking children that hold the pids limit.
  const BOMBS: Record<string, string> = {
    classic: "f(){ f|f& }; f; sleep 2; echo launched",
    zombie: `cat > /tmp/zb.py <<'EOF'
import ctypes, os, threading, time
def bomb():
    while True:
        try:
            if os.fork() == 0: time.sleep(1000); os._exit(0)
        except OSError: time.sleep(0.01)
threading.Thread(target=bomb).start()
time.sleep(0.2)
ctypes.CDLL(None).syscall(60, 0)
EOF
python3 /tmp/zb.py & sleep 2; echo launched`,
  };
  const script = (kind: string) => [
    bash(BOMBS[kind]!),
    ...squares.map((n) => bash(`python3 -c 'print(${n}*${n})'`)),
    reply(text("Done.")),
  ];

  const w = useWorker("verified-bomb", (body) => script(/bomb=(\w+)/.exec(taskOf(body))?.[1] ?? ""));
  // A parallel load on the host's two cores, besides the two bomb jobs at a time.
  beforeAll(() => {
    for (let i = 0; i < 2; i++) load.push(spawn(process.execPath, ["-e", "for(;;){}"], { stdio: "ignore" }));
  });
  afterAll(() => {
    for (const p of load) p.kill("SIGKILL");
  });

  it.each(["classic", "zombie"])(
    "%s bomb, ten times: every one of the 20 commands after it runs and prints its answer",
    async (kind) => {
      const ids = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          w.client.enqueue({
            task: `bomb=${kind} ${i}`,
            repo: { path: CLAMP },
            commandTimeoutSec: 10,
            limits: { pids: 128 },
          }),
        ),
      );
      for (const id of ids) {
        const result = await w.client.waitForResult(id, { timeoutMs: 600_000 });
        expect(result.status, id).toBe("completed");
        const outputs: string[] = [];
        for await (const e of w.client.watch(id)) if (e.type === "tool_result") outputs.push(e.output);
        expect(outputs, id).toHaveLength(21);
        squares.forEach((n, i) =>
          expect(outputs[i + 1], `${id}: command ${i + 1} of 20`).toMatch(new RegExp(`(^|\\n)${n * n}\\n?$`)),
        );
      }
    },
    900_000,
  );
});

describe("a forged end marker followed by endless bytes (real worker)", () => {
  // A DEBUG trap sees the shell's own next line, `__pb_post <nonce> $?`: at the command's real end it
  // prints that nonce's end marker, then bytes without a newline until it is killed.
  const flood = `trap 'case "$BASH_COMMAND" in __pb_post*) set -- $BASH_COMMAND; trap - DEBUG; printf "\\nPBEND%s:" "$2"; yes | tr -d "\\n";; esac' DEBUG; echo armed`;
  const script = [bash(flood), bash("echo after"), reply(text("Done."))];

  const w = useWorker("verified-flood", script, { PATCHBAY_CONCURRENCY: "1", PATCHBAY_POOL: "0" });

  it("keeps the worker's peak RSS under 300 MB for the whole command timeout, and the next command runs", async () => {
    // The default command timeout: the buffer of old grew for all of it (367 MB at its end here).
    const id = await w.client.enqueue({ task: "flood", repo: { path: CLAMP } });
    const result = await w.client.waitForResult(id, { timeoutMs: 300_000 });
    const peak = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${w.worker.pid}/status`, "utf8"))![1]) * 1024;
    const outputs: string[] = [];
    for await (const e of w.client.watch(id)) if (e.type === "tool_result") outputs.push(e.output);
    expect(peak).toBeLessThan(300 * 1024 * 1024);
    expect(outputs[0]).toMatch(/armed[\s\S]*yyyy/); // the flood reached the worker, as output
    expect(outputs[0]!.length).toBeLessThan(40_000);
    expect(outputs[1]).toBe("after");
    expect(result.status).toBe("completed");
  }, 400_000);
});
