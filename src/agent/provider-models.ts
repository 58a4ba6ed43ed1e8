// Model ids per provider. The first-party id (PATCHBAY_MODEL, a spec's `model`) is what patchbay
// prices, budgets and records; Bedrock and Vertex name the same models their own way, so the id
// is mapped only where the request leaves (src/agent/model.ts). An id already in the provider's
// form (`anthropic.…`, `us.anthropic.…`, an ARN, `…@date`) passes through unchanged.
import type { Provider } from "../core/config/provider.js";

/** Families whose Bedrock and Vertex ids carry a release date: first-party family → [Bedrock id, Vertex id]. */
const DATED: Readonly<Record<string, readonly [string, string]>> = Object.freeze({
  "claude-opus-4-5": ["anthropic.claude-opus-4-5-20251101-v1:0", "claude-opus-4-5@20251101"],
  "claude-sonnet-4-5": ["anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5@20250929"],
  "claude-haiku-4-5": ["anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5@20251001"],
  "claude-opus-4-1": ["anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1@20250805"],
  "claude-opus-4": ["anthropic.claude-opus-4-20250514-v1:0", "claude-opus-4@20250514"],
  "claude-sonnet-4": ["anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4@20250514"],
  "claude-3-7-sonnet": ["anthropic.claude-3-7-sonnet-20250219-v1:0", "claude-3-7-sonnet@20250219"],
  "claude-3-5-haiku": ["anthropic.claude-3-5-haiku-20241022-v1:0", "claude-3-5-haiku@20241022"],
  "claude-3-haiku": ["anthropic.claude-3-haiku-20240307-v1:0", "claude-3-haiku@20240307"],
  "claude-opus-4-6": ["anthropic.claude-opus-4-6-v1", "claude-opus-4-6"],
});

/**
 * Families released without dates on the platforms: Bedrock's id is `anthropic.<id>` (the Bedrock
 * SDK's own example: `global.anthropic.claude-sonnet-5-5`), Vertex's the first-party id itself.
 */
const UNDATED = [
  "claude-sonnet-5-5",
  "claude-haiku-5-5",
  "claude-opus-5-5",
  "claude-fable-5-2",
  "claude-mythos-5-2",
  "claude-fable-5-1",
  "claude-mythos-5-1",
  "claude-sonnet-5",
  "claude-fable-5",
  "claude-mythos-5",
  "claude-opus-5",
  "claude-opus-4-8",
  "claude-opus-4-7",
  "claude-mythos-preview",
  "claude-sonnet-4-6",
] as const;

/** Every first-party id the table maps (tests check each against the price table). */
export const MAPPED_MODELS: readonly string[] = [...Object.keys(DATED), ...UNDATED];

/** Whether `id` is already in Bedrock's form: a (cross-region) model id or an ARN. */
const bedrockForm = (id: string) => /^(?:[a-z]+\.)?anthropic\./.test(id) || id.startsWith("arn:");

/** The id to send to `provider` for the first-party `model`; unknown ids and provider-form ids pass through. */
export function providerModelId(provider: Provider, model: string): string {
  if (provider === "anthropic") return model;
  if (provider === "bedrock" ? bedrockForm(model) : model.includes("@")) return model;
  // A dated first-party id (claude-sonnet-4-5-20250929) is its family's.
  const family = model.replace(/-\d{8}$/, "");
  const dated = DATED[family];
  if (dated) return provider === "bedrock" ? dated[0] : dated[1];
  if ((UNDATED as readonly string[]).includes(family)) return provider === "bedrock" ? `anthropic.${family}` : family;
  return model;
}
