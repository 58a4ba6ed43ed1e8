// Each model's context window, and how the loop counts a conversation's tokens before it is sent.
// The count is an estimate: bytes of the request's JSON / 3.5 (Claude's tokenizer averages about
// 3.5 to 4 bytes a token on code and English; the smaller divisor errs high, so a conversation is
// compacted early rather than refused). The scripted server (test/support/fake-anthropic.ts)
// enforces a window by the same rule. Between requests the API's own `usage` replaces the estimate
// for what was already sent (see LoopRun's token count in loop.ts).

export const BYTES_PER_TOKEN = 3.5;
export const DEFAULT_CONTEXT_WINDOW = 200_000;

/** Input tokens by model id prefix, longest prefix first. Unknown ids get DEFAULT_CONTEXT_WINDOW. */
export const CONTEXT_WINDOWS: Readonly<Record<string, number>> = Object.freeze({
  "claude-3": 200_000,
  "claude-opus-4": 200_000,
  "claude-sonnet-4": 200_000, // 1M only with the long-context beta header, which patchbay does not send
  "claude-haiku-4": 200_000,
  "claude-opus-5": 200_000,
  "claude-sonnet-5": 200_000,
  "claude-haiku-5": 200_000,
  "claude-fable-5": 200_000,
  "claude-mythos": 200_000,
});
const PREFIXES = Object.keys(CONTEXT_WINDOWS).sort((a, b) => b.length - a.length);

/** The model's context window in tokens: `override` (PATCHBAY_CONTEXT_WINDOW) when set, else the table's, else 200k. */
export function contextWindow(model: string, override?: number): number {
  if (override !== undefined) return override;
  const id = model
    .trim()
    .toLowerCase()
    .replace(/^(?:[a-z]+\.)?anthropic\./, "");
  const p = PREFIXES.find((x) => id.startsWith(x));
  return p === undefined ? DEFAULT_CONTEXT_WINDOW : CONTEXT_WINDOWS[p]!;
}

/** Estimated tokens of any JSON-able value (a message, a list of them, a request). */
export function estimateTokens(x: unknown): number {
  return Math.ceil(Buffer.byteLength(typeof x === "string" ? x : (JSON.stringify(x) ?? ""), "utf8") / BYTES_PER_TOKEN);
}

/** The API's refusal of a request over the window (400 "prompt is too long: N tokens > M maximum", or a 413). */
export function isPromptTooLong(status: number | undefined, message: string): boolean {
  return (
    (status === 400 && /prompt is too long|context window|too many (?:input )?tokens/i.test(message)) || status === 413
  );
}
