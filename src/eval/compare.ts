// Two runs side by side (`patchbay eval compare RUN_A RUN_B`): resolved, cost, cost per resolved
// instance, pass@k and best-of-K (where a verify judged) of each, and the instances whose outcome differs. compareRuns gives the
// numbers; compareText renders them for a terminal, every text from a run (its name, model,
// instance ids, outcomes and pass@k keys: a summary.json may be anyone's) through safeText. Pure.
import { count } from "../core/count.js";
import { usd } from "../core/money.js";
import { safeText } from "../core/term.js";
import type { GradeOutcome, RunSummary } from "./types.js";

/** An instance's outcome in one run: as graded, "pending" while not, "absent" when the run has no such instance. */
export type CompareOutcome = GradeOutcome | "pending" | "absent";

/** One run's numbers in a comparison. */
export interface RunSide {
  /** The run's name. */
  run: string;
  /** The model it ran. */
  model: string;
  /** Instances of the set. */
  total: number;
  /** How many of them resolved. */
  resolved: number;
  /** Every candidate's spend, USD. */
  costUsd: number;
  /** null when none resolved. */
  costPerResolvedUsd: number | null;
  /** pass@k by k ("1", and K when the run had K candidates). */
  passAtK: Record<string, number>;
  /** Candidates per instance (K). */
  candidates: number;
  /** best-of-K: judged instances whose picked candidate resolved; null where no verify judged (or the run predates it). */
  bestOfK: number | null;
}

/** Two runs compared: each one's numbers, and the instances whose outcomes differ (in instance_id order). */
export interface RunComparison {
  /** The first run's numbers. */
  a: RunSide;
  /** The second run's numbers. */
  b: RunSide;
  /** Each instance whose outcome differs: its outcome in a, then in b. */
  differing: { instance_id: string; a: CompareOutcome; b: CompareOutcome }[];
}

/** Each instance's outcome in `s`: patchbay's account where it has one (it tells patch_failed from error), else SWE-bench's lists. */
function outcomes(s: RunSummary): Map<string, CompareOutcome> {
  const out = new Map<string, CompareOutcome>();
  const lists: [string[], CompareOutcome][] = [
    [s.resolved_ids, "resolved"],
    [s.unresolved_ids, "unresolved"],
    [s.empty_patch_ids, "empty_patch"],
    [s.error_ids, "error"],
    [s.incomplete_ids, "pending"],
  ];
  for (const [ids, outcome] of lists) for (const id of ids) out.set(id, outcome);
  for (const a of s.patchbay.instances) out.set(a.instance_id, a.outcome);
  return out;
}

function side(s: RunSummary): RunSide {
  return {
    run: s.patchbay.run,
    model: s.patchbay.model,
    total: s.total_instances,
    resolved: s.resolved_instances,
    costUsd: s.patchbay.costUsd,
    costPerResolvedUsd: s.patchbay.costPerResolvedUsd,
    passAtK: { ...s.patchbay.passAtK },
    candidates: s.patchbay.candidates,
    bestOfK: s.patchbay.bestOfK ?? null,
  };
}

/** Runs `a` and `b` side by side, and the instances whose outcome differs between them. */
export function compareRuns(a: RunSummary, b: RunSummary): RunComparison {
  const oa = outcomes(a);
  const ob = outcomes(b);
  const ids = [...new Set([...oa.keys(), ...ob.keys()])].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
  const differing = ids
    .map((id) => ({ instance_id: id, a: oa.get(id) ?? "absent", b: ob.get(id) ?? "absent" }))
    .filter((d) => d.a !== d.b);
  return { a: side(a), b: side(b), differing };
}

const percent = (n: number, of: number) => (of === 0 ? "-" : `${((100 * n) / of).toFixed(1)}%`);
const one = (s: string) => safeText(s, { oneLine: true });

/** Rows padded to columns: the first column as wide as its longest cell, the others too. */
function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) =>
    r
      .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd(),
  );
}

/** A run's best-of-K as `0.500 (K=4)`, or "-" where no verify judged. */
const bestOf = (s: RunSide) => (s.bestOfK === null ? "-" : `${s.bestOfK.toFixed(3)} (K=${s.candidates})`);

/** A comparison as plain text for a terminal: the two runs in columns, then the instances that differ. */
export function compareText(c: RunComparison): string {
  const ks = [...new Set([...Object.keys(c.a.passAtK), ...Object.keys(c.b.passAtK)])].sort((x, y) => +x - +y);
  const pass = (s: RunSide, k: string) => (k in s.passAtK ? s.passAtK[k]!.toFixed(3) : "-");
  const rows = [
    ["", `A: ${one(c.a.run)}`, `B: ${one(c.b.run)}`],
    ["model", one(c.a.model), one(c.b.model)],
    [
      "resolved",
      `${c.a.resolved}/${c.a.total} (${percent(c.a.resolved, c.a.total)})`,
      `${c.b.resolved}/${c.b.total} (${percent(c.b.resolved, c.b.total)})`,
    ],
    ["cost", usd(c.a.costUsd), usd(c.b.costUsd)],
    [
      "cost per resolved",
      c.a.costPerResolvedUsd === null ? "-" : usd(c.a.costPerResolvedUsd),
      c.b.costPerResolvedUsd === null ? "-" : usd(c.b.costPerResolvedUsd),
    ],
    ...ks.map((k) => [`pass@${one(k)}`, pass(c.a, k), pass(c.b, k)]),
    // The judge's pick beside pass@1 and the oracle pass@K, where either run had one.
    ...(c.a.bestOfK === null && c.b.bestOfK === null ? [] : [["best-of-K", bestOf(c.a), bestOf(c.b)]]),
  ];
  const lines = table(rows);
  if (c.differing.length === 0) return [...lines, "", "No instance's outcome differs."].join("\n") + "\n";
  const diff = table([["instance", "A", "B"], ...c.differing.map((d) => [one(d.instance_id), one(d.a), one(d.b)])]).map(
    (l) => `  ${l}`,
  );
  const head = `${count(c.differing.length, "instance")} whose outcome differs:`;
  return [...lines, "", head, ...diff].join("\n") + "\n";
}
