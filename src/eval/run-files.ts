// The files of an eval run, laid out as SWE-bench's harness lays out its logs, under one directory:
//   preds.jsonl                       the first candidate's patch per instance (SWE-bench's predictions)
//   summary.json                      the run's summary (SWE-bench's v2 fields, then patchbay's)
//   <instance_id>/report.json         SWE-bench's report of the first candidate
//   <instance_id>/patch.diff, test_output.txt, grade.json (patchbay's: the job, the patch's hash, the
//                                     outcome, the statuses), transcript.jsonl and result.json for a run
//   <instance_id>/candidate-<n>/...   the same for candidate n (n >= 2) when K > 1
// grade.json is what makes a second run grade nothing again: a candidate whose grade.json names the
// same job and the same patch is taken as graded.
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { makeOutDir, writeOwn } from "../core/out-files.js";
import type { Graded, Prediction, RunSummary } from "./types.js";

/** What grade.json keeps of a graded candidate. */
export interface GradeRecord extends Omit<Graded, "testOutput"> {
  /** The job whose patch was graded ("" for `eval grade`'s predictions). */
  jobId: string;
  /** sha256 of the patch graded. */
  patchSha256: string;
}

export const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** The directory of an instance's candidate (0-based) under the run's directory, made if missing. */
export function candidateDir(out: string, instanceId: string, candidate: number): string {
  makeOutDir(out);
  const inst = join(out, instanceId);
  makeOutDir(inst);
  if (candidate === 0) return inst;
  const dir = join(inst, `candidate-${candidate + 1}`);
  makeOutDir(dir);
  return dir;
}

/** The grade recorded in `dir` for this job and patch, if it was graded before. */
export function gradedBefore(dir: string, jobId: string, patch: string): GradeRecord | undefined {
  const file = join(dir, "grade.json");
  if (!existsSync(file)) return undefined;
  try {
    const rec = JSON.parse(readFileSync(file, "utf8")) as GradeRecord;
    return rec.jobId === jobId && rec.patchSha256 === sha256(patch) ? rec : undefined;
  } catch {
    return undefined; // a torn or edited file: graded again
  }
}

/** Writes a graded candidate's files: report.json (SWE-bench's), test_output.txt, patch.diff, grade.json (last). */
export function writeGraded(dir: string, g: Graded, jobId: string, patch: string): GradeRecord {
  const { testOutput, ...rest } = g;
  const rec: GradeRecord = { ...rest, jobId, patchSha256: sha256(patch) };
  writeOwn(join(dir, "patch.diff"), patch);
  writeOwn(join(dir, "report.json"), JSON.stringify({ [g.instance_id]: g.report }, null, 4) + "\n");
  writeOwn(join(dir, "test_output.txt"), testOutput);
  writeOwn(join(dir, "grade.json"), JSON.stringify(rec, null, 2) + "\n");
  return rec;
}

/** Writes preds.jsonl and summary.json. */
export function writeRunFiles(out: string, preds: Prediction[], summary: RunSummary): void {
  makeOutDir(out);
  writeOwn(join(out, "preds.jsonl"), preds.map((p) => JSON.stringify(p) + "\n").join(""));
  writeOwn(join(out, "summary.json"), JSON.stringify(summary, null, 2) + "\n");
}
