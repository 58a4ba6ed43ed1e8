// A job's candidates as planned (src/job/candidates/plan.ts) and its seed's meta as read back
// (src/job/candidates/seed.ts): each candidate's spec is the job's less setup and its network, with
// its share of the budget; the job's result is the picked one's with the cost of all; the seed's
// meta from Redis is held to the shell state's own bounds and the names it may carry.
import { describe, expect, it } from "vitest";
import { candidateOutcome, candidateSpec, candidatesResult } from "../../../src/job/candidates/plan.js";
import { SeedMeta } from "../../../src/job/candidates/seed.js";
import { emptyResult, type JobResult, type JobSpec } from "../../../src/core/spec/spec.js";
import { STATE_MAX_BYTES } from "../../../src/sandbox/shell-state.js";

const job: JobSpec = {
  task: "t",
  repo: { path: "/r" },
  setup: ["npm ci"],
  network: { setup: { allow: ["npm"] } },
  verify: "npm test",
  candidates: 4,
  stopAfterVerified: 1,
  pick: "lower-cost",
  jobId: "fix-1",
  budget: { usd: 2, inputTokens: 10, outputTokens: 3 },
  maxTurns: 20,
};

describe("candidateSpec", () => {
  it("is the job's less setup, its network and the candidates' knobs, with a 1/N share of the budget", () => {
    expect(candidateSpec(job)).toEqual({
      task: "t",
      repo: { path: "/r" },
      verify: "npm test",
      maxTurns: 20,
      budget: { usd: 0.5, inputTokens: 2, outputTokens: 1 },
    });
  });
});

describe("candidatesResult", () => {
  const done = (over: Partial<JobResult>): JobResult => ({
    ...emptyResult("verify_failed", ""),
    error: undefined,
    patch: "diff --git a/x b/x\n",
    filesChanged: ["x"],
    costUsd: 0.25,
    turns: 3,
    verified: false,
    usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 },
    ...over,
  });
  const base = { jobId: "fix-1", timings: { queuedMs: 1, sandboxMs: 0, agentMs: 0, totalMs: 9 } };

  it("is the picked candidate's patch and verify, with the cost, usage and turns of all", () => {
    const results = [
      done({}),
      done({ status: "completed", verified: true, patch: "diff --git a/y b/y\n", jobId: "fix-1-C2" }),
      undefined,
    ];
    const outcomes = [
      candidateOutcome("fix-1", 1, results[0]!),
      candidateOutcome("fix-1", 2, results[1]!),
      candidateOutcome("fix-1", 3, { failed: "the engine died" }),
    ];
    const { result, why } = candidatesResult(job, outcomes, results, base);
    expect(why).toBe("candidate 2 is the only one verify passed");
    expect(result).toMatchObject({
      status: "completed",
      verified: true,
      patch: "diff --git a/y b/y\n",
      picked: 2,
      jobId: "fix-1",
    });
    expect(result.costUsd).toBe(0.5);
    expect(result.turns).toBe(6);
    expect(result.usage.inputTokens).toBe(20);
    expect(result.candidates![2]).toMatchObject({
      n: 3,
      jobId: "fix-1-C3",
      status: "failed",
      error: "the engine died",
    });
  });

  it("fails, saying why, where no candidate can be picked", () => {
    const outcomes = [candidateOutcome("fix-1", 1, { failed: "gone" })];
    const { result } = candidatesResult(job, outcomes, [undefined], base);
    expect(result).toMatchObject({
      status: "failed",
      error: "no candidate could be picked: none of the 1 candidate finished without failing",
    });
    expect(result.picked).toBeUndefined();
  });
});

describe("SeedMeta (read back from Redis)", () => {
  it("takes what a worker wrote, and refuses a state outside the shell state's bounds", () => {
    expect(SeedMeta.safeParse({ v: 1, state: { cwd: "/workspace", env: [["A", "1"]] } }).success).toBe(true);
    expect(SeedMeta.safeParse({ v: 1, state: { cwd: "workspace", env: [] } }).success).toBe(false);
    expect(SeedMeta.safeParse({ v: 1, state: { cwd: "/w", env: [["A", "x".repeat(STATE_MAX_BYTES)]] } }).success).toBe(
      false,
    );
    expect(SeedMeta.safeParse({ v: 1, extra: 1 }).success).toBe(false);
    expect(SeedMeta.safeParse({ v: 1, baseCommit: "not a sha" }).success).toBe(false);
  });

  it("refuses a variable setup's shell state could not carry: its name goes into the shell's start unquoted", () => {
    const env = (name: string) => ({ v: 1, state: { cwd: "/workspace", env: [[name, "1"]] } });
    expect(SeedMeta.safeParse(env("VIRTUAL_ENV")).success).toBe(true);
    for (const name of ["A;touch /tmp/pwned;B", "LD_PRELOAD", "BASH_ENV", "PROMPT_COMMAND", "", "A B"])
      expect(SeedMeta.safeParse(env(name)).success, name).toBe(false);
  });
});
