// The tool-use loop: model → tool calls → results → model, until the model ends its turn or a
// limit is hit. It knows a Model and a runTool function, nothing of Docker.
import { defaults } from "../config.js";
import { addUsage, emptyUsage, type EventInput, type JobStatus, type Usage } from "../spec.js";
import type { ToolRun, ToolUseBlock } from "../tools/index.js";
import { cacheBreakpoints, shortenOldToolResults } from "./context.js";
import { ModelError, type ContentBlock, type Message, type Model } from "./model.js";
import { costUsd } from "./prices.js";
import { taskMessage } from "./prompt.js";

export interface LoopOptions {
  model: Model;
  modelName: string;
  system: string;
  task: string;
  tools: unknown[];
  runTool: (block: ToolUseBlock, signal?: AbortSignal) => Promise<ToolRun>;
  maxTurns?: number;
  maxTokens?: number;
  budget?: { usd?: number; inputTokens?: number; outputTokens?: number };
  /** Aborted with reason "timeout" or "cancelled" (anything else counts as cancelled). */
  signal?: AbortSignal;
  emit?: (e: EventInput) => void;
  contextChars?: number;
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
  turns: number;
  usage: Usage;
  stopReason: string | null;
  summary: string;
  messages: Message[];
  /** Set when the model had ended (its status). */
  ended?: JobStatus;
}

export interface LoopOutcome {
  status: JobStatus;
  stopReason: string | null;
  turns: number;
  usage: Usage;
  costUsd: number;
  messages: Message[];
  summary: string;
  error?: string;
}

