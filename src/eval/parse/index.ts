// A test command's output read per test, in the format its instance names (patchbay.test.format):
// one parser per format, each documenting how it names a test (docs/eval.md quotes them). The output
// is bounded before any parser sees it. Pure.
import type { TestFormat, TestStatus } from "../types.js";
import { parseJunit } from "./junit.js";
import { parsePytest } from "./pytest.js";
import { boundOutput } from "./statuses.js";
import { parseTap } from "./tap.js";
import { parseUnittest } from "./unittest.js";

export { boundOutput, MAX_NAME_CHARS, MAX_OUTPUT_CHARS, MAX_TESTS } from "./statuses.js";

const PARSERS: Record<TestFormat, (text: string) => Record<string, TestStatus>> = {
  pytest: parsePytest,
  unittest: parseUnittest,
  tap: parseTap,
  junit: parseJunit,
};

/**
 * Each test `text` names, with its status, read as `format` (its head only past 16 MiB; at most
 * 100,000 tests). A name printed twice keeps its worse status. Look a name up with Object.hasOwn.
 */
export function parseTestOutput(format: TestFormat, text: string): Record<string, TestStatus> {
  return PARSERS[format](boundOutput(text).text);
}
