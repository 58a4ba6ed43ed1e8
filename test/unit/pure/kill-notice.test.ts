// Guards that bash's own notice of a killed foreground command ("main: line 25: 40 Killed sleep 60")
// is dropped from the end of a timed-out command's output (src/sandbox/shell.ts), and nothing else.
import { describe, expect, it } from "vitest";
import { withoutKillNotice } from "../../../src/sandbox/shell.js";

describe("withoutKillNotice", () => {
  it("drops the notice lines that end the output", () => {
    expect(withoutKillNotice("started\nmain: line 25:    40 Killed                  sleep 60\n")).toBe("started");
    expect(withoutKillNotice("main: line 3: 7 Terminated sleep 9")).toBe("");
  });
  it("takes linear time on the agent's output: thousands of notice lines, with or without a last line that is none", () => {
    // One pattern over the whole output took 8 s at 22 such lines before a last other line, and
    // doubled with each more: a timed-out command's output could hold the worker's event loop.
    // With that pattern this test never ends.
    const notices = "main: line 1: 123 Killed                  sleep 60\n".repeat(5000);
    expect(withoutKillNotice(`${notices}x`)).toBe(`${notices}x`);
    expect(withoutKillNotice(`started\n${notices}`)).toBe("started");
    expect(withoutKillNotice(`${"line 1: 1 Killedline 2: 2 Terminated".repeat(2000)}\n`)).toBe("");
  });
  it("keeps the same words anywhere else", () => {
    expect(withoutKillNotice("main: line 2: 5 Killed x\nmore output")).toBe("main: line 2: 5 Killed x\nmore output");
    expect(withoutKillNotice("Killed by the test")).toBe("Killed by the test");
  });
});
