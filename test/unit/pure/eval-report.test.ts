// Grading and the run summary (src/eval/report.ts): an instance's report.json graded as SWE-bench's
// grading.py grades (a skipped FAIL_TO_PASS test is no resolution, a skipped PASS_TO_PASS test no
// regression), every outcome in the summary's lists as make_run_report puts it, pass@k by the
// unbiased estimator, and both files the shape SWE-bench's code writes (test/support/swebench-shapes.ts).
// Pure.
import { describe, expect, it } from "vitest";
import { instanceReport, passAtK, runSummary, untrustedRun, type RunSummaryInput } from "../../../src/eval/report.js";
import type { GradeOutcome, InstanceAccount, TestStatus } from "../../../src/eval/types.js";
import { reportJsonProblems, runSummaryProblems } from "../../support/swebench-shapes.js";

const inst = { FAIL_TO_PASS: ["f1", "f2"], PASS_TO_PASS: ["p1", "p2"] };
const applied = { patch: "diff --git a/x b/x\n", applied: true };
const grade = (statuses: Record<string, TestStatus>) => instanceReport(inst, statuses, applied);

describe("instanceReport: SWE-bench's get_eval_report", () => {
  it("resolves when every FAIL_TO_PASS and PASS_TO_PASS test passes (XFAIL passes), in report.json's shape", () => {
    const r = grade({ f1: "PASSED", f2: "XFAIL", p1: "PASSED", p2: "PASSED", other: "FAILED" });
    expect(r).toEqual({
      patch_is_None: false,
      patch_exists: true,
      patch_successfully_applied: true,
      resolved: true,
      tests_status: {
        FAIL_TO_PASS: { success: ["f1", "f2"], failure: [] },
        PASS_TO_PASS: { success: ["p1", "p2"], failure: [] },
        FAIL_TO_FAIL: { success: [], failure: [] },
        PASS_TO_FAIL: { success: [], failure: [] },
      },
    });
    expect(reportJsonProblems({ "acme__calc-1": r })).toEqual([]);
  });

  it("fails a missing, FAILED, ERROR or SKIPPED FAIL_TO_PASS test; keeps a SKIPPED PASS_TO_PASS test", () => {
    const r = grade({ f1: "SKIPPED", p1: "SKIPPED", p2: "PASSED" });
    expect(r.tests_status!.FAIL_TO_PASS).toEqual({ success: [], failure: ["f1", "f2"] });
    expect(r.tests_status!.PASS_TO_PASS).toEqual({ success: ["p1", "p2"], failure: [] });
    expect(r.resolved).toBe(false);
    const broke = grade({ f1: "PASSED", f2: "PASSED", p1: "ERROR", p2: "FAILED" });
    expect(broke.tests_status!.PASS_TO_PASS).toEqual({ success: [], failure: ["p1", "p2"] });
    expect(broke.resolved).toBe(false);
  });

  it("never takes an inherited property for a test's status", () => {
    const r = instanceReport({ FAIL_TO_PASS: ["constructor", "toString"], PASS_TO_PASS: [] }, {}, applied);
    expect(r.tests_status!.FAIL_TO_PASS).toEqual({ success: [], failure: ["constructor", "toString"] });
    expect(r.resolved).toBe(false);
  });

  it("matches a parametrized id cut short in the set only when every match grades alike", () => {
    const cut = { FAIL_TO_PASS: ["t.py::test_a[log(x"], PASS_TO_PASS: [] };
    const one = instanceReport(cut, { "t.py::test_a[log(x)-1]": "PASSED", "t.py::test_a[log(x)-2]": "XFAIL" }, applied);
    expect(one.resolved).toBe(true);
    const mixed = instanceReport(
      cut,
      { "t.py::test_a[log(x)-1]": "PASSED", "t.py::test_a[log(x)-2]": "FAILED" },
      applied,
    );
    expect(mixed.resolved).toBe(false);
    const closed = instanceReport(
      { FAIL_TO_PASS: ["t.py::test_a"], PASS_TO_PASS: [] },
      { "t.py::test_ab": "PASSED" },
      applied,
    );
    expect(closed.resolved).toBe(false);
  });

  it("has no tests_status for a None patch, or when the patches did not apply or the tests did not run", () => {
    const none = instanceReport(inst, { f1: "PASSED" }, { patch: null, applied: true });
    expect(none).toEqual({
      patch_is_None: true,
      patch_exists: false,
      patch_successfully_applied: false,
      resolved: false,
    });
    const notApplied = instanceReport(inst, {}, { patch: "x", applied: false });
    expect(notApplied).toEqual({
      patch_is_None: false,
      patch_exists: true,
      patch_successfully_applied: false,
      resolved: false,
    });
    expect(reportJsonProblems({ a: none })).toEqual([]);
    expect(reportJsonProblems({ a: notApplied })).toEqual([]);
  });

  it("resolves with an empty PASS_TO_PASS (SWE-bench counts an empty list as all passing)", () => {
    expect(instanceReport({ FAIL_TO_PASS: ["f"], PASS_TO_PASS: [] }, { f: "PASSED" }, applied).resolved).toBe(true);
  });
});

