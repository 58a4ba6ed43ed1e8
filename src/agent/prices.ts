// Model prices, USD per million tokens. Cache writes are 5-minute writes (1.25× input), cache reads
// are 0.1× input. Model ids are matched by prefix, longest prefix first, so dated ids and aliases
// (claude-sonnet-4-5-20250929, claude-3-5-haiku-latest) find their family. An unknown model is
// priced as the most expensive known one: a budget should stop a job early, never late.
// (Long-context surcharges above 200K input tokens are not modelled.)
import type { Usage } from "../spec.js";

export interface ModelPrice {
  input: number;
  output: number;
  cacheWrite: number;
  cacheRead: number;
}

const price = (input: number, output: number, cacheWrite: number, cacheRead: number): ModelPrice =>
  Object.freeze({ input, output, cacheWrite, cacheRead });

/** By model id prefix. */
export const PRICES: Readonly<Record<string, ModelPrice>> = Object.freeze({
  "claude-opus-4": price(15, 75, 18.75, 1.5), // Opus 4 and 4.1
  "claude-opus-4-1": price(15, 75, 18.75, 1.5),
  "claude-opus-4-5": price(5, 25, 6.25, 0.5),
  "claude-opus-4-6": price(5, 25, 6.25, 0.5),
  "claude-opus-4-7": price(5, 25, 6.25, 0.5),
  "claude-opus-4-8": price(5, 25, 6.25, 0.5),
  "claude-opus-5": price(5, 25, 6.25, 0.5),
  "claude-opus-5-5": price(4, 20, 5, 0.4),
  "claude-sonnet-5": price(2, 10, 2.5, 0.2), // Sonnet 5 and 5.5 (the current default)
  "claude-fable-5": price(10, 50, 12.5, 1),
  "claude-sonnet-4": price(3, 15, 3.75, 0.3), // Sonnet 4
  "claude-sonnet-4-5": price(3, 15, 3.75, 0.3),
  "claude-haiku-4-5": price(1, 5, 1.25, 0.1),
  "claude-3-7-sonnet": price(3, 15, 3.75, 0.3),
  "claude-3-5-sonnet": price(3, 15, 3.75, 0.3),
  "claude-3-5-haiku": price(0.8, 4, 1, 0.08),
  "claude-3-opus": price(15, 75, 18.75, 1.5),
  "claude-3-haiku": price(0.25, 1.25, 0.3, 0.03), // the one exception: Anthropic lists $0.30 writes
});

/** The most expensive known price, for models not in the table. */
export const DEFAULT_PRICE: ModelPrice = Object.values(PRICES).reduce((a, b) => (b.output > a.output ? b : a));

// Longest first, so "claude-opus-4-5" wins over "claude-opus-4".
const PREFIXES = Object.keys(PRICES).sort((a, b) => b.length - a.length);

/** The table key a model id matches, or null if unknown. Bedrock-style ids ("us.anthropic.claude-…") are understood. */
export function pricePrefix(model: string): string | null {
  const id = model.trim().toLowerCase().replace(/^(?:[a-z]+\.)?anthropic\./, "");
  return PREFIXES.find((p) => id.startsWith(p)) ?? null;
}

export function priceFor(model: string): ModelPrice {
  const p = pricePrefix(model);
  return p === null ? DEFAULT_PRICE : PRICES[p]!;
}

/**
 * Cost of `usage` in USD. Every price is a whole number of cents per million tokens, so the sum is
 * computed exactly in integers and divided once: the result is the correctly rounded double, and
 * totals do not drift with float error.
 */
export function costUsd(model: string, usage: Usage): number {
  const p = priceFor(model);
  const cents = (usd: number) => Math.round(usd * 100);
  const centTokens =
    usage.inputTokens * cents(p.input) +
    usage.outputTokens * cents(p.output) +
    usage.cacheWriteTokens * cents(p.cacheWrite) +
    usage.cacheReadTokens * cents(p.cacheRead);
  return centTokens / 100_000_000; // one division: cents → USD and per-million together
}
