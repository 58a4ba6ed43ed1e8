// runJob's phases (src/job/run.ts), each on its own: the context, acquire/release, prepare, the
// agent, the patch and verify rounds, the result. On the local backend: seconds, no Docker.
//
// Backend: local (runJob's logic).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { loadConfig } from "../../src/core/config/config.js";
import { acquire, release, type Held } from "../../src/job/acquire.js";
import { runAgent } from "../../src/job/agent-phase.js";
import { jobContext, stoppedStatus } from "../../src/job/job-context.js";
import { endedEarly, finish } from "../../src/job/finalize.js";
import { prepare } from "../../src/job/prepare.js";
import { patchAndVerify } from "../../src/job/rounds.js";
import { backendOf } from "../../src/backend/index.js";
import { SandboxPool } from "../../src/sandbox/pool.js";
import { JobSpec, type TranscriptEvent } from "../../src/core/spec/spec.js";
import { reply, startFakeAnthropic, text, toolUse } from "../support/fake-anthropic.js";

const backend = backendOf("local");
const repo = mkdtempSync(join(tmpdir(), "pb-phases-"));
writeFileSync(join(repo, "a.txt"), "a\n");
afterAll(() => rmSync(repo, { recursive: true, force: true }));

function ctxOf(extra: Record<string, unknown> = {}, opts: Record<string, unknown> = {}) {
  const events: TranscriptEvent[] = [];
  const spec = JobSpec.parse({ task: "t", repo: { path: repo }, ...extra });
  const { ctx, dispose } = jobContext(spec, loadConfig(), {
    backend,
    labels: { "patchbay.test": "job-phases" },
    onEvent: (e) => events.push(e),
    ...opts,
  });
  return { ctx, dispose, events };
}

describe("the context", () => {
  it("one signal: the caller's cancel, or the job's own wall clock", async () => {
    const caller = new AbortController();
    const a = ctxOf({}, { signal: caller.signal });
    caller.abort("cancelled");
    expect(stoppedStatus(a.ctx.signal)).toBe("cancelled");
    a.dispose();
    const b = ctxOf({ timeoutSec: 0.05 });
    await new Promise((r) => b.ctx.signal.addEventListener("abort", r));
    expect(stoppedStatus(b.ctx.signal)).toBe("timeout");
    b.dispose();
  });
});

describe("acquire, prepare, release (local backend)", () => {
  it("takes a warm sandbox of the job's kind from the pool; release removes it", async () => {
    const pool = new SandboxPool({ size: 1, backend, labels: { "patchbay.test": "job-phases" } });
    try {
      while (pool.size < 1) await new Promise((r) => setTimeout(r, 20));
      const { ctx, dispose } = ctxOf({}, { pool });
      const held: Held = { removals: [] };
      const sb = await acquire(ctx, held);
      expect(pool.stats.taken).toBe(1);
      await release(held);
      dispose();
      expect(await sb.running()).toBe(false);
    } finally {
      await pool.close();
    }
  });

  it("runs setup, kills what it left running, takes the baseline after it and, with verify, the snapshot", async () => {
    const { ctx, dispose, events } = ctxOf({ setup: ["echo made > made.txt", "sleep 1000 &"], verify: "true" });
    const held: Held = { removals: [] };
    try {
      const sb = await acquire(ctx, held);
      const prep = await prepare(ctx, sb, held, performance.now());
      if ("stopped" in prep) throw new Error("stopped");
      await prep.loaded;
      expect(events.map((e) => e.type)).toEqual(["sandbox_ready", "setup", "setup"]);
      // No live sleep of setup's: the kill takes setup's shell too, so a killed child may stay a
      // zombie a moment until init reaps it (dead, it writes nothing); count only the living.
      expect(
        (await sb.shell.run("ps -u 1000 -o stat=,comm= | awk '$1 !~ /^Z/ && $2 == \"sleep\"' | wc -l")).output.trim(),
      ).toBe("0");
      expect((await held.snapshot!).bytes).toBeGreaterThan(0);
      expect(prep.baseline).toMatch(/^[0-9a-f]{40}$/);
    } finally {
      await release(held);
      dispose();
    }
  });

  it("a job stopped during setup says so, and how", async () => {
    const caller = new AbortController();
    const { ctx, dispose } = ctxOf({ setup: "sleep 30" }, { signal: caller.signal });
    const held: Held = { removals: [] };
    try {
      const sb = await acquire(ctx, held);
      setTimeout(() => caller.abort("cancelled"), 300);
      const prep = await prepare(ctx, sb, held, performance.now());
      expect(prep).toEqual({ stopped: { status: "cancelled", error: "the job was stopped during setup: sleep 30" } });
    } finally {
      await release(held);
      dispose();
    }
  });
});

