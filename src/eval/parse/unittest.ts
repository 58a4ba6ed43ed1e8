// Python's unittest in verbose mode (`python3 -m unittest -v`, Django's runner with -v 2): each test
// a line `name ... status`, as SWE-bench's Django parser reads it (swebench/harness/log_parsers/python.py,
// parse_log_django), made to hold where that parser loses a test. Pure.
//
// How a test is named: the text before " ... " on its line, trimmed, as SWE-bench's Django parser
// takes it: `test_div (calc.tests.CalcTest.test_div)` on Python 3.11+, `test_div (calc.tests.CalcTest)`
// before. When the test has a docstring, unittest prints its first line on the next line, before
// " ... ": the test is still named by its own line (`test_div (…)`), not by the docstring. A subtest
// is named as unittest prints it, `test_div (…) (i=1)`, and a failing subtest fails its test too.
// Statuses: `ok` PASSED, `FAIL` FAILED, `ERROR` ERROR, `skipped …` SKIPPED, `expected failure` XFAIL,
// `unexpected success` FAILED (unittest fails the run for it). The status is the last word(s) of the
// line, so output the test printed before it on the same line (`name ... noise ok`) or on lines of
// its own (`name ... noise`, then `ok`) does not hide it. The `FAIL: name` and `ERROR: name` headers
// of the failure report count too.
import type { TestStatus } from "../types.js";
import { plainLines, Statuses } from "./statuses.js";

const STATUS_WORDS = ["ok", "FAIL", "ERROR", "expected failure", "unexpected success", "skipped"];

/**
 * A status at the end of a line: alone, or after the test's own output and a whitespace (`skipped`
 * with its reason quoted), as `/(?:^|\s)(ok|FAIL|…|skipped(?: (['"]).*\2)?)$/` reads it, but without
 * that expression's backtracking, quadratic on a line of many ` skipped '` (the graded code prints it).
 */
function statusAtEnd(line: string): string | undefined {
  for (const w of STATUS_WORDS)
    if (line.endsWith(w) && (line.length === w.length || /\s/.test(line[line.length - w.length - 1]!))) return w;
  const q = line.at(-1);
  if ((q === "'" || q === '"') && (q === "'" ? SKIPPED_SINGLE : SKIPPED_DOUBLE).test(line.slice(0, -1)))
    return "skipped";
  return undefined;
}
const SKIPPED_SINGLE = /(?:^|\s)skipped '/;
const SKIPPED_DOUBLE = /(?:^|\s)skipped "/;
// A test's own line, as unittest prints it before a docstring: `test_x (module.Class[.test_x])`.
const HEADER = /^\S+ \([\w.]+\)$/;
const REPORT = /^(FAIL|ERROR|UNEXPECTED SUCCESS): (.+)$/;

function statusOf(word: string): TestStatus {
  if (word === "ok") return "PASSED";
  if (word === "ERROR") return "ERROR";
  if (word === "expected failure") return "XFAIL";
  if (word.startsWith("skipped")) return "SKIPPED";
  return "FAILED"; // FAIL, unexpected success
}

/** Each test unittest's verbose output names, with its status. */
export function parseUnittest(text: string): Record<string, TestStatus> {
  const out = new Statuses();
  let current: string | undefined; // the test whose status may still follow
  let awaiting = false; // current has no status yet: a line that looks like a test's own is its output
  let header: string | undefined; // a test's line seen alone: its docstring's line comes next
  const add = (name: string, status: TestStatus) => {
    out.add(name, status);
    // A subtest's failure is its test's: `test_x (m.C.test_x) (i=1)` fails `test_x (m.C.test_x)`.
    const parent = /^(\S+ \([\w.]+\)) \(.*\)$/.exec(name);
    if (parent && status !== "PASSED") out.add(parent[1]!, status);
  };
  for (const raw of plainLines(text)) {
    const line = raw.trim();
    const report = REPORT.exec(line);
    if (/^(=+|-+)$/.test(line) || /^Ran \d+ tests? in /.test(line) || report) {
      current = header = undefined;
      awaiting = false;
      if (report) add(report[2]!, report[1] === "ERROR" ? "ERROR" : "FAILED");
      continue;
    }
    const dots = line.indexOf(" ... ");
    const tail = line.endsWith(" ...") ? line.length - 4 : -1;
    const at = dots >= 0 ? dots : tail;
    if (at >= 0) {
      const before = line.slice(0, at).trim();
      // The docstring's line follows the test's own; a subtest's line starts with its test's name.
      const name = header !== undefined && !HEADER.test(before) && !before.startsWith(`${header} (`) ? header : before;
      header = undefined;
      current = name;
      const status = statusAtEnd(line.slice(at + 4).trim());
      awaiting = !status;
      if (status) add(name, statusOf(status));
      continue;
    }
    if (HEADER.test(line) && !awaiting) {
      header = line;
      current = undefined;
      continue;
    }
    const status = current !== undefined ? statusAtEnd(line) : undefined;
    if (status) {
      add(current!, statusOf(status));
      awaiting = false;
    }
  }
  return out.toRecord();
}