describe("untrustedRun: SWE-bench's cross-check of the output against the exit code", () => {
  it("distrusts a failing exit with only passing lines, and nothing else", () => {
    expect(untrustedRun({ f1: "PASSED", p1: "SKIPPED" }, 1)).toMatch(
      /exited with 1 but its output names no failing test/,
    );
    expect(untrustedRun({ f1: "PASSED", p1: "FAILED" }, 1)).toBeUndefined();
    expect(untrustedRun({ f1: "PASSED" }, 0)).toBeUndefined();
    expect(untrustedRun({ f1: "PASSED" }, null)).toBeUndefined();
    expect(untrustedRun({}, 2)).toBeUndefined(); // nothing to believe: every test is missing, so failing
  });
});

describe("passAtK: the unbiased estimator 1 - C(n-c, k) / C(n, k)", () => {
  const choose = (n: number, k: number): number => (k < 0 || k > n ? 0 : k === 0 ? 1 : (choose(n - 1, k - 1) * n) / k);
  it("equals the estimator computed from binomials", () => {
    for (const [n, c, k] of [
      [5, 2, 1],
      [5, 2, 2],
      [5, 0, 3],
      [10, 3, 5],
      [4, 4, 4],
      [1, 1, 1],
    ] as const)
      expect(passAtK(n, c, k)).toBeCloseTo(1 - choose(n - c, k) / choose(n, k), 12);
    expect(passAtK(5, 2, 1)).toBeCloseTo(0.4, 12);
    expect(passAtK(5, 2, 2)).toBeCloseTo(0.7, 12);
  });
});

const account = (id: string, over: Partial<InstanceAccount> = {}): InstanceAccount => ({
  instance_id: id,
  outcome: "unresolved",
  candidates: 1,
  resolvedCandidates: 0,
  costUsd: 0.5,
  inputTokens: 100,
  outputTokens: 10,
  jobMs: 1_000,
  modelMs: 800,
  gradeMs: 300,
  harnessMs: 500,
  jobIds: [`${id}-job`],
  ...over,
});

function input(over: Partial<RunSummaryInput> = {}): RunSummaryInput {
  const graded: [string, GradeOutcome][] = [
    ["c-resolved", "resolved"],
    ["a-unresolved", "unresolved"],
    ["e-patch-failed", "patch_failed"],
    ["d-error", "error"],
    ["f-empty", "empty_patch"],
  ];
  return {
    run: "r1",
    model: "claude-x",
    candidates: 1,
    wallMs: 9_000,
    instanceIds: [
      "c-resolved",
      "a-unresolved",
      "e-patch-failed",
      "d-error",
      "f-empty",
      "g-null",
      "b-pending",
      "h-none",
    ],
    predictions: [
      ...graded.map(([id]) => ({ instance_id: id, model_patch: id === "f-empty" ? "" : "diff" })),
      { instance_id: "g-null", model_patch: null },
      { instance_id: "b-pending", model_patch: "diff" },
      { instance_id: "zz-not-in-set", model_patch: "diff" },
    ],
    graded: graded.map(([instance_id, outcome]) => ({ instance_id, outcome })),
    accounts: [
      account("c-resolved", { outcome: "resolved", resolvedCandidates: 1, costUsd: 1.5, harnessMs: 100 }),
      account("a-unresolved", { harnessMs: 300 }),
      account("b-pending", { outcome: "pending", harnessMs: 99_999 }),
    ],
    ...over,
  };
}

