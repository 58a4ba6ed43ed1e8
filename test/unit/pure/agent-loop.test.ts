// The agent loop against a scripted in-memory Model (no HTTP, no Docker): stop reasons, tool
// rounds, budgets on the running total, aborts, errors, resume. Pure and fast (mutation-tested).
import { describe, expect, it } from "vitest";
import { runAgentLoop, type LoopOptions } from "../../../src/agent/loop.js";
import {
  ModelError,
  type ContentBlock,
  type Model,
  type ModelRequest,
  type ModelResponse,
} from "../../../src/agent/model.js";
import { defaults } from "../../../src/core/config/config.js";
import type { EventInput, Usage } from "../../../src/core/spec/spec.js";
import type { ToolUseBlock } from "../../../src/tools/index.js";

const usage = (inputTokens = 0, outputTokens = 0, cacheReadTokens = 0, cacheWriteTokens = 0): Usage => ({
  inputTokens,
  outputTokens,
  cacheReadTokens,
  cacheWriteTokens,
});
const text = (t: string): ContentBlock => ({ type: "text", text: t });
let seq = 0;
const tool = (command: string): ContentBlock => ({
  type: "tool_use",
  id: `tu${++seq}`,
  name: "bash",
  input: { command },
});

type Step = Partial<ModelResponse> | Error | ((req: ModelRequest) => Partial<ModelResponse> | Error);
const say = (...content: ContentBlock[]): Partial<ModelResponse> => ({
  content,
  stopReason: content.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn",
});

/** A model that answers from a script (or a function of the turn), recording what it was asked. */
function scripted(script: Step[] | ((i: number) => Step)) {
  const requests: (Omit<ModelRequest, "signal"> & { signal?: AbortSignal })[] = [];
  const model: Model = {
    async complete(req, hooks) {
      requests.push({ ...JSON.parse(JSON.stringify({ ...req, signal: undefined })), signal: req.signal });
      const i = requests.length - 1;
      let step = typeof script === "function" ? script(i) : script[i];
      if (typeof step === "function") step = step(req);
      if (step === undefined) throw new Error(`script exhausted at request ${i + 1}`);
      if (step instanceof Error) throw step;
      if ((step as { retry?: boolean }).retry) hooks?.onRetry?.({ retry: 1, status: 529, error: "overloaded" });
      return { content: [], stopReason: "end_turn", usage: usage(), model: `${req.model}-resolved`, ...step };
    },
  };
  return { model, requests };
}

async function loop(script: Step[] | ((i: number) => Step), o: Partial<LoopOptions> = {}) {
  const { model, requests } = scripted(script);
  const events: EventInput[] = [];
  const calls: { block: ToolUseBlock; signal?: AbortSignal }[] = [];
  const outcome = await runAgentLoop({
    model,
    modelName: "claude-sonnet-5-5",
    system: "SYSTEM",
    task: "TASK",
    tools: [{ name: "bash" }],
    runTool: async (block, signal) => (
      calls.push({ block, signal }),
      { content: `ran ${(block.input as { command: string }).command}`, isError: false, durationMs: 7 }
    ),
    emit: (e) => events.push(e),
    ...o,
  });
  return { outcome, events, requests, calls, types: events.map((e) => e.type) };
}

