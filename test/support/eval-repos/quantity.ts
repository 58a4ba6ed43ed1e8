// One repository of the eval's task sets (test/support/eval-sets.ts writes it), written for these
// tests. quantity: zero defaults to one, with is-number from npm through `setup: npm ci` (JavaScript, TAP).
// Its test lists were read from real runs; test/integration/eval-sets.test.ts runs them again.
import type { RepoSpec } from "../eval-sets.js";
import { JS_GITIGNORE, pkg, TAP } from "./common.js";

// The lockfile npm wrote for is-number 7.0.0 (without `resolved`, so npm ci fetches from the registry
// it is configured with).
const LOCK = {
  name: "quantity",
  version: "1.0.0",
  lockfileVersion: 3,
  requires: true,
  packages: {
    "": { name: "quantity", version: "1.0.0", dependencies: { "is-number": "7.0.0" } },
    "node_modules/is-number": {
      version: "7.0.0",
      integrity: "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng==",
      license: "MIT",
      engines: { node: ">=0.12.0" },
    },
  },
};

/** quantity: an empty-input default also catches 0 (a falsy check), with is-number from npm. */
export const quantity: RepoSpec = {
  id: "fixtures__quantity-10",
  repo: "fixtures/quantity",
  problem:
    "parseQuantity('0') returns 1\n\n" +
    "Since empty input defaults to 1, a quantity of 0 (the string `'0'` or the number 0) also comes " +
    "back as 1. Only a missing or empty input should default to 1.\n",
  test: TAP,
  setup: "npm ci",
  network: { setup: { allow: ["npm"] } },
  start: {
    message: "quantity: parse order quantities",
    files: {
      ".gitignore": JS_GITIGNORE,
      "package.json": pkg("quantity", { "is-number": "7.0.0" }),
      "package-lock.json": JSON.stringify(LOCK, null, 2) + "\n",
      "quantity.js": `import isNumber from "is-number";

/** A quantity from a form field: a whole number of at least 0. */
export function parseQuantity(input) {
  if (!isNumber(input)) throw new TypeError(\`not a number: \${input}\`);
  const n = Number(input);
  if (!Number.isInteger(n) || n < 0) throw new RangeError(\`not a quantity: \${input}\`);
  return n;
}
`,
      "test/quantity.test.js": `import assert from "node:assert/strict";
import { describe, it } from "node:test";
import isNumber from "is-number";
import { parseQuantity } from "../quantity.js";

describe("parseQuantity", () => {
  it("reads a number", () => {
    assert.equal(parseQuantity("3"), 3);
    assert.ok(isNumber(parseQuantity("3")));
  });
  it("refuses words", () => {
    assert.throws(() => parseQuantity("three"), TypeError);
  });
  it("refuses fractions", () => {
    assert.throws(() => parseQuantity("1.5"), RangeError);
  });
});
`,
    },
  },
  bug: {
    message: "quantity: an empty field means one",
    edits: [
      {
        path: "quantity.js",
        old: "export function parseQuantity(input) {\n",
        new: "export function parseQuantity(input) {\n  if (!input) return 1;\n",
      },
      { path: "quantity.js", old: "of at least 0. */", new: "of at least 0; 1 when empty. */" },
    ],
  },
  fix: {
    message: "quantity: only an empty input defaults to one\n\nThe falsy check caught 0 too.",
    edits: [
      {
        path: "quantity.js",
        old: "  if (!input) return 1;\n",
        new: '  if (input === undefined || input === null || input === "") return 1;\n',
      },
    ],
    tests: [
      {
        path: "test/quantity.test.js",
        old: '    assert.throws(() => parseQuantity("1.5"), RangeError);\n  });\n',
        new: `    assert.throws(() => parseQuantity("1.5"), RangeError);
  });
  it("defaults an empty field to one", () => {
    assert.equal(parseQuantity(""), 1);
  });
  it("keeps zero", () => {
    assert.equal(parseQuantity("0"), 0);
    assert.equal(parseQuantity(0), 0);
    assert.ok(isNumber(parseQuantity("0")));
  });
`,
      },
    ],
  },
  FAIL_TO_PASS: ["parseQuantity", "parseQuantity > keeps zero"],
  PASS_TO_PASS: [
    "parseQuantity > reads a number",
    "parseQuantity > refuses words",
    "parseQuantity > refuses fractions",
    "parseQuantity > defaults an empty field to one",
  ],
};
