// What is sent each turn, derived from the stored conversation without changing it:
// prompt-cache breakpoints, and old tool output shortened once the context grows past a bound.
import { count } from "../core/count.js";
import type { ContentBlock, Message } from "./model.js";
import { REPO_INSTRUCTIONS_TAG } from "./repo-instructions.js";

const EPHEMERAL = { type: "ephemeral" } as const;

function withCache(content: Message["content"]): ContentBlock[] {
  const blocks: ContentBlock[] =
    typeof content === "string" ? [{ type: "text", text: content }] : content.map((b) => ({ ...b }));
  const last = blocks[blocks.length - 1];
  if (last) blocks[blocks.length - 1] = { ...last, cache_control: EPHEMERAL };
  return blocks;
}

export const cacheBreakpoints = {
  /** One breakpoint after the system prompt (with the tools before it, the stable prefix). */
  system: (system: ContentBlock[]): ContentBlock[] => withCache(system),
  /**
   * A breakpoint on the newest message every turn (this turn's cache write) and on the previous
   * user message (where the last turn's write is, to be read back), so a long job re-reads its
   * history from cache. With the system one: three of the four allowed.
   */
  messages(messages: Message[]): Message[] {
    const out = messages.slice();
    const first = out[0];
    // The repository's instructions (the first block of the first message, before the task): a
    // breakpoint of its own, so that they are read from cache even once a compaction rewrote the
    // rest of that message. The fourth of the four allowed.
    if (first && typeof first.content !== "string" && first.content.length > 1 && isRepoInstructions(first.content[0]))
      out[0] = { ...first, content: [{ ...first.content[0]!, cache_control: EPHEMERAL }, ...first.content.slice(1)] };
    const userIdx = out.map((m, i) => (m.role === "user" ? i : -1)).filter((i) => i >= 0);
    for (const i of new Set([out.length - 1, userIdx[userIdx.length - 2] ?? -1])) {
      if (i >= 0) out[i] = { ...out[i]!, content: withCache(out[i]!.content) };
    }
    return out;
  },
};

const isRepoInstructions = (b: ContentBlock | undefined) =>
  b?.type === "text" && typeof b.text === "string" && b.text.startsWith(REPO_INSTRUCTIONS_TAG);

const KEEP_RECENT_TURNS = 6;
const KEEP_CHARS = 2_000;

const size = (m: Message) => (typeof m.content === "string" ? m.content.length : JSON.stringify(m.content).length);

/**
 * Past `maxChars` of conversation, tool results older than the last few turns are cut to their
 * head and tail. The stored conversation (and the transcript) keep the full text.
 */
export function shortenOldToolResults(
  messages: Message[],
  maxChars: number,
): { messages: Message[]; removedChars: number; keptTurns: number } {
  const total = messages.reduce((n, m) => n + size(m), 0);
  if (total <= maxChars) return { messages, removedChars: 0, keptTurns: messages.length };
  let removed = 0;
  const cutoff = messages.length - 2 * KEEP_RECENT_TURNS;
  const out = messages.map((m, i) => {
    if (i >= cutoff || m.role !== "user" || typeof m.content === "string") return m;
    return {
      ...m,
      content: m.content.map((b) => {
        if (b.type !== "tool_result" || typeof b.content !== "string" || b.content.length <= KEEP_CHARS) return b;
        const text = b.content;
        removed += text.length - KEEP_CHARS;
        const half = KEEP_CHARS / 2;
        return {
          ...b,
          content: `${text.slice(0, half)}\n[... ${count(text.length - KEEP_CHARS, "character")} of this old tool output removed to save context ...]\n${text.slice(-half)}`,
        };
      }),
    };
  });
  return { messages: out, removedChars: removed, keptTurns: KEEP_RECENT_TURNS };
}
