// Counts in words: every count patchbay prints ("1 job", "2 jobs") goes through these, so none
// reads "1 jobs". test/unit/counts.test.ts fails on a number printed before a plural noun by hand.

/**
 * The noun for `n` things: `one` when n is 1, else `many` (the noun plus "s" unless given, for an
 * irregular plural: `plural(n, "directory", "directories")`).
 */
export function plural(n: number, one: string, many = `${one}s`): string {
  return n === 1 ? one : many;
}

/** `n` and its noun: `count(1, "job")` is "1 job", `count(2, "job")` is "2 jobs" (irregulars as in {@link plural}). */
export function count(n: number, one: string, many?: string): string {
  return `${n} ${plural(n, one, many)}`;
}
