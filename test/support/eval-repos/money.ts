// One repository of the eval's task sets (test/support/eval-sets.ts writes it), written for these
// tests. money: negative amounts lose their sign, a fix in two files (Python, unittest).
// Its test lists were read from real runs; test/integration/eval-sets.test.ts runs them again.
import type { RepoSpec } from "../eval-sets.js";
import { PY_GITIGNORE, UNITTEST } from "./common.js";

/** money: the currency symbol change lost the sign, in the parser and the formatter (a multi-file fix). */
export const money: RepoSpec = {
  id: "fixtures__money-5",
  repo: "fixtures/money",
  problem:
    "Negative amounts come out wrong since currency symbols\n\n" +
    '`parse_amount("-$1.50")` returns -50 instead of -150, and `format_amount(-150)` returns ' +
    '`"$-2.50"` instead of `"-$1.50"`. Both worked before symbols were added.\n',
  test: UNITTEST,
  start: {
    message: "money: parse and format amounts in cents",
    files: {
      ".gitignore": PY_GITIGNORE,
      "money/__init__.py": "from money.format import format_amount\nfrom money.parse import parse_amount\n",
      "money/parse.py": `def parse_amount(text):
    """Cents from '12.34', '-0.50' or '7'."""
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    whole, _, frac = text.lstrip("-").partition(".")
    return sign * (int(whole or "0") * 100 + int((frac + "00")[:2]))
`,
      "money/format.py": `def format_amount(cents):
    """'12.34' for 1234 cents, '-0.50' for -50."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"
`,
      "test_money.py": `import unittest

from money import format_amount, parse_amount


class ParseTest(unittest.TestCase):
    def test_whole(self):
        self.assertEqual(parse_amount("7"), 700)

    def test_cents(self):
        self.assertEqual(parse_amount("12.34"), 1234)


class FormatTest(unittest.TestCase):
    def test_cents(self):
        self.assertEqual(format_amount(1234), "12.34")
`,
    },
  },
  bug: {
    message: "money: currency symbols",
    edits: [
      {
        path: "money/parse.py",
        old: `def parse_amount(text):
    """Cents from '12.34', '-0.50' or '7'."""
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    whole, _, frac = text.lstrip("-").partition(".")
    return sign * (int(whole or "0") * 100 + int((frac + "00")[:2]))
`,
        new: `def parse_amount(text, symbol="$"):
    """Cents from '$12.34', '-$0.50' or '$7'."""
    text = text.strip().replace(symbol, "", 1)
    whole, _, frac = text.partition(".")
    return int(whole or "0") * 100 + int((frac + "00")[:2])
`,
      },
      {
        path: "money/format.py",
        old: `def format_amount(cents):
    """'12.34' for 1234 cents, '-0.50' for -50."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"
`,
        new: `def format_amount(cents, symbol="$"):
    """'$12.34' for 1234 cents, '-$0.50' for -50."""
    return f"{symbol}{cents // 100}.{cents % 100:02d}"
`,
      },
      { path: "test_money.py", old: 'parse_amount("7")', new: 'parse_amount("$7")' },
      { path: "test_money.py", old: 'parse_amount("12.34")', new: 'parse_amount("$12.34")' },
      { path: "test_money.py", old: '"12.34")\n', new: '"$12.34")\n' },
    ],
  },
  fix: {
    message:
      "money: keep the sign of negative amounts\n\nThe symbol change parsed the sign into the whole part and formatted a floored division.",
    edits: [
      {
        path: "money/parse.py",
        old: `    text = text.strip().replace(symbol, "", 1)
    whole, _, frac = text.partition(".")
    return int(whole or "0") * 100 + int((frac + "00")[:2])
`,
        new: `    text = text.strip().replace(symbol, "", 1)
    sign = -1 if text.startswith("-") else 1
    whole, _, frac = text.lstrip("-").partition(".")
    return sign * (int(whole or "0") * 100 + int((frac + "00")[:2]))
`,
      },
      {
        path: "money/format.py",
        old: `    return f"{symbol}{cents // 100}.{cents % 100:02d}"
`,
        new: `    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{symbol}{cents // 100}.{cents % 100:02d}"
`,
      },
    ],
    tests: [
      {
        path: "test_money.py",
        old: '        self.assertEqual(parse_amount("$12.34"), 1234)\n',
        new: `        self.assertEqual(parse_amount("$12.34"), 1234)

    def test_negative(self):
        self.assertEqual(parse_amount("-$1.50"), -150)

    def test_negative_below_one(self):
        self.assertEqual(parse_amount("-$0.50"), -50)
`,
      },
      {
        path: "test_money.py",
        old: '        self.assertEqual(format_amount(1234), "$12.34")\n',
        new: `        self.assertEqual(format_amount(1234), "$12.34")

    def test_negative(self):
        self.assertEqual(format_amount(-150), "-$1.50")


class RoundTripTest(unittest.TestCase):
    def test_round_trip(self):
        for cents in (0, 5, 1234, -5, -150):
            self.assertEqual(parse_amount(format_amount(cents)), cents)
`,
      },
    ],
  },
  FAIL_TO_PASS: [
    "test_negative (test_money.FormatTest.test_negative)",
    "test_negative (test_money.ParseTest.test_negative)",
    "test_negative_below_one (test_money.ParseTest.test_negative_below_one)",
  ],
  PASS_TO_PASS: [
    "test_cents (test_money.FormatTest.test_cents)",
    "test_cents (test_money.ParseTest.test_cents)",
    "test_whole (test_money.ParseTest.test_whole)",
    "test_round_trip (test_money.RoundTripTest.test_round_trip)",
  ],
};
