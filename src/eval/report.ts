// Grading and summing as SWE-bench's harness does: an instance's report.json from its tests'
// statuses (swebench/harness/grading.py, get_eval_report and get_eval_tests_report), and a run's
// summary in make_run_report's schema_version 2 fields (swebench/harness/reporting.py) with
// patchbay's own under `patchbay`. Pure.
//
// Which SWE-bench: the report's and the summary's keys are v4.1.0's (726c546), the release the
// published results use; the grading of a test is v5.0.1's (87ab1f6), which closed a hole of
// v4.1.0's: there a skipped FAIL_TO_PASS test landed in neither list, so a patch that made every
// FAIL_TO_PASS test skip resolved the instance. v5.0.1's extra advisory fields (infra_failure and its
// reason, and five summary keys from its log classifier) are not written: patchbay has no classifier.
// Every instance is graded PASS_AND_FAIL (SWE-bench's FAIL_ONLY is for a few repos of its own).
import type {
  EvalInstance,
  EvalTotals,
  GradeOutcome,
  Graded,
  InstanceAccount,
  InstanceReport,
  Prediction,
  RunSummary,
  SuccessFailure,
  TestStatus,
} from "./types.js";

const PASSING: readonly TestStatus[] = ["PASSED", "XFAIL"];

/**
 * The status-map key for `test`: itself, or, for a parametrized id cut short in the set (more `[`
 * than `]`, as 676 ids of SWE-bench Verified are), the statuses' keys it starts when they all grade
 * alike (SWE-bench's _resolve_case).
 */
function keyOf(test: string, statuses: Record<string, TestStatus>): string | undefined {
  if (Object.hasOwn(statuses, test)) return test;
  if (test.split("[").length <= test.split("]").length) return undefined;
  const matches = Object.keys(statuses).filter((k) => k.startsWith(test));
  const outcomes = new Set(matches.map((k) => PASSING.includes(statuses[k]!)));
  return matches.length > 0 && outcomes.size === 1 ? matches[0] : undefined;
}

/** SWE-bench's test_passed: PASSED or XFAIL. */
const passed = (s: TestStatus | undefined) => s !== undefined && PASSING.includes(s);
/** test_failed: missing, FAILED, ERROR, or SKIPPED (a skipped FAIL_TO_PASS test is no resolution). */
const failed = (s: TestStatus | undefined) => s === undefined || s === "FAILED" || s === "ERROR" || s === "SKIPPED";
/** test_maintained: a PASS_TO_PASS test passed, or was skipped (a skip is no regression). */
const maintained = (s: TestStatus | undefined) => passed(s) || s === "SKIPPED";

function sort(
  tests: readonly string[],
  statuses: Record<string, TestStatus>,
  ok: (s: TestStatus | undefined) => boolean,
): SuccessFailure {
  const out: SuccessFailure = { success: [], failure: [] };
  for (const t of tests) {
    const key = keyOf(t, statuses);
    const s = key === undefined ? undefined : statuses[key];
    if (ok(s)) out.success.push(t);
    else if (failed(s)) out.failure.push(t);
  }
  return out;
}

/** Whether an instance is resolved, SWE-bench's FULL: every FAIL_TO_PASS and PASS_TO_PASS test passes (an empty list counts as all). */
export function isFull(tests: NonNullable<InstanceReport["tests_status"]>): boolean {
  const rate = (sf: SuccessFailure) => {
    const total = sf.success.length + sf.failure.length;
    return total === 0 ? 1 : sf.success.length / total;
  };
  return rate(tests.FAIL_TO_PASS) === 1 && rate(tests.PASS_TO_PASS) === 1;
}

/**
 * Why a test run's statuses cannot be graded, as SWE-bench v5.0.1's get_logs_eval judges: the
 * command exited non-zero while no test FAILED or ERRORed, so passing lines were printed that the
 * run did not have (a patch's conftest.py or test output can print them). undefined when they can
 * be graded (an exit code of null: not known). SWE-bench then reports the patch as not applied.
 */
export function untrustedRun(statuses: Record<string, TestStatus>, exitCode: number | null): string | undefined {
  if (exitCode === null || exitCode === 0) return undefined;
  const values = Object.values(statuses);
  if (values.length === 0 || values.some((s) => s === "FAILED" || s === "ERROR")) return undefined;
  return `the test command exited with ${exitCode} but its output names no failing test: its passing lines are not to be believed`;
}

/** What grading knew besides the statuses: the model patch (null: none), and whether the tests ran. */
export interface ReportInput {
  /** The model patch; null is SWE-bench's `patch_is_None` (an empty string is a patch that exists). */
  patch: string | null;
  /** The model patch and the test patch applied and the test command's output was read (SWE-bench's `patch_successfully_applied`, false when its log has no test output). */
  applied: boolean;
}

/**
 * An instance's report as SWE-bench's report.json holds it under the instance_id: tests_status only
 * when the tests ran; FAIL_TO_FAIL and PASS_TO_FAIL empty, as SWE-bench computes them by default.
 */
export function instanceReport(
  instance: Pick<EvalInstance, "FAIL_TO_PASS" | "PASS_TO_PASS">,
  statuses: Record<string, TestStatus>,
  { patch, applied }: ReportInput,
): InstanceReport {
  const base = { patch_is_None: patch === null, patch_exists: patch !== null, patch_successfully_applied: false };
  if (patch === null || !applied) return { ...base, resolved: false };
  const tests_status = {
    FAIL_TO_PASS: sort(instance.FAIL_TO_PASS, statuses, passed),
    PASS_TO_PASS: sort(instance.PASS_TO_PASS, statuses, maintained),
    FAIL_TO_FAIL: { success: [], failure: [] },
    PASS_TO_FAIL: { success: [], failure: [] },
  };
  return { ...base, patch_successfully_applied: true, resolved: isFull(tests_status), tests_status };
}

