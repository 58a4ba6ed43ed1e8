// Guards that bash's own notice of a killed foreground command ("main: line 25: 40 Killed sleep 60")
// is dropped from the end of a timed-out command's output (src/sandbox/shell.ts), and nothing else.
import { describe, expect, it } from "vitest";
import { withoutKillNotice } from "../../../src/sandbox/shell.js";

describe("withoutKillNotice", () => {
  it("drops the notice lines that end the output", () => {
    expect(withoutKillNotice("started\nmain: line 25:    40 Killed                  sleep 60\n")).toBe("started");
    expect(withoutKillNotice("main: line 3: 7 Terminated sleep 9")).toBe("");
  });
  it("keeps the same words anywhere else", () => {
    expect(withoutKillNotice("main: line 2: 5 Killed x\nmore output")).toBe("main: line 2: 5 Killed x\nmore output");
    expect(withoutKillNotice("Killed by the test")).toBe("Killed by the test");
  });
});