describe("the agent, the rounds and the result (local backend)", () => {
  it("runs the agent, then verify judges the patch; a failed verify goes back to it once per round", async () => {
    const fake = await startFakeAnthropic([
      reply(toolUse("bash", { command: "echo bad > /workspace/f.txt" })),
      reply(text("Done.")),
      reply(text("Still done.")),
    ]);
    const { ctx, dispose, events } = ctxOf(
      { verify: "grep -q good f.txt", verifyRounds: 1 },
      { model: new AnthropicModel({ apiKey: "k", baseURL: fake.url, maxRetries: 0 }) },
    );
    const held: Held = { removals: [] };
    try {
      const sb = await acquire(ctx, held);
      const prep = await prepare(ctx, sb, held, performance.now());
      if ("stopped" in prep) throw new Error("stopped");
      const agent = await runAgent(ctx, sb, prep);
      expect(agent.outcome).toMatchObject({ status: "completed", turns: 2 });
      const rounds = await patchAndVerify({
        sandbox: sb,
        baseline: prep.baseline,
        spec: ctx.spec,
        snapshot: held.snapshot,
        outcome: agent.outcome,
        at: agent.at,
        emit: (e) => ctx.emit(e),
        signal: ctx.signal,
        removals: held.removals,
        resume: (from, message) => agent.resume(from, message),
        verifySandbox: () => acquireVerify(),
      });
      expect(rounds.outcome.status).toBe("verify_failed");
      expect(rounds.patch.filesChanged).toEqual(["f.txt"]);
      expect(events.filter((e) => e.type === "verify").map((e) => (e as { round: number }).round)).toEqual([1, 2]);
      expect(fake.requests).toHaveLength(3); // the second round's feedback reached the model
      const result = finish(ctx, { ...rounds, timings: { sandboxMs: 1, agentMs: 2 } });
      expect(result).toMatchObject({
        status: "verify_failed",
        verified: false,
        filesChanged: ["f.txt"],
        jobId: ctx.jobId,
        attempt: 1,
        timings: { sandboxMs: 1, agentMs: 2 },
      });
      expect(events.at(-1)).toMatchObject({ type: "job_finished", status: "verify_failed" });
    } finally {
      await release(held);
      dispose();
      await fake.close();
    }

    async function acquireVerify() {
      const { Sandbox } = await import("../../src/sandbox/sandbox.js");
      return Sandbox.create({ backend, labels: { "patchbay.test": "job-phases" } });
    }
  });

  it("an attempt ended early: no patch, no usage, the reason, and its job_finished", () => {
    const { ctx, dispose, events } = ctxOf();
    const r = endedEarly(ctx, "cancelled", "the job was cancelled before it started");
    dispose();
    expect(r).toMatchObject({
      status: "cancelled",
      patch: "",
      turns: 0,
      costUsd: 0,
      error: "the job was cancelled before it started",
    });
    expect(events).toEqual([expect.objectContaining({ type: "job_finished", status: "cancelled" })]);
  });
});
