// Two runs compared (src/eval/compare.ts): each run's resolved, cost, cost per resolved instance,
// pass@k and best-of-K, the instances whose outcome differs (patch_failed told from error), and the plain table
// `eval compare` prints, with no terminal control from a run's names or ids. Pure.
import { describe, expect, it } from "vitest";
import { compareRuns, compareText } from "../../../src/eval/compare.js";
import { runSummary } from "../../../src/eval/report.js";
import type { GradeOutcome, InstanceAccount, RunSummary } from "../../../src/eval/types.js";
import { safeText } from "../../../src/core/term.js";

/** A run over ids a..d with these outcomes (absent: not in the run's set), each instance costing `cost`. */
function run(name: string, outcomes: Record<string, GradeOutcome | "pending">, cost: number, model = "m"): RunSummary {
  const ids = Object.keys(outcomes);
  const account = (id: string): InstanceAccount => ({
    instance_id: id,
    outcome: outcomes[id]!,
    candidates: 1,
    resolvedCandidates: outcomes[id] === "resolved" ? 1 : 0,
    costUsd: cost,
    inputTokens: 1,
    outputTokens: 1,
    jobMs: 10,
    modelMs: 5,
    gradeMs: 1,
    harnessMs: 6,
    jobIds: [],
  });
  return runSummary({
    run: name,
    model,
    candidates: 1,
    wallMs: 100,
    instanceIds: ids,
    predictions: ids
      .filter((id) => outcomes[id] !== "pending")
      .map((id) => ({ instance_id: id, model_patch: outcomes[id] === "empty_patch" ? "" : "diff" })),
    graded: ids.flatMap((id) => {
      const outcome = outcomes[id]!;
      return outcome === "pending" ? [] : [{ instance_id: id, outcome }];
    }),
    accounts: ids.map(account),
  });
}

describe("compareRuns", () => {
  it("puts resolved, cost, cost per resolved and pass@k side by side, and lists the outcomes that differ", () => {
    const a = run("base", { a: "resolved", b: "unresolved", c: "patch_failed", d: "resolved" }, 1);
    const b = run("new", { a: "resolved", b: "resolved", c: "error", e: "pending" }, 2);
    const c = compareRuns(a, b);
    expect(c.a).toEqual({
      run: "base",
      model: "m",
      total: 4,
      resolved: 2,
      costUsd: 4,
      costPerResolvedUsd: 2,
      passAtK: { "1": 0.5 },
      candidates: 1,
      bestOfK: null,
    });
    expect(c.b).toMatchObject({ run: "new", total: 4, resolved: 2, costUsd: 8, costPerResolvedUsd: 4 });
    expect(c.differing).toEqual([
      { instance_id: "b", a: "unresolved", b: "resolved" },
      { instance_id: "c", a: "patch_failed", b: "error" },
      { instance_id: "d", a: "resolved", b: "absent" },
      { instance_id: "e", a: "absent", b: "pending" },
    ]);
  });

  it("falls back to SWE-bench's lists for an instance patchbay has no account of", () => {
    const a = run("a", { x: "resolved" }, 1);
    const b = { ...run("b", { x: "resolved" }, 1) };
    b.patchbay = { ...b.patchbay, instances: [] };
    b.resolved_ids = [];
    b.error_ids = ["x"];
    expect(compareRuns(a, b).differing).toEqual([{ instance_id: "x", a: "resolved", b: "error" }]);
  });
});

/** A run of K = 3 whose candidates a verify judged: `picks[id]` is the picked one's outcome and the candidates resolved. */
function judgedRun(name: string, picks: Record<string, [GradeOutcome, number]>): RunSummary {
  const ids = Object.keys(picks);
  return runSummary({
    run: name,
    model: "m",
    candidates: 3,
    wallMs: 1,
    instanceIds: ids,
    predictions: ids.map((id) => ({ instance_id: id, model_patch: "diff" })),
    graded: ids.map((id) => ({ instance_id: id, outcome: picks[id]![0] })),
    accounts: ids.map((id) => ({
      ...run("x", { [id]: picks[id]![0] }, 0).patchbay.instances[0]!,
      candidates: 3,
      resolvedCandidates: picks[id]![1],
      picked: 1,
    })),
  });
}

describe("compareRuns: best-of-K", () => {
  it("compares best-of-K beside pass@1 and pass@K, and a run that had no judge as '-'", () => {
    const judged = judgedRun("judged", { a: ["resolved", 1], b: ["unresolved", 1] });
    const plain = run("plain", { a: "resolved", b: "unresolved" }, 0);
    const c = compareRuns(plain, judged);
    expect([c.a.bestOfK, c.b.bestOfK]).toEqual([null, 0.5]);
    const text = compareText(c);
    expect(text).toContain("\npass@1             0.500        0.333\n");
    expect(text).toContain("\npass@3             -            1.000\n");
    expect(text).toContain("\nbest-of-K          -            0.500 (K=3)\n");
    // Two runs without a judge have no such row.
    expect(compareText(compareRuns(plain, plain))).not.toContain("best-of");
  });
});

describe("compareText", () => {
  it("prints a plain table: the runs in columns, then the instances that differ", () => {
    const a = run("base", { a: "resolved", b: "unresolved" }, 0.5);
    const b = run("new", { a: "resolved", b: "resolved" }, 0.25);
    expect(compareText(compareRuns(a, b))).toBe(
      [
        "                   A: base      B: new",
        "model              m            m",
        "resolved           1/2 (50.0%)  2/2 (100.0%)",
        "cost               $1.00        $0.50",
        "cost per resolved  $1.00        $0.25",
        "pass@1             0.500        1.000",
        "",
        "1 instance whose outcome differs:",
        "  instance  A           B",
        "  b         unresolved  resolved",
        "",
      ].join("\n"),
    );
    expect(compareText(compareRuns(a, a))).toMatch(/\nNo instance's outcome differs\.\n$/);
  });

  it("shows a run with nothing resolved as '-' per resolved, and no control from a run's names", () => {
    const evil = "x\u001b]52;c;aGk=\u0007\u001b[2J\u202e\nforged line";
    const a = run(evil, { [`i${evil}`]: "unresolved" }, 1, evil);
    const b = run("b", { [`i${evil}`]: "resolved" }, 1);
    const text = compareText(compareRuns(a, b));
    expect(safeText(text)).toBe(text);
    expect(text).not.toContain("forged line\n");
    expect(text).toMatch(/\ncost per resolved +- +\$1\.00\n/);
  });
});
