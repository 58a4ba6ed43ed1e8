// One repository of the eval's task sets (test/support/eval-sets.ts writes it), written for these
// tests. pager: pages() stops one page short, an off-by-one in a range (Python, unittest).
// Its test lists were read from real runs; test/integration/eval-sets.test.ts runs them again.
import type { RepoSpec } from "../eval-sets.js";
import { PY_GITIGNORE, UNITTEST } from "./common.js";

/** pager: `pages()` stops one page short (an off-by-one in a range). */
export const pager: RepoSpec = {
  id: "fixtures__pager-1",
  repo: "fixtures/pager",
  problem:
    "pages() drops the last page of a list\n\n" +
    "`pages(list(range(7)), 3)` returns `[[0, 1, 2], [3, 4, 5]]`: the last page, `[6]`, is missing. " +
    "With 6 items it returns only the first page. Every page should be returned, the last one " +
    "possibly shorter.\n",
  test: UNITTEST,
  start: {
    message: "pager: page_count and page",
    files: {
      ".gitignore": PY_GITIGNORE,
      "pager.py": `"""Splits a list of items into pages of a fixed size."""


def page_count(total, size):
    """The number of pages \`total\` items fill at \`size\` per page."""
    if size < 1:
        raise ValueError("size must be at least 1")
    return (total + size - 1) // size


def page(items, number, size):
    """The items on page \`number\` (counted from 1)."""
    if number < 1:
        raise ValueError("pages are counted from 1")
    start = (number - 1) * size
    return items[start:start + size]
`,
      "test_pager.py": `import unittest

from pager import page, page_count


class PageCountTest(unittest.TestCase):
    def test_exact(self):
        self.assertEqual(page_count(10, 5), 2)

    def test_partial(self):
        self.assertEqual(page_count(11, 5), 3)

    def test_empty(self):
        self.assertEqual(page_count(0, 5), 0)


class PageTest(unittest.TestCase):
    def test_first_page(self):
        self.assertEqual(page(list(range(7)), 1, 3), [0, 1, 2])

    def test_rejects_page_zero(self):
        with self.assertRaises(ValueError):
            page([1], 0, 3)
`,
    },
  },
  bug: {
    message: "pager: pages() lists every page",
    edits: [
      {
        path: "pager.py",
        old: "    return items[start:start + size]\n",
        new: `    return items[start:start + size]


def pages(items, size):
    """Every page of \`items\`, in order."""
    return [page(items, n, size) for n in range(1, page_count(len(items), size))]
`,
      },
    ],
  },
  fix: {
    message:
      "pager: pages() keeps the last page\n\nrange() stops before its end, so the last page number was never reached.",
    edits: [
      {
        path: "pager.py",
        old: "range(1, page_count(len(items), size))",
        new: "range(1, page_count(len(items), size) + 1)",
      },
    ],
    tests: [
      {
        path: "test_pager.py",
        old: "from pager import page, page_count\n",
        new: "from pager import page, page_count, pages\n",
      },
      {
        path: "test_pager.py",
        old: "            page([1], 0, 3)\n",
        new: `            page([1], 0, 3)


class PagesTest(unittest.TestCase):
    def test_keeps_last_partial_page(self):
        self.assertEqual(pages(list(range(7)), 3), [[0, 1, 2], [3, 4, 5], [6]])

    def test_exact_multiple(self):
        self.assertEqual(pages(list(range(6)), 3), [[0, 1, 2], [3, 4, 5]])

    def test_no_items(self):
        self.assertEqual(pages([], 3), [])
`,
      },
    ],
  },
  FAIL_TO_PASS: [
    "test_exact_multiple (test_pager.PagesTest.test_exact_multiple)",
    "test_keeps_last_partial_page (test_pager.PagesTest.test_keeps_last_partial_page)",
  ],
  PASS_TO_PASS: [
    "test_empty (test_pager.PageCountTest.test_empty)",
    "test_exact (test_pager.PageCountTest.test_exact)",
    "test_partial (test_pager.PageCountTest.test_partial)",
    "test_first_page (test_pager.PageTest.test_first_page)",
    "test_rejects_page_zero (test_pager.PageTest.test_rejects_page_zero)",
    "test_no_items (test_pager.PagesTest.test_no_items)",
  ],
};
