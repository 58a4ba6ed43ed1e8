// JobSpec/JobResult/TranscriptEvent parsing with one message per bad field; prices; a pids limit
// below what the sandbox needs (32, under either runtime) refused by the spec and by `Sandbox.create`.
import { describe, expect, it } from "vitest";
import {
  DEFAULT_EDITOR_TOOL,
  EVENT_TYPES,
  JobResult,
  JobSpecError,
  TranscriptEvent,
  addUsage,
  assertJobSpec,
  emptyUsage,
  parseJobSpec,
  type EventInput,
  type JobSpec,
  type Usage,
} from "../../../src/core/spec/spec.js";
import {
  PRICES,
  SDK_MODELS,
  costUsd,
  pricePrefix,
  priceFor,
  priceKnown,
  unknownModelWarning,
} from "../../../src/agent/prices.js";
import { Sandbox } from "../../../src/sandbox/sandbox.js";

const minimal = { task: "fix the failing test", repo: { path: "/tmp/repo" } };

/** Parse expecting failure; the error must be one clean line, never a stack or zod's JSON. */
function errorOf(input: unknown): string {
  const r = parseJobSpec(input);
  if (r.ok) throw new Error(`expected a failure, got ${JSON.stringify(r.spec)}`);
  expect(r.error).toMatch(/^invalid JobSpec: /);
  expect(r.error).not.toContain("\n");
  expect(r.error).not.toMatch(/\bat .*:\d+:\d+/); // stack frame
  expect(r.error).not.toContain('"code"'); // raw zod issue JSON
  expect(r.error).not.toMatch(/Invalid input|expected .* received/); // zod's default wording
  return r.error;
}

