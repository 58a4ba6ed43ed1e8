// One repository of the eval's task sets (test/support/eval-sets.ts writes it), written for these
// tests. leap: centuries count as leap years, a wrong branch (Python, unittest).
// Its test lists were read from real runs; test/integration/eval-sets.test.ts runs them again.
import type { RepoSpec } from "../eval-sets.js";
import { PY_GITIGNORE, UNITTEST } from "./common.js";

/** leap: is_leap tests divisibility by 4 first, so centuries are leap years (a wrong branch). */
export const leap: RepoSpec = {
  id: "fixtures__leap-4",
  repo: "fixtures/leap",
  problem:
    "is_leap(1900) is True\n\n" +
    "1900 was not a leap year, but `is_leap(1900)` returns True and `days_in_month(1900, 2)` " +
    "returns 29. A century year is a leap year only when it divides by 400.\n",
  test: UNITTEST,
  start: {
    message: "dates: is_leap and days_in_month",
    files: {
      ".gitignore": PY_GITIGNORE,
      "dates.py": `DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


def is_leap(year):
    """Whether \`year\` has a 29 February (Gregorian)."""
    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0


def days_in_month(year, month):
    """The days of \`month\` (1 to 12) of \`year\`."""
    if month == 2 and is_leap(year):
        return 29
    return DAYS[month - 1]
`,
      "test_dates.py": `import unittest

from dates import days_in_month, is_leap


class IsLeapTest(unittest.TestCase):
    def test_common_year(self):
        self.assertFalse(is_leap(2023))

    def test_leap_year(self):
        self.assertTrue(is_leap(2024))


class DaysInMonthTest(unittest.TestCase):
    def test_february_of_a_leap_year(self):
        self.assertEqual(days_in_month(2024, 2), 29)

    def test_april(self):
        self.assertEqual(days_in_month(2023, 4), 30)
`,
    },
  },
  bug: {
    message: "dates: the common case first in is_leap",
    edits: [
      {
        path: "dates.py",
        old: `    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0
`,
        new: `    if year % 4 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 400 == 0
`,
      },
    ],
  },
  fix: {
    message: "dates: centuries are leap years only by 400\n\nThe reordered test returned True for every multiple of 4.",
    edits: [
      {
        path: "dates.py",
        old: `    if year % 4 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 400 == 0
`,
        new: `    if year % 100 == 0:
        return year % 400 == 0
    return year % 4 == 0
`,
      },
    ],
    tests: [
      {
        path: "test_dates.py",
        old: "        self.assertTrue(is_leap(2024))\n",
        new: `        self.assertTrue(is_leap(2024))

    def test_century(self):
        self.assertFalse(is_leap(1900))

    def test_fourth_century(self):
        self.assertTrue(is_leap(2000))
`,
      },
      {
        path: "test_dates.py",
        old: "        self.assertEqual(days_in_month(2023, 4), 30)\n",
        new: `        self.assertEqual(days_in_month(2023, 4), 30)

    def test_february_of_a_century(self):
        self.assertEqual(days_in_month(1900, 2), 28)
`,
      },
    ],
  },
  FAIL_TO_PASS: [
    "test_february_of_a_century (test_dates.DaysInMonthTest.test_february_of_a_century)",
    "test_century (test_dates.IsLeapTest.test_century)",
  ],
  PASS_TO_PASS: [
    "test_april (test_dates.DaysInMonthTest.test_april)",
    "test_february_of_a_leap_year (test_dates.DaysInMonthTest.test_february_of_a_leap_year)",
    "test_common_year (test_dates.IsLeapTest.test_common_year)",
    "test_fourth_century (test_dates.IsLeapTest.test_fourth_century)",
    "test_leap_year (test_dates.IsLeapTest.test_leap_year)",
  ],
};
