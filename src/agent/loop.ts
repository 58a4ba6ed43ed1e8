// The tool-use loop: model → tool calls → results → model, until the model ends its turn or a
// limit is hit. It knows a Model and a runTool function, nothing of Docker.
import { count } from "../core/count.js";
import { defaults } from "../core/config/config.js";
import { mcpServerOf } from "../core/spec/tools.js";
import { addUsage, emptyUsage, type EventInput, type JobStatus, type Usage } from "../core/spec/spec.js";
import type { ToolRun, ToolUseBlock } from "../tools/index.js";
import { compact } from "./compact.js";
import { cacheBreakpoints, shortenOldToolResults } from "./turn-messages.js";
import { ModelError, type ContentBlock, type Message, type Model, type ModelResponse } from "./model.js";
import { costUsd } from "./prices.js";
import { firstMessage } from "./prompt.js";
import { contextWindow, estimateTokens, isPromptTooLong } from "./window.js";
import {
  inSpan,
  modelRequestAttrs,
  modelResponseAttrs,
  SpanKind,
  toolAttrs,
  toolResultAttrs,
} from "../observability/trace.js";

/** What runAgentLoop runs: the model, the task, the tools, and its limits. */
export interface LoopOptions {
  /** The model client that answers each request. */
  model: Model;
  /** The model's id (its prices, its context window). */
  modelName: string;
  /** The system prompt. */
  system: string;
  /** The task, the first user message. */
  task: string;
  /**
   * The repository's instructions block (repo-instructions.ts), put before the task in the first
   * user message. A resumed conversation keeps its own first message.
   */
  repoInstructions?: string;
  /** The tool definitions sent with every request (Toolbox.definitions). */
  tools: unknown[];
  /** Runs one tool call (Toolbox.run, or your own). */
  runTool: (block: ToolUseBlock, signal?: AbortSignal) => Promise<ToolRun>;
  /**
   * Model turns before the loop ends with max_turns.
   * @default 50
   */
  maxTurns?: number;
  /**
   * Output tokens per response.
   * @default 8192
   */
  maxTokens?: number;
  /** Limits on what the conversation may spend (dollars, input and output tokens); past one it ends with budget_exceeded. */
  budget?: { usd?: number; inputTokens?: number; outputTokens?: number };
  /** Aborted with reason "timeout" or "cancelled" (anything else counts as cancelled). */
  signal?: AbortSignal;
  /** Gets every transcript event of the loop (model requests and responses, tool calls and results). */
  emit?: (e: EventInput) => void;
  /**
   * Past this many characters of context, tool results older than the newest few are shortened.
   * @default 400000
   */
  contextChars?: number;
  /**
   * The model's context window in tokens.
   * @default by the model's id (src/agent/window.ts)
   */
  contextWindow?: number;
  /**
   * Past this fraction of the window, older turns are compacted into a summary.
   * @default 0.8
   */
  compactAt?: number;
  /**
   * Goes on from an earlier outcome (same budgets, turns and usage counted on) with one more user
   * message, e.g. a failed verify fed back to the model.
   */
  resume?: { from: TurnState; message: string; sendAll?: boolean };
  /**
   * Awaited with the conversation so far, e.g. to checkpoint it: after each model answer that
   * calls tools (before they run; the conversation then ends with that answer), after each turn
   * once its tool results are in, and when the model ends its turn. Given back through `resume`,
   * a conversation that ends with tool calls runs them first; with `sendAll` (going on after a
   * crash) its first request's event carries every message in the transcript.
   */
  onTurn?: (s: TurnState) => Promise<void>;
  /**
   * Asked after every model response with the job's running cost; a reason ends the job as
   * budget_exceeded after this turn (e.g. a batch whose spend reached its budget).
   */
  stopAfterTurn?: (costUsd: number) => Promise<string | undefined>;
}