describe("JobSpec: valid input", () => {
  it("accepts a minimal spec and injects no defaults", () => {
    const r = parseJobSpec(minimal);
    expect(r).toEqual({ ok: true, spec: minimal });
    if (r.ok) expect(Object.keys(r.spec).sort()).toEqual(["repo", "task"]);
    expect(DEFAULT_EDITOR_TOOL).toBe("text_editor_20250728");
  });

  it.each([
    [{ path: "/src/app" }],
    [{ git: "https://example.com/x.git" }],
    [{ git: "https://example.com/x.git", ref: "v1.2" }],
    [{ archive: "/tmp/repo.tar.gz" }],
  ])("accepts repo %j", (repo) => {
    const r = parseJobSpec({ task: "t", repo });
    expect(r).toEqual({ ok: true, spec: { task: "t", repo } });
  });

  it("accepts every field at once, unchanged", () => {
    const full: JobSpec = {
      task: "t",
      repo: { git: "git@example.com:a/b.git", ref: "main" },
      image: "patchbay-sandbox:latest",
      setup: ["npm ci", "npm run build"],
      verify: "npm test",
      model: "claude-sonnet-4-5",
      maxTurns: 40,
      maxTokens: 8192,
      budget: { usd: 0.5, inputTokens: 1_000_000, outputTokens: 50_000 },
      timeoutSec: 900,
      commandTimeoutSec: 120.5,
      tools: "edit_file",
      limits: { memoryMb: 2048, cpus: 1.5, pids: 256, diskMb: 1024, network: "none" },
      runtime: "runsc",
      jobId: "batch-7.repo_42",
      priority: 2_097_152,
      attempts: 20,
    };
    expect(parseJobSpec(full)).toEqual({ ok: true, spec: full });
    expect(parseJobSpec({ ...minimal, setup: "make deps" })).toEqual({
      ok: true,
      spec: { ...minimal, setup: "make deps" },
    });
  });

  it("assertJobSpec returns the spec or throws JobSpecError with the same message", () => {
    expect(assertJobSpec(minimal)).toEqual(minimal);
    let thrown: unknown;
    try {
      assertJobSpec({ repo: { path: "/x" } });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(JobSpecError);
    expect(thrown).toBeInstanceOf(Error);
    expect((thrown as Error).message).toBe("invalid JobSpec: task: required");
  });
});

describe("JobSpec: bad input gives one message naming the field", () => {
  it("missing task", () => {
    expect(errorOf({ repo: { path: "/x" } })).toBe("invalid JobSpec: task: required");
    expect(errorOf({ ...minimal, task: "  " })).toContain("task: must be a non-empty string");
  });

  it("missing repo", () => {
    expect(errorOf({ task: "t" })).toBe("invalid JobSpec: repo: required");
  });

  it.each([[{}], [{ url: "x" }], ["/just/a/string"], [null]])("repo that is none of the forms: %j", (repo) => {
    expect(errorOf({ task: "t", repo })).toContain("repo: must be exactly one of { path }, { git, ref? }, { archive }");
  });

  it("repo with two kinds", () => {
    expect(errorOf({ task: "t", repo: { path: "/x", git: "g" } })).toBe(
      "invalid JobSpec: repo: must be exactly one of { path }, { git, ref? }, { archive } (got path and git)",
    );
    expect(errorOf({ task: "t", repo: { archive: "a.tar", git: "g", ref: "r" } })).toContain("(got git and archive)");
  });

  it("repo of one kind with a bad field points at that field", () => {
    expect(errorOf({ task: "t", repo: { path: 5 } })).toBe(
      "invalid JobSpec: repo.path: must be a non-empty path (got 5)",
    );
    expect(errorOf({ task: "t", repo: { git: "g", ref: 3 } })).toContain(
      "repo.ref: must be a non-empty git ref (got 3)",
    );
    expect(errorOf({ task: "t", repo: { path: "/x", ref: "main" } })).toBe(
      "invalid JobSpec: repo.ref: only allowed with git",
    );
  });

  it("negative or zero budget", () => {
    expect(errorOf({ ...minimal, budget: { usd: -1 } })).toBe(
      "invalid JobSpec: budget.usd: must be a positive number (got -1)",
    );
    expect(errorOf({ ...minimal, budget: { outputTokens: 0 } })).toContain(
      "budget.outputTokens: must be a positive integer (got 0)",
    );
    expect(errorOf({ ...minimal, budget: { inputTokens: 10.5 } })).toContain(
      "budget.inputTokens: must be a positive integer",
    );
  });

  it("unknown editor flavour", () => {
    expect(errorOf({ ...minimal, tools: "text_editor_2099" })).toBe(
      'invalid JobSpec: tools: must be one of text_editor_20250728, text_editor_20250124, edit_file (got "text_editor_2099")',
    );
  });

  it("unknown top-level key, with a suggestion for a typo", () => {
    expect(errorOf({ ...minimal, verfiy: "npm test" })).toBe(
      'invalid JobSpec: verfiy: unknown key (did you mean "verify"?)',
    );
    expect(errorOf({ ...minimal, max_turns: 3 })).toContain('max_turns: unknown key (did you mean "maxTurns"?)');
    expect(errorOf({ ...minimal, zzzzzz: 1 })).toBe("invalid JobSpec: zzzzzz: unknown key");
    expect(errorOf({ ...minimal, limits: { memory: 1 } })).toContain(
      'limits.memory: unknown key (did you mean "memoryMb"?)',
    );
  });

  it("jobId BullMQ cannot take", () => {
    expect(errorOf({ ...minimal, jobId: "batch:1" })).toMatch(/^invalid JobSpec: jobId: must be .*\(got "batch:1"\)$/);
    expect(errorOf({ ...minimal, jobId: "123" })).toContain("jobId: must not be a plain integer");
    expect(errorOf({ ...minimal, jobId: "" })).toContain("jobId: ");
    expect(errorOf({ ...minimal, jobId: "x".repeat(129) })).toContain("jobId: ");
    expect(errorOf({ ...minimal, jobId: ".." })).toContain('jobId: must not be "." or ".."');
    expect(parseJobSpec({ ...minimal, jobId: "x".repeat(128) }).ok).toBe(true);
  });

  it("priority, attempts, limits and runtime ranges", () => {
    expect(errorOf({ ...minimal, priority: 0 })).toContain("priority: must be an integer from 1 to 2097152 (got 0)");
    expect(errorOf({ ...minimal, priority: 2_097_153 })).toContain("priority: ");
    expect(errorOf({ ...minimal, attempts: 21 })).toContain("attempts: must be an integer from 1 to 20 (got 21)");
    expect(errorOf({ ...minimal, limits: { network: "host" } })).toContain(
      'limits.network: must be one of none, bridge (got "host")',
    );
    expect(errorOf({ ...minimal, limits: { pids: -5 } })).toContain("limits.pids: must be a positive integer (got -5)");
    expect(errorOf({ ...minimal, runtime: "kata" })).toContain('runtime: must be one of runc, runsc (got "kata")');
    expect(errorOf({ ...minimal, timeoutSec: Number.POSITIVE_INFINITY })).toContain(
      "timeoutSec: must be a positive number",
    );
  });

  it("refuses a pids limit the sandbox cannot work with, under either runtime, and Sandbox.create refuses it before making anything", async () => {
    expect(errorOf({ ...minimal, limits: { pids: 16 } })).toContain(
      "limits.pids: must be at least 32 (the sandbox's own processes and git need some)",
    );
    expect(parseJobSpec({ ...minimal, limits: { pids: 32 } }).ok).toBe(true);
    // Under gVisor too the limit counts the guest's processes: the engine gets room for gVisor's threads.
    expect(errorOf({ ...minimal, runtime: "runsc", limits: { pids: 16 } })).toContain(
      "limits.pids: must be at least 32 (the sandbox's own processes and git need some)",
    );
    expect(parseJobSpec({ ...minimal, runtime: "runsc", limits: { pids: 64 } }).ok).toBe(true);
    expect(parseJobSpec({ ...minimal, runtime: "runsc" }).ok).toBe(true); // the default, 256
    await expect(Sandbox.create({ runtime: "runsc", limits: { pids: 16 } })).rejects.toThrow(
      "Sandbox.create: limits.pids 16 must be at least 32",
    );
  });

  it("setup must be a command or a list of commands", () => {
    expect(errorOf({ ...minimal, setup: ["npm ci", 5] })).toContain(
      "setup: must be a command or an array of commands (item 1 is 5)",
    );
    expect(errorOf({ ...minimal, setup: 5 })).toContain("setup: must be a command or an array of commands (got 5)");
  });

  it("a non-object spec", () => {
    expect(errorOf(null)).toBe("invalid JobSpec: must be an object (got null)");
    expect(errorOf([minimal])).toBe("invalid JobSpec: must be an object (got an array)");
    expect(errorOf("task")).toBe('invalid JobSpec: must be an object (got "task")');
  });

  it("lists every problem, in one line", () => {
    const msg = errorOf({
      repo: { path: "/x", archive: "/y" },
      budget: { usd: "lots" },
      tools: "vim",
      verfiy: "npm test",
      maxTurns: 0,
    });
    for (const part of [
      "task: required",
      "repo: must be exactly one of",
      'budget.usd: must be a positive number (got "lots")',
      'tools: must be one of text_editor_20250728, text_editor_20250124, edit_file (got "vim")',
      "maxTurns: must be a positive integer (got 0)",
      'verfiy: unknown key (did you mean "verify"?)',
    ]) {
      expect(msg).toContain(part);
    }
    expect(msg.split("; ")).toHaveLength(6);
  });

  it("bounds how much of a bad value it echoes", () => {
    const msg = errorOf({ ...minimal, tools: "y".repeat(10_000) });
    expect(msg.length).toBeLessThan(200);
  });
});

describe("JobResult and Usage", () => {
  const result: JobResult = {
    status: "completed",
    patch: "diff --git a/x b/x\n",
    diffstat: " x | 2 +-\n 1 file changed",
    filesChanged: ["x"],
    verify: { exitCode: 0, outputTail: "ok\n" },
    stopReason: "end_turn",
    turns: 3,
    usage: { inputTokens: 100, outputTokens: 20, cacheReadTokens: 50, cacheWriteTokens: 10 },
    costUsd: 0.0012,
    timings: { queuedMs: 5, sandboxMs: 800, agentMs: 4000, totalMs: 5000 },
    jobId: "j1",
    attempt: 1,
  };

  it("round-trips", () => {
    expect(JobResult.parse(JSON.parse(JSON.stringify(result)))).toEqual(result);
    const failed: JobResult = { ...result, status: "timeout", stopReason: null, error: "job timed out after 900s" };
    delete failed.verify;
    expect(JobResult.parse(failed)).toEqual(failed);
  });

  it("rejects a result missing a field or with an unknown status", () => {
    const { usage: _u, ...noUsage } = result;
    expect(JobResult.safeParse(noUsage).success).toBe(false);
    expect(JobResult.safeParse({ ...result, status: "done" }).success).toBe(false);
  });

  it("adds usage without mutating", () => {
    const a: Usage = { inputTokens: 1, outputTokens: 2, cacheReadTokens: 3, cacheWriteTokens: 4 };
    const b: Usage = { inputTokens: 10, outputTokens: 20, cacheReadTokens: 30, cacheWriteTokens: 40 };
    expect(addUsage(a, b)).toEqual({ inputTokens: 11, outputTokens: 22, cacheReadTokens: 33, cacheWriteTokens: 44 });
    expect(a.inputTokens).toBe(1);
    expect(addUsage(emptyUsage(), a)).toEqual(a);
    expect(emptyUsage()).not.toBe(emptyUsage());
  });
});

describe("TranscriptEvent", () => {
  const base = { ts: "2025-01-02T03:04:05.678Z", jobId: "j1", attempt: 1 };
  const usage = { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 };
  const inputs: EventInput[] = [
    { type: "job_started", spec: { ...minimal, verify: "npm test" } },
    { type: "sandbox_ready", container: "abc123", ms: 412 },
    { type: "setup", command: "npm ci", exitCode: 0, outputTail: "added 3 packages", ms: 2000 },
    { type: "model_request", turn: 1, messagesCount: 1 },
    {
      type: "model_response",
      turn: 1,
      content: [
        { type: "text", text: "Let me look." },
        { type: "tool_use", id: "toolu_1", name: "bash", input: { command: "ls" } },
      ],
      stopReason: "tool_use",
      usage,
      ms: 900,
      model: "claude-sonnet-4-5-20250929",
    },
    { type: "tool_call", turn: 1, toolUseId: "toolu_1", name: "bash", input: { command: "ls" } },
    { type: "tool_result", turn: 1, toolUseId: "toolu_1", name: "bash", output: "a\nb\n", isError: false, ms: 12 },
    { type: "verify", command: "npm test", exitCode: 1, outputTail: "1 failing", ms: 3000 },
    { type: "patch", filesChanged: ["a"], diffstat: " a | 1 +", bytes: 120 },
    { type: "job_finished", status: "completed", costUsd: 0.01, turns: 2 },
    { type: "job_finished", status: "failed", error: "boom", costUsd: 0, turns: 0 },
    { type: "model_retry", retry: 1, error: "overloaded", status: 529, delayMs: 1000 },
    { type: "context_trimmed", removedChars: 50_000, keptTurns: 4 },
    { type: "candidates_started", jobIds: ["j-C1", "j-C2"], seedBytes: 10_240 },
    {
      type: "candidate_picked",
      picked: 2,
      why: "candidate 2 is the only one verify passed",
      candidates: [
        {
          n: 1,
          jobId: "j-C1",
          status: "verify_failed",
          verified: false,
          costUsd: 0.1,
          turns: 3,
          patchBytes: 80,
          filesChanged: 1,
        },
        {
          n: 2,
          jobId: "j-C2",
          status: "completed",
          verified: true,
          costUsd: 0.2,
          turns: 4,
          patchBytes: 120,
          filesChanged: 1,
        },
      ],
    },
    {
      type: "instructions_loaded",
      files: ["AGENTS.md", "CLAUDE.md"],
      bytes: 2048,
      cut: false,
      refused: [
        { path: ".github/copilot-instructions.md", reason: "a symbolic link, or a path through one: not followed" },
      ],
    },
    {
      type: "context_compacted",
      turn: 40,
      reason: "threshold",
      turnsDropped: 30,
      messagesKept: 9,
      tokensBefore: 161_000,
      tokensAfter: 52_000,
      summary: "read src/a.ts",
      usage: { inputTokens: 90_000, outputTokens: 800, cacheReadTokens: 0, cacheWriteTokens: 0 },
    },
    {
      type: "egress",
      host: "registry.npmjs.org",
      port: 443,
      method: "CONNECT",
      allowed: false,
      reason: "not on the allow-list",
      bytesUp: 0,
      bytesDown: 0,
      ms: 1,
    },
    { type: "budget", limit: "usd", max: 0.5, used: 0.51 },
    { type: "resume", restored: true, fromAttempt: 1, turns: 4, patchBytes: 1575, costUsd: 0.0031 },
    {
      type: "checkpoint",
      turn: 2,
      saved: false,
      reason: "the workspace's change is over 8388608 bytes; the last checkpoint that fit is kept",
    },
  ];

  it("covers every event type", () => {
    expect(new Set(inputs.map((e) => e.type))).toEqual(new Set(EVENT_TYPES));
    expect(EVENT_TYPES).toEqual(
      expect.arrayContaining([
        "job_started",
        "sandbox_ready",
        "setup",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "verify",
        "patch",
        "job_finished",
      ]),
    );
  });

  it.each(inputs.map((e) => [e.type, e] as const))("round-trips %s through a JSONL line", (_t, input) => {
    const ev = { ...base, ...input };
    const line = JSON.stringify(ev);
    expect(TranscriptEvent.parse(JSON.parse(line))).toEqual(ev);
  });

  it("rejects unknown types, missing per-type fields and bad timestamps", () => {
    expect(TranscriptEvent.safeParse({ ...base, type: "nope" }).success).toBe(false);
    expect(
      TranscriptEvent.safeParse({ ...base, type: "tool_result", turn: 1, toolUseId: "t", name: "bash", output: "" })
        .success,
    ).toBe(false);
    expect(
      TranscriptEvent.safeParse({ ...base, ts: "yesterday", type: "model_request", turn: 1, messagesCount: 1 }).success,
    ).toBe(false);
    expect(
      TranscriptEvent.safeParse({ ...base, attempt: 0, type: "model_request", turn: 1, messagesCount: 1 }).success,
    ).toBe(false);
  });

  it("EventInput is checked per type (compile time)", () => {
    // @ts-expect-error tool_result needs isError and ms
    const bad: EventInput = { type: "tool_result", turn: 1, toolUseId: "t", name: "bash", output: "" };
    // @ts-expect-error ts is added by the writer, not the emitter
    const withTs: EventInput = { type: "model_request", turn: 1, messagesCount: 1, ts: "x" };
    expect([bad, withTs]).toHaveLength(2);
  });
});

describe("prices", () => {
  const u = (inputTokens: number, outputTokens: number, cacheReadTokens: number, cacheWriteTokens: number): Usage => ({
    inputTokens,
    outputTokens,
    cacheReadTokens,
    cacheWriteTokens,
  });

  it("prices input, output, cache reads and cache writes exactly", () => {
    // Sonnet: $3 in, $15 out, $3.75 cache write, $0.30 cache read per MTok
    // 1000*3 + 500*15 + 2000*0.30 + 4000*3.75 = 3000 + 7500 + 600 + 15000 = 26100 µ$ → $0.0261
    expect(costUsd("claude-sonnet-4-5-20250929", u(1000, 500, 2000, 4000))).toBe(0.0261);
    // Haiku 3.5: $0.80 / $4 / $1 / $0.08: 0.8 + 1 + 0.04 + 0.1
    expect(costUsd("claude-3-5-haiku-latest", u(1_000_000, 250_000, 500_000, 100_000))).toBe(1.94);
    // Haiku 4.5: one token of each = (1 + 5 + 0.1 + 1.25) µ$
    expect(costUsd("claude-haiku-4-5", u(1, 1, 1, 1))).toBe(7.35e-6);
    expect(costUsd("claude-opus-4-1", emptyUsage())).toBe(0);
  });

  it("cache prices follow the 1.25x / 0.1x rule for every model", () => {
    for (const [prefix, p] of Object.entries(PRICES)) {
      if (prefix === "claude-3-haiku") continue; // Anthropic lists $0.30, not 1.25 x $0.25
      expect(p.cacheWrite).toBeCloseTo(p.input * 1.25, 10);
      expect(p.cacheRead).toBeCloseTo(p.input * 0.1, 10);
    }
  });

  it("longest prefix wins", () => {
    expect(priceFor("claude-opus-4-5-20251101")).toMatchObject({ input: 5, output: 25 });
    expect(priceFor("claude-opus-4-1-20250805")).toMatchObject({ input: 15, output: 75 });
    expect(priceFor("claude-opus-4-20250514")).toMatchObject({ input: 15, output: 75 });
    expect(pricePrefix("claude-opus-4-5-20251101")).toBe("claude-opus-4-5");
    expect(pricePrefix("claude-sonnet-4-20250514")).toBe("claude-sonnet-4");
    expect(priceFor("claude-sonnet-4-5")).toMatchObject({ input: 3, output: 15 });
    expect(priceFor("claude-haiku-4-5-20251001")).toMatchObject({ input: 1, output: 5 });
    expect(priceFor("us.anthropic.claude-haiku-4-5-20251001-v1:0")).toMatchObject({ input: 1, output: 5 });
  });

  it("a model with no price is priced as unknown, not guessed; unknown ids are told apart from the SDK's", () => {
    expect(pricePrefix("gpt-4o")).toBeNull();
    expect(priceFor("gpt-4o")).toBeNull();
    expect(priceFor("claude-future-9")).toBeNull();
    expect(priceKnown("claude-future-9")).toBe(false);
    expect(costUsd("mystery-model", u(1_000_000, 1_000_000, 0, 0))).toBe(0);
    // Every id the SDK names is known (no warning), priced or not; a made-up one is not.
    for (const m of SDK_MODELS) expect(unknownModelWarning(m), m).toBeUndefined();
    expect(unknownModelWarning("claude-sonnet-4-5-20250929")).toBeUndefined();
    expect(unknownModelWarning("us.anthropic.claude-haiku-4-5-20251001-v1:0")).toBeUndefined();
    expect(unknownModelWarning("claude-sonet-4-5")).toMatch(
      /^model 'claude-sonet-4-5' is not one this version of patchbay knows .*its cost is unknown/,
    );
  });
});

describe("JobSpec candidates (best-of-N)", () => {
  it("takes 1 to 16 candidates with verify, stopAfterVerified up to them, and a pick", () => {
    const ok = parseJobSpec({
      ...minimal,
      verify: "make test",
      candidates: 4,
      stopAfterVerified: 2,
      pick: "lower-cost",
    });
    expect(ok.ok).toBe(true);
    expect(errorOf({ ...minimal, verify: "t", candidates: 17 })).toContain(
      "candidates: must be an integer from 1 to 16 (got 17)",
    );
    expect(errorOf({ ...minimal, verify: "t", candidates: 0 })).toContain("candidates:");
    expect(errorOf({ ...minimal, verify: "t", candidates: 4, pick: "best" })).toContain(
      "pick: must be one of smaller-patch, lower-cost",
    );
  });

  it("refuses candidates without the judge, and the knobs that mean nothing with one candidate", () => {
    expect(errorOf({ ...minimal, candidates: 3 })).toContain(
      "candidates: 3 candidates need a verify command: verify is what judges them",
    );
    expect(errorOf({ ...minimal, verify: "t", candidates: 2, stopAfterVerified: 3 })).toContain(
      "stopAfterVerified: must be at most candidates (2; got 3)",
    );
    expect(errorOf({ ...minimal, verify: "t", stopAfterVerified: 1 })).toContain(
      "stopAfterVerified: applies only with candidates over 1",
    );
    expect(errorOf({ ...minimal, pick: "lower-cost" })).toContain("pick: applies only with candidates over 1");
  });

  it("keeps the candidates' ids (-C<n>) for the worker: a free job id may not end so", () => {
    expect(errorOf({ ...minimal, jobId: "fix-C2" })).toContain(
      "must not end in -C<n>: those are the ids of a job's candidates, which only its worker makes",
    );
    expect(parseJobSpec({ ...minimal, jobId: "fix-C" }).ok).toBe(true);
    expect(parseJobSpec({ ...minimal, jobId: "fix-Cx2" }).ok).toBe(true);
  });
});