describe("agent loop: turns and stop reasons", () => {
  it("end_turn completes after one request, with the summary, usage and cost", async () => {
    const { outcome, events, requests } = await loop([
      { ...say(text("  All done.  ")), usage: usage(1000, 100, 0, 0) },
    ]);
    expect(outcome).toMatchObject({
      status: "completed",
      stopReason: "end_turn",
      turns: 1,
      summary: "All done.",
      usage: usage(1000, 100, 0, 0),
      costUsd: 0.003,
    });
    expect(outcome.error).toBeUndefined();
    expect("error" in outcome).toBe(false);
    expect(outcome.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(requests).toHaveLength(1);
    const req = requests[0]!;
    expect(req).toMatchObject({
      model: "claude-sonnet-5-5",
      maxTokens: defaults.job.maxTokens,
      tools: [{ name: "bash" }],
    });
    expect(req.system).toEqual([{ type: "text", text: "SYSTEM", cache_control: { type: "ephemeral" } }]);
    expect(JSON.stringify(req.messages[0])).toMatch(/TASK/);
    expect(events.map((e) => e.type)).toEqual(["model_request", "model_response"]);
    expect(events[0]).toMatchObject({ type: "model_request", turn: 1, messagesCount: 1, system: "SYSTEM" });
    expect((events[0] as { newMessages: unknown[] }).newMessages).toHaveLength(1);
    expect(events[1]).toMatchObject({
      type: "model_response",
      turn: 1,
      stopReason: "end_turn",
      usage: usage(1000, 100, 0, 0),
      model: "claude-sonnet-5-5-resolved",
      content: [text("  All done.  ")],
    });
    expect((events[1] as { ms: number }).ms).toBeGreaterThanOrEqual(0);
  });

  it("a tool round: runs each tool_use in order, sends results (is_error only on errors), then completes", async () => {
    const a = tool("a");
    const b = tool("b");
    const runTool: LoopOptions["runTool"] = async (block) =>
      block.id === b.id
        ? { content: "boom", isError: true, durationMs: 3 }
        : { content: "fine", isError: false, durationMs: 5 };
    const { outcome, events, requests, types } = await loop([say(text("first"), a, b), say(text("second"))], {
      runTool,
      maxTokens: 123,
    });
    expect(outcome).toMatchObject({ status: "completed", turns: 2, summary: "second" });
    expect(types).toEqual([
      "model_request",
      "model_response",
      "tool_call",
      "tool_result",
      "tool_call",
      "tool_result",
      "model_request",
      "model_response",
    ]);
    expect(events[2]).toEqual({ type: "tool_call", turn: 1, toolUseId: a.id, name: "bash", input: { command: "a" } });
    expect(events[3]).toEqual({
      type: "tool_result",
      turn: 1,
      toolUseId: a.id,
      name: "bash",
      output: "fine",
      isError: false,
      ms: 5,
    });
    expect(events[5]).toMatchObject({ toolUseId: b.id, output: "boom", isError: true, ms: 3 });
    expect(requests[1]!.maxTokens).toBe(123);
    const results = requests[1]!.messages.at(-1)!.content as ContentBlock[];
    expect(results.map(({ cache_control, ...r }) => r)).toEqual([
      { type: "tool_result", tool_use_id: a.id, content: "fine" },
      { type: "tool_result", tool_use_id: b.id, content: "boom", is_error: true },
    ]);
    // Turn 2 sends only what is new (the assistant turn and the results), and no system again.
    const req2 = events[6] as { turn: number; messagesCount: number; newMessages: unknown[]; system?: string };
    expect(req2).toMatchObject({ turn: 2, messagesCount: 3 });
    expect(req2.newMessages).toHaveLength(1);
    expect(req2.system).toBeUndefined();
    expect(outcome.messages).toHaveLength(4);
  });

  it("the tool gets the loop's signal", async () => {
    const ctl = new AbortController();
    const { calls } = await loop([say(tool("x")), say(text("ok"))], { signal: ctl.signal });
    expect(calls[0]!.signal).toBe(ctl.signal);
  });

  it("stop_sequence completes; refusal fails; an unknown stop reason completes unless there are tool uses", async () => {
    expect((await loop([{ ...say(text("x")), stopReason: "stop_sequence" }])).outcome).toMatchObject({
      status: "completed",
      stopReason: "stop_sequence",
    });
    const refused = await loop([{ content: [], stopReason: "refusal" }]);
    expect(refused.outcome).toMatchObject({
      status: "failed",
      stopReason: "refusal",
      error: "the model refused to continue (stop_reason refusal)",
    });
    expect(
      (await loop([{ content: [text("hm")], stopReason: "model_context_window_exceeded" }])).outcome,
    ).toMatchObject({ status: "completed", turns: 1 });
    const odd = await loop([{ content: [tool("y")], stopReason: null }, say(text("ok"))]);
    expect(odd.outcome).toMatchObject({ status: "completed", turns: 2 });
    expect(odd.calls).toHaveLength(1);
  });

  it("pause_turn sends the conversation back as it is", async () => {
    const { outcome, requests } = await loop([
      { content: [text("thinking")], stopReason: "pause_turn" },
      say(text("done")),
    ]);
    expect(outcome).toMatchObject({ status: "completed", turns: 2 });
    expect(requests[1]!.messages.at(-1)!.role).toBe("assistant");
    expect(requests[1]!.messages).toHaveLength(2);
  });

  it("max_tokens: cut-off tool calls are answered as not run and the model continues once; twice in a row fails", async () => {
    const t = tool("cut");
    const cut = (...content: ContentBlock[]): Partial<ModelResponse> => ({ content, stopReason: "max_tokens" });
    const once = await loop([cut(text("I was"), t), say(text("done"))]);
    expect(once.outcome).toMatchObject({ status: "completed", turns: 2 });
    expect(once.calls).toHaveLength(0);
    const cont = once.requests[1]!.messages.at(-1)!.content as ContentBlock[];
    expect(cont.map(({ cache_control, ...b }) => b)).toEqual([
      {
        type: "tool_result",
        tool_use_id: t.id,
        is_error: true,
        content: "This tool call was cut off by the output token limit and was not run.",
      },
      {
        type: "text",
        text: "Your response was cut off at the output token limit. Continue where you stopped, in smaller steps.",
      },
    ]);
    const twice = await loop([cut(text("a")), cut(text("b")), say(text("never"))]);
    expect(twice.outcome).toMatchObject({
      status: "failed",
      stopReason: "max_tokens",
      turns: 2,
      error: "the model's response was cut off at max_tokens twice in a row",
    });
    // A tool round in between resets the count.
    const apart = await loop([cut(text("a")), say(tool("z")), cut(text("b")), say(text("done"))]);
    expect(apart.outcome).toMatchObject({ status: "completed", turns: 4 });
  });

  it("max_turns stops at the limit (default from config) without asking again", async () => {
    const forever = () => say(tool("again"));
    const two = await loop(forever, { maxTurns: 2 });
    expect(two.outcome).toMatchObject({ status: "max_turns", turns: 2, error: "stopped after 2 turns" });
    expect(two.requests).toHaveLength(2);
    expect(two.calls).toHaveLength(2);
    const dflt = await loop(forever);
    expect(dflt.outcome).toMatchObject({ status: "max_turns", turns: defaults.job.maxTurns });
    expect(dflt.requests).toHaveLength(defaults.job.maxTurns);
  });

  it("the summary is the newest non-empty text", async () => {
    const { outcome } = await loop([
      say(text("first"), tool("a")),
      say(text("   "), tool("b")),
      say(text("a"), text("b"), tool("c")),
      say(tool("d")),
      { content: [], stopReason: "end_turn" },
    ]);
    expect(outcome.summary).toBe("a\nb");
  });
});

describe("agent loop: budgets are on the running total", () => {
  const turns = (u: Usage) => () => ({ ...say(tool("x")), usage: u });

  it.each([
    ["inputTokens", usage(1000), { inputTokens: 3000 }, 3000, 4000],
    ["inputTokens", usage(100, 0, 500, 400), { inputTokens: 3000 }, 3000, 4000],
    ["outputTokens", usage(0, 1000), { outputTokens: 3000 }, 3000, 4000],
  ] as const)("%s: at the budget goes on, past it stops (turn 4)", async (limit, u, budget, atBudget, used) => {
    const { outcome, events, calls } = await loop(turns(u), { budget, maxTurns: 10 });
    expect(outcome).toMatchObject({
      status: "budget_exceeded",
      turns: 4,
      error: `budget ${limit} exceeded: ${used} > ${atBudget}`,
    });
    expect(events.filter((e) => e.type === "budget")).toEqual([{ type: "budget", limit, max: atBudget, used }]);
    expect(calls).toHaveLength(3); // the 4th turn's tool call is not run
  });

  it("usd: $0.012 a turn against $0.036 goes on at $0.036 and stops at $0.048, used rounded to the micro-dollar", async () => {
    const { outcome, events } = await loop(turns(usage(1000, 1000)), { budget: { usd: 0.036 }, maxTurns: 10 });
    expect(outcome).toMatchObject({ status: "budget_exceeded", turns: 4, costUsd: 0.048 });
    expect(events.find((e) => e.type === "budget")).toEqual({ type: "budget", limit: "usd", max: 0.036, used: 0.048 });
    const odd = await loop(turns(usage(1, 0)), { budget: { usd: 0.0000031 }, maxTurns: 10 }); // $0.000002 a token
    expect(odd.outcome.turns).toBe(2);
    expect(odd.events.find((e) => e.type === "budget")).toMatchObject({ used: 0.000004 });
  });

  it("usd is checked first, then input, then output; no budget never stops", async () => {
    const all = await loop(turns(usage(1000, 1000)), { budget: { usd: 0.001, inputTokens: 10, outputTokens: 10 } });
    expect(all.events.find((e) => e.type === "budget")).toMatchObject({ limit: "usd" });
    const io = await loop(turns(usage(1000, 1000)), { budget: { inputTokens: 10, outputTokens: 10 } });
    expect(io.events.find((e) => e.type === "budget")).toMatchObject({ limit: "inputTokens" });
    const none = await loop(turns(usage(1e6, 1e6)), { maxTurns: 3, budget: {} });
    expect(none.outcome.status).toBe("max_turns");
  });

  it("stopAfterTurn gets the running cost and can end the job", async () => {
    const seen: number[] = [];
    const stopAfterTurn = async (usd: number) => (
      seen.push(usd),
      seen.length === 3 ? "the batch spent its budget" : undefined
    );
    const { outcome, calls } = await loop(turns(usage(1000, 1000)), { stopAfterTurn, maxTurns: 10 });
    expect(seen).toEqual([0.012, 0.024, 0.036]);
    expect(outcome).toMatchObject({ status: "budget_exceeded", turns: 3, error: "the batch spent its budget" });
    expect(calls).toHaveLength(2);
  });
});

describe("agent loop: aborts and errors", () => {
  it("aborted before the first turn: cancelled, or timeout when that is the reason; the model is not asked", async () => {
    const ctl = new AbortController();
    ctl.abort("cancelled");
    const c = await loop([say(text("never"))], { signal: ctl.signal });
    expect(c.outcome).toMatchObject({ status: "cancelled", turns: 0, error: "the job was cancelled" });
    expect(c.requests).toHaveLength(0);
    const t = new AbortController();
    t.abort("timeout");
    expect((await loop([], { signal: t.signal })).outcome).toMatchObject({
      status: "timeout",
      error: "the job's wall-clock timeout was reached",
    });
    const other = new AbortController();
    other.abort(new Error("whatever"));
    expect((await loop([], { signal: other.signal })).outcome.status).toBe("cancelled");
  });

  it("aborted during a tool: the rest of the round is not run and the model is not asked again", async () => {
    const ctl = new AbortController();
    const runTool: LoopOptions["runTool"] = async (block) => (
      ctl.abort("cancelled"),
      { content: `ran ${block.id}`, isError: true, durationMs: 1 }
    );
    const { outcome, types, requests } = await loop([say(tool("a"), tool("b")), say(text("never"))], {
      signal: ctl.signal,
      runTool,
    });
    expect(outcome).toMatchObject({ status: "cancelled", turns: 1 });
    expect(types).toEqual(["model_request", "model_response", "tool_call", "tool_result"]);
    expect(requests).toHaveLength(1);
    expect(outcome.messages).toHaveLength(2); // no results message appended
  });

  it("a model call that fails because of the abort ends as the abort says", async () => {
    const ctl = new AbortController();
    const { outcome } = await loop([() => (ctl.abort("timeout"), new Error("aborted by user"))], {
      signal: ctl.signal,
    });
    expect(outcome).toMatchObject({ status: "timeout", turns: 1 });
  });

  it("a retryable model error is thrown (the queue retries); others fail the job with their message", async () => {
    await expect(loop([new ModelError("Anthropic API error 529: Overloaded", 529, true)])).rejects.toThrow(/529/);
    expect((await loop([new ModelError("Anthropic API error 400: bad", 400)])).outcome).toMatchObject({
      status: "failed",
      error: "Anthropic API error 400: bad",
    });
    expect((await loop([new Error("socket hang up")])).outcome).toMatchObject({
      status: "failed",
      error: "socket hang up",
    });
    const weird = await loop([
      () => {
        // This test is about a model that throws something other than an Error, so it throws a string.
        // eslint-disable-next-line @typescript-eslint/only-throw-error
        throw "a string";
      },
    ]);
    expect(weird.outcome).toMatchObject({ status: "failed", error: "a string" });
  });

  it("the model's retries show as model_retry events", async () => {
    const { events } = await loop([{ ...say(text("ok")), retry: true } as Partial<ModelResponse>]);
    expect(events.find((e) => e.type === "model_retry")).toEqual({
      type: "model_retry",
      retry: 1,
      error: "overloaded",
      status: 529,
    });
  });
});

describe("agent loop: context and resume", () => {
  it("old tool output is shortened past contextChars, and said once per growth", async () => {
    const big = "x".repeat(5000);
    const runTool: LoopOptions["runTool"] = async () => ({ content: big, isError: false, durationMs: 1 });
    const { events, requests } = await loop((i) => (i < 8 ? say(tool(`t${i}`)) : say(text("done"))), {
      runTool,
      contextChars: 8000,
    });
    const trims = events.filter((e) => e.type === "context_trimmed") as { removedChars: number; keptTurns: number }[];
    expect(trims.length).toBeGreaterThan(0);
    for (let i = 1; i < trims.length; i++) expect(trims[i]!.removedChars).toBeGreaterThan(trims[i - 1]!.removedChars);
    expect(JSON.stringify(requests.at(-1)!.messages).length).toBeLessThan(8 * 5000);
    const small = await loop((i) => (i < 3 ? say(tool(`t${i}`)) : say(text("done"))), {
      runTool: async () => ({ content: "short", isError: false, durationMs: 1 }),
    });
    expect(small.types).not.toContain("context_trimmed");
  });

  it("onTurn sees the model's answer before its tools run, then the results", async () => {
    const seen: { roles: string[]; ran: number }[] = [];
    const ran: string[] = [];
    await loop([say(tool("a")), say(text("done"))], {
      runTool: async (block) => (ran.push(block.id), { content: "ok", isError: false, durationMs: 1 }),
      onTurn: async (s) => void seen.push({ roles: s.messages.map((m) => m.role), ran: ran.length }),
    });
    expect(seen).toEqual([
      { roles: ["user", "assistant"], ran: 0 },
      { roles: ["user", "assistant", "user"], ran: 1 },
      { roles: ["user", "assistant", "user", "assistant"], ran: 1 },
    ]);
  });

  it("resume from a conversation that ends with tool calls runs them first, then asks with their results and the note", async () => {
    const cut = await loop([say(tool("first"), tool("second"))], { maxTurns: 1 });
    const pendingState = { ...cut.outcome, messages: cut.outcome.messages.slice(0, 2) }; // as a checkpoint before the tools ran
    const { outcome, requests, calls, events } = await loop([say(text("done"))], {
      resume: { from: pendingState, message: "NOTE", sendAll: true },
    });
    expect(calls.map((c) => (c.block.input as { command: string }).command)).toEqual(["first", "second"]);
    expect(events.slice(0, 4).map((e) => e.type)).toEqual(["tool_call", "tool_result", "tool_call", "tool_result"]);
    expect(events[0]).toMatchObject({ turn: 1 });
    expect(requests).toHaveLength(1);
    const last = requests[0]!.messages.at(-1)!;
    expect(last.role).toBe("user");
    expect((last.content as { type: string }[]).map((b) => b.type)).toEqual(["tool_result", "tool_result", "text"]);
    expect(JSON.stringify(last.content)).toContain("NOTE");
    expect(requests[0]!.messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(outcome).toMatchObject({ status: "completed", turns: 2 });
  });

  it("resume from tool calls stops at once when aborted, running none", async () => {
    const cut = await loop([say(tool("x"))], { maxTurns: 1 });
    const ctl = new AbortController();
    ctl.abort("cancelled");
    const { outcome, calls, requests } = await loop([], {
      resume: { from: { ...cut.outcome, messages: cut.outcome.messages.slice(0, 2) }, message: "NOTE" },
      signal: ctl.signal,
    });
    expect(calls).toHaveLength(0);
    expect(requests).toHaveLength(0);
    expect(outcome.status).toBe("cancelled");
  });

  it("resume goes on from an outcome with one more user message: turns, usage and summary carried", async () => {
    const first = await loop([{ ...say(text("first try")), usage: usage(1000, 0) }]);
    const { outcome, events, requests } = await loop([{ ...say(text("")), usage: usage(1000, 0) }], {
      resume: { from: first.outcome, message: "verify failed" },
      budget: { inputTokens: 1500 },
    });
    expect(requests[0]!.messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(JSON.stringify(requests[0]!.messages.at(-1))).toMatch(/verify failed/);
    expect(events[0]).toMatchObject({ type: "model_request", turn: 2, messagesCount: 3 });
    expect((events[0] as { newMessages: unknown[]; system?: string }).newMessages).toHaveLength(1);
    expect((events[0] as { system?: string }).system).toBeUndefined();
    expect(outcome).toMatchObject({
      status: "budget_exceeded",
      turns: 2,
      usage: usage(2000, 0),
      summary: "first try",
      stopReason: "end_turn",
    });
  });
});

// The edges the mutation run (npm run mutation) found no test holding.
describe("agent loop: edges", () => {
  it("resume after the tools' results: the note joins the user message that ends the conversation", async () => {
    const cut = await loop([say(tool("a")), say(text("never"))], { maxTurns: 1 });
    expect(cut.outcome.messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    const { requests, calls } = await loop([say(text("done"))], { resume: { from: cut.outcome, message: "NOTE" } });
    expect(calls).toHaveLength(0);
    expect(requests[0]!.messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    const last = requests[0]!.messages.at(-1)!.content as ContentBlock[];
    expect(last.map((b) => b.type)).toEqual(["tool_result", "text"]);
    expect(last[1]).toMatchObject({ type: "text", text: "NOTE" });
  });

  it("resume from a task alone (a string): one user message with both texts", async () => {
    const from = {
      ...(await loop([say(text("x"))])).outcome,
      messages: [{ role: "user" as const, content: "TASK ALONE" }],
    };
    const { requests } = await loop([say(text("done"))], { resume: { from, message: "NOTE", sendAll: true } });
    expect(requests[0]!.messages).toHaveLength(1);
    expect(
      (requests[0]!.messages[0]!.content as ContentBlock[]).map((b) => ({
        type: b.type,
        text: (b as { text?: string }).text,
      })),
    ).toEqual([
      { type: "text", text: "TASK ALONE" },
      { type: "text", text: "NOTE" },
    ]);
  });

  it("resume from an answer given as a string: no tool calls to run, the note is a message of its own", async () => {
    const base = (await loop([say(text("x"))])).outcome;
    const from = {
      ...base,
      messages: [
        { role: "user" as const, content: "T" },
        { role: "assistant" as const, content: "a plain answer" },
        { role: "user" as const, content: "more" },
        { role: "assistant" as const, content: "again plain" },
      ],
    };
    const { requests, calls } = await loop([say(text("done"))], { resume: { from, message: "NOTE" } });
    expect(calls).toHaveLength(0);
    expect(requests[0]!.messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant", "user"]);
    const [answer, note] = requests[0]!.messages.slice(-2);
    expect(JSON.stringify(answer!.content)).toContain("again plain");
    expect(JSON.stringify(note!.content)).toContain('"NOTE"');
    expect(JSON.stringify(note!.content)).not.toContain("again plain");
  });

  it("aborted before a resumed job asks: the outcome keeps the stop reason, summary and turns it resumed from", async () => {
    const first = await loop([say(text("the summary"))]);
    const ctl = new AbortController();
    ctl.abort("cancelled");
    const { outcome } = await loop([], { resume: { from: first.outcome, message: "NOTE" }, signal: ctl.signal });
    expect(outcome).toMatchObject({ status: "cancelled", stopReason: "end_turn", summary: "the summary", turns: 1 });
    const fresh = await loop([], { signal: ctl.signal });
    expect(fresh.outcome).toMatchObject({ stopReason: null, summary: "" });
  });

  it("aborted while a resumed job's pending tool runs: the model is not asked", async () => {
    const cut = await loop([say(tool("p1"), tool("p2"))], { maxTurns: 1 });
    const ctl = new AbortController();
    const runTool: LoopOptions["runTool"] = async () => (
      ctl.abort("timeout"),
      { content: "x", isError: false, durationMs: 1 }
    );
    const { outcome, requests } = await loop([say(text("never"))], {
      resume: { from: { ...cut.outcome, messages: cut.outcome.messages.slice(0, 2) }, message: "NOTE" },
      signal: ctl.signal,
      runTool,
    });
    expect(requests).toHaveLength(0);
    expect(outcome.status).toBe("timeout");
  });

  it("the last checkpoint says the job completed; a tool_use stop with no tool calls asks again", async () => {
    const ended: (string | undefined)[] = [];
    const onTurn: LoopOptions["onTurn"] = async (s) => void ended.push((s as { ended?: string }).ended);
    await loop([say(tool("a")), say(text("done"))], { onTurn });
    expect(ended.at(-1)).toBe("completed");
    expect(ended.slice(0, -1).every((e) => e === undefined)).toBe(true);
    const odd = await loop([{ content: [text("hm")], stopReason: "tool_use" }, say(text("done"))]);
    expect(odd.requests).toHaveLength(2);
    expect(odd.outcome).toMatchObject({ status: "completed", turns: 2 });
  });

  it("a model_response's ms is the request's own time, and the max_tokens note is a user message", async () => {
    const { events, requests } = await loop([
      { content: [text("I was")], stopReason: "max_tokens" },
      say(text("done")),
    ]);
    const ms = events.filter((e) => e.type === "model_response").map((e) => (e as { ms: number }).ms);
    for (const m of ms) expect(m >= 0 && m <= Math.ceil(performance.now())).toBe(true);
    expect(requests[1]!.messages.at(-1)!.role).toBe("user");
  });

  it("a budget of one kind never stops the job for another kind", async () => {
    for (const budget of [{ usd: 1000 }, { inputTokens: 1e9 }, { outputTokens: 1e9 }]) {
      const { outcome } = await loop(
        [
          { ...say(tool("a")), usage: usage(5000, 5000) },
          { ...say(text("done")), usage: usage(5000, 5000) },
        ],
        { budget },
      );
      expect(outcome.status).toBe("completed");
    }
  });
});
