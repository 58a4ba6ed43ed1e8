// The price table's lookups (src/agent/prices.ts), pure: Bedrock-style ids, models the SDK names
// without a price, the unknown-model warning and why a USD budget cannot hold an unpriced model.
import { describe, expect, it } from "vitest";
import {
  knownModel,
  priceFor,
  priceKnown,
  pricePrefix,
  unknownModelWarning,
  usdBudgetProblem,
} from "../../../src/agent/prices.js";

describe("prices", () => {
  it("finds a family from any form of its id: dated, Bedrock-style with a region, any case and spacing", () => {
    expect(pricePrefix("  US.Anthropic.Claude-Opus-4-5-20251101-v1:0 ")).toBe("claude-opus-4-5");
    expect(pricePrefix("anthropic.claude-3-haiku-20240307-v1:0")).toBe("claude-3-haiku");
    expect(pricePrefix("eu.anthropic.claude-sonnet-4-5")).toBe("claude-sonnet-4-5");
    expect(pricePrefix("claude-opus-4-1-20250805")).toBe("claude-opus-4-1"); // the longer key wins
    expect(pricePrefix("xanthropic.claude-opus-4")).toBeNull();
    expect(pricePrefix("a.b.anthropic.claude-opus-4")).toBeNull();
    expect(pricePrefix("gpt-4")).toBeNull();
    expect(priceFor("gpt-4")).toBeNull();
    expect(priceFor("claude-opus-4-5")).toMatchObject({});
    expect([priceKnown("claude-haiku-4-5"), priceKnown("claude-mythos-5-2")]).toEqual([true, false]);
  });

  it("knows the SDK's ids with or without a price, in their dated and Bedrock forms; nothing else", () => {
    for (const id of [
      "claude-mythos-5-2",
      " Claude-Mythos-5-2 ",
      "us.anthropic.claude-mythos-5-2",
      "claude-haiku-5-5-20260101",
      "claude-haiku-5-5@20260101",
      "claude-sonnet-4-5-20250929",
    ])
      expect(knownModel(id), id).toBe(true);
    for (const id of ["claude-haiku-5-55", "gpt-4", "claude", "mythos-5-2"]) expect(knownModel(id), id).toBe(false);
  });

  it("warns about an unknown id, naming it (cut at 100 characters) and saying its cost is unknown", () => {
    expect(unknownModelWarning("claude-sonnet-5-5")).toBeUndefined();
    expect(unknownModelWarning("gpt-4")).toBe(
      "model 'gpt-4' is not one this version of patchbay knows (the SDK's ids and the priced families, e.g. claude-fable-5-2, claude-mythos-5-2, claude-haiku-5-5): it is sent as it is, and its cost is unknown (costUsd 0, priceUnknown in the result)",
    );
    expect(unknownModelWarning("m".repeat(300))).toContain(`model '${"m".repeat(100)}' is not`);
  });

  it("a USD budget needs a priced model; no USD budget needs nothing", () => {
    expect(usdBudgetProblem("gpt-4", undefined)).toBeUndefined();
    expect(usdBudgetProblem("claude-haiku-4-5", 5)).toBeUndefined();
    expect(usdBudgetProblem("claude-mythos-5-2", 5)).toBe(
      "budget.usd: the price of model 'claude-mythos-5-2' is unknown, so a USD budget cannot be held; set budget.inputTokens or budget.outputTokens instead, or a model with a known price",
    );
    expect(usdBudgetProblem("x".repeat(300), 1)).toContain(`model '${"x".repeat(100)}' is unknown`);
  });
});
