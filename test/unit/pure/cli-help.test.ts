// Guards the --help layout (src/cli/help.ts): option rows aligned at one computed column two spaces
// at least after the longest term, a too-long term's description on the next line, long text wrapped.
import { describe, expect, it } from "vitest";
import { helpTable, layoutUsage, wrap } from "../../../src/cli/help.js";

describe("help layout", () => {
  it("pads the term column to the longest term plus two spaces", () => {
    expect(
      helpTable([
        ["campaign tracker", "a"],
        ["run", "b"],
      ]),
    ).toEqual(["  campaign tracker  a", "  run               b"]);
  });

  it("puts a long term's description on the next line and wraps long descriptions at the column", () => {
    const out = layoutUsage(
      [
        "patchbay x",
        "  --repo DIR | --git URL [--ref REF] | --archive FILE   the repository",
        "  --task TEXT  what to do, " + "word ".repeat(30).trim(),
        "                continued here",
      ].join("\n"),
      60,
    );
    const lines = out.split("\n");
    expect(lines[1]).toBe("  --repo DIR | --git URL [--ref REF] | --archive FILE");
    expect(lines[2]).toBe("               the repository");
    expect(lines[3]!.startsWith("  --task TEXT  what to do, word")).toBe(true);
    expect(lines.slice(3).every((l) => l.length <= 60)).toBe(true);
    expect(lines.slice(4).every((l) => l.startsWith(" ".repeat(15)))).toBe(true);
    expect(out).toContain("continued here");
  });

  it("wraps at spaces and keeps a longer word whole", () => {
    expect(wrap("aaa bbb ccc", 7)).toEqual(["aaa bbb", "ccc"]);
    expect(wrap("aaaaaaaaaa b", 4)).toEqual(["aaaaaaaaaa", "b"]);
  });
});
