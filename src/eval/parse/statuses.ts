// What every test-output parser shares (src/eval/parse/): the bounds on hostile output and one map
// of test name to status in which a name seen twice keeps its worse status. Pure.
import { count } from "../../core/count.js";
import type { TestStatus } from "../types.js";

/** The most test output read, in characters: past it, the head is kept and a note says how much was cut. */
export const MAX_OUTPUT_CHARS = 16 * 1024 * 1024;
/** At most this many tests are read from one output; later names are dropped (and so count as missing). */
export const MAX_TESTS = 100_000;
/** The longest test name kept; a longer one names no test of a set (their names are bounded the same) and is dropped. */
export const MAX_NAME_CHARS = 2_000;

/** Test output bounded for parsing and keeping: its head, cut at a line, with a note when anything was cut. */
export function boundOutput(text: string): { text: string; cut: number } {
  if (text.length <= MAX_OUTPUT_CHARS) return { text, cut: 0 };
  const nl = text.lastIndexOf("\n", MAX_OUTPUT_CHARS);
  const head = text.slice(0, nl > 0 ? nl + 1 : MAX_OUTPUT_CHARS);
  const cut = text.length - head.length;
  return {
    text: `${head}[patchbay: ${count(cut, "character")} of test output cut; the tests in it count as missing]\n`,
    cut,
  };
}

// Worse first: a name printed twice (a test's own output faking a result line, two tests of one
// name) keeps the status that grades worse, so printed text can fail a test but never pass one
// that a real line failed.
const RANK: Record<TestStatus, number> = { ERROR: 4, FAILED: 3, SKIPPED: 2, XFAIL: 1, PASSED: 0 };

/** Test names and their statuses as a parser finds them, bounded; the worse status kept for a repeated name. */
export class Statuses {
  private readonly map = new Map<string, TestStatus>();

  /** Records `name`'s status (trimmed; an empty or over-long name, or one past the bound, is dropped). */
  add(name: string, status: TestStatus): void {
    const n = name.trim();
    if (n === "" || n.length > MAX_NAME_CHARS) return;
    const had = this.map.get(n);
    if (had === undefined && this.map.size >= MAX_TESTS) return;
    if (had === undefined || RANK[status] > RANK[had]) this.map.set(n, status);
  }

  /** The statuses as a plain object (own properties only: look names up with Object.hasOwn). */
  toRecord(): Record<string, TestStatus> {
    return Object.fromEntries(this.map);
  }
}

/** `text` without ANSI escape sequences (colour codes) and carriage returns, split into lines. */
export function plainLines(text: string): string[] {
  return text
    .replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, "")
    .replace(/\r\n?/g, "\n")
    .split("\n");
}