/** What a run summary is made of. */
export interface RunSummaryInput {
  /** The run's name. */
  run: string;
  /** The model it ran. */
  model: string;
  /** Candidates per instance (K). */
  candidates: number;
  /** From the first job's start to the last grade's end, ms. */
  wallMs: number;
  /** Every instance of the set, in its order (SWE-bench's full_dataset). */
  instanceIds: readonly string[];
  /** The predictions (each instance's first candidate's, or its picked one's), as preds.jsonl holds them. */
  predictions: readonly Pick<Prediction, "instance_id" | "model_patch">[];
  /** The grading of each instance's prediction graded so far. */
  graded: readonly Pick<Graded, "instance_id" | "outcome">[];
  /** patchbay's account of each instance. */
  accounts: readonly InstanceAccount[];
}

type Bucket = "resolved" | "unresolved" | "empty_patch" | "error" | "incomplete";

/**
 * Where an instance goes in SWE-bench's lists. No prediction and no grade: incomplete; an empty
 * patch ("" or null): empty_patch; resolved and unresolved: completed and so; patch_failed and
 * error: error (SWE-bench writes no report.json for a patch that does not apply, and counts every
 * prediction without one as an error). A prediction not graded yet is incomplete: SWE-bench sums a
 * run only once every prediction is graded.
 */
function bucketOf(p: Pick<Prediction, "model_patch"> | undefined, outcome: GradeOutcome | undefined): Bucket {
  if (p && (p.model_patch === null || p.model_patch === "")) return "empty_patch";
  if (outcome === "empty_patch") return "empty_patch";
  if (outcome === "resolved" || outcome === "unresolved") return outcome;
  if (outcome === "patch_failed" || outcome === "error") return "error";
  return "incomplete";
}

/** pass@k by the unbiased estimator 1 - C(n-c, k) / C(n, k), in its stable product form. */
export function passAtK(n: number, c: number, k: number): number {
  if (n - c < k) return 1;
  let miss = 1;
  for (let i = n - c + 1; i <= n; i++) miss *= 1 - k / i;
  return 1 - miss;
}

/** The median of `xs` (0 for none). */
function median(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function totals(input: RunSummaryInput, resolved: number): EvalTotals {
  const sum = (f: (a: InstanceAccount) => number) => input.accounts.reduce((n, a) => n + f(a), 0);
  const costUsd = sum((a) => a.costUsd);
  const ks = [...new Set([1, input.candidates])];
  // pass@k averages over the instances that ran at least k candidates (one still running has not).
  const passAt = Object.fromEntries(
    ks.map((k) => {
      const ran = input.accounts.filter((a) => a.outcome !== "pending" && a.candidates >= k);
      const total = ran.reduce((n, a) => n + passAtK(a.candidates, a.resolvedCandidates, k), 0);
      return [String(k), ran.length > 0 ? total / ran.length : 0];
    }),
  );
  // best-of-K: the judged instances whose picked candidate (their prediction) resolved.
  const judged = input.accounts.filter((a) => a.picked !== undefined && a.outcome !== "pending");
  const picksResolved = judged.filter((a) => a.outcome === "resolved").length;
  const harness = input.accounts.filter((a) => a.outcome !== "pending").map((a) => a.harnessMs);
  return {
    run: input.run,
    model: input.model,
    candidates: input.candidates,
    costUsd,
    inputTokens: sum((a) => a.inputTokens),
    outputTokens: sum((a) => a.outputTokens),
    wallMs: input.wallMs,
    costPerResolvedUsd: resolved > 0 ? costUsd / resolved : null,
    passAtK: passAt,
    bestOfK: judged.length > 0 ? picksResolved / judged.length : null,
    judged: judged.length,
    harnessMs: { median: median(harness), total: harness.reduce((n, x) => n + x, 0) },
    instances: [...input.accounts],
  };
}

/** A run's summary: SWE-bench's make_run_report fields, in its order (ids sorted), then patchbay's. */
export function runSummary(input: RunSummaryInput): RunSummary {
  const preds = new Map(input.predictions.map((p) => [p.instance_id, p]));
  const outcomes = new Map(input.graded.map((g) => [g.instance_id, g.outcome]));
  const ids: Record<Bucket, string[]> = { resolved: [], unresolved: [], empty_patch: [], error: [], incomplete: [] };
  for (const id of input.instanceIds) ids[bucketOf(preds.get(id), outcomes.get(id))].push(id);
  const sorted = (xs: Iterable<string>) => [...xs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const completed = [...ids.resolved, ...ids.unresolved];
  return {
    total_instances: input.instanceIds.length,
    submitted_instances: preds.size,
    completed_instances: completed.length,
    resolved_instances: ids.resolved.length,
    unresolved_instances: ids.unresolved.length,
    empty_patch_instances: ids.empty_patch.length,
    error_instances: ids.error.length,
    completed_ids: sorted(completed),
    incomplete_ids: sorted(ids.incomplete),
    empty_patch_ids: sorted(ids.empty_patch),
    submitted_ids: sorted(preds.keys()),
    resolved_ids: sorted(ids.resolved),
    unresolved_ids: sorted(ids.unresolved),
    error_ids: sorted(ids.error),
    schema_version: 2,
    patchbay: totals(input, ids.resolved.length),
  };
}