/** Where a conversation stands between turns: enough to go on from there. */
export interface TurnState {
  /** Model turns so far. */
  turns: number;
  /** Tokens used so far. */
  usage: Usage;
  /** The last response's stop reason. */
  stopReason: string | null;
  /** The model's last text. */
  summary: string;
  /** The conversation. */
  messages: Message[];
  /** Set when the model had ended (its status). */
  ended?: JobStatus;
}

/** How a conversation ended. */
export interface LoopOutcome {
  /** completed when the model ended its turn; otherwise the limit or failure that ended it. */
  status: JobStatus;
  /** The last response's stop reason (end_turn, tool_use, max_tokens, ...); null before any. */
  stopReason: string | null;
  /** Model turns taken. */
  turns: number;
  /** Tokens used, compaction's included. */
  usage: Usage;
  /** What the usage cost, in dollars, at the model's prices. */
  costUsd: number;
  /** The whole conversation. */
  messages: Message[];
  /** The model's last text (its account of what it did). */
  summary: string;
  /** Why it failed, where it did. */
  error?: string;
}

/** Runs the tool-use loop (model, tool calls, results, model, ...) until the model ends its turn or a limit ends it. */
export async function runAgentLoop(o: LoopOptions): Promise<LoopOutcome> {
  const run = new LoopRun(o);
  const first = await run.runPending();
  if (first) return first;
  for (;;) {
    if (o.signal?.aborted) return run.aborted();
    if (run.turns >= run.maxTurns) return run.done("max_turns", `stopped after ${count(run.maxTurns, "turn")}`);
    const res = await run.ask();
    if (!("content" in res)) return res;
    const next = await run.judge(res);
    if (next === "again") continue;
    if (!Array.isArray(next)) return next;
    // The answer is paid for: kept before its tools run, so a crash while they run does not ask again.
    await run.checkpoint();
    const results = await run.runTools(next);
    if (o.signal?.aborted) return run.aborted();
    run.messages.push({ role: "user", content: results });
    await run.checkpoint();
  }
}

/** One run of the loop: the conversation, its counters, and the steps of a turn. */
class LoopRun {
  readonly emit: (e: EventInput) => void;
  readonly maxTurns: number;
  readonly messages: Message[];
  private readonly system: ContentBlock[];
  private readonly pending: ToolUseBlock[];
  /** The names of the tools the model was offered: a span names no other (src/observability/trace.ts). */
  private readonly toolNames: ReadonlySet<string>;
  usage: Usage;
  turns: number;
  private sentUpTo: number;
  private maxTokensHits = 0;
  private trimmedChars = 0;
  private stopReason: string | null;
  private summary: string;
  /** The model's context window, and the tokens the API counted for the first `at` messages (its last request and answer). */
  private readonly window: number;
  private counted?: { tokens: number; at: number };

  constructor(private readonly o: LoopOptions) {
    this.emit = o.emit ?? (() => {});
    this.maxTurns = o.maxTurns ?? defaults.job.maxTurns;
    this.system = [{ type: "text", text: o.system }];
    const from = o.resume?.from;
    // A conversation that stopped between the model's answer and its tool results (a crash while
    // the tools ran): those tool calls run now, and the note goes with their results.
    this.pending = from ? pendingToolUses(from.messages) : [];
    this.toolNames = new Set(
      o.tools.flatMap((t) =>
        t && typeof (t as { name?: unknown }).name === "string" ? [(t as { name: string }).name] : [],
      ),
    );
    this.messages = !from
      ? [{ role: "user", content: firstMessage(o.task, o.repoInstructions) }]
      : this.pending.length
        ? [...from.messages]
        : withUserText(from.messages, o.resume!.message);
    this.usage = from?.usage ?? emptyUsage();
    this.turns = from?.turns ?? 0;
    this.sentUpTo = o.resume?.sendAll ? 0 : (from?.messages.length ?? 0);
    this.stopReason = from?.stopReason ?? null;
    this.summary = from?.summary ?? "";
    this.window = o.contextWindow ?? contextWindow(o.modelName);
  }

