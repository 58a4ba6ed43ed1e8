// Red team (issue 44): a hostile model's patch, graded in the real grading sandbox. The agent never
// sees the instance's tests, but its patch runs with them: a patch that leaves the JUnit file the
// grader reads as a FIFO or a link to /dev/zero, or floods the output. Each grading must end, the
// first two unresolved, and a flood must not hide the results printed after it. (A patch that
// shadows the runner itself, a unittest.py at the root, does resolve an instance: a documented
// limit, docs/eval.md "What grading cannot tell".)
//
// Needs: Docker with the sandbox image.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_OUTPUT_CHARS } from "../../src/eval/parse/index.js";
import { gradePrediction } from "../../src/eval/grade.js";
import type { EvalInstance, EvalTest } from "../../src/eval/types.js";

const tmp = mkdtempSync(join(tmpdir(), "pb-eval-attacks-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const GIT_ENV = {
  ...process.env,
  GIT_AUTHOR_NAME: "A",
  GIT_AUTHOR_EMAIL: "a@fixtures.invalid",
  GIT_COMMITTER_NAME: "A",
  GIT_COMMITTER_EMAIL: "a@fixtures.invalid",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
};
const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", args, { cwd, env: GIT_ENV, encoding: "utf8" }).trimEnd();
const write = (root: string, files: Record<string, string>) => {
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    writeFileSync(join(root, p), text);
  }
};

const BASE = {
  "calc.py": "def add(a, b):\n    return a - b\n",
  "test_base.py":
    "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n",
  // The JUnit instance's runner: runs the unittest suite and writes out.xml as pytest would.
  "junit_run.py": `import sys, unittest
from xml.sax.saxutils import quoteattr
r = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.discover("."))
bad = {t.id() for t, _ in r.failures + r.errors}
cases = "".join(f"<testcase classname={quoteattr(i.rsplit('.', 1)[0])} name={quoteattr(i.rsplit('.', 1)[1])}>{'<failure/>' if i in bad else ''}</testcase>" for i in ids) if (ids := sorted(t.id() for s in unittest.defaultTestLoader.discover(".") for c in s for t in c)) else ""
open("out.xml", "w").write(f"<testsuite>{cases}</testsuite>")
sys.exit(0 if r.wasSuccessful() else 1)
`,
};
const TESTS = {
  "test_calc.py":
    "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
};

let repo: string;
let base: string;
let testPatch: string;
/** A patch that makes `files` over base_commit (a model's patch). */
function patchOf(files: Record<string, string>): string {
  const w = mkdtempSync(join(tmp, "w-"));
  git(tmp, "clone", "-q", repo, w);
  write(w, files);
  git(w, "add", "-A");
  return git(w, "diff", "--cached", base) + "\n";
}

beforeAll(() => {
  repo = join(tmp, "repo");
  mkdirSync(repo);
  git(repo, "init", "-q", "-b", "main");
  write(repo, BASE);
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "base");
  base = git(repo, "rev-parse", "HEAD");
  const w = mkdtempSync(join(tmp, "t-"));
  git(tmp, "clone", "-q", repo, w);
  write(w, TESTS);
  git(w, "add", "-A");
  testPatch = git(w, "diff", "--cached", base) + "\n";
});

const UNITTEST: EvalTest = { command: "python3 -m unittest -v", format: "unittest", timeoutSec: 120 };
const JUNIT: EvalTest = { command: "python3 junit_run.py", format: "junit", file: "out.xml", timeoutSec: 120 };

function instance(test: EvalTest): EvalInstance {
  const junit = test.format === "junit";
  return {
    instance_id: "fixtures__calc-1",
    repo: "fixtures/calc",
    base_commit: base,
    problem_statement: "add subtracts",
    test_patch: testPatch,
    FAIL_TO_PASS: [junit ? "test_calc.T::test_add" : "test_add (test_calc.T.test_add)"],
    PASS_TO_PASS: [junit ? "test_base.T::test_zero" : "test_zero (test_base.T.test_zero)"],
    patchbay: { repo, test },
  };
}
const grade = (test: EvalTest, files: Record<string, string>) =>
  gradePrediction(instance(test), {
    instance_id: "fixtures__calc-1",
    model_patch: patchOf(files),
    model_name_or_path: "m",
  });

const GOLD = { "calc.py": "def add(a, b):\n    return a + b\n" };

describe("a hostile patch, graded", { timeout: 300_000 }, () => {
  it("the gold patch resolves the instance, in both formats (the fixture is sound)", async () => {
    expect((await grade(UNITTEST, GOLD)).outcome).toBe("resolved");
    expect((await grade(JUNIT, GOLD)).outcome).toBe("resolved");
    expect((await grade(UNITTEST, { "notes.txt": "nothing\n" })).outcome).toBe("unresolved");
  });

  it("a JUnit file left as a FIFO or a link to /dev/zero ends the grading, unresolved", async () => {
    const run = (tail: string) => ({
      "junit_run.py": `${BASE["junit_run.py"].replace("sys.exit(", "import os\nos.remove('out.xml')\n" + tail + "\nsys.exit(")}`,
    });
    const t0 = Date.now();
    const fifo = await grade(JUNIT, { ...GOLD, ...run("os.mkfifo('out.xml')") });
    expect(fifo.outcome).not.toBe("resolved");
    const zero = await grade(JUNIT, { ...GOLD, ...run("os.symlink('/dev/zero', 'out.xml')") });
    expect(zero.outcome).not.toBe("resolved");
    expect(Date.now() - t0).toBeLessThan(120_000);
  });

  // Before the fix the sandbox kept 8 MiB of head and 8 MiB of tail with a notice between, which the
  // parsers' 16 Mi character bound cut back to the head: the results at the end were lost, and a
  // correct patch whose code printed much was unresolved.
  it("a flood of output is kept bounded, and the results at its end are still read", async () => {
    const g = await grade(UNITTEST, {
      "calc.py": "import sys\nsys.stdout.write('x' * (64 * 1024 * 1024) + '\\n')\ndef add(a, b):\n    return a + b\n",
    });
    expect(g.testOutput.length).toBeLessThanOrEqual(MAX_OUTPUT_CHARS);
    expect(g.outcome).toBe("resolved");
  });
});
