// One repository of the eval's task sets (test/support/eval-sets.ts writes it), written for these
// tests. csv: escaped quotes in quoted fields, string handling, tests nested two deep (JavaScript, TAP).
// Its test lists were read from real runs; test/integration/eval-sets.test.ts runs them again.
import type { RepoSpec } from "../eval-sets.js";
import { JS_GITIGNORE, pkg, TAP } from "./common.js";

/** csv: a doubled quote inside a quoted field is read as two toggles (string handling). */
export const csv: RepoSpec = {
  id: "fixtures__csv-7",
  repo: "fixtures/csv",
  problem:
    "splitLine() loses escaped quotes in a quoted field\n\n" +
    'The line `a,"say ""hi""",b` splits into `["a", "say hi", "b"]`. In CSV a doubled quote inside ' +
    'quotes is one quote character, so the middle field should be `say "hi"`.\n',
  test: TAP,
  start: {
    message: "csv: split a line into fields",
    files: {
      ".gitignore": JS_GITIGNORE,
      "package.json": pkg("csv"),
      "csv.js": `/** The fields of one CSV line. */
export function splitLine(line) {
  return line.split(",");
}
`,
      "test/csv.test.js": `import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { splitLine } from "../csv.js";

describe("splitLine", () => {
  it("splits at commas", () => {
    assert.deepEqual(splitLine("a,b,c"), ["a", "b", "c"]);
  });
  it("keeps empty fields", () => {
    assert.deepEqual(splitLine("a,,c,"), ["a", "", "c", ""]);
  });
});
`,
    },
  },
  bug: {
    message: "csv: quoted fields may hold commas",
    edits: [
      {
        path: "csv.js",
        old: '  return line.split(",");\n',
        new: `  const fields = [];
  let field = "";
  let quoted = false;
  for (const ch of line) {
    if (ch === '"') {
      quoted = !quoted;
    } else if (ch === "," && !quoted) {
      fields.push(field);
      field = "";
    } else {
      field += ch;
    }
  }
  fields.push(field);
  return fields;
`,
      },
    ],
  },
  fix: {
    message:
      "csv: a doubled quote in a quoted field is one quote\n\nEach quote toggled the quoted state, so both halves of an escaped quote vanished.",
    edits: [
      {
        path: "csv.js",
        old: `  for (const ch of line) {
    if (ch === '"') {`,
        new: `  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (ch === '"' && quoted && line[i + 1] === '"') {
      field += '"';
      i++;
    } else if (ch === '"') {`,
      },
    ],
    tests: [
      {
        path: "test/csv.test.js",
        old: '    assert.deepEqual(splitLine("a,,c,"), ["a", "", "c", ""]);\n  });\n',
        new: `    assert.deepEqual(splitLine("a,,c,"), ["a", "", "c", ""]);
  });
  describe("quoted fields", () => {
    it("hold commas", () => {
      assert.deepEqual(splitLine('a,"b,c",d'), ["a", "b,c", "d"]);
    });
    it("unescape doubled quotes", () => {
      assert.deepEqual(splitLine('a,"say ""hi""",b'), ["a", 'say "hi"', "b"]);
    });
    it("may be only a quote", () => {
      assert.deepEqual(splitLine('""""'), ['"']);
    });
  });
`,
      },
    ],
  },
  FAIL_TO_PASS: [
    "splitLine",
    "splitLine > quoted fields",
    "splitLine > quoted fields > unescape doubled quotes",
    "splitLine > quoted fields > may be only a quote",
  ],
  PASS_TO_PASS: [
    "splitLine > splits at commas",
    "splitLine > keeps empty fields",
    "splitLine > quoted fields > hold commas",
  ],
};
