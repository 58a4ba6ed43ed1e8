// pytest's output, as SWE-bench's pytest parsers read it (swebench/harness/log_parsers/python.py):
// the `-rA` short summary, `STATUS name[ - message]`, and the `-v` lines, `name STATUS[ (reason)]
// [ NN%]`. Pure.
//
// How a test is named: its pytest node id as pytest prints it, `tests/test_x.py::TestClass::test_a`
// or `tests/test_x.py::test_eq[1-2]` (parameters, spaces included, as printed). Statuses: PASSED,
// FAILED, ERROR, SKIPPED and XFAIL as printed; XPASS (an expected failure that passed) is FAILED, as
// SWE-bench does not count it as passing. `SKIPPED [N] file:line: reason` summary lines name no test
// and are ignored. A `-v` line counts only when its name has `::` (a node id), so other lines ending
// in a status word are not taken for tests.
import type { TestStatus } from "../types.js";
import { plainLines, Statuses } from "./statuses.js";

const STATUS = "PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS";
const SUMMARY = new RegExp(`^(${STATUS}) (.+)$`);
const STATUS_WORD = new RegExp(` (${STATUS})`, "g");
// pytest-xdist prefixes a verbose result with its worker and progress: `[gw0] [ 10%] PASSED name`.
const XDIST = /^\[gw\d+\]\s+\[\s*\d+%\]\s+/;

const statusOf = (s: string): TestStatus => (s === "XPASS" ? "FAILED" : (s as TestStatus));

const isSpace = (c: string | undefined) => c !== undefined && /\s/.test(c);

/**
 * A `-v` line, `name STATUS[ (reason)][ [ NN%]]`, read as the regular expression
 * `^(\S.*?::.*?) (STATUS)(?: \(.*\))?(?:\s+\[\s*\d+%\])?$` reads it (the leftmost status whose
 * name has `::` and whose tail is only a reason and the progress), but in one pass: that expression
 * backtracks cubically on a line of many `::` and ` PASSED (`, and the output is the graded code's.
 */
function verboseLine(line: string): [string, string] | undefined {
  const end = line.length;
  if (end === 0 || isSpace(line[0])) return undefined;
  const colons = line.indexOf("::", 1);
  if (colons < 0) return undefined;
  // The progress `\s+[ NN%]` at the end: where its whitespace starts (run, from `run` to `bracket`).
  let run = end;
  let bracket = end;
  if (line.endsWith("%]")) {
    let i = end - 3;
    const digitsEnd = i;
    while (i >= 0 && line[i]! >= "0" && line[i]! <= "9") i--;
    if (i < digitsEnd) {
      while (i >= 0 && isSpace(line[i])) i--;
      if (i >= 0 && line[i] === "[") {
        bracket = i;
        run = i;
        while (run > 0 && isSpace(line[run - 1])) run--;
        if (run === bracket) run = bracket = end; // `\s+` needs one
      }
    }
  }
  // A tail may start at the end or in the progress's whitespace; a reason `(…)` must end where one may.
  const tailAt = (j: number) => j === end || (j >= run && j < bracket);
  const closeEnd = Math.max(line[end - 1] === ")" ? end : -1, run < bracket && line[run - 1] === ")" ? run : -1);
  for (const m of line.matchAll(STATUS_WORD)) {
    if (m.index < colons + 2) continue;
    const j = m.index + m[0].length;
    if (tailAt(j) || (line.startsWith(" (", j) && closeEnd >= j + 3)) return [line.slice(0, m.index), m[1]!];
  }
  return undefined;
}

/** Each test pytest's `-rA` or `-v` output names, with its status. */
export function parsePytest(text: string): Record<string, TestStatus> {
  const out = new Statuses();
  for (const raw of plainLines(text)) {
    const line = raw.trimEnd().replace(XDIST, "");
    const summary = SUMMARY.exec(line);
    if (summary) {
      const [, status, rest] = summary as unknown as [string, string, string];
      if (status === "SKIPPED" && /^\[\d+\]/.test(rest)) continue;
      // The message after " - " is not part of the name (FAILED, ERROR, XFAIL and XPASS carry one).
      out.add(rest.split(" - ")[0]!, statusOf(status));
      continue;
    }
    const verbose = verboseLine(line);
    if (verbose) out.add(verbose[0], statusOf(verbose[1]));
  }
  return out.toRecord();
}
