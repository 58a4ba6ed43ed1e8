// Long jobs (issue 27 §2): the loop compacts a conversation that nears its context window, against
// the scripted server enforcing one (test/support/fake-anthropic.ts, contextWindow: it refuses a
// request over it as the API does) through the real SDK; the loop directly with a fake runTool, and
// whole jobs through runJob on the local backend. Every request is checked against the Messages
// API's rules (test/support/messages-check.ts).
import { describe, expect, it } from "vitest";
import { runAgentLoop } from "../../src/agent/loop.js";
import { AnthropicModel } from "../../src/agent/model.js";
import { costUsd } from "../../src/agent/prices.js";
import { contextWindow, estimateTokens } from "../../src/agent/window.js";
import { loadConfig } from "../../src/core/config/config.js";
import { runJob } from "../../src/job/run.js";
import {
  addUsage,
  emptyUsage,
  JobSpec,
  type EventInput,
  type EventOf,
  type TranscriptEvent,
  type Usage,
} from "../../src/core/spec/spec.js";
import { localBackend } from "../support/backend.js";
import {
  apiError,
  countInput,
  reply,
  startFakeAnthropic,
  text,
  toolUse,
  type FakeAnthropic,
  type Policy,
} from "../support/fake-anthropic.js";
import { messageProblems } from "../support/messages-check.js";

const TASK = "Walk the log files one by one and report the checksum of the last one (task marker 7f3a).";
const isSummaryRequest = (body: any) => /summarise the earlier part/.test(JSON.stringify(body?.system ?? ""));
const usageOf = (u: any): Usage => ({
  inputTokens: u.inputTokens,
  outputTokens: u.outputTokens,
  cacheReadTokens: u.cacheReadTokens,
  cacheWriteTokens: u.cacheWriteTokens,
});

/** Agent requests answered with a bash call each, `turns` of them, then the end; summary requests with a short summary. */
function longJob(turns: number, hooks: { refuse?: (agentIndex: number) => boolean } = {}): Policy {
  let agent = 0;
  let summaries = 0;
  return ({ body }) => {
    if (isSummaryRequest(body))
      return reply(text(`summary ${++summaries}: read logs up to the one before the kept turns; task marker 7f3a.`));
    if (hooks.refuse?.(agent)) return apiError(400, `prompt is too long: 210000 tokens > 200000 maximum`);
    agent++;
    return agent <= turns ? reply(toolUse("bash", { command: `cat log-${agent}` })) : reply(text("done: checksum 42"));
  };
}

const agentRequests = (fake: FakeAnthropic) => fake.requests.filter((r) => !isSummaryRequest(r.body));

function loopOn(fake: FakeAnthropic, extra: { contextWindow?: number; maxTurns?: number; outputBytes?: number } = {}) {
  const events: EventInput[] = [];
  const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
  const out = promise(model, events, extra);
  return { events, out };
}
function promise(
  model: AnthropicModel,
  events: EventInput[],
  extra: { contextWindow?: number; maxTurns?: number; outputBytes?: number },
) {
  return runAgentLoop({
    model,
    modelName: "claude-sonnet-5-5",
    system: "SYSTEM",
    task: TASK,
    tools: [
      {
        name: "bash",
        description: "run a command",
        input_schema: { type: "object", properties: { command: { type: "string" } } },
      },
    ],
    runTool: async (block) => ({
      content: `${(block.input as { command: string }).command}\n${"x".repeat(extra.outputBytes ?? 4096)}`,
      isError: false,
      durationMs: 1,
    }),
    maxTurns: extra.maxTurns ?? 400,
    ...(extra.contextWindow ? { contextWindow: extra.contextWindow } : {}),
    emit: (e) => events.push(e),
  });
}

describe("context windows and token estimates", () => {
  it("knows the window by model id (Bedrock-style ids too), 200k by default, and the override", () => {
    expect(contextWindow("claude-sonnet-5-5")).toBe(200_000);
    expect(contextWindow("us.anthropic.claude-opus-4-5-20251101-v1:0")).toBe(200_000);
    expect(contextWindow("some-other-model")).toBe(200_000);
    expect(contextWindow("claude-sonnet-5-5", 50_000)).toBe(50_000);
    expect(estimateTokens("x".repeat(7))).toBe(2);
    const body = {
      system: [{ type: "text", text: "S" }],
      tools: [{ name: "bash" }],
      messages: [{ role: "user", content: "é".repeat(50) }],
    };
    expect(estimateTokens(body)).toBe(countInput(body)); // one rule on both sides: UTF-8 bytes / 3.5
    expect(countInput(body)).toBe(Math.ceil(Buffer.byteLength(JSON.stringify(body)) / 3.5));
  });

  it("PATCHBAY_CONTEXT_WINDOW and PATCHBAY_COMPACT_AT are read, bounded and defaulted", () => {
    expect(loadConfig({}).compactAt).toBe(0.8);
    expect(loadConfig({}).contextWindow).toBeUndefined();
    expect(loadConfig({ PATCHBAY_CONTEXT_WINDOW: "50000", PATCHBAY_COMPACT_AT: "0.5" })).toMatchObject({
      contextWindow: 50_000,
      compactAt: 0.5,
    });
    expect(() => loadConfig({ PATCHBAY_COMPACT_AT: "1.5" })).toThrow(/PATCHBAY_COMPACT_AT/);
  });
});

