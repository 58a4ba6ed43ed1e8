// One eval job's part of a run (run.ts): a candidate's job read back from the queue and graded here
// (or its grade taken from an earlier run), its files written; and a job that judged its own K
// candidates by verify (`candidates: K`), its result read for the candidate it picked. A job's
// result and transcript come from Redis, which only the workers write, but what they hold came from
// the model and a repo: they are written to the run's files as data, never run or rendered here.
import { setTimeout as sleep } from "node:timers/promises";
import { join } from "node:path";
import type { BatchClient } from "../batch/batches.js";
import { JobNotFoundError } from "../queue/client.js";
import { writeOwn } from "../core/out-files.js";
import { emptyResult, type JobResult, type TranscriptEvent } from "../core/spec/spec.js";
import { candidateDir, gradedBefore, writeGraded, type GradeRecord } from "./run-files.js";
import type { EvalInstance, Graded, Prediction } from "./types.js";

/** Grades one prediction (gradePrediction, or a test's own). */
export type GradeFn = (instance: EvalInstance, pred: Prediction) => Promise<Graded>;

/** A candidate graded (or found graded before): its grade, its job's result, the model's share of its time. */
export interface Done {
  rec: GradeRecord;
  result: JobResult;
  modelMs: number;
}

/** What a judged job came to: its own result (the picked candidate's, costs summed) and the number it picked. */
export interface Judged {
  jobId: string;
  result: JobResult;
  /** The candidate picked (from 1); null when the job picked none (or has no result). */
  picked: number | null;
}

/** Where one candidate is graded: its instance, its number (0-based), its job, and its files' directory. */
export interface CandidateRef {
  inst: EvalInstance;
  candidate: number;
  jobId: string;
  /** The run's name (for the retry hint) and directory, and the model named in predictions. */
  run: { name: string; out: string; model?: string };
  /** Its files go under `candidate-<n>/` even for the first (a judged job's instance directory is the job's own). */
  numbered: boolean;
}

/** A job's result, or why there is none (not in the queue, still running, failed for good). */
async function resultOf(b: BatchClient, jobId: string, runName: string): Promise<JobResult | string> {
  // The batch names a job as ended when its worker records it there, a moment before BullMQ moves
  // it to completed (the processor's return): a result read at once may not be there yet.
  const r = await b.c
    .waitForResult(jobId, { timeoutMs: RESULT_WAIT_MS, warnIfNoWorker: false })
    .catch((err: Error) => err);
  if (r instanceof JobNotFoundError)
    return `the job ${jobId} has no result in the queue (removed?): retry the run's batch (patchbay batch retry eval-${runName})`;
  if (r instanceof Error) return `the job ${jobId} has no result: ${r.message}`;
  return r;
}

/** How long gradeOne waits for the result of a job its batch says ended. */
const RESULT_WAIT_MS = 120_000;

/** A job's transcript, read whole, and the model's share of its time (its model_response ms summed). */
async function transcriptOf(b: BatchClient, jobId: string): Promise<{ events: TranscriptEvent[]; modelMs: number }> {
  const events: TranscriptEvent[] = [];
  for await (const e of b.c.watch(jobId, { follow: false })) events.push(e);
  return { events, modelMs: events.reduce((ms, e) => ms + (e.type === "model_response" ? e.ms : 0), 0) };
}

/** Writes a job's result.json and transcript.jsonl into `dir`. */
function writeJob(dir: string, result: JobResult, events: TranscriptEvent[]): void {
  writeOwn(join(dir, "result.json"), JSON.stringify(result, null, 2) + "\n");
  writeOwn(join(dir, "transcript.jsonl"), events.map((e) => JSON.stringify(e) + "\n").join(""));
}

/** How long gradeOne waits before it grades again after the host failed under a grade. */
const GRADE_RETRY_MS = [2000, 5000];

/** Grades one candidate's job (or takes its grade from an earlier run), writing its files. */
export async function gradeOne(b: BatchClient, grade: GradeFn, ref: CandidateRef): Promise<Done & { before: boolean }> {
  const { inst, jobId } = ref;
  const result = await resultOf(b, jobId, ref.run.name);
  if (typeof result === "string")
    return { rec: unrecorded(inst, jobId, result), result: emptyResult("failed", result), modelMs: 0, before: false };
  const { events, modelMs } = await transcriptOf(b, jobId);
  const dir = candidateDir(ref.run.out, inst.instance_id, ref.candidate, { numbered: ref.numbered });
  writeJob(dir, result, events);
  const before = gradedBefore(dir, jobId, result.patch, inst);
  if (before) return { rec: before, result, modelMs, before: true };
  const pred = {
    instance_id: inst.instance_id,
    model_patch: result.patch,
    model_name_or_path: modelName(ref.run, result),
  };
  // The host's own failure (its engine gone, say) is tried again twice, a few seconds apart: a
  // loaded engine's hiccup once made a run report an error its next run graded resolved. Past
  // that it is this candidate's error, recorded nowhere: the next run grades it again.
  let g = await grade(inst, pred).catch((err: Error) => err);
  for (const ms of GRADE_RETRY_MS) {
    if (!(g instanceof Error)) break;
    await sleep(ms);
    g = await grade(inst, pred).catch((err: Error) => err);
  }
  if (g instanceof Error)
    return { rec: unrecorded(inst, jobId, `grading failed: ${g.message}`), result, modelMs, before: false };
  return { rec: writeGraded(dir, g, jobId, result.patch, inst), result, modelMs, before: false };
}

/**
 * Reads a judged job's result (its candidates all ended before it did) and writes it and the job's
 * transcript (candidates_started, candidate_picked) into the instance's directory.
 */
export async function readJudged(
  b: BatchClient,
  ref: Omit<CandidateRef, "candidate" | "numbered">,
  K: number,
): Promise<Judged> {
  const { inst, jobId, run } = ref;
  const result = await resultOf(b, jobId, run.name);
  if (typeof result === "string") return { jobId, result: emptyResult("failed", result), picked: null };
  const { events } = await transcriptOf(b, jobId);
  writeJob(candidateDir(run.out, inst.instance_id, 0), result, events);
  // The number must name one of the K candidates the run asked for; any other is no pick.
  const n = result.picked;
  return { jobId, result, picked: n !== undefined && Number.isInteger(n) && n >= 1 && n <= K ? n : null };
}

/** An error outcome kept in memory only (no grade.json): the next run grades the candidate again. */
export function unrecorded(inst: EvalInstance, jobId: string, error: string): GradeRecord {
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

/** The model a prediction names: the run's, else the job's, else patchbay. */
export const modelName = (run: { model?: string }, r?: JobResult) => run.model ?? r?.model ?? "patchbay";
