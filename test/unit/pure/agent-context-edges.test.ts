// Edges of the context handling, exactly: breakpoints on string and empty content, the shortening
// threshold, which turns are kept, which blocks are cut and by how much. Pure.
import { describe, expect, it } from "vitest";
import { cacheBreakpoints, shortenOldToolResults } from "../../../src/agent/turn-messages.js";
import type { Message } from "../../../src/agent/model.js";

const E = { type: "ephemeral" };
const result = (id: string, content: unknown) => ({ type: "tool_result", tool_use_id: id, content });
const turn = (i: number, ...blocks: object[]): Message[] => [
  { role: "assistant", content: [{ type: "tool_use", id: `t${i}`, name: "bash", input: {} }] },
  { role: "user", content: blocks as never },
];

describe("cache breakpoints: edges", () => {
  it("string content becomes one text block with the breakpoint; empty content stays empty", () => {
    expect(cacheBreakpoints.messages([{ role: "user", content: "task" }])).toEqual([
      { role: "user", content: [{ type: "text", text: "task", cache_control: E }] },
    ]);
    expect(cacheBreakpoints.system([])).toEqual([]);
    expect(cacheBreakpoints.messages([{ role: "user", content: [] }])).toEqual([{ role: "user", content: [] }]);
  });

  it("the previous user message may be the first one (index 0)", () => {
    const msgs: Message[] = [
      { role: "user", content: "task" },
      { role: "assistant", content: [{ type: "text", text: "a" }] },
      { role: "user", content: "more" },
    ];
    const out = cacheBreakpoints.messages(msgs);
    expect(out[0]!.content).toEqual([{ type: "text", text: "task", cache_control: E }]);
    expect(out[1]).toBe(msgs[1]);
    expect(out[2]!.content).toEqual([{ type: "text", text: "more", cache_control: E }]);
  });
});

describe("shortenOldToolResults: edges", () => {
  const long = (n: number, c = "x") => c.repeat(n);
  // 1 task + 7 turns: the oldest turn (messages 1-2) is the only one older than the last 6 turns.
  const convo = (first: object[]): Message[] => [
    { role: "user", content: "task" },
    ...turn(0, ...first),
    ...Array.from({ length: 6 }, (_, i) => turn(i + 1, result(`r${i}`, long(3000)))).flat(),
  ];
  const sizeOf = (m: Message[]) =>
    m.reduce((n, x) => n + (typeof x.content === "string" ? x.content.length : JSON.stringify(x.content).length), 0);

  it("at exactly maxChars nothing is cut; one char less and old output is cut", () => {
    const msgs = convo([result("old", long(5000))]);
    const total = sizeOf(msgs);
    expect(shortenOldToolResults(msgs, total)).toEqual({ messages: msgs, removedChars: 0, keptTurns: msgs.length });
    const cut = shortenOldToolResults(msgs, total - 1);
    expect(cut.removedChars).toBe(3000);
    expect(cut.keptTurns).toBe(6);
    const c = (cut.messages[2]!.content as unknown as { content: string }[])[0]!.content;
    expect(c).toBe(
      `${long(1000)}\n[... 3000 characters of this old tool output removed to save context ...]\n${long(1000)}`,
    );
    // The last six turns and the task are untouched, and the stored conversation too.
    expect(cut.messages.slice(3)).toEqual(msgs.slice(3));
    expect(cut.messages[0]).toBe(msgs[0]);
    expect((msgs[2]!.content as unknown as { content: string }[])[0]!.content).toHaveLength(5000);
  });

  it("keeps head and tail of the old output, and only cuts string tool results over 2000 characters", () => {
    const text = `${long(1000, "h")}${long(3000, "m")}${long(1000, "t")}`;
    const blocks = [
      result("a", text),
      result("b", long(2000)),
      result("c", long(2001)),
      { type: "text", text: long(9000) },
      result("d", [{ type: "text", text: long(9000) }]),
    ];
    const cut = shortenOldToolResults(convo(blocks), 1);
    const out = cut.messages[2]!.content as unknown as { content: unknown; text?: string }[];
    expect(out[0]!.content).toBe(
      `${long(1000, "h")}\n[... 3000 characters of this old tool output removed to save context ...]\n${long(1000, "t")}`,
    );
    expect(out[1]!.content).toBe(long(2000));
    expect(out[2]!.content).toBe(
      `${long(1000)}\n[... 1 character of this old tool output removed to save context ...]\n${long(1000)}`,
    );
    expect(out[3]!.text).toHaveLength(9000);
    expect(out[4]!.content).toEqual([{ type: "text", text: long(9000) }]);
    expect(cut.removedChars).toBe(3001);
  });

  it("a string user message in the old part is left alone; a conversation of only recent turns is not cut", () => {
    const msgs: Message[] = [{ role: "user", content: long(50_000) }, ...turn(0, result("a", long(5000)))];
    expect(shortenOldToolResults(msgs, 10).removedChars).toBe(0);
  });
});
