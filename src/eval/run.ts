// `patchbay eval run`: a task set through the workers, graded here. Each instance becomes K jobs
// (task.ts) in one batch named after the run, so the batch's budget, progress, retry and dashboard
// hold for an eval too, and submitting it again adds nothing; or, where the instance has a verify
// command, one job that runs its K candidates itself and picks one by verify. As each job ends its
// patch (a judged job: each of its candidates' patches) is graded in a sandbox of this host's
// (grade.ts, via run-grade.ts), a few at a time while the other jobs still run; its files go under
// the run's directory (run-files.ts), and a candidate graded before (same job, same patch) is not
// graded again. Then the run's summary (run-summary.ts): SWE-bench's fields, pass@1, best-of-K,
// pass@K, cost, tokens, harness overhead.
import type { BatchClient } from "../batch/batches.js";
import { candidateJobId } from "../core/candidate-id.js";
import { gradePrediction } from "./grade.js";
import { writePicked, writeRunFiles } from "./run-files.js";
import { gradeOne, readJudged, type GradeFn, type Judged } from "./run-grade.js";
import { doneKey, predsOf, summarize, type RunState } from "./run-summary.js";
import { evalPlan, type EvalLine } from "./task.js";
import type { EvalInstance, Graded, RunSummary } from "./types.js";

export type { GradeFn } from "./run-grade.js";

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
  /** The verify command of every instance that names none (`--verify`): with K > 1 it judges the K candidates. */
  verify?: string;
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
  /** The candidate, from 0. */
  candidate: number;
  jobId: string;
  /** Set for a candidate of a job that judged them: whether the job picked it. */
  picked?: boolean;
  /** What grading came to ("before": graded by an earlier run). */
  outcome: Graded["outcome"];
  before: boolean;
  graded: number;
  total: number;
}

/**
 * What the graders do next: read a job that judged its candidates (which then queues them), or
 * grade a candidate (0-based) of an instance (`numbered`: it is a judged job's).
 */
type Task =
  | { kind: "judged"; index: number; jobId: string }
  | { kind: "grade"; index: number; candidate: number; jobId: string; numbered: boolean };

/** The task of a line's job as it ends. */
const taskOf = (line: EvalLine, jobId: string): Task =>
  line.judged
    ? { kind: "judged", index: line.index, jobId }
    : { kind: "grade", index: line.index, candidate: line.candidate, jobId, numbered: false };

/** Runs the set and resolves to its summary (also written to `out`/summary.json). */
export async function runEval(b: BatchClient, o: EvalRunOptions): Promise<RunSummary & { batchId: string }> {
  const t0 = Date.now();
  const K = o.candidates ?? 1;
  const plan = evalPlan(o.instances, { model: o.model, candidates: K, verify: o.verify });
  const { batchId, added } = await b.submit(plan.specs, {
    name: `eval-${o.name}`,
    ...(o.budgetUsd !== undefined ? { budgetUsd: o.budgetUsd } : {}),
  });
  o.onSubmitted?.({ batchId, added, total: plan.specs.length });
  const st: RunState = { o, K, plan, done: new Map(), judged: new Map() };
  let createdAt: number;
  const graders = startGraders(b, st, o, { batchId, t0 });
  try {
    const end = await b.wait(batchId, {
      signal: o.signal,
      onProgress: (p) => p.finished.forEach((f) => graders.add(f.result.line, f.jobId)),
    });
    createdAt = end.createdAt;
    for (const j of (await b.status(end.batchId, { jobs: true })).jobs ?? []) graders.add(j.line, j.jobId);
  } finally {
    await graders.end();
  }
  writeJudgedPredictions(st, o.out);
  // From the batch's submit to the last grade, whichever run made them (a rerun grades nothing anew).
  const lastGrade = Math.max(0, ...[...st.done.values()].map((d) => d.rec.gradedAt ?? 0));
  const summary = summarize(st, Math.max(0, (lastGrade || Date.now()) - Math.min(createdAt, t0)));
  writeRunFiles(o.out, predsOf(st), summary);
  await o.onSummary?.(summary, batchId);
  return { ...summary, batchId };
}

/**
 * The graders: `add` queues a line's job as it ends (once per line), `end` says no more will come
 * and resolves once every queued job is graded. A judged job's line is read first (the candidate it
 * picked), then its K candidates are queued as jobs of their own.
 */
function startGraders(
  b: BatchClient,
  st: RunState,
  o: EvalRunOptions,
  { batchId, t0 }: { batchId: string; t0: number },
) {
  const { K } = st;
  const grade: GradeFn = o.grade ?? ((inst, pred) => gradePrediction(inst, pred, { signal: o.signal }));
  const run = { name: o.name, out: o.out, ...(o.model ? { model: o.model } : {}) };
  const todo: Task[] = [];
  const seen = new Set<number>();
  const sleepers: (() => void)[] = []; // graders waiting for a job to end
  const wake = () => sleepers.splice(0).forEach((r) => r());
  let waiting = true;
  let reading = 0; // judged jobs being read: each adds its candidates after
  let savedAt = 0;
  const total = o.instances.length * K;
  const one = async (t: Task) => {
    const inst = o.instances[t.index]!;
    if (t.kind === "judged") {
      const j: Judged = await readJudged(b, { inst, jobId: t.jobId, run }, K);
      st.judged.set(t.index, j);
      for (let c = 0; c < K; c++)
        todo.push({
          kind: "grade",
          index: t.index,
          candidate: c,
          jobId: candidateJobId(t.jobId, c + 1),
          numbered: true,
        });
      return;
    }
    const { candidate, jobId } = t;
    const d = await gradeOne(b, grade, { inst, candidate, jobId, run, numbered: t.numbered });
    st.done.set(doneKey(t.index, candidate), d);
    const picked = t.numbered ? st.judged.get(t.index)?.picked === candidate + 1 : undefined;
    o.onProgress?.({
      instance_id: inst.instance_id,
      candidate,
      jobId,
      ...(picked !== undefined ? { picked } : {}),
      outcome: d.rec.outcome,
      before: d.before,
      graded: st.done.size,
      total,
    });
    if (o.onSummary && Date.now() - savedAt >= 2000) {
      savedAt = Date.now();
      void o.onSummary(summarize(st, savedAt - t0), batchId).catch(() => {}); // the end's save says why
    }
  };
  const workers = Array.from({ length: o.gradeConcurrency ?? 2 }, async () => {
    for (;;) {
      const next = todo.shift();
      if (next) {
        if (next.kind === "judged") reading++;
        await one(next).finally(() => {
          if (next.kind === "judged") reading--;
          wake();
        });
      } else if (!waiting && reading === 0) return;
      else await new Promise<void>((r) => sleepers.push(r));
    }
  });
  return {
    add(lineNo: number, jobId: string) {
      const line = st.plan.lines[lineNo - 1];
      if (!line || seen.has(lineNo)) return;
      seen.add(lineNo);
      todo.push(taskOf(line, jobId));
      wake();
    },
    async end() {
      waiting = false;
      wake();
      await Promise.all(workers);
    },
  };
}

/** Each judged instance's prediction into its directory: the picked candidate's report.json and patch.diff. */
function writeJudgedPredictions(st: RunState, out: string): void {
  for (const [index, j] of st.judged) {
    const d = j.picked === null ? undefined : st.done.get(doneKey(index, j.picked - 1));
    const id = st.o.instances[index]!.instance_id;
    writePicked(out, id, j.picked === null ? null : d ? { rec: d.rec, patch: d.result.patch } : null);
  }
}
