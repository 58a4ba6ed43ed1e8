// Issue 41, part 1: nothing of the repo's survives setup into the baseline, the snapshot or the
// agent phase. Each attack is the repo's setup leaving something behind that writes after setup
// ended: it guts the tests (so verify would pass without a fix) and plants src/backdoor.js (a
// file the agent never wrote). Each runs through a real worker process (dist/ or src/ via tsx),
// Redis, Docker and git with the scripted model, whose agent only writes NOTES.md: the job must
// end with exactly that patch, and verify must fail on clamp()'s real bug. Stock repo:
// examples/clamp; verify: python3 -m unittest -q.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../src/queue/client.js";
import type { JobResult, TranscriptEvent } from "../src/spec.js";
import { removeQueueSandboxes, startRedis, startWorkerProc, type WorkerProc } from "./support/cluster.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic, type Reply } from "./support/fake-anthropic.js";
import { byTurn, taskOf } from "./support/scripts.js";

const CLAMP = new URL("../examples/clamp", import.meta.url).pathname;
const VERIFY = "python3 -m unittest -q";
const bash = (command: string) => reply(toolUse("bash", { command }));

// The writer every attack leaves: after a delay (setup is over by then), for a minute, every
// 10 ms, it guts the tests and plants the backdoor.
const GUT_PY = `
import os, sys, time
time.sleep(float(sys.argv[1]))
end = time.time() + 60
while time.time() < end:
    try:
        os.makedirs("/workspace/src", exist_ok=True)
        with open("/workspace/src/backdoor.js", "w") as f: f.write("stolen()\\n")
        with open("/workspace/test_clamp.py", "w") as f: f.write("import unittest\\nclass T(unittest.TestCase):\\n    def test_ok(self): pass\\n")
    except OSError: pass
    time.sleep(0.01)
`;
const WRITE_GUT = `cat > /tmp/gut.py <<'EOF'\n${GUT_PY}\nEOF`;

// A daemon by the book: fork, setsid, fork again, its parent gone, stdio closed.
const DAEMON_PY = `
import os, sys
if os.fork(): sys.exit(0)
os.setsid()
if os.fork(): os._exit(0)
os.chdir("/")
fd = os.open("/dev/null", os.O_RDWR)
for i in (0, 1, 2): os.dup2(fd, i)
os.execvp("python3", ["python3", "/tmp/gut.py", "1.5"])
`;

// A writer that looks like the agent's shell: named bash (prctl PR_SET_NAME, what ps -o comm and
// /proc/PID/status show) with an argv that reads as patchbay's own shell.
const RENAMED_PY = `
import ctypes, os, sys
ctypes.CDLL(None).prctl(15, b"bash", 0, 0, 0)
time = __import__("time")
exec(open("/tmp/gut.py").read().replace("float(sys.argv[1])", "1.5"))
`;

// The sourced-script takeover: sourced into the setup shell itself, it leaves a DEBUG trap (run
// before every later command the shell reads, armed two seconds on), a PROMPT_COMMAND, and
// variables bash would run as code if a shell took them in (BASH_ENV, PS4 under xtrace), plus a
// variable to carry (TAKEOVER=1: data only).
const TAKEOVER_SH = `
ARMED=$((SECONDS + 2))
trap '[ "$SECONDS" -ge "$ARMED" ] && python3 /tmp/gut.py 0 </dev/null >/dev/null 2>&1 &' DEBUG
echo 'python3 /tmp/gut.py 0 &' > /tmp/env.sh
export BASH_ENV=/tmp/env.sh PS4='$(python3 /tmp/gut.py 0 &)' PROMPT_COMMAND='python3 /tmp/gut.py 0 &' TAKEOVER=1
tk() { python3 /tmp/gut.py 0 & }
export -f tk
`;

const ATTACKS: Record<string, string[]> = {
  // A child of setup that waits for setup to end, then writes (what a shell taken over by ptrace does).
  child: [WRITE_GUT, "(python3 /tmp/gut.py 1.5 </dev/null >/dev/null 2>&1 &)"],
  takeover: [WRITE_GUT, `cat > /tmp/takeover.sh <<'EOF'\n${TAKEOVER_SH}\nEOF`, "source /tmp/takeover.sh"],
  daemon: [WRITE_GUT, `cat > /tmp/daemon.py <<'EOF'\n${DAEMON_PY}\nEOF`, "python3 /tmp/daemon.py"],
  renamed: [WRITE_GUT, `cat > /tmp/renamed.py <<'EOF'\n${RENAMED_PY}\nEOF`, "(exec -a 'bash --noprofile --norc' python3 /tmp/renamed.py </dev/null >/dev/null 2>&1 &)"],
  setsid: [WRITE_GUT, "setsid -f python3 /tmp/gut.py 1.5 </dev/null >/dev/null 2>&1"],
};