describe("runSummary: make_run_report's fields and patchbay's", () => {
  it("puts each instance in SWE-bench's lists: patch_failed and error are errors, a pending one incomplete", () => {
    const s = runSummary(input());
    expect(runSummaryProblems(s)).toEqual([]);
    const { patchbay, ...swe } = s;
    expect(swe).toEqual({
      total_instances: 8,
      submitted_instances: 8,
      completed_instances: 2,
      resolved_instances: 1,
      unresolved_instances: 1,
      empty_patch_instances: 2,
      error_instances: 2,
      completed_ids: ["a-unresolved", "c-resolved"],
      incomplete_ids: ["b-pending", "h-none"],
      empty_patch_ids: ["f-empty", "g-null"],
      submitted_ids: [
        "a-unresolved",
        "b-pending",
        "c-resolved",
        "d-error",
        "e-patch-failed",
        "f-empty",
        "g-null",
        "zz-not-in-set",
      ],
      resolved_ids: ["c-resolved"],
      unresolved_ids: ["a-unresolved"],
      error_ids: ["d-error", "e-patch-failed"],
      schema_version: 2,
    });
    expect(patchbay).toMatchObject({
      run: "r1",
      model: "claude-x",
      candidates: 1,
      costUsd: 2.5,
      inputTokens: 300,
      outputTokens: 30,
      wallMs: 9_000,
      costPerResolvedUsd: 2.5,
      passAtK: { "1": 0.5 },
      harnessMs: { median: 200, total: 400 },
    });
    expect(patchbay.instances.map((a) => a.instance_id)).toEqual(["c-resolved", "a-unresolved", "b-pending"]);
  });

  it("has no cost per resolved instance when none resolved, and pass@1 and pass@K over K candidates", () => {
    const s = runSummary(
      input({
        candidates: 4,
        graded: [{ instance_id: "a-unresolved", outcome: "unresolved" }],
        accounts: [
          account("a-unresolved", { candidates: 4, resolvedCandidates: 1 }),
          account("c-resolved", { candidates: 4, resolvedCandidates: 0 }),
        ],
      }),
    );
    expect(s.resolved_instances).toBe(0);
    expect(s.patchbay.costPerResolvedUsd).toBeNull();
    expect(s.patchbay.passAtK).toEqual({ "1": (0.25 + 0) / 2, "4": (1 + 0) / 2 });
  });

  it("reports best-of-K (the judge's pick resolved) beside pass@1 (resolved / K) and the oracle pass@K", () => {
    // Four judged instances of K = 4: the judge picked a resolving candidate in "a" (1 of 4 resolved)
    // and in "b" (4 of 4), a failing one in "c" (2 of 4 resolved: the oracle had one), none in "d".
    const judged = (
      id: string,
      resolvedCandidates: number,
      picked: number | null,
      outcome: InstanceAccount["outcome"],
    ) => account(id, { candidates: 4, resolvedCandidates, picked, outcome });
    const s = runSummary(
      input({
        candidates: 4,
        instanceIds: ["a", "b", "c", "d", "e"],
        predictions: [],
        graded: [],
        accounts: [
          judged("a", 1, 3, "resolved"),
          judged("b", 4, 1, "resolved"),
          judged("c", 2, 2, "unresolved"),
          judged("d", 0, null, "empty_patch"),
          judged("e", 0, 1, "pending"), // not finished: in no figure
        ],
      }),
    );
    expect(s.patchbay.passAtK).toEqual({ "1": (1 / 4 + 4 / 4 + 2 / 4 + 0) / 4, "4": 3 / 4 });
    expect(s.patchbay.bestOfK).toBe(2 / 4);
    expect(s.patchbay.judged).toBe(4);
    // pass@1 is the mean of resolved / K: the unbiased estimator at k = 1 is exactly that.
    for (const c of [0, 1, 2, 3, 4]) expect(passAtK(4, c, 1)).toBeCloseTo(c / 4, 12);
  });

  it("has no best-of-K where no verify judged an instance (independent candidates, or eval grade)", () => {
    const s = runSummary(input());
    expect(s.patchbay.bestOfK).toBeNull();
    expect(s.patchbay.judged).toBe(0);
    // An instance of independent candidates beside judged ones is left out of best-of-K's figure.
    const mixed = runSummary(
      input({
        candidates: 2,
        accounts: [
          account("a", { candidates: 2, resolvedCandidates: 2, outcome: "resolved" }),
          account("b", { candidates: 2, resolvedCandidates: 1, picked: 2, outcome: "unresolved" }),
        ],
      }),
    );
    expect(mixed.patchbay.bestOfK).toBe(0);
    expect(mixed.patchbay.judged).toBe(1);
  });

  it("is caught by the shape check when its keys leave SWE-bench's order or a count its list", () => {
    const s = runSummary(input());
    const { schema_version, ...rest } = s;
    expect(runSummaryProblems({ schema_version, ...rest })).toEqual(["keys out of order"]);
    expect(runSummaryProblems({ ...s, error_instances: 5 })).toEqual(["error_instances: not the length of error_ids"]);
    expect(runSummaryProblems({ ...s, infra: 1 })).not.toEqual([]);
  });
});
