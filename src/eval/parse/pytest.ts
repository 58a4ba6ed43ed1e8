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
const VERBOSE = new RegExp(`^(\\S.*?::.*?) (${STATUS})(?: \\(.*\\))?(?:\\s+\\[\\s*\\d+%\\])?$`);
// pytest-xdist prefixes a verbose result with its worker and progress: `[gw0] [ 10%] PASSED name`.
const XDIST = /^\[gw\d+\]\s+\[\s*\d+%\]\s+/;

const statusOf = (s: string): TestStatus => (s === "XPASS" ? "FAILED" : (s as TestStatus));

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
    const verbose = VERBOSE.exec(line);
    if (verbose) out.add(verbose[1]!, statusOf(verbose[2]!));
  }
  return out.toRecord();
}
