// Resume, not restart (runJob with a checkpoint store in memory): the local backend
// (test/support/backend.ts: resume is runJob's logic), real git and the SDK against the scripted server. A second attempt given the checkpoint after turn 4 of a 10-turn job
// asks the model only for the turns left and ends with the same patch as an uninterrupted run; a
// checkpoint that is invalid, of another spec, of another baseline, or whose patch does not apply
// means a fresh start with an event saying why; an agent that had finished goes straight to verify.
//
// Backend: local (runJob's logic).
import { describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { Checkpoint, Checkpointer, parseCheckpoint, specHash, type CheckpointStore } from "../../src/job/checkpoint.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";
import { loadRepo } from "../../src/job/repo/load.js";
import { runJob } from "../../src/job/run.js";
import { jobWatchdog } from "../support/sandbox.js";
import { localBackend } from "../support/backend.js";
import { loadConfig } from "../../src/core/config/config.js";
import { JobSpec, type TranscriptEvent } from "../../src/core/spec/spec.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic } from "../support/fake-anthropic.js";
import { byTurn } from "../support/scripts.js";
import { editScript } from "../support/resume-scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;

/** A store in memory: every checkpoint saved, and what load() gives back. */
function memoryStore(jobId: string, spec: JobSpec, stored?: Checkpoint | string) {
  const saved: Checkpoint[] = [];
  const store: CheckpointStore = {
    async load() {
      if (stored === undefined) return undefined;
      return parseCheckpoint(typeof stored === "string" ? stored : JSON.stringify(stored), jobId, specHash(spec));
    },
    async save(c) {
      saved.push(structuredClone(c));
    },
  };
  return { store, saved };
}

async function attempt(
  fake: FakeAnthropic,
  spec: JobSpec,
  jobId: string,
  attemptNo: number,
  stored?: Checkpoint | string,
) {
  const { store, saved } = memoryStore(jobId, spec, stored);
  const events: TranscriptEvent[] = [];
  const before = fake.requests.length;
  const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
  // A job that hangs says where (a hang was seen once under load).
  const disarm = jobWatchdog(`job ${jobId}`, events, 240_000, "local");
  const result = await runJob(spec, {
    jobId,
    attempt: attemptNo,
    model,
    checkpoints: store,
    onEvent: (e) => events.push(e),
    backend: localBackend(),
  }).finally(disarm);
  return { result, events, saved, requests: fake.requests.length - before };
}

const specOf = (task: string, extra: Partial<JobSpec> = {}) => JobSpec.parse({ task, repo: { path: CLAMP }, ...extra });

describe("resume from a checkpoint", { timeout: 600_000 }, () => {
  it("a second attempt from the checkpoint after turn 4 asks only for the turns left and ends with the same patch", async () => {
    const fake = await startFakeAnthropic(byTurn(editScript(10)));
    try {
      const spec = specOf("ten turns of edits", { verify: "python3 -m unittest -q" });
      const whole = await attempt(fake, spec, "resume-whole", 1);
      expect(whole.result.status).toBe("completed");
      expect(whole.requests).toBe(11);
      // Two checkpoints per turn with tool calls (the model's answer before its tools run, then the
      // results), and one at the end; the view turn took no new patch.
      expect(whole.saved.map((c) => c.turns)).toEqual([
        1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11,
      ]);
      expect(whole.saved.map((c) => c.messages.at(-1)!.role)).toEqual([
        ...Array<string[]>(10).fill(["assistant", "user"]).flat(),
        "assistant",
      ]);
      expect(whole.saved.at(-1)!.ended).toBe("completed");
      const done = whole.saved.filter((c) => c.messages.at(-1)!.role === "user");
      expect(done[6]!.patch).toBe(done[5]!.patch);
      expect(whole.saved[0]!.patch).toBe(""); // before any tool ran: the baseline, no exec needed
      expect(whole.result.patch).toContain("GIT binary patch");
      expect(whole.result.patch).toContain("deleted file mode");
      expect(whole.result.patch).toContain("new mode 100755");

      // Attempt 2 of the same job, from what attempt 1 had after turn 4 (as if its worker died in turn 5).
      const cp4 = { ...done[3]!, jobId: "resume-two" };
      const second = await attempt(fake, spec, "resume-two", 2, cp4);
      expect(second.result.status).toBe("completed");
      expect(second.requests).toBe(7); // turns 5-10 and the final answer: none of turns 1-4 again
      expect(second.result.patch).toBe(whole.result.patch);
      expect(second.result.turns).toBe(11);
      // Budgets and cost count both attempts: the usage of turns 1-4 carries on.
      expect(second.result.usage.outputTokens).toBeGreaterThan(
        second.events
          .filter((e) => e.type === "model_response")
          .reduce((s, e) => s + (e.type === "model_response" ? e.usage.outputTokens : 0), 0),
      );
      const resume = second.events.find((e) => e.type === "resume");
      expect(resume).toMatchObject({ restored: true, fromAttempt: 1, turns: 4 });
      // The model was told what was lost, after turn 4's tool results, in the same user message.
      const first = fake.requests.at(-7)!.body;
      const last = first.messages.at(-1);
      expect(last.role).toBe("user");
      expect(last.content.at(0).type).toBe("tool_result");
      expect(last.content.at(-1).text).toMatch(/processes.*files outside \/workspace were lost/);
      // The first request of the resumed attempt carries the whole conversation in its transcript event.
      const req = second.events.find((e) => e.type === "model_request");
      expect(req).toMatchObject({ turn: 5, messagesCount: 9 });
      expect((req as { newMessages: unknown[] }).newMessages).toHaveLength(9);
    } finally {
      await fake.close();
    }
  });

  it("a checkpoint taken while turn 5's tools ran: they run again from turn 4's workspace, with no model request for turn 5", async () => {
    const fake = await startFakeAnthropic(byTurn(editScript(10)));
    try {
      const spec = specOf("ten turns of edits, cut in turn 5");
      const whole = await attempt(fake, spec, "pending-whole", 1);
      const pending5 = whole.saved.find((c) => c.turns === 5 && c.messages.at(-1)!.role === "assistant")!;
      expect(pending5.patch).toBe(whole.saved.find((c) => c.turns === 4 && c.messages.at(-1)!.role === "user")!.patch);
      const second = await attempt(fake, spec, "pending-two", 2, { ...pending5, jobId: "pending-two" });
      expect(second.result.status).toBe("completed");
      expect(second.requests).toBe(6); // turns 6-10 and the final answer
      expect(second.result.patch).toBe(whole.result.patch);
      expect(second.result.turns).toBe(11);
      // Turn 5's tool ran before any request, and its result went to the model with the note.
      const types = second.events.map((e) => e.type);
      expect(types.indexOf("tool_call")).toBeLessThan(types.indexOf("model_request"));
      expect(second.events.find((e) => e.type === "tool_call")).toMatchObject({ turn: 5 });
      const last = fake.requests.at(-6)!.body.messages.at(-1);
      expect(last.role).toBe("user");
      expect(last.content.at(0)).toMatchObject({
        type: "tool_result",
        tool_use_id: (pending5.messages.at(-1)!.content as { id?: string }[]).find((b) => b.id)!.id,
      });
      expect(last.content.at(-1).text).toMatch(/while your last tool calls ran.*run again/);
    } finally {
      await fake.close();
    }
  });

  it("an agent that had finished: no model request at all, straight to the patch and verify", async () => {
    const fake = await startFakeAnthropic(byTurn(editScript(6)));
    try {
      const spec = specOf("six turns", { verify: "python3 -m unittest -q" });
      const whole = await attempt(fake, spec, "resume-ended", 1);
      expect(whole.result.status).toBe("completed");
      const second = await attempt(fake, spec, "resume-ended", 2, whole.saved.at(-1));
      expect(second.requests).toBe(0);
      expect(second.result).toMatchObject({ status: "completed", verified: true, turns: 7, patch: whole.result.patch });
    } finally {
      await fake.close();
    }
  });

  it("a checkpoint that cannot be used means a fresh start with an event saying why, never a failed job", async () => {
    const fake = await startFakeAnthropic(byTurn(editScript(6)));
    try {
      const spec = specOf("six turns, bad checkpoints");
      const whole = await attempt(fake, spec, "resume-bad", 1);
      const cp = whole.saved.filter((c) => c.messages.at(-1)!.role === "user")[3]!; // after turn 4's results
      const cases: [string, Checkpoint | string, RegExp][] = [
        ["not JSON", "{nope", /not JSON/],
        ["schema", JSON.stringify({ ...cp, messages: "all of them" }), /invalid: messages/],
        ["spec", { ...cp, specHash: specHash(specOf("another task")) }, /another spec/],
        ["baseline", { ...cp, baseline: "0".repeat(40) }, /baseline changed/],
        ["patch", { ...cp, patch: cp.patch.replace("-        return lo", "-        return xx") }, /git apply refused/],
        [
          "path escape",
          {
            ...cp,
            patch: "diff --git a/../x b/../x\nnew file mode 100644\n--- /dev/null\n+++ b/../x\n@@ -0,0 +1 @@\n+x\n",
          },
          /git apply refused/,
        ],
      ];
      for (const [what, stored, reason] of cases) {
        const r = await attempt(fake, spec, "resume-bad", 2, stored);
        expect(r.result.status, what).toBe("completed");
        expect(r.requests, what).toBe(7); // all over again
        expect(r.result.patch, what).toBe(whole.result.patch);
        const ev = r.events.find((e) => e.type === "resume");
        expect(ev, what).toMatchObject({ restored: false });
        expect((ev as { reason: string }).reason, what).toMatch(reason);
      }
    } finally {
      await fake.close();
    }
  });

  it("a workspace change over the bound keeps the last checkpoint that fit, and says so", async () => {
    const script = [
      reply(toolUse("bash", { command: "echo small > /workspace/small.txt" })),
      reply(toolUse("bash", { command: "seq 1 5000 > /workspace/big.txt" })),
      reply(toolUse("bash", { command: "echo more >> /workspace/small.txt" })),
      reply(text("Done.")),
    ];
    const fake = await startFakeAnthropic(byTurn(script));
    process.env.PATCHBAY_CHECKPOINT_MAX_BYTES = "10000";
    try {
      const spec = specOf("one big file");
      const r = await attempt(fake, spec, "resume-big", 1);
      expect(r.result.status).toBe("completed");
      expect(r.result.filesChanged).toEqual(["big.txt", "small.txt"]);
      // Turn 1's two, and turn 2's answer (still turn 1's workspace); every later one is over the bound.
      expect(r.saved.map((c) => c.turns)).toEqual([1, 1, 2]);
      expect(r.saved.at(-1)!.patch).toContain("+small");
      expect(r.saved.at(-1)!.patch).not.toContain("big.txt");
      const said = r.events.filter((e) => e.type === "checkpoint");
      expect(said).toHaveLength(1); // said once, not every turn
      expect(said[0]).toMatchObject({ turn: 2, saved: false });
      expect((said[0] as { reason: string }).reason).toMatch(/over 10000 bytes; the last checkpoint that fit is kept/);
    } finally {
      delete process.env.PATCHBAY_CHECKPOINT_MAX_BYTES;
      await fake.close();
    }
  });

  it("a checkpoint whose patch could not be taken (the engine away) is not stored, and neither is a later one on the stale patch", async () => {
    const spec = specOf("engine away");
    const { store, saved } = memoryStore("cp-stale", spec);
    const events: unknown[] = [];
    // Every exec fails, as when the engine is gone.
    const sandbox = new Proxy(
      {},
      { get: () => () => Promise.reject(new Error("connect ECONNREFUSED docker.sock")) },
    ) as unknown as Sandbox;
    const cp = new Checkpointer({
      store,
      sandbox,
      baseline: "a".repeat(40),
      jobId: "cp-stale",
      attempt: 1,
      specHash: specHash(spec),
      emit: (e) => events.push(e),
      maxBytes: 1 << 20,
    });
    const state = (turns: number, last: "user" | "assistant") => ({
      turns,
      usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
      stopReason: "tool_use",
      summary: "",
      messages: [
        { role: "user" as const, content: "task" },
        { role: last, content: "x" },
      ],
    });
    await cp.take(state(1, "assistant"), 1); // before any tool: the baseline, stored
    expect(saved.map((c) => c.patch)).toEqual([""]);
    cp.touched(); // turn 1's tool may have changed files
    await cp.take(state(1, "user"), 1); // the patch fails: nothing stored
    await cp.take(state(2, "assistant"), 1); // still unknown: nothing stored (not turn 2 on the baseline's patch)
    expect(saved).toHaveLength(1);
    expect(events).toMatchObject([
      { type: "checkpoint", turn: 1, saved: false },
      { type: "checkpoint", turn: 2, saved: false },
    ]);
  });

  it("after a turn whose commands only read, the checkpoint takes no patch (the workspace's fingerprint is unchanged); after any write it does", async () => {
    const spec = specOf("fingerprints");
    const { store, saved } = memoryStore("cp-fp", spec);
    const sandbox = await Sandbox.create({
      backend: localBackend(),
      labels: { "patchbay.test": "resume-fingerprint" },
    });
    try {
      const { baseline } = await loadRepo(sandbox, { path: CLAMP });
      let runs = 0; // commands run for the worker (the checkpoint's git is one)
      const exec = sandbox.exec.bind(sandbox);
      sandbox.exec = (argv, o) => (runs++, exec(argv, o));
      const cp = new Checkpointer({
        store,
        sandbox,
        baseline,
        jobId: "cp-fp",
        attempt: 1,
        specHash: specHash(spec),
        emit: () => {},
        maxBytes: 1 << 20,
      });
      const state = (turns: number) => ({
        turns,
        usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
        stopReason: "tool_use",
        summary: "",
        messages: [
          { role: "user" as const, content: "task" },
          { role: "assistant" as const, content: `turn ${turns}` },
        ],
      });
      const turn = async (n: number, cmd: string) => {
        cp.touched();
        const r = await sandbox.shell.run(`cd /workspace && ${cmd}`);
        expect(r.exitCode, r.output).toBe(0);
        const before = runs;
        await cp.take(state(n), 1);
        return runs - before;
      };
      await cp.start(); // the baseline's fingerprint
      expect(await turn(1, "ls >/dev/null")).toBe(0); // read only, from the start: no git at all
      expect(saved.at(-1)).toMatchObject({ turns: 1, patch: "" });
      expect(await turn(1, "echo '# one' >> clamp.py")).toBe(1);
      expect(saved.at(-1)!.patch).toMatch(/^\+# one$/m);
      expect(await turn(2, "ls -la && cat clamp.py >/dev/null && python3 -c 'print(1)'")).toBe(0); // read only: no git
      expect(saved.at(-1)).toMatchObject({ turns: 2, patch: saved.at(-2)!.patch });
      // A rewrite that puts back size and mtime: the fingerprint still differs (ctime), so git runs.
      expect(
        await turn(3, "m=$(stat -c %.9Y clamp.py); sed -i 's/# one/# two/' clamp.py; touch -m -d \"@$m\" clamp.py"),
      ).toBe(1);
      expect(saved.at(-1)!.patch).toMatch(/^\+# two$/m);
      // A directory the agent cannot read: no fingerprint, so git runs after every turn from now
      // on, read only or not, and no more fingerprints are asked for.
      let digests = 0;
      const digest = sandbox.files.digest.bind(sandbox.files);
      sandbox.files.digest = (...a) => (digests++, digest(...a));
      expect(await turn(4, "mkdir -p closed && chmod 000 closed")).toBe(1);
      expect(await turn(5, "ls >/dev/null")).toBe(1);
      expect(digests).toBe(1);
      expect(saved.map((c) => c.turns)).toEqual([1, 1, 2, 3, 4, 5]);
    } finally {
      await sandbox.destroy();
    }
  }, 120_000);

  it("a dead worker's job is taken up again within 30 s by default (lock + stall check)", () => {
    const c = loadConfig({});
    expect(c.lockDurationMs + c.stalledIntervalMs).toBeLessThanOrEqual(30_000);
    // Renewed often enough that a worker must be stuck for more than half the lock to lose it.
    expect(c.lockRenewMs).toBeLessThanOrEqual(c.lockDurationMs / 2);
  });
});
