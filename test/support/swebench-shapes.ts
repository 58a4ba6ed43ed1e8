// The files SWE-bench's harness writes, as zod schemas, to check that patchbay's are the same shape:
// an instance's report.json (swebench/harness/grading.py, get_eval_report, written by
// swebench/harness/run_evaluation.py) and the run's summary (swebench/harness/reporting.py,
// make_run_report). Read at SWE-bench's tag v4.1.0, commit 726c546 (github.com/SWE-bench/SWE-bench):
// the keys, their order and their types as those functions build them. v5.0.1 (87ab1f6) adds
// advisory keys from a log classifier (report: infra_failure, infra_failure_reason; summary:
// infra_failure_instances, ambiguous_failure_instances, infra_failure_ids, ambiguous_failure_ids,
// failure_reasons) that patchbay does not write. The summary's `patchbay` key is patchbay's own
// (src/eval/types.ts, EvalTotals); SWE-bench's readers take the keys they know.
import { z } from "zod";

const Ids = z.array(z.string());
const SuccessFailure = z.strictObject({ success: Ids, failure: Ids });

/** The object under an instance_id in report.json: get_eval_report's report_map[instance_id]. */
export const InstanceReportShape = z.strictObject({
  patch_is_None: z.boolean(),
  patch_exists: z.boolean(),
  patch_successfully_applied: z.boolean(),
  resolved: z.boolean(),
  /** Present when the test log was found (include_tests_status is true in run_instance). */
  tests_status: z
    .strictObject({
      FAIL_TO_PASS: SuccessFailure,
      PASS_TO_PASS: SuccessFailure,
      FAIL_TO_FAIL: SuccessFailure,
      PASS_TO_FAIL: SuccessFailure,
    })
    .optional(),
});

/** report.json: `{ [instance_id]: report }`, one instance. */
export const ReportJsonShape = z
  .record(z.string(), InstanceReportShape)
  .refine((r) => Object.keys(r).length === 1, { error: "report.json holds exactly one instance" });

/** The keys of report.json's inner object, in the order get_eval_report sets them. */
export const REPORT_KEYS = ["patch_is_None", "patch_exists", "patch_successfully_applied", "resolved", "tests_status"];

/** make_run_report's report dict, without the keys it adds only when given a Docker client. */
export const RunSummaryShape = z.strictObject({
  total_instances: z.int().nonnegative(),
  submitted_instances: z.int().nonnegative(),
  completed_instances: z.int().nonnegative(),
  resolved_instances: z.int().nonnegative(),
  unresolved_instances: z.int().nonnegative(),
  empty_patch_instances: z.int().nonnegative(),
  error_instances: z.int().nonnegative(),
  completed_ids: Ids,
  incomplete_ids: Ids,
  empty_patch_ids: Ids,
  submitted_ids: Ids,
  resolved_ids: Ids,
  unresolved_ids: Ids,
  error_ids: Ids,
  schema_version: z.literal(2),
  /** patchbay's own: checked by src/eval/types.ts's EvalTotals, not by SWE-bench. */
  patchbay: z.unknown(),
});

/** The summary's keys in make_run_report's order (Python dicts keep it, and json.dumps writes it). */
export const RUN_SUMMARY_KEYS = Object.keys(RunSummaryShape.shape);

/**
 * Problems of `summary` against make_run_report's: the shape, the keys' order, each id list sorted
 * (it writes `sorted(...)`), and each count the length of its list.
 */
export function runSummaryProblems(summary: unknown): string[] {
  const r = RunSummaryShape.safeParse(summary);
  if (!r.success) return r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  const s = r.data;
  const problems: string[] = [];
  if (Object.keys(summary as object).join() !== RUN_SUMMARY_KEYS.join()) problems.push("keys out of order");
  for (const key of RUN_SUMMARY_KEYS.filter((k) => k.endsWith("_ids"))) {
    const ids = s[key as keyof typeof s] as string[];
    if (ids.join("\n") !== [...ids].sort().join("\n")) problems.push(`${key}: not sorted`);
  }
  const counts: [keyof typeof s, keyof typeof s][] = [
    ["completed_instances", "completed_ids"],
    ["resolved_instances", "resolved_ids"],
    ["unresolved_instances", "unresolved_ids"],
    ["empty_patch_instances", "empty_patch_ids"],
    ["error_instances", "error_ids"],
    ["submitted_instances", "submitted_ids"],
  ];
  for (const [n, ids] of counts)
    if (s[n] !== (s[ids] as string[]).length) problems.push(`${String(n)}: not the length of ${String(ids)}`);
  return problems;
}

/** Problems of a report.json value: its shape, and its inner keys in get_eval_report's order. */
export function reportJsonProblems(report: unknown): string[] {
  const r = ReportJsonShape.safeParse(report);
  if (!r.success) return r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  const inner = Object.values(r.data)[0]!;
  const keys = Object.keys(inner);
  return keys.join() === REPORT_KEYS.filter((k) => k in inner).join() ? [] : ["keys out of order"];
}
