// One repository of the eval's task sets (test/support/eval-sets.ts writes it), written for these
// tests. slug: runs of separators become runs of dashes, string handling (Python, unittest).
// Its test lists were read from real runs; test/integration/eval-sets.test.ts runs them again.
import type { RepoSpec } from "../eval-sets.js";
import { PY_GITIGNORE, UNITTEST } from "./common.js";

/** slug: runs of separators become runs of dashes (a regex lost its `+`). */
export const slug: RepoSpec = {
  id: "fixtures__slug-2",
  repo: "fixtures/slug",
  problem:
    "slugify() leaves several dashes in a row\n\n" +
    '`slugify("Hello,  World!")` returns `"hello---world"`; it should be `"hello-world"`. ' +
    "A run of spaces or punctuation should become one dash.\n",
  test: UNITTEST,
  start: {
    message: "slug: slugify titles",
    files: {
      ".gitignore": PY_GITIGNORE,
      "slug.py": `import re
import unicodedata


def slugify(title):
    """A URL slug: lowercase ASCII words joined by single dashes."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^a-zA-Z0-9]+", "-", text)
    return text.strip("-").lower()
`,
      "test_slug.py": `import unittest

from slug import slugify


class SlugifyTest(unittest.TestCase):
    def test_lowercase(self):
        self.assertEqual(slugify("Hello"), "hello")

    def test_accents(self):
        self.assertEqual(slugify("Caf\\u00e9 cr\\u00e8me"), "cafe-creme")
`,
    },
  },
  bug: {
    message: "slug: drop apostrophes instead of splitting words at them",
    edits: [
      {
        path: "slug.py",
        old: '    text = re.sub(r"[^a-zA-Z0-9]+", "-", text)\n',
        new: '    text = text.replace("\'", "")\n    text = re.sub(r"[^a-zA-Z0-9]", "-", text)\n',
      },
    ],
  },
  fix: {
    message: "slug: one dash for a run of separators\n\nThe apostrophe change dropped the + of the pattern.",
    edits: [{ path: "slug.py", old: 'r"[^a-zA-Z0-9]"', new: 'r"[^a-zA-Z0-9]+"' }],
    tests: [
      {
        path: "test_slug.py",
        old: '        self.assertEqual(slugify("Caf\\u00e9 cr\\u00e8me"), "cafe-creme")\n',
        new: `        self.assertEqual(slugify("Caf\\u00e9 cr\\u00e8me"), "cafe-creme")

    def test_collapses_separators(self):
        self.assertEqual(slugify("Hello,  World!"), "hello-world")

    def test_apostrophe(self):
        self.assertEqual(slugify("Don't panic"), "dont-panic")
`,
      },
    ],
  },
  FAIL_TO_PASS: ["test_collapses_separators (test_slug.SlugifyTest.test_collapses_separators)"],
  PASS_TO_PASS: [
    "test_accents (test_slug.SlugifyTest.test_accents)",
    "test_apostrophe (test_slug.SlugifyTest.test_apostrophe)",
    "test_lowercase (test_slug.SlugifyTest.test_lowercase)",
  ],
};
