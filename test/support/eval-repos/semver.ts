// One repository of the eval's task sets (test/support/eval-sets.ts writes it), written for these
// tests. semver: a release ranks below its prerelease, a missing case (JavaScript, JUnit XML).
// Its test lists were read from real runs; test/integration/eval-sets.test.ts runs them again.
import type { RepoSpec } from "../eval-sets.js";
import { JS_GITIGNORE, JUNIT, pkg } from "./common.js";

/** semver: a release compares below its own prerelease (a missing case). */
export const semver: RepoSpec = {
  id: "fixtures__semver-8",
  repo: "fixtures/semver",
  problem:
    "compare() ranks 1.0.0 below 1.0.0-beta\n\n" +
    '`compare("1.0.0", "1.0.0-beta")` returns -1. A release comes after its prereleases, so it ' +
    "should return 1 (and -1 the other way round).\n",
  test: JUNIT,
  start: {
    message: "semver: compare versions",
    files: {
      ".gitignore": JS_GITIGNORE,
      "package.json": pkg("semver"),
      "semver.js": `function parse(version) {
  return version.split(".").map(Number);
}

/** -1, 0 or 1 as version a is below, equal to or above version b (major.minor.patch). */
export function compare(a, b) {
  const pa = parse(a);
  const pb = parse(b);
  for (let i = 0; i < 3; i++) {
    if (pa[i] !== pb[i]) return pa[i] < pb[i] ? -1 : 1;
  }
  return 0;
}
`,
      "test/semver.test.js": `import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compare } from "../semver.js";

describe("compare", () => {
  it("orders by major first", () => {
    assert.equal(compare("2.0.0", "1.9.9"), 1);
  });
  it("orders numerically", () => {
    assert.equal(compare("1.2.10", "1.2.9"), 1);
  });
  it("finds equal versions equal", () => {
    assert.equal(compare("1.2.3", "1.2.3"), 0);
  });
});
`,
    },
  },
  bug: {
    message: "semver: prerelease tags",
    edits: [
      {
        path: "semver.js",
        old: `function parse(version) {
  return version.split(".").map(Number);
}
`,
        new: `function parse(version) {
  const [core, pre = ""] = version.split("-", 2);
  return { nums: core.split(".").map(Number), pre };
}
`,
      },
      {
        path: "semver.js",
        old: `    if (pa[i] !== pb[i]) return pa[i] < pb[i] ? -1 : 1;
  }
  return 0;
`,
        new: `    if (pa.nums[i] !== pb.nums[i]) return pa.nums[i] < pb.nums[i] ? -1 : 1;
  }
  if (pa.pre === pb.pre) return 0;
  return pa.pre < pb.pre ? -1 : 1;
`,
      },
      { path: "semver.js", old: "(major.minor.patch)", new: "(major.minor.patch[-prerelease])" },
    ],
  },
  fix: {
    message: "semver: a release is above its prereleases\n\nAn empty prerelease tag sorted first as a string.",
    edits: [
      {
        path: "semver.js",
        old: "  if (pa.pre === pb.pre) return 0;\n",
        new: "  if (pa.pre === pb.pre) return 0;\n  if (!pa.pre) return 1;\n  if (!pb.pre) return -1;\n",
      },
    ],
    tests: [
      {
        path: "test/semver.test.js",
        old: '    assert.equal(compare("1.2.3", "1.2.3"), 0);\n  });\n',
        new: `    assert.equal(compare("1.2.3", "1.2.3"), 0);
  });
  it("puts a release above its prerelease", () => {
    assert.equal(compare("1.0.0", "1.0.0-beta"), 1);
    assert.equal(compare("1.0.0-rc.1", "1.0.0"), -1);
  });
  it("orders prereleases", () => {
    assert.equal(compare("1.0.0-alpha", "1.0.0-beta"), -1);
  });
`,
      },
    ],
  },
  FAIL_TO_PASS: ["test::puts a release above its prerelease"],
  PASS_TO_PASS: [
    "test::orders by major first",
    "test::orders numerically",
    "test::finds equal versions equal",
    "test::orders prereleases",
  ],
};
