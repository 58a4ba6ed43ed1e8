// One repository of the eval's task sets (test/support/eval-sets.ts writes it), written for these
// tests. roman: the subtractive pairs past 39 are missing, a missing case (Python, unittest).
// Its test lists were read from real runs; test/integration/eval-sets.test.ts runs them again.
import type { RepoSpec } from "../eval-sets.js";
import { PY_GITIGNORE, UNITTEST } from "./common.js";

/** roman: the table for numbers past 39 misses its subtractive pairs (a missing case). */
export const roman: RepoSpec = {
  id: "fixtures__roman-3",
  repo: "fixtures/roman",
  problem:
    "to_roman(40) returns XXXX\n\n" +
    "Since numbers up to 3999 are accepted, 40 comes out as `XXXX` and 1994 as `MDCCCCLXXXXIV`. " +
    "They should be `XL` and `MCMXCIV`, with the subtractive pairs as for 4 and 9.\n",
  test: UNITTEST,
  start: {
    message: "roman: to_roman for 1 to 39",
    files: {
      ".gitignore": PY_GITIGNORE,
      "roman.py": `TABLE = [(10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def to_roman(n):
    """n in Roman numerals."""
    if not 0 < n < 40:
        raise ValueError("to_roman takes 1 to 39")
    out = ""
    for value, letters in TABLE:
        while n >= value:
            out += letters
            n -= value
    return out
`,
      "test_roman.py": `import unittest

from roman import to_roman


class ToRomanTest(unittest.TestCase):
    def test_three(self):
        self.assertEqual(to_roman(3), "III")

    def test_nine(self):
        self.assertEqual(to_roman(9), "IX")

    def test_rejects_zero(self):
        with self.assertRaises(ValueError):
            to_roman(0)
`,
    },
  },
  bug: {
    message: "roman: numbers up to 3999",
    edits: [
      {
        path: "roman.py",
        old: 'TABLE = [(10, "X"),',
        new: 'TABLE = [(1000, "M"), (500, "D"), (100, "C"), (50, "L"), (10, "X"),',
      },
      { path: "roman.py", old: "0 < n < 40:", new: "0 < n < 4000:" },
      { path: "roman.py", old: "takes 1 to 39", new: "takes 1 to 3999" },
    ],
  },
  fix: {
    message: "roman: the subtractive pairs of the larger numerals\n\nCM, CD, XC and XL were missing from the table.",
    edits: [
      {
        path: "roman.py",
        old: 'TABLE = [(1000, "M"), (500, "D"), (100, "C"), (50, "L"), (10, "X"),',
        new: `TABLE = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
    (100, "C"), (90, "XC"), (50, "L"), (40, "XL"), (10, "X"),`,
      },
    ],
    tests: [
      {
        path: "test_roman.py",
        old: "            to_roman(0)\n",
        new: `            to_roman(0)

    def test_forty(self):
        self.assertEqual(to_roman(40), "XL")

    def test_1994(self):
        self.assertEqual(to_roman(1994), "MCMXCIV")

    def test_2000(self):
        self.assertEqual(to_roman(2000), "MM")
`,
      },
    ],
  },
  FAIL_TO_PASS: ["test_1994 (test_roman.ToRomanTest.test_1994)", "test_forty (test_roman.ToRomanTest.test_forty)"],
  PASS_TO_PASS: [
    "test_2000 (test_roman.ToRomanTest.test_2000)",
    "test_nine (test_roman.ToRomanTest.test_nine)",
    "test_rejects_zero (test_roman.ToRomanTest.test_rejects_zero)",
    "test_three (test_roman.ToRomanTest.test_three)",
  ],
};
