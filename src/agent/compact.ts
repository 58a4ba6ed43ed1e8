// Compaction: when a conversation nears its model's context window, the older turns are replaced
// by a summary the model writes in a request of its own. What stays is what the Messages API and
// the job need: the first user message (the task; a summary so far rides in it, after the task),
// then the newest turns from an assistant message on, so every tool_result still follows its
// tool_use and roles still alternate.
import type { Usage } from "../core/spec/spec.js";
import { cutMiddle } from "../core/truncate.js";
import type { ContentBlock, Message, Model } from "./model.js";
import { estimateTokens } from "./window.js";

/** Marks the summary's block in the first message (so a later compaction replaces it). */
export const SUMMARY_TAG = "<summary-of-earlier-turns>";

/** The system prompt of a compaction's summary request (a scripted model answers it with a fixed text). */
export const SUMMARY_SYSTEM =
  "You summarise the earlier part of a coding agent's work so that it can go on without it. Write what was " +
  "learnt about the repository (files, functions, commands, test results), what was changed and why, what " +
  "failed, and what is left to do. Be concrete (paths, names, exact errors); no preamble. Reply with the summary only.";

export interface Compaction {
  messages: Message[];
  /** The messages taken out (the turns dropped), and how many stayed after the first. */
  droppedMessages: number;
  keptMessages: number;
  summary: string;
  usage: Usage;
}

const blocks = (c: Message["content"]): ContentBlock[] => (typeof c === "string" ? [{ type: "text", text: c }] : c);
const isSummary = (b: ContentBlock) =>
  b.type === "text" && typeof b.text === "string" && b.text.startsWith(SUMMARY_TAG);

/**
 * Where the kept turns start: the oldest assistant message (index ≥ 3, so at least one turn goes)
 * from which the rest fits in `keepTokens`; when not even the newest turn fits, the newest
 * assistant message still (the latest turn is never dropped). Undefined: nothing can be dropped.
 */
export function keepFrom(messages: Message[], keepTokens: number): number | undefined {
  const starts = messages.flatMap((m, i) => (m.role === "assistant" && i >= 3 ? [i] : []));
  if (!starts.length) return undefined;
  let tail = 0;
  let best = starts.at(-1)!;
  for (let i = messages.length - 1; i >= starts[0]!; i--) {
    tail += estimateTokens(messages[i]);
    if (tail > keepTokens) break;
    if (messages[i]!.role === "assistant") best = i;
  }
  return best;
}

/** The dropped turns as plain text for the summary request, each block cut so that the whole stays near `maxTokens`. */
export function renderTurns(turns: Message[], maxTokens: number): string {
  const all = turns.flatMap((m) => blocks(m.content).map((b) => [m.role, b] as const));
  const perBlock = Math.max(400, Math.floor((maxTokens * 3.5) / Math.max(1, all.length)));
  return all
    .map(([role, b]) => {
      const body =
        b.type === "text"
          ? String(b.text)
          : b.type === "tool_result"
            ? resultText(b)
            : JSON.stringify(b.type === "tool_use" ? { tool: b.name, input: b.input } : b);
      return `[${role} ${b.type}${b.is_error ? " (error)" : ""}]\n${cutMiddle(body, perBlock)}`;
    })
    .join("\n\n");
}

function resultText(b: ContentBlock): string {
  const c = b.content;
  if (typeof c === "string") return c;
  return Array.isArray(c)
    ? c
        .map((x: { type?: string; text?: unknown }) => (x?.type === "text" ? String(x.text) : `[${String(x?.type)}]`))
        .join("\n")
    : "";
}

export interface CompactOptions {
  model: Model;
  modelName: string;
  messages: Message[];
  /** Tokens the kept turns may take, and the summary request's input at most. */
  keepTokens: number;
  requestTokens: number;
  maxTokens: number;
  signal?: AbortSignal;
}

/** Compacts the conversation with one summary request; undefined when there is nothing to drop. Model errors propagate. */
export async function compact(o: CompactOptions): Promise<Compaction | undefined> {
  const { messages } = o;
  const k = keepFrom(messages, o.keepTokens);
  if (k === undefined) return undefined;
  const first = blocks(messages[0]!.content);
  const task = first.filter((b) => !isSummary(b));
  const before = first
    .filter(isSummary)
    .map((b) => String(b.text).slice(SUMMARY_TAG.length))
    .join("\n");
  const dropped = messages.slice(1, k);
  const prompt = [
    "The task the agent is working on:",
    task.map((b) => (b.type === "text" ? String(b.text) : `[${b.type}]`)).join("\n"),
    before ? `The summary of the work before these turns:\n${before}` : "",
    `The turns to summarise (tool outputs may be cut):\n\n${renderTurns(dropped, Math.max(1000, o.requestTokens - estimateTokens(task) - estimateTokens(before) - 500))}`,
    "Write the new summary, covering the earlier summary too.",
  ]
    .filter(Boolean)
    .join("\n\n");
  const res = await o.model.complete({
    model: o.modelName,
    system: [{ type: "text", text: SUMMARY_SYSTEM }],
    messages: [{ role: "user", content: prompt }],
    tools: [],
    maxTokens: o.maxTokens,
    signal: o.signal,
  });
  const summary =
    res.content
      .filter((b) => b.type === "text")
      .map((b) => String(b.text))
      .join("\n")
      .trim() || "(the model wrote no summary)";
  const head: Message = {
    role: "user",
    content: [
      ...task,
      {
        type: "text",
        text: `${SUMMARY_TAG}\nThe earlier turns of this conversation were replaced by this summary to save context:\n${summary}`,
      },
    ],
  };
  return {
    messages: [head, ...messages.slice(k)],
    droppedMessages: dropped.length,
    keptMessages: messages.length - k,
    summary,
    usage: res.usage,
  };
}
