// Pure parts of the loop's context handling: cache breakpoints and shortening old tool output.
import { describe, expect, it } from "vitest";
import { cacheBreakpoints, shortenOldToolResults } from "../../../src/agent/turn-messages.js";
import type { Message } from "../../../src/agent/model.js";

const turn = (i: number, out: string): Message[] => [
  { role: "assistant", content: [{ type: "tool_use", id: `t${i}`, name: "bash", input: { command: "x" } }] },
  { role: "user", content: [{ type: "tool_result", tool_use_id: `t${i}`, content: out }] },
];
const conversation = (n: number, out: string): Message[] => [
  { role: "user", content: "task" },
  ...Array.from({ length: n }, (_, i) => turn(i, out)).flat(),
];
const resultText = (m: Message) => String((m.content as { content?: unknown }[])[0]!.content);
const count = (x: unknown) => (JSON.stringify(x).match(/cache_control/g) ?? []).length;

describe("cache breakpoints", () => {
  it("mark the newest message and the previous user message, without touching the stored conversation", () => {
    const msgs = conversation(5, "out");
    const before = JSON.stringify(msgs);
    const sent = cacheBreakpoints.messages(msgs);
    expect(JSON.stringify(msgs)).toBe(before);
    expect(count(sent)).toBe(2);
    expect((sent.at(-1)!.content as { cache_control?: unknown }[]).at(-1)!.cache_control).toEqual({
      type: "ephemeral",
    });
    expect((sent.at(-3)!.content as { cache_control?: unknown }[]).at(-1)!.cache_control).toEqual({
      type: "ephemeral",
    });
    expect(count(cacheBreakpoints.system([{ type: "text", text: "s" }])) + count(sent)).toBeLessThanOrEqual(4);
  });

  it("turn a string first message into a block that can carry the breakpoint", () => {
    const sent = cacheBreakpoints.messages([{ role: "user", content: "task" }]);
    expect(sent[0]!.content).toEqual([{ type: "text", text: "task", cache_control: { type: "ephemeral" } }]);
  });
});

describe("shortening old tool output", () => {
  it("leaves a conversation under the bound alone", () => {
    const msgs = conversation(20, "x".repeat(100));
    expect(shortenOldToolResults(msgs, 1_000_000)).toMatchObject({ messages: msgs, removedChars: 0 });
  });

  it("cuts old results to head and tail past the bound and keeps the recent turns whole", () => {
    const big = "A".repeat(500) + "B".repeat(9000) + "C".repeat(500);
    const msgs = conversation(20, big);
    const r = shortenOldToolResults(msgs, 50_000);
    expect(r.removedChars).toBeGreaterThan(0);
    const first = resultText(r.messages[2]!);
    expect(first.startsWith("A".repeat(500))).toBe(true);
    expect(first.endsWith("C".repeat(500))).toBe(true);
    expect(first).toMatch(/8000 characters of this old tool output removed/);
    expect(resultText(r.messages.at(-1)!)).toBe(big);
    expect(resultText(msgs[2]!)).toBe(big); // stored conversation intact
  });
});
