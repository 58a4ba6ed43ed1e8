// "Did you mean": the known name closest to a misspelt one (a JobSpec key, a CLI flag). Pure, and
// free of imports: `patchbay --help` loads it.

/** Optimal string alignment distance (Levenshtein plus adjacent transpositions: verfiy → verify = 1). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** The known name `key` was probably meant to be: the same but for case, `_` and `-`, or within a small edit distance. */
export function suggest(key: string, known: readonly string[]): string | undefined {
  const norm = (s: string) => s.toLowerCase().replace(/[_-]/g, "");
  const exact = known.find((k) => norm(k) === norm(key));
  if (exact) return exact;
  let best: string | undefined;
  let bestD = key.length <= 4 ? 2 : 3; // strictly below this
  for (const k of known) {
    const dist = editDistance(key.toLowerCase(), k.toLowerCase());
    if (dist < bestD) [best, bestD] = [k, dist];
  }
  return best;
}
