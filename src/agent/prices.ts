// Model prices, USD per million tokens. Cache writes are 5-minute writes (1.25× input), cache reads
// are 0.1× input. Model ids are matched by prefix, longest prefix first, so dated ids and aliases
// (claude-sonnet-4-5-20250929, claude-3-5-haiku-latest) find their family. A model with no price
// here is priced as unknown, not guessed: its cost counts 0 and the result says `priceUnknown`; a
// USD budget cannot hold it, so such a spec is refused at enqueue (src/queue/client.ts). A scripted
// model (`scripted:FILE`, src/agent/scripted.ts) has no price here and costs 0: it is never priced.
// (Long-context surcharges above 200K input tokens are not modelled.)
import type Anthropic from "@anthropic-ai/sdk";
import type { Usage } from "../core/spec/spec.js";
import { isScriptedModel } from "../core/config/scripted.js";

/** The ids the SDK names (its Model type), every one: a newer SDK with a new id fails to compile until it is added here. */
export const SDK_MODELS = [
  "claude-fable-5-2",
  "claude-mythos-5-2",
  "claude-haiku-5-5",
  "claude-sonnet-5-5",
  "claude-fable-5-1",
  "claude-opus-5-5",
  "claude-mythos-5-1",
  "claude-sonnet-5",
  "claude-fable-5",
  "claude-mythos-5",
  "claude-opus-5",
  "claude-opus-4-8",
  "claude-opus-4-7",
  "claude-mythos-preview",
  "claude-opus-4-6",
  "claude-sonnet-4-6",
  "claude-haiku-4-5",
  "claude-haiku-4-5-20251001",
  "claude-opus-4-5",
  "claude-opus-4-5-20251101",
  "claude-sonnet-4-5",
  "claude-sonnet-4-5-20250929",
] as const satisfies readonly SdkModel[];
type SdkModel = Anthropic.Model;
type Literal<T> = T extends string ? (string extends T ? never : T) : never;
type Unlisted = Exclude<Literal<SdkModel>, (typeof SDK_MODELS)[number]>;
// A compile-time check: `true` fits only while every id of the SDK's type is in SDK_MODELS.
const sdkModelsComplete: [Unlisted] extends [never] ? true : Unlisted = true;
void sdkModelsComplete;

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

// Longest first, so "claude-opus-4-5" wins over "claude-opus-4".
const PREFIXES = Object.keys(PRICES).sort((a, b) => b.length - a.length);

/** The table key a model id matches, or null if unknown. Bedrock-style ids ("us.anthropic.claude-…") are understood. */
export function pricePrefix(model: string): string | null {
  const id = model
    .trim()
    .toLowerCase()
    .replace(/^(?:[a-z]+\.)?anthropic\./, "");
  return PREFIXES.find((p) => id.startsWith(p)) ?? null;
}

/** The model's price, or null when it has none here (its cost is unknown). */
export function priceFor(model: string): ModelPrice | null {
  const p = pricePrefix(model);
  return p === null ? null : PRICES[p]!;
}

/** Whether the model's cost can be counted (a price here, or a scripted model's, which is always 0), so a USD budget can hold it. */
export const priceKnown = (model: string): boolean => pricePrefix(model) !== null || isScriptedModel(model);

/** Whether patchbay knows the id: the SDK names it (or a dated or Bedrock-style form of one), or it has a price here. */
export function knownModel(model: string): boolean {
  const id = model
    .trim()
    .toLowerCase()
    .replace(/^(?:[a-z]+\.)?anthropic\./, "");
  return priceKnown(id) || SDK_MODELS.some((m) => id === m || id.startsWith(`${m}-`) || id.startsWith(`${m}@`));
}

/** Why a model id is worth a warning (unknown to this version), or undefined. */
export function unknownModelWarning(model: string): string | undefined {
  if (knownModel(model)) return undefined;
  return `model '${model.slice(0, 100)}' is not one this version of patchbay knows (the SDK's ids and the priced families, e.g. ${SDK_MODELS.slice(0, 3).join(", ")}): it is sent as it is, and its cost is unknown (costUsd 0, priceUnknown in the result)`;
}

/** Why a USD budget cannot hold this model (its price is unknown), or undefined. */
export function usdBudgetProblem(model: string, usd: number | undefined): string | undefined {
  if (usd === undefined || priceKnown(model)) return undefined;
  return `budget.usd: the price of model '${model.slice(0, 100)}' is unknown, so a USD budget cannot be held; set budget.inputTokens or budget.outputTokens instead, or a model with a known price`;
}

/**
 * Cost of `usage` in USD; 0 for a model whose price is unknown (priceKnown). Every price is a whole
 * number of cents per million tokens, so the sum is computed exactly in integers and divided once:
 * the result is the correctly rounded double, and totals do not drift with float error.
 */
export function costUsd(model: string, usage: Usage): number {
  const p = priceFor(model);
  if (p === null) return 0;
  const cents = (usd: number) => Math.round(usd * 100);
  const centTokens =
    usage.inputTokens * cents(p.input) +
    usage.outputTokens * cents(p.output) +
    usage.cacheWriteTokens * cents(p.cacheWrite) +
    usage.cacheReadTokens * cents(p.cacheRead);
  return centTokens / 100_000_000; // one division: cents → USD and per-million together
}