describe("compaction against a server that enforces a 50k-token window", { timeout: 300_000 }, () => {
  it("a 300-turn job with 4 KB tool outputs completes; every request valid, under the window, with the task and the last turns; the summaries counted", async () => {
    const fake = await startFakeAnthropic(longJob(300), { contextWindow: 50_000 });
    try {
      const { events, out } = loopOn(fake, { contextWindow: 50_000 });
      const outcome = await out;
      expect(outcome.status).toBe("completed");
      expect(outcome.turns).toBe(301);
      expect(outcome.summary).toBe("done: checksum 42");
      for (const [i, r] of fake.requests.entries()) {
        expect(countInput(r.body), `request ${i}`).toBeLessThanOrEqual(50_000);
        expect(messageProblems(r.body.messages), `request ${i}`).toEqual([]);
        expect(JSON.stringify(r.body.messages[0]), `request ${i}`).toContain(TASK);
      }
      // Each agent request ends with the newest turn: the model's last tool call and its result.
      const agents = agentRequests(fake);
      expect(agents).toHaveLength(301);
      for (let n = 1; n < agents.length; n++) {
        const msgs = agents[n]!.body.messages;
        expect(JSON.stringify(msgs.at(-2))).toContain(`cat log-${n}`);
        expect(JSON.stringify(msgs.at(-1))).toContain(`cat log-${n}\\n`);
      }
      const compactions = events.filter((e): e is EventOf<"context_compacted"> => e.type === "context_compacted");
      const summaries = fake.requests.filter((r) => isSummaryRequest(r.body));
      expect(compactions.length).toBeGreaterThan(5);
      expect(summaries).toHaveLength(compactions.length);
      for (const c of compactions) {
        expect(c).toMatchObject({ reason: "threshold" });
        expect(c.turnsDropped).toBeGreaterThan(0);
        expect(c.tokensAfter).toBeLessThan(c.tokensBefore);
        expect(c.tokensBefore).toBeGreaterThan(40_000); // 0.8 of the window
        expect(c.usage.inputTokens + c.usage.cacheWriteTokens + c.usage.cacheReadTokens).toBeGreaterThan(0);
      }
      // A later summary request carries the task and the summary so far.
      expect(JSON.stringify(summaries.at(-1)!.body.messages)).toContain(TASK);
      expect(JSON.stringify(summaries.at(-1)!.body.messages)).toContain(`summary ${summaries.length - 1}:`);
      // The job's usage is every response's, the summaries' included, and its cost that usage's.
      const responses = events
        .filter((e): e is EventOf<"model_response"> => e.type === "model_response")
        .map((e) => e.usage);
      const all = [...responses, ...compactions.map((c) => c.usage)].map(usageOf).reduce(addUsage, emptyUsage());
      expect(outcome.usage).toEqual(all);
      expect(outcome.usage.outputTokens).toBeGreaterThan(
        responses.map(usageOf).reduce(addUsage, emptyUsage()).outputTokens,
      );
      expect(outcome.costUsd).toBe(costUsd("claude-sonnet-5-5", all));
      // The newest turns are whole in the conversation the job ends with.
      expect(JSON.stringify(outcome.messages.at(-3))).toContain("cat log-300");
    } finally {
      await fake.close();
    }
  });

  it("a compaction whose own tokens pass the budget ends the job there, before another request", async () => {
    const policy = longJob(300);
    const fake = await startFakeAnthropic(
      (req) =>
        isSummaryRequest(req.body)
          ? ({ ...(policy(req) as object), usage: { output_tokens: 5000 } } as any)
          : policy(req),
      { contextWindow: 50_000 },
    );
    try {
      const events: EventInput[] = [];
      const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
      const outcome = await runAgentLoop({
        model,
        modelName: "claude-sonnet-5-5",
        system: "SYSTEM",
        task: TASK,
        tools: [],
        maxTurns: 400,
        contextWindow: 50_000,
        budget: { outputTokens: 4000 },
        runTool: async () => ({ content: "x".repeat(4096), isError: false, durationMs: 1 }),
        emit: (e) => events.push(e),
      });
      expect(outcome).toMatchObject({
        status: "budget_exceeded",
        error: expect.stringMatching(/^budget outputTokens exceeded: \d+ > 4000$/),
      });
      expect(isSummaryRequest(fake.requests.at(-1)!.body)).toBe(true);
      expect(events.slice(-2).map((e) => e.type)).toEqual(["context_compacted", "budget"]);
      expect(outcome.usage.outputTokens).toBeGreaterThan(5000);
    } finally {
      await fake.close();
    }
  });

  it("a prompt-too-long with no older turn to drop fails the job with the API's reason, and no summary is asked for", async () => {
    const fake = await startFakeAnthropic(longJob(5, { refuse: (n) => n === 1 }));
    try {
      const { events, out } = loopOn(fake);
      const outcome = await out;
      expect(outcome).toMatchObject({
        status: "failed",
        error: expect.stringMatching(
          /prompt is too long: 210000 tokens > 200000 maximum \(no older turns left to compact\)$/,
        ),
      });
      expect(fake.requests.map((r) => isSummaryRequest(r.body))).toEqual([false, false]);
      expect(events.filter((e) => e.type === "context_compacted")).toEqual([]);
    } finally {
      await fake.close();
    }
  });

  it("a 400 prompt-too-long mid-job compacts and the job goes on", async () => {
    let refused = 0;
    const fake = await startFakeAnthropic(longJob(8, { refuse: (n) => n === 5 && refused++ === 0 }));
    try {
      const { events, out } = loopOn(fake);
      const outcome = await out;
      expect(outcome.status).toBe("completed");
      const compactions = events.filter((e): e is EventOf<"context_compacted"> => e.type === "context_compacted");
      expect(compactions).toHaveLength(1);
      expect(compactions[0]).toMatchObject({ reason: "prompt_too_long", turn: 6 });
      expect(compactions[0]!.turnsDropped).toBeGreaterThan(0);
      // request 6 refused, then the summary, then request 6 again (shorter), valid.
      const kinds = fake.requests.map((r) => (isSummaryRequest(r.body) ? "summary" : "agent"));
      expect(kinds.slice(5, 8)).toEqual(["agent", "summary", "agent"]);
      expect(fake.requests[7]!.body.messages.length).toBeLessThan(fake.requests[5]!.body.messages.length);
      for (const r of fake.requests) expect(messageProblems(r.body.messages)).toEqual([]);
      expect(outcome.usage).toEqual(
        [
          ...events.flatMap((e) =>
            e.type === "model_response" || e.type === "context_compacted" ? [usageOf(e.usage)] : [],
          ),
        ].reduce(addUsage, emptyUsage()),
      );
    } finally {
      await fake.close();
    }
  });
});

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;

