// `patchbay eval grade`: predictions graded alone, with no queue and no worker, as SWE-bench's
// run_evaluation does: each prediction in a sandbox of this host's (grade.ts), a few at a time,
// its files under the run's directory as run.ts writes them, and a prediction graded before (same
// patch) taken as it was. The summary has no cost: no job ran.
import { gradePrediction } from "./grade.js";
import { runSummary } from "./report.js";
import { candidateDir, gradedBefore, writeGraded, writeRunFiles, type GradeRecord } from "./run-files.js";
import type { EvalInstance, Graded, InstanceAccount, Prediction, RunSummary } from "./types.js";

/** What gradeSet grades, and where its files go. */
export interface GradeSetOptions {
  name: string;
  instances: EvalInstance[];
  preds: Prediction[];
  out: string;
  /** @default 2 */
  concurrency?: number;
  /** @default gradePrediction with the process's configuration */
  grade?: (instance: EvalInstance, pred: Prediction) => Promise<Graded>;
  /** Called after each prediction, with how many are done of how many. */
  onGraded?: (g: Pick<Graded, "instance_id" | "outcome">, n: number, total: number) => void;
}

/** Grades every prediction whose instance is in the set; a prediction of no instance of the set is an error named. */
export async function gradeSet(o: GradeSetOptions): Promise<RunSummary> {
  const t0 = Date.now();
  const byId = new Map(o.instances.map((i) => [i.instance_id, i]));
  const unknown = o.preds.filter((p) => !byId.has(p.instance_id)).map((p) => p.instance_id);
  if (unknown.length)
    throw new Error(
      `predictions for instances the set does not have: ${unknown.slice(0, 10).join(", ")}${unknown.length > 10 ? ", …" : ""}`,
    );
  const grade = o.grade ?? ((i, p) => gradePrediction(i, p));
  const todo = [...o.preds];
  const recs = new Map<string, GradeRecord>();
  await Promise.all(
    Array.from({ length: o.concurrency ?? 2 }, async () => {
      for (let p = todo.shift(); p; p = todo.shift()) {
        const inst = byId.get(p.instance_id)!;
        const dir = candidateDir(o.out, inst.instance_id, 0);
        const patch = p.model_patch ?? "";
        const rec = gradedBefore(dir, "", patch, inst) ?? writeGraded(dir, await grade(inst, p), "", patch, inst);
        recs.set(inst.instance_id, rec);
        o.onGraded?.(rec, recs.size, o.preds.length);
      }
    }),
  );
  const accounts: InstanceAccount[] = [...recs.values()].map((r) => ({
    instance_id: r.instance_id,
    outcome: r.outcome,
    candidates: 1,
    resolvedCandidates: r.outcome === "resolved" ? 1 : 0,
    costUsd: 0,
    inputTokens: 0,
    outputTokens: 0,
    jobMs: 0,
    modelMs: 0,
    gradeMs: r.ms,
    harnessMs: r.ms,
    jobIds: [],
  }));
  const summary = runSummary({
    run: o.name,
    model: o.preds[0]?.model_name_or_path ?? "unknown",
    candidates: 1,
    instanceIds: o.instances.map((i) => i.instance_id),
    predictions: o.preds,
    graded: [...recs.values()],
    accounts,
    wallMs: Date.now() - t0,
  });
  writeRunFiles(o.out, o.preds, summary);
  return summary;
}
