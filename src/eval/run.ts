// `patchbay eval run`: a task set through the workers, graded here. Each instance becomes K jobs
// (task.ts) in one batch named after the run, so the batch's budget, progress, retry and dashboard
// hold for an eval too, and submitting it again adds nothing. As each job ends its patch is graded
// in a sandbox of this host's (grade.ts), a few at a time while the other jobs still run; its files
// go under the run's directory (run-files.ts), and a candidate graded before (same job, same patch)
// is not graded again. Then the run's summary: SWE-bench's fields, cost, tokens, harness overhead.
import { join } from "node:path";
import type { BatchClient } from "../batch/batches.js";
import { writeOwn } from "../core/out-files.js";
import { emptyResult, type JobResult, type TranscriptEvent } from "../core/spec/spec.js";
import { gradePrediction } from "./grade.js";
import { runSummary } from "./report.js";
import { candidateDir, gradedBefore, writeGraded, writeRunFiles, type GradeRecord } from "./run-files.js";
import { evalSpecs, lineOf } from "./task.js";
import type { EvalInstance, Graded, InstanceAccount, Prediction, RunSummary } from "./types.js";

/** Grades one prediction (gradePrediction, or a test's own). */
export type GradeFn = (instance: EvalInstance, pred: Prediction) => Promise<Graded>;

/** How runEval runs a set. */
export interface EvalRunOptions {
  /** The run's name: its batch is `eval-<name>`, its files go to `out`. */
  name: string;
  /** The set's instances (their repos resolved: URLs or absolute paths). */
  instances: EvalInstance[];
  /** The run's directory. */
  out: string;
  /** The model the jobs use (default: the workers'). */
  model?: string;
  /** Candidates per instance (K). @default 1 */
  candidates?: number;
  /** The batch's shared budget, USD. */
  budgetUsd?: number;
  /** Predictions graded at once on this host. @default 2 */
  gradeConcurrency?: number;
  /** @default gradePrediction with the process's configuration */
  grade?: GradeFn;
  /** Called once the batch is submitted: how many jobs this call added of how many. */
  onSubmitted?: (s: { batchId: string; added: number; total: number }) => void;
  /**
   * Called with the summary so far after each grade (at most every 2 s) and once at the end, e.g. to
   * save it where the dashboard reads it (src/eval/store.ts); awaited only at the end.
   */
  onSummary?: (s: RunSummary, batchId: string) => Promise<unknown>;
  /** Called as the run goes: a job ended, a candidate was graded (or found graded before). */
  onProgress?: (p: EvalProgress) => void;
  /** Ends the wait (the batch runs on; a later run picks up where this one stopped). */
  signal?: AbortSignal;
}

/** One step of a run, for a progress line. */
export interface EvalProgress {
  instance_id: string;
  candidate: number;
  jobId: string;
  /** What grading came to ("before": graded by an earlier run). */
  outcome: Graded["outcome"];
  before: boolean;
  graded: number;
  total: number;
}

interface Done {
  rec: GradeRecord;
  result: JobResult;
  modelMs: number;
}

/** Runs the set and resolves to its summary (also written to `out`/summary.json). */
export async function runEval(b: BatchClient, o: EvalRunOptions): Promise<RunSummary & { batchId: string }> {
  const t0 = Date.now();
  const K = o.candidates ?? 1;
  const specs = evalSpecs(o.instances, { model: o.model, candidates: K });
  const { batchId, added } = await b.submit(specs, {
    name: `eval-${o.name}`,
    ...(o.budgetUsd !== undefined ? { budgetUsd: o.budgetUsd } : {}),
  });
  o.onSubmitted?.({ batchId, added, total: specs.length });
  const grade: GradeFn = o.grade ?? ((inst, pred) => gradePrediction(inst, pred, { signal: o.signal }));
  const done = new Map<number, Done>(); // by line
  const todo: { line: number; jobId: string }[] = [];
  const seen = new Set<number>();
  const sleepers: (() => void)[] = []; // graders waiting for a job to end
  const wake = () => sleepers.splice(0).forEach((r) => r());
  const add = (line: number, jobId: string) => {
    if (seen.has(line)) return;
    seen.add(line);
    todo.push({ line, jobId });
    wake();
  };
  const one = async (line: number, jobId: string) => {
    const { index, candidate } = lineOf(line, K);
    const inst = o.instances[index]!;
    const d = await gradeOne(b, o, grade, inst, candidate, jobId);
    done.set(line, d);
    o.onProgress?.({
      instance_id: inst.instance_id,
      candidate,
      jobId,
      outcome: d.rec.outcome,
      before: d.before,
      graded: done.size,
      total: specs.length,
    });
    if (o.onSummary && Date.now() - savedAt >= 2000) {
      savedAt = Date.now();
      void o.onSummary(summarize(o, K, done, savedAt - t0), batchId).catch(() => {}); // the end's save says why
    }
  };
  let savedAt = 0;
  let waiting = true;
  const graders = Array.from({ length: o.gradeConcurrency ?? 2 }, async () => {
    for (;;) {
      const next = todo.shift();
      if (next) await one(next.line, next.jobId);
      else if (!waiting) return;
      else await new Promise<void>((r) => sleepers.push(r));
    }
  });
  let createdAt: number;
  try {
    const st = await b.wait(batchId, {
      signal: o.signal,
      onProgress: (p) => p.finished.forEach((f) => add(f.result.line, f.jobId)),
    });
    createdAt = st.createdAt;
    for (const j of (await b.status(st.batchId, { jobs: true })).jobs ?? []) add(j.line, j.jobId);
  } finally {
    waiting = false;
    wake();
    await Promise.all(graders);
  }
  // From the batch's submit to the last grade, whichever run made them (a rerun grades nothing anew).
  const lastGrade = Math.max(0, ...[...done.values()].map((d) => d.rec.gradedAt ?? 0));
  const summary = summarize(o, K, done, Math.max(0, (lastGrade || Date.now()) - Math.min(createdAt, t0)));
  writeRunFiles(o.out, predsOf(o, K, done), summary);
  await o.onSummary?.(summary, batchId);
  return { ...summary, batchId };
}