  done(status: JobStatus, error?: string): LoopOutcome {
    const { stopReason, turns, usage, messages, summary } = this;
    return {
      status,
      stopReason,
      turns,
      usage,
      costUsd: costUsd(this.o.modelName, usage),
      messages,
      summary,
      ...(error ? { error } : {}),
    };
  }

  aborted(): LoopOutcome {
    return this.o.signal?.reason === "timeout"
      ? this.done("timeout", "the job's wall-clock timeout was reached")
      : this.done("cancelled", "the job was cancelled");
  }

  checkpoint(ended?: JobStatus): Promise<void> | undefined {
    const { turns, usage, stopReason, summary, messages } = this;
    return this.o.onTurn?.({ turns, usage, stopReason, summary, messages, ...(ended ? { ended } : {}) });
  }

  /** The tool calls left by a crash, run before the first request; an outcome if aborted meanwhile. */
  async runPending(): Promise<LoopOutcome | undefined> {
    if (!this.pending.length) return undefined;
    const results = await this.runTools(this.pending);
    if (this.o.signal?.aborted) return this.aborted();
    this.messages.push({ role: "user", content: [...results, { type: "text", text: this.o.resume!.message }] });
    await this.checkpoint();
    return undefined;
  }

  async runTools(toolUses: ToolUseBlock[]): Promise<ContentBlock[]> {
    const results: ContentBlock[] = [];
    for (const block of toolUses) {
      if (this.o.signal?.aborted) break;
      this.emit({
        type: "tool_call",
        turn: this.turns,
        toolUseId: block.id,
        name: block.name,
        input: block.input,
        ...mcpServerOf(block.name),
      });
      const r = await inSpan("patchbay.tool", toolAttrs(block.name, this.toolNames, this.turns), async (span) => {
        const run = await this.o.runTool(block, this.o.signal);
        span.setAttributes(toolResultAttrs(run));
        return run;
      });
      this.emit({
        type: "tool_result",
        turn: this.turns,
        toolUseId: block.id,
        name: block.name,
        output: r.content,
        isError: r.isError,
        ms: r.durationMs,
      });
      results.push({
        type: "tool_result",
        tool_use_id: block.id,
        content: r.blocks ?? r.content,
        ...(r.isError ? { is_error: true } : {}),
      });
    }
    return results;
  }

  /**
   * One model request: the model's answer (kept in the conversation), or how the loop ends. Near
   * the window the conversation is compacted first; a request the API still refuses as too long is
   * compacted and sent once more, and a second refusal (or nothing left to compact) fails the job.
   */
  async ask(): Promise<ModelResponse | LoopOutcome> {
    this.turns++;
    const threshold = Math.floor(this.window * (this.o.compactAt ?? defaults.job.compactAt));
    const before = this.tokens();
    if (before > threshold) {
      const c = await this.compactNow(before, "threshold");
      if (c !== "compacted" && c !== undefined) return c;
    }
    let res = await this.send();
    if ("tooLong" in res) {
      const c = await this.compactNow(this.tokens(), "prompt_too_long");
      if (c !== "compacted") return c ?? this.done("failed", `${res.tooLong} (no older turns left to compact)`);
      res = await this.send();
      if ("tooLong" in res) return this.done("failed", `${res.tooLong} (even after compacting the conversation)`);
    }
    return res;
  }

  /** The conversation's tokens: the API's count of what it last saw, plus an estimate of what came since. */
  tokens(): number {
    const k = this.counted;
    if (k && k.at <= this.messages.length) return k.tokens + estimateTokens(this.messages.slice(k.at));
    return estimateTokens({ system: this.o.system, tools: this.o.tools, messages: this.messages });
  }

