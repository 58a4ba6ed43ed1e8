// Red team (issue 44): test output the graded code prints is hostile, and parsing it runs on the
// eval's event loop, where no timeout can stop it. A line built to make a parser's regular
// expression backtrack (many `::` and ` PASSED (` for pytest's -v line, many ` skipped '` for
// unittest's status) must not cost more than a linear pass: before the fix, 12 KB of one pytest
// line took 22 s and 24 KB 186 s (cubic), so 16 MiB of output hung `eval run` for good. Pure.
import { describe, expect, it } from "vitest";
import { parseTestOutput } from "../../../src/eval/parse/index.js";
import type { TestFormat } from "../../../src/eval/types.js";

const timed = (format: TestFormat, text: string) => {
  const t0 = performance.now();
  const statuses = parseTestOutput(format, text);
  return { ms: performance.now() - t0, statuses };
};

describe("hostile output costs a parser no more than a linear pass", () => {
  it("pytest: a -v line of many '::' and ' PASSED (' (cubic backtracking before)", () => {
    const line = "a" + "::".repeat(600) + " PASSED (".repeat(600) + "x";
    expect(timed("pytest", line).ms).toBeLessThan(500);
  });

  it("pytest: 16 MiB of such lines, and one line of 16 MiB", () => {
    const line = "a" + "::".repeat(300) + " PASSED (".repeat(300) + "x\n";
    expect(timed("pytest", line.repeat(Math.floor((16 * 1024 * 1024) / line.length))).ms).toBeLessThan(20_000);
    const one = "t::a" + " PASSED (".repeat(1_800_000) + "x";
    expect(timed("pytest", one).ms).toBeLessThan(20_000);
  });

  it("unittest: a status line of many ` skipped '` (quadratic backtracking before)", () => {
    const line = "t ... " + " skipped '".repeat(20_000) + "x";
    expect(timed("unittest", line).ms).toBeLessThan(500);
    const big = "t ... " + " skipped '".repeat(1_600_000) + "x";
    expect(timed("unittest", big).ms).toBeLessThan(20_000);
  });

  it("still reads the lines the fast paths must keep", () => {
    expect(
      parseTestOutput(
        "pytest",
        [
          "tests/t.py::test_a PASSED",
          "tests/t.py::test_b FAILED [ 50%]",
          "tests/t.py::test_c SKIPPED (no db)   [ 75%]",
          "tests/t.py::test_d[a b] XFAIL (why)",
          "tests/t.py::test_e PASSED (x) PASSED",
          "x PASSED (a::b PASSED (c))",
          "not a test PASSED",
        ].join("\n"),
      ),
    ).toEqual({
      "tests/t.py::test_a": "PASSED",
      "tests/t.py::test_b": "FAILED",
      "tests/t.py::test_c": "SKIPPED",
      "tests/t.py::test_d[a b]": "XFAIL",
      "tests/t.py::test_e PASSED (x)": "PASSED",
      "x PASSED (a::b": "PASSED",
    });
    expect(
      parseTestOutput(
        "unittest",
        [
          "test_a (m.T.test_a) ... ok",
          "test_b (m.T.test_b) ... skipped 'no db'",
          'test_c (m.T.test_c) ... skipped "x"',
          "test_d (m.T.test_d) ... noise\tFAIL",
          "test_e (m.T.test_e) ... expected failure",
          "test_f (m.T.test_f) ... okay",
          "test_g (m.T.test_g) ... skipped '",
        ].join("\n"),
      ),
    ).toEqual({
      "test_a (m.T.test_a)": "PASSED",
      "test_b (m.T.test_b)": "SKIPPED",
      "test_c (m.T.test_c)": "SKIPPED",
      "test_d (m.T.test_d)": "FAILED",
      "test_e (m.T.test_e)": "XFAIL",
    });
  });
});