/** Grades one candidate's job (or takes its grade from an earlier run), writing its files. */
async function gradeOne(
  b: BatchClient,
  o: EvalRunOptions,
  grade: GradeFn,
  inst: EvalInstance,
  candidate: number,
  jobId: string,
): Promise<Done & { before: boolean }> {
  const result = await b.c.result(jobId);
  if (!result) {
    const error = `the job ${jobId} has no result in the queue (removed?): retry the run's batch (patchbay batch retry eval-${o.name})`;
    return { rec: unrecorded(inst, jobId, error), result: emptyResult("failed", error), modelMs: 0, before: false };
  }
  const events: TranscriptEvent[] = [];
  for await (const e of b.c.watch(jobId, { follow: false })) events.push(e);
  const modelMs = events.reduce((ms, e) => ms + (e.type === "model_response" ? e.ms : 0), 0);
  const dir = candidateDir(o.out, inst.instance_id, candidate);
  writeOwn(join(dir, "result.json"), JSON.stringify(result, null, 2) + "\n");
  writeOwn(join(dir, "transcript.jsonl"), events.map((e) => JSON.stringify(e) + "\n").join(""));
  const before = gradedBefore(dir, jobId, result.patch, inst);
  if (before) return { rec: before, result, modelMs, before: true };
  const pred = { instance_id: inst.instance_id, model_patch: result.patch, model_name_or_path: modelName(o, result) };
  // The host's own failure (its engine gone, say) is this candidate's error, recorded nowhere: the next run grades it again.
  const g = await grade(inst, pred).catch((err: Error) => err);
  if (g instanceof Error)
    return { rec: unrecorded(inst, jobId, `grading failed: ${g.message}`), result, modelMs, before: false };
  return { rec: writeGraded(dir, g, jobId, result.patch, inst), result, modelMs, before: false };
}

/** An error outcome kept in memory only (no grade.json): the next run grades the candidate again. */
function unrecorded(inst: EvalInstance, jobId: string, error: string): GradeRecord {
  const report = { patch_is_None: false, patch_exists: false, patch_successfully_applied: false, resolved: false };
  return {
    instance_id: inst.instance_id,
    outcome: "error",
    report,
    statuses: {},
    error,
    ms: 0,
    jobId,
    patchSha256: "",
    instanceSha256: "",
  };
}

const modelName = (o: EvalRunOptions, r?: JobResult) => o.model ?? r?.model ?? "patchbay";

/** The first candidate's prediction per instance that has one. */
function predsOf(o: EvalRunOptions, K: number, done: Map<number, Done>): Prediction[] {
  return o.instances.flatMap((inst, i) => {
    const d = done.get(i * K + 1);
    return d
      ? [{ instance_id: inst.instance_id, model_patch: d.result.patch, model_name_or_path: modelName(o, d.result) }]
      : [];
  });
}

function summarize(o: EvalRunOptions, K: number, done: Map<number, Done>, wallMs: number): RunSummary {
  const accounts: InstanceAccount[] = [];
  o.instances.forEach((inst, i) => {
    const ds = Array.from({ length: K }, (_, c) => done.get(i * K + c + 1));
    const got = ds.filter((d): d is Done => d !== undefined);
    if (!got.length) return;
    const jobMs = sum(got.map((d) => d.result.timings.totalMs));
    const modelMs = sum(got.map((d) => d.modelMs));
    const gradeMs = sum(got.map((d) => d.rec.ms));
    accounts.push({
      instance_id: inst.instance_id,
      outcome: ds[0]?.rec.outcome ?? "pending",
      candidates: got.length,
      resolvedCandidates: got.filter((d) => d.rec.outcome === "resolved").length,
      costUsd: sum(got.map((d) => d.result.costUsd)),
      inputTokens: sum(got.map((d) => d.result.usage.inputTokens)),
      outputTokens: sum(got.map((d) => d.result.usage.outputTokens)),
      jobMs,
      modelMs,
      gradeMs,
      harnessMs: Math.max(0, jobMs - modelMs) + gradeMs,
      jobIds: got.map((d) => d.rec.jobId),
    });
  });
  return runSummary({
    run: o.name,
    model: o.model ?? got1Model(done) ?? "patchbay",
    candidates: K,
    instanceIds: o.instances.map((i) => i.instance_id),
    predictions: predsOf(o, K, done),
    graded: o.instances.flatMap((inst, i) => {
      const d = done.get(i * K + 1);
      return d ? [{ instance_id: inst.instance_id, outcome: d.rec.outcome }] : [];
    }),
    accounts,
    wallMs,
  });
}

const got1Model = (done: Map<number, Done>) => [...done.values()][0]?.result.model;
const sum = (xs: number[]) => xs.reduce((a, x) => a + x, 0);