  /** Older turns replaced by the model's summary: "compacted", undefined (nothing to drop), or how the loop ends. */
  async compactNow(
    tokensBefore: number,
    reason: "threshold" | "prompt_too_long",
  ): Promise<"compacted" | LoopOutcome | undefined> {
    const o = this.o;
    const target = Math.floor(this.window * (o.compactAt ?? defaults.job.compactAt));
    let c;
    try {
      c = await inSpan(
        "patchbay.model.compact",
        modelRequestAttrs(o.modelName, this.turns),
        () =>
          compact({
            model: o.model,
            modelName: o.modelName,
            messages: this.messages,
            keepTokens: Math.floor(Math.min(target, tokensBefore) * (reason === "threshold" ? 0.4 : 0.25)),
            requestTokens: Math.floor(target * 0.75),
            maxTokens: Math.min(o.maxTokens ?? defaults.job.maxTokens, 4096),
            signal: o.signal,
          }),
        { kind: SpanKind.CLIENT },
      );
    } catch (err) {
      if (o.signal?.aborted) return this.aborted();
      if (err instanceof ModelError && err.retryable) throw err;
      return this.done(
        "failed",
        `compacting the conversation failed: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    if (!c) return undefined;
    this.usage = addUsage(this.usage, c.usage);
    this.messages.splice(0, this.messages.length, ...c.messages);
    this.counted = undefined;
    this.sentUpTo = this.messages.length;
    const turnsDropped = Math.ceil(c.droppedMessages / 2);
    this.emit({
      type: "context_compacted",
      turn: this.turns,
      reason,
      turnsDropped,
      messagesKept: c.keptMessages,
      tokensBefore,
      tokensAfter: this.tokens(),
      summary: c.summary,
      usage: c.usage,
    });
    return this.overBudget() ?? "compacted";
  }

  /** The request itself: the answer, how the loop ends, or the API's refusal of a prompt too long. */
  async send(): Promise<ModelResponse | LoopOutcome | { tooLong: string }> {
    const o = this.o;
    const trimmed = shortenOldToolResults(this.messages, o.contextChars ?? defaults.job.contextCharsBeforeShortening);
    if (trimmed.removedChars > this.trimmedChars)
      this.emit({ type: "context_trimmed", removedChars: trimmed.removedChars, keptTurns: trimmed.keptTurns });
    this.emit({
      type: "model_request",
      turn: this.turns,
      messagesCount: this.messages.length,
      newMessages: this.messages.slice(this.sentUpTo),
      ...(this.turns === 1 ? { system: o.system } : {}),
    });
    this.trimmedChars = trimmed.removedChars;
    this.sentUpTo = this.messages.length;
    const t0 = performance.now();
    let res: ModelResponse;
    try {
      const req = {
        model: o.modelName,
        system: cacheBreakpoints.system(this.system),
        messages: cacheBreakpoints.messages(trimmed.messages),
        tools: o.tools,
        maxTokens: o.maxTokens ?? defaults.job.maxTokens,
        signal: o.signal,
      };
      res = await inSpan(
        "patchbay.model.request",
        modelRequestAttrs(o.modelName, this.turns),
        async (span) => {
          const answer = await o.model.complete(req, {
            onRetry: (r) => {
              span.setAttribute("patchbay.model.retries", r.retry);
              this.emit({
                type: "model_retry",
                retry: r.retry,
                error: r.error,
                ...(r.status ? { status: r.status } : {}),
              });
            },
          });
          span.setAttributes(modelResponseAttrs(answer, costUsd(o.modelName, answer.usage)));
          return answer;
        },
        { kind: SpanKind.CLIENT },
      );
    } catch (err) {
      if (o.signal?.aborted) return this.aborted();
      if (err instanceof ModelError && err.retryable) throw err; // the worker retries the job with backoff
      if (err instanceof ModelError && isPromptTooLong(err.status, err.message)) return { tooLong: err.message };
      return this.done("failed", err instanceof Error ? err.message : String(err));
    }
    this.usage = addUsage(this.usage, res.usage);
    this.stopReason = res.stopReason;
    this.messages.push({ role: "assistant", content: res.content });
    this.sentUpTo = this.messages.length;
    const u = res.usage;
    this.counted = {
      tokens: u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens + u.outputTokens,
      at: this.messages.length,
    };
    this.emit({
      type: "model_response",
      turn: this.turns,
      content: res.content,
      stopReason: res.stopReason,
      usage: res.usage,
      ms: Math.round(performance.now() - t0),
      model: res.model,
    });
    const text = res.content
      .filter((b) => b.type === "text")
      .map((b) => String(b.text))
      .join("\n")
      .trim();
    if (text) this.summary = text;
    return res;
  }

  /** The job's end when its running usage is past a budget (checked after each answer and each compaction). */
  overBudget(): LoopOutcome | undefined {
    const over = overBudget(this.o.budget, this.usage, costUsd(this.o.modelName, this.usage));
    if (!over) return undefined;
    this.emit({ type: "budget", ...over });
    return this.done("budget_exceeded", `budget ${over.limit} exceeded: ${over.used} > ${over.max}`);
  }

  /** What an answer means: the tool calls to run, "again" for another request, or how the loop ends. */
  async judge(res: ModelResponse): Promise<ToolUseBlock[] | "again" | LoopOutcome> {
    const cost = costUsd(this.o.modelName, this.usage);
    const over = this.overBudget();
    if (over) return over;
    const stop = await this.o.stopAfterTurn?.(cost);
    if (stop) return this.done("budget_exceeded", stop);

    const toolUses = res.content.filter((b) => b.type === "tool_use") as unknown as ToolUseBlock[];
    switch (res.stopReason) {
      case "end_turn":
      case "stop_sequence":
        await this.checkpoint("completed");
        return this.done("completed");
      case "refusal":
        return this.done("failed", "the model refused to continue (stop_reason refusal)");
      case "pause_turn":
        return "again"; // a long server-side turn: send the conversation back as it is and let it go on
      case "max_tokens":
        if (++this.maxTokensHits > 1)
          return this.done("failed", "the model's response was cut off at max_tokens twice in a row");
        this.messages.push({
          role: "user",
          content: [
            ...cutOffResults(toolUses),
            {
              type: "text",
              text: "Your response was cut off at the output token limit. Continue where you stopped, in smaller steps.",
            },
          ],
        });
        return "again";
      case "tool_use":
        break;
      default:
        if (!toolUses.length) {
          await this.checkpoint("completed");
          return this.done("completed");
        }
    }
    this.maxTokensHits = 0;
    return toolUses;
  }
}

/** The tool calls of a conversation that ends with the model's answer (their results never came). */
function pendingToolUses(messages: Message[]): ToolUseBlock[] {
  const last = messages.at(-1);
  if (last?.role !== "assistant" || typeof last.content === "string") return [];
  return last.content.filter((b) => b.type === "tool_use") as unknown as ToolUseBlock[];
}

/** One more user text: a message of its own after the model's, else joined to the user message that ends the conversation (tool results). */
function withUserText(messages: Message[], text: string): Message[] {
  const last = messages.at(-1);
  if (last?.role !== "user") return [...messages, { role: "user", content: text }];
  const content = typeof last.content === "string" ? [{ type: "text", text: last.content }] : last.content;
  return [...messages.slice(0, -1), { role: "user", content: [...content, { type: "text", text }] }];
}

function cutOffResults(toolUses: ToolUseBlock[]): ContentBlock[] {
  return toolUses.map((b) => ({
    type: "tool_result",
    tool_use_id: b.id,
    is_error: true,
    content: "This tool call was cut off by the output token limit and was not run.",
  }));
}

function overBudget(b: LoopOptions["budget"], u: Usage, usd: number) {
  if (!b) return undefined;
  const input = u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens;
  if (b.usd !== undefined && usd > b.usd)
    return { limit: "usd" as const, max: b.usd, used: Math.round(usd * 1e6) / 1e6 };
  if (b.inputTokens !== undefined && input > b.inputTokens)
    return { limit: "inputTokens" as const, max: b.inputTokens, used: input };
  if (b.outputTokens !== undefined && u.outputTokens > b.outputTokens)
    return { limit: "outputTokens" as const, max: b.outputTokens, used: u.outputTokens };
  return undefined;
}