export async function runAgentLoop(o: LoopOptions): Promise<LoopOutcome> {
  const emit = o.emit ?? (() => {});
  const maxTurns = o.maxTurns ?? defaults.job.maxTurns;
  const system: ContentBlock[] = [{ type: "text", text: o.system }];
  const from = o.resume?.from;
  // A conversation that stopped between the model's answer and its tool results (a crash while
  // the tools ran): those tool calls run now, and the note goes with their results.
  const pending = from ? pendingToolUses(from.messages) : [];
  const messages: Message[] = !from ? [{ role: "user", content: taskMessage(o.task) }] : pending.length ? [...from.messages] : withUserText(from.messages, o.resume!.message);
  let usage = from?.usage ?? emptyUsage();
  let turns = from?.turns ?? 0;
  let sentUpTo = o.resume?.sendAll ? 0 : (from?.messages.length ?? 0);
  let maxTokensHits = 0;
  let trimmedChars = 0;
  let stopReason: string | null = from?.stopReason ?? null;
  let summary = from?.summary ?? "";
  const done = (status: JobStatus, error?: string): LoopOutcome => ({
    status, stopReason, turns, usage, costUsd: costUsd(o.modelName, usage), messages, summary, ...(error ? { error } : {}),
  });
  const aborted = () => (o.signal?.reason === "timeout" ? done("timeout", "the job's wall-clock timeout was reached") : done("cancelled", "the job was cancelled"));
  const runTools = async (toolUses: ToolUseBlock[]): Promise<ContentBlock[]> => {
    const results: ContentBlock[] = [];
    for (const block of toolUses) {
      if (o.signal?.aborted) break;
      emit({ type: "tool_call", turn: turns, toolUseId: block.id, name: block.name, input: block.input });
      const r = await o.runTool(block, o.signal);
      emit({ type: "tool_result", turn: turns, toolUseId: block.id, name: block.name, output: r.content, isError: r.isError, ms: r.durationMs });
      results.push({ type: "tool_result", tool_use_id: block.id, content: r.content, ...(r.isError ? { is_error: true } : {}) });
    }
    return results;
  };

  if (pending.length) {
    const results = await runTools(pending);
    if (o.signal?.aborted) return aborted();
    messages.push({ role: "user", content: [...results, { type: "text", text: o.resume!.message }] });
    await o.onTurn?.({ turns, usage, stopReason, summary, messages });
  }

  for (;;) {
    if (o.signal?.aborted) return aborted();
    if (turns >= maxTurns) return done("max_turns", `stopped after ${maxTurns} turns`);
    turns++;
    const trimmed = shortenOldToolResults(messages, o.contextChars ?? defaults.job.contextCharsBeforeShortening);
    if (trimmed.removedChars > trimmedChars) emit({ type: "context_trimmed", removedChars: trimmed.removedChars, keptTurns: trimmed.keptTurns });
    emit({ type: "model_request", turn: turns, messagesCount: messages.length, newMessages: messages.slice(sentUpTo), ...(turns === 1 ? { system: o.system } : {}) });
    trimmedChars = trimmed.removedChars;
    sentUpTo = messages.length;
    const t0 = performance.now();
    let res;
    try {
      res = await o.model.complete(
        { model: o.modelName, system: cacheBreakpoints.system(system), messages: cacheBreakpoints.messages(trimmed.messages), tools: o.tools, maxTokens: o.maxTokens ?? defaults.job.maxTokens, signal: o.signal },
        { onRetry: (r) => emit({ type: "model_retry", retry: r.retry, error: r.error, ...(r.status ? { status: r.status } : {}) }) },
      );
    } catch (err) {
      if (o.signal?.aborted) return aborted();
      if (err instanceof ModelError && err.retryable) throw err; // the worker retries the job with backoff
      return done("failed", err instanceof Error ? err.message : String(err));
    }
    usage = addUsage(usage, res.usage);
    stopReason = res.stopReason;
    messages.push({ role: "assistant", content: res.content });
    sentUpTo = messages.length;
    emit({ type: "model_response", turn: turns, content: res.content, stopReason: res.stopReason, usage: res.usage, ms: Math.round(performance.now() - t0), model: res.model });
    const text = res.content.filter((b) => b.type === "text").map((b) => String(b.text)).join("\n").trim();
    if (text) summary = text;

    const over = overBudget(o.budget, usage, costUsd(o.modelName, usage));
    if (over) {
      emit({ type: "budget", ...over });
      return done("budget_exceeded", `budget ${over.limit} exceeded: ${over.used} > ${over.max}`);
    }
    const stop = await o.stopAfterTurn?.(costUsd(o.modelName, usage));
    if (stop) return done("budget_exceeded", stop);

    const toolUses = res.content.filter((b) => b.type === "tool_use") as unknown as ToolUseBlock[];
    switch (res.stopReason) {
      case "end_turn":
      case "stop_sequence":
        await o.onTurn?.({ turns, usage, stopReason, summary, messages, ended: "completed" });
        return done("completed");
      case "refusal":
        return done("failed", "the model refused to continue (stop_reason refusal)");
      case "pause_turn":
        continue; // a long server-side turn: send the conversation back as it is and let it go on
      case "max_tokens":
        if (++maxTokensHits > 1) return done("failed", "the model's response was cut off at max_tokens twice in a row");
        messages.push({ role: "user", content: [...cutOffResults(toolUses), { type: "text", text: "Your response was cut off at the output token limit. Continue where you stopped, in smaller steps." }] });
        continue;
      case "tool_use":
        break;
      default:
        if (!toolUses.length) {
          await o.onTurn?.({ turns, usage, stopReason, summary, messages, ended: "completed" });
          return done("completed");
        }
    }
    maxTokensHits = 0;
    // The answer is paid for: kept before its tools run, so a crash while they run does not ask again.
    await o.onTurn?.({ turns, usage, stopReason, summary, messages });
    const results = await runTools(toolUses);
    if (o.signal?.aborted) return aborted();
    messages.push({ role: "user", content: results });
    await o.onTurn?.({ turns, usage, stopReason, summary, messages });
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
  return toolUses.map((b) => ({ type: "tool_result", tool_use_id: b.id, is_error: true, content: "This tool call was cut off by the output token limit and was not run." }));
}

function overBudget(b: LoopOptions["budget"], u: Usage, usd: number) {
  if (!b) return undefined;
  const input = u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens;
  if (b.usd !== undefined && usd > b.usd) return { limit: "usd" as const, max: b.usd, used: Math.round(usd * 1e6) / 1e6 };
  if (b.inputTokens !== undefined && input > b.inputTokens) return { limit: "inputTokens" as const, max: b.inputTokens, used: input };
  if (b.outputTokens !== undefined && u.outputTokens > b.outputTokens) return { limit: "outputTokens" as const, max: b.outputTokens, used: u.outputTokens };
  return undefined;
}