// The agent: waits past every attack's arming, looks, writes its one file, and ends.
const AGENT: Reply[] = [
  bash("sleep 3; ls /workspace; echo \"TAKEOVER=[${TAKEOVER-}] BASH_ENV=[${BASH_ENV-}] trap=[$(trap -p DEBUG)] tk=[$(declare -F tk)]\""),
  bash("cd /workspace && echo agent > NOTES.md && sleep 1 && ls /workspace"),
  reply(text("Done.")),
];

// Setup's directory and exported variables carry into the agent's shell as data; nothing else does.
const CARRY_SETUP = ["mkdir -p 'sub dir' && cd 'sub dir' && export CARRIED=\"a b'c\\$(x)\" && export PATH=\"/workspace/bin:$PATH\" && f() { :; } && trap 'echo TRAPPED' DEBUG && unset LANG"];
const CARRY: Reply[] = [bash("echo \"[$CARRIED] [$PWD] [${PATH%%:*}] [$(declare -F f)] [${LANG-unset}]\"; trap -p DEBUG; echo end"), reply(text("Done."))];

describe("setup leaves nothing running into the baseline, the snapshot or the agent phase (real worker, Docker, git)", () => {
  const ctx = {} as { redis: Awaited<ReturnType<typeof startRedis>>; fake: FakeAnthropic; worker: WorkerProc; client: PatchbayClient };
  const queue = `setup-leftovers-${process.pid}`;
  beforeAll(async () => {
    ctx.redis = await startRedis();
    ctx.fake = await startFakeAnthropic(byTurn((body) => (/carry/.test(taskOf(body)) ? CARRY : AGENT)));
    ctx.worker = startWorkerProc({ REDIS_URL: ctx.redis.url, PATCHBAY_QUEUE: queue, ANTHROPIC_BASE_URL: ctx.fake.url, ANTHROPIC_API_KEY: "test-key", PATCHBAY_CONCURRENCY: "2" });
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

  async function run(task: string, setup: string[]): Promise<{ result: JobResult; outputs: string[] }> {
    const id = await ctx.client.enqueue({ task, repo: { path: CLAMP }, setup, verify: VERIFY, verifyRounds: 0 });
    const result = await ctx.client.waitForResult(id, { timeoutMs: 180_000 });
    const events: TranscriptEvent[] = [];
    for await (const e of ctx.client.watch(id)) events.push(e);
    return { result, outputs: events.flatMap((e) => (e.type === "tool_result" ? [e.output] : [])) };
  }

  // The job is exactly the agent's: its one file in the patch, and verify failing on the real bug.
  function onlyTheAgents({ result, outputs }: { result: JobResult; outputs: string[] }) {
    expect({ status: result.status, filesChanged: result.filesChanged }).toEqual({ status: "verify_failed", filesChanged: ["NOTES.md"] });
    expect(result.error).toMatch(/^verify failed \(exit 1\)/);
    expect(outputs[1]).not.toMatch(/src/); // nothing wrote after setup ended
    expect(result.filesChanged).toEqual(["NOTES.md"]);
    expect(result.patch).not.toMatch(/backdoor|test_ok/);
    expect(result).toMatchObject({ status: "verify_failed", verified: false });
    expect(result.verify?.outputTail).toMatch(/FAILED \(failures=1\)/);
  }

  it.each(["child", "daemon", "renamed", "setsid"])("setup leaves a %s writer: killed with everything of the agent's uid before the baseline", async (attack) => {
    onlyTheAgents(await run(`attack=${attack}`, ATTACKS[attack]!));
  });

  it("a sourced-script takeover of the setup shell (a DEBUG trap, BASH_ENV, PS4, an exported function) dies with that shell; only its data carries", async () => {
    const r = await run("attack=takeover", ATTACKS.takeover!);
    onlyTheAgents(r);
    expect(r.outputs[0]).toMatch(/TAKEOVER=\[1\] BASH_ENV=\[\] trap=\[\] tk=\[\]/);
  });

  it("the agent's shell starts in setup's directory with its exported variables (set as data), not its functions or traps", async () => {
    const { result, outputs } = await run("carry", CARRY_SETUP);
    expect(outputs[0]).toMatch(/^\[a b'c\$\(x\)\] \[\/workspace\/sub dir\] \[\/workspace\/bin\] \[\] \[unset\]\nend/);
    expect(result.filesChanged).toEqual([]);
  });
});