async function job(fake: FakeAnthropic, id: string, env: Record<string, string> = {}) {
  const events: TranscriptEvent[] = [];
  const config = loadConfig({ ...process.env, ...env });
  const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
  const spec = JobSpec.parse({ task: TASK, repo: { path: CLAMP }, maxTurns: 100 });
  const result = await runJob(spec, {
    jobId: id,
    attempt: 1,
    model,
    config,
    onEvent: (e) => events.push(e),
    backend: localBackend(),
  });
  return { result, events };
}

describe("compaction in whole jobs (runJob, local backend)", { timeout: 300_000 }, () => {
  it("a job whose bash output outgrows a 20k window (PATCHBAY_CONTEXT_WINDOW) completes, compacting", async () => {
    let agent = 0;
    const policy: Policy = ({ body }) => {
      if (isSummaryRequest(body)) return reply(text("summary: printed blocks so far"));
      agent++;
      return agent <= 40
        ? reply(toolUse("bash", { command: `echo block-${agent}; head -c 4000 /dev/zero | tr '\\0' y` }))
        : reply(text("done"));
    };
    const fake = await startFakeAnthropic(policy, { contextWindow: 20_000 });
    try {
      const { result, events } = await job(fake, "compact-job", { PATCHBAY_CONTEXT_WINDOW: "20000" });
      expect(result.status).toBe("completed");
      expect(result.turns).toBe(41);
      expect(events.filter((e) => e.type === "context_compacted").length).toBeGreaterThan(0);
      for (const r of fake.requests) {
        expect(countInput(r.body)).toBeLessThanOrEqual(20_000);
        expect(messageProblems(r.body.messages)).toEqual([]);
      }
      expect(JSON.stringify(agentRequests(fake).at(-1)!.body.messages.at(-1))).toContain("block-40");
    } finally {
      await fake.close();
    }
  });

  it("a prompt-too-long that persists after compacting ends the job failed with the API's reason, once", async () => {
    const fake = await startFakeAnthropic(longJob(10, { refuse: (n) => n >= 3 }));
    try {
      const { result, events } = await job(fake, "too-long-job");
      expect(result.status).toBe("failed");
      expect(result.error).toMatch(/prompt is too long: 210000 tokens > 200000 maximum.*even after compacting/);
      const kinds = fake.requests.map((r) => (isSummaryRequest(r.body) ? "summary" : "agent"));
      expect(kinds).toEqual(["agent", "agent", "agent", "agent", "summary", "agent"]);
      expect(events.filter((e) => e.type === "context_compacted")).toHaveLength(1);
      expect(events.filter((e) => e.type === "job_finished")).toEqual([expect.objectContaining({ status: "failed" })]);
    } finally {
      await fake.close();
    }
  });
});
