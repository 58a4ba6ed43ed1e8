// One repository of the eval's task sets (test/support/eval-sets.ts writes it), written for these
// tests. duration: hours never show, a wrong branch, tests at the top level (JavaScript, JUnit XML).
// Its test lists were read from real runs; test/integration/eval-sets.test.ts runs them again.
import type { RepoSpec } from "../eval-sets.js";
import { JS_GITIGNORE, JUNIT, pkg } from "./common.js";

/** duration: the minutes branch comes before the hours branch, so hours never show (a wrong branch). */
export const duration: RepoSpec = {
  id: "fixtures__duration-9",
  repo: "fixtures/duration",
  problem:
    "durationText() never shows hours\n\n" +
    '`durationText(3_720_000)` (1 hour 2 minutes) returns `"62m 0s"`; it should return `"1h 2m"`, ' +
    "as the function's comment says.\n",
  test: JUNIT,
  start: {
    message: "duration: durations in seconds and minutes",
    files: {
      ".gitignore": JS_GITIGNORE,
      "package.json": pkg("duration"),
      "duration.js": `/** A duration of ms milliseconds in words: "45s", "2m 5s". */
export function durationText(ms) {
  const s = Math.floor(ms / 1000);
  if (s >= 60) return \`\${Math.floor(s / 60)}m \${s % 60}s\`;
  return \`\${s}s\`;
}
`,
      "test/duration.test.js": `import assert from "node:assert/strict";
import { test } from "node:test";
import { durationText } from "../duration.js";

test("seconds", () => {
  assert.equal(durationText(45_000), "45s");
});
test("minutes and seconds", () => {
  assert.equal(durationText(125_000), "2m 5s");
});
`,
    },
  },
  bug: {
    message: "duration: hours for an hour or more",
    edits: [
      {
        path: "duration.js",
        old: "  if (s >= 60) return `${Math.floor(s / 60)}m ${s % 60}s`;\n",
        new:
          "  if (s >= 60) return `${Math.floor(s / 60)}m ${s % 60}s`;\n" +
          "  if (s >= 3600) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;\n",
      },
      { path: "duration.js", old: '"45s", "2m 5s"', new: '"45s", "2m 5s", "1h 2m"' },
    ],
  },
  fix: {
    message: "duration: test for hours before minutes\n\nEvery duration of an hour or more took the minutes branch.",
    edits: [
      {
        path: "duration.js",
        old:
          "  if (s >= 60) return `${Math.floor(s / 60)}m ${s % 60}s`;\n" +
          "  if (s >= 3600) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;\n",
        new:
          "  if (s >= 3600) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;\n" +
          "  if (s >= 60) return `${Math.floor(s / 60)}m ${s % 60}s`;\n",
      },
    ],
    tests: [
      {
        path: "test/duration.test.js",
        old: '  assert.equal(durationText(125_000), "2m 5s");\n});\n',
        new: `  assert.equal(durationText(125_000), "2m 5s");
});
test("hours and minutes", () => {
  assert.equal(durationText(3_720_000), "1h 2m");
});
test("just under an hour", () => {
  assert.equal(durationText(3_599_000), "59m 59s");
});
`,
      },
    ],
  },
  FAIL_TO_PASS: ["test::hours and minutes"],
  PASS_TO_PASS: ["test::seconds", "test::minutes and seconds", "test::just under an hour"],
};
