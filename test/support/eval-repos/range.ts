// One repository of the eval's task sets (test/support/eval-sets.ts writes it), written for these
// tests. range: counting down leaves out its end, an off-by-one; the scripted model's wrong fix (JavaScript, TAP).
// Its test lists were read from real runs; test/integration/eval-sets.test.ts runs them again.
import type { RepoSpec } from "../eval-sets.js";
import { JS_GITIGNORE, pkg, TAP } from "./common.js";

/** range: counting down stops one short of the end (an off-by-one in a loop's condition). */
export const range: RepoSpec = {
  id: "fixtures__range-6",
  repo: "fixtures/range",
  problem:
    "range() counting down leaves out its end\n\n" +
    "`range(5, 1)` returns `[5, 4, 3, 2]`, but `range(1, 5)` returns `[1, 2, 3, 4, 5]`: counting " +
    "down should include the end as counting up does.\n",
  test: TAP,
  start: {
    message: "range: integers from start to end",
    files: {
      ".gitignore": JS_GITIGNORE,
      "package.json": pkg("range"),
      "range.js": `/** The integers from start up to and including end, by step. */
export function range(start, end, step = 1) {
  if (step <= 0) throw new RangeError("step must be positive");
  const out = [];
  for (let i = start; i <= end; i += step) out.push(i);
  return out;
}
`,
      "test/range.test.js": `import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { range } from "../range.js";

describe("range", () => {
  it("counts up to and including end", () => {
    assert.deepEqual(range(1, 4), [1, 2, 3, 4]);
  });
  it("counts up by a step", () => {
    assert.deepEqual(range(0, 9, 3), [0, 3, 6, 9]);
  });
  it("rejects a zero step", () => {
    assert.throws(() => range(1, 2, 0), RangeError);
  });
});
`,
    },
  },
  bug: {
    message: "range: count down when end is below start",
    edits: [
      {
        path: "range.js",
        old: "  const out = [];\n",
        new: `  const out = [];
  if (end < start) {
    for (let i = start; i > end; i -= step) out.push(i);
    return out;
  }
`,
      },
      { path: "range.js", old: "/** The integers from start up to", new: "/** The integers from start up or down to" },
    ],
  },
  fix: {
    message: "range: counting down includes the end\n\nThe loop stopped before end, unlike counting up.",
    edits: [{ path: "range.js", old: "i > end;", new: "i >= end;" }],
    tests: [
      {
        path: "test/range.test.js",
        old: "    assert.throws(() => range(1, 2, 0), RangeError);\n  });\n",
        new: `    assert.throws(() => range(1, 2, 0), RangeError);
  });
  describe("counting down", () => {
    it("includes the end", () => {
      assert.deepEqual(range(5, 1), [5, 4, 3, 2, 1]);
    });
    it("steps down", () => {
      assert.deepEqual(range(9, 0, 3), [9, 6, 3, 0]);
    });
    it("stops before passing the end", () => {
      assert.deepEqual(range(9, 1, 3), [9, 6, 3]);
    });
  });
`,
      },
    ],
  },
  // The scripted model's wrong fix: it widens the branch instead of the loop, so the end stays out.
  wrong: [{ path: "range.js", old: "if (end < start) {", new: "if (end <= start) {" }],
  FAIL_TO_PASS: [
    "range",
    "range > counting down",
    "range > counting down > includes the end",
    "range > counting down > steps down",
  ],
  PASS_TO_PASS: [
    "range > counts up to and including end",
    "range > counts up by a step",
    "range > rejects a zero step",
    "range > counting down > stops before passing the end",
  ],
};
