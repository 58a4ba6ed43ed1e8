// A made-up eval run summary (src/eval/types.ts RunSummary) for the tests of the eval store and the
// dashboard's eval pages: instances with the given ids and outcomes, their spend and times, and the
// totals summed from them as report.ts would.
import type { GradeOutcome, InstanceAccount, RunSummary } from "../../src/eval/types.js";

/** One instance's account: `outcome`, its candidates' jobs, spend and times from `i`. */
export function account(id: string, outcome: GradeOutcome, i: number, candidates = 1): InstanceAccount {
  return {
    instance_id: id,
    outcome,
    candidates,
    resolvedCandidates: outcome === "resolved" ? candidates : 0,
    costUsd: 0.25 * (i + 1),
    inputTokens: 1000 * (i + 1),
    outputTokens: 100 * (i + 1),
    jobMs: 2000 + i,
    modelMs: 1500,
    gradeMs: 300,
    harnessMs: 800 + i,
    jobIds: Array.from({ length: candidates }, (_, c) => `${id.slice(0, 40)}-job-${c}`),
  };
}

/** A run of `accounts`, its SWE-bench fields and patchbay's totals summed from them. */
export function runSummary(run: string, accounts: InstanceAccount[], model = "claude-test"): RunSummary {
  const ids = (o: GradeOutcome) => accounts.filter((a) => a.outcome === o).map((a) => a.instance_id);
  const all = accounts.map((a) => a.instance_id);
  const resolved = ids("resolved");
  const costUsd = accounts.reduce((s, a) => s + a.costUsd, 0);
  return {
    total_instances: all.length,
    submitted_instances: all.length,
    completed_instances: all.length - ids("empty_patch").length - ids("error").length,
    resolved_instances: resolved.length,
    unresolved_instances: ids("unresolved").length + ids("patch_failed").length,
    empty_patch_instances: ids("empty_patch").length,
    error_instances: ids("error").length,
    completed_ids: all.filter((id) => !ids("empty_patch").includes(id) && !ids("error").includes(id)),
    incomplete_ids: [],
    empty_patch_ids: ids("empty_patch"),
    submitted_ids: all,
    resolved_ids: resolved,
    unresolved_ids: [...ids("unresolved"), ...ids("patch_failed")],
    error_ids: ids("error"),
    schema_version: 2,
    patchbay: {
      run,
      model,
      candidates: accounts[0]?.candidates ?? 1,
      costUsd,
      inputTokens: accounts.reduce((s, a) => s + a.inputTokens, 0),
      outputTokens: accounts.reduce((s, a) => s + a.outputTokens, 0),
      wallMs: 60_000,
      costPerResolvedUsd: resolved.length ? costUsd / resolved.length : null,
      passAtK: {
        "1": all.length ? resolved.length / all.length : 0,
        [String(accounts[0]?.candidates ?? 1)]: all.length ? resolved.length / all.length : 0,
      },
      harnessMs: { median: 800, total: accounts.reduce((s, a) => s + a.harnessMs, 0) },
      instances: accounts,
    },
  };
}
