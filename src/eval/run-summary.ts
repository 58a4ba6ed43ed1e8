// An eval run's state as run.ts grades it, summed (report.ts) into the run's summary: each
// instance's account (its candidates' grades, spend and times; for a job that judged its
// candidates, the one it picked) and SWE-bench's one prediction per instance: the first
// candidate's, or the picked one's where a verify judged them. Pure.
import { runSummary } from "./report.js";
import type { Done, Judged } from "./run-grade.js";
import { modelName } from "./run-grade.js";
import type { EvalPlan } from "./task.js";
import type { EvalInstance, GradeOutcome, InstanceAccount, Prediction, RunSummary } from "./types.js";

/** What a run has so far: its options, K, its batch's plan, each candidate graded, each judged job read. */
export interface RunState {
  o: { name: string; instances: EvalInstance[]; model?: string };
  K: number;
  plan: EvalPlan;
  /** Each graded candidate, keyed `<instance index>:<candidate>` (both 0-based). */
  done: Map<string, Done>;
  /** Each judged job read, by instance index. */
  judged: Map<number, Judged>;
}

const sum = (xs: number[]) => xs.reduce((a, x) => a + x, 0);

/** The key of an instance's candidate (both 0-based) in a run's `done`. */
export const doneKey = (index: number, candidate: number) => `${index}:${candidate}`;

/** Instance `i`'s K candidates in order, each graded or not yet. */
const candidatesOf = (st: RunState, i: number) => Array.from({ length: st.K }, (_, c) => st.done.get(doneKey(i, c)));

/**
 * Instance `i`'s prediction, its grade's outcome, and (judged) the number picked: the first
 * candidate's; where a verify judged them, the picked one's, or an empty patch when the job picked
 * none. undefined while the job that makes it has not ended.
 */
function predictionOf(
  st: RunState,
  i: number,
): { patch: string; outcome: GradeOutcome | "pending"; result?: Done["result"]; picked?: number | null } | undefined {
  const ds = candidatesOf(st, i);
  const judged = st.plan.lines.some((l) => l.index === i && l.judged);
  if (!judged)
    return ds[0] ? { patch: ds[0].result.patch, outcome: ds[0].rec.outcome, result: ds[0].result } : undefined;
  const j = st.judged.get(i);
  if (!j) return undefined;
  if (j.picked === null) return { patch: "", outcome: "empty_patch", result: j.result, picked: null };
  const d = ds[j.picked - 1];
  return {
    patch: d?.result.patch ?? j.result.patch,
    outcome: d?.rec.outcome ?? "pending",
    result: j.result,
    picked: j.picked,
  };
}

/** Each instance's prediction where it has one, as preds.jsonl holds them. */
export function predsOf(st: RunState): Prediction[] {
  return st.o.instances.flatMap((inst, i) => {
    const p = predictionOf(st, i);
    return p
      ? [{ instance_id: inst.instance_id, model_patch: p.patch, model_name_or_path: modelName(st.o, p.result) }]
      : [];
  });
}

/** Instance `i`'s account, or undefined while nothing of it has ended. */
function accountOf(st: RunState, inst: EvalInstance, i: number): InstanceAccount | undefined {
  const got = candidatesOf(st, i).filter((d): d is Done => d !== undefined);
  const p = predictionOf(st, i);
  if (!got.length && !p) return undefined;
  const judged = st.judged.get(i);
  // A judged job's result sums its candidates' cost and tokens, those whose results are gone too.
  const costUsd = judged ? judged.result.costUsd : sum(got.map((d) => d.result.costUsd));
  const usage = judged ? [judged.result.usage] : got.map((d) => d.result.usage);
  const jobMs = sum(got.map((d) => d.result.timings.totalMs));
  const modelMs = sum(got.map((d) => d.modelMs));
  const gradeMs = sum(got.map((d) => d.rec.ms));
  return {
    instance_id: inst.instance_id,
    outcome: p?.outcome ?? "pending",
    candidates: got.length,
    resolvedCandidates: got.filter((d) => d.rec.outcome === "resolved").length,
    costUsd,
    inputTokens: sum(usage.map((u) => u.inputTokens)),
    outputTokens: sum(usage.map((u) => u.outputTokens)),
    jobMs,
    modelMs,
    gradeMs,
    harnessMs: Math.max(0, jobMs - modelMs) + gradeMs,
    jobIds: got.map((d) => d.rec.jobId),
    ...(p?.picked !== undefined ? { picked: p.picked } : {}),
  };
}

/** The run's summary so far (`wallMs`: its wall time until now). */
export function summarize(st: RunState, wallMs: number): RunSummary {
  const accounts = st.o.instances.flatMap((inst, i) => accountOf(st, inst, i) ?? []);
  const first = [...st.done.values()][0]?.result.model;
  return runSummary({
    run: st.o.name,
    model: st.o.model ?? first ?? "patchbay",
    candidates: st.K,
    instanceIds: st.o.instances.map((i) => i.instance_id),
    predictions: predsOf(st),
    graded: accounts.flatMap((a) =>
      a.outcome === "pending" ? [] : [{ instance_id: a.instance_id, outcome: a.outcome }],
    ),
    accounts,
    wallMs,
  });
}
