// The files of an eval run, laid out as SWE-bench's harness lays out its logs, under one directory:
//   preds.jsonl                       the first candidate's patch per instance (SWE-bench's predictions)
//   summary.json                      the run's summary (SWE-bench's v2 fields, then patchbay's)
//   <instance_id>/report.json         SWE-bench's report of the first candidate
//   <instance_id>/patch.diff, test_output.txt, grade.json (patchbay's: the job, the patch's hash, the
//                                     outcome, the statuses), transcript.jsonl and result.json for a run
//   <instance_id>/candidate-<n>/...   the same for candidate n (n >= 2) when K > 1
//   where a verify judged an instance's K candidates in one job: <instance_id>/ holds that job's
//   result.json and transcript.jsonl and the picked candidate's report.json and patch.diff, and
//   candidate-<n>/ every candidate's own files, n from 1
// grade.json is what makes a second run grade nothing again: a candidate whose grade.json names the
// same instance (its tests as the set has them now), the same job and the same patch is taken as
// graded. The directory may be below a repo's working directory (./patchbay-eval/NAME), so
// grade.json is read as patchbay's own or not at all: a regular file, never through a symbolic
// link, never waited on (a FIFO), bounded, and of a grade's shape; anything else is graded again.
import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, openSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { makeOutDir, writeOwn } from "../core/out-files.js";
import type { EvalInstance, Graded, Prediction, RunSummary } from "./types.js";

/** What grade.json keeps of a graded candidate. */
export interface GradeRecord extends Omit<Graded, "testOutput"> {
  /** The job whose patch was graded ("" for `eval grade`'s predictions). */
  jobId: string;
  /** sha256 of the patch graded. */
  patchSha256: string;
  /** {@link instanceSha256} of the instance it was graded for. */
  instanceSha256: string;
  /** When it was graded, epoch ms (a run's wall time ends at its last grade, whichever run made it). */
  gradedAt?: number;
}

export const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * What a grade depends on besides the patch: the instance's base commit, tests, test lists and
 * environment. A set whose tests changed grades its patches again.
 */
export const instanceSha256 = (i: EvalInstance) => {
  // The agent's verify judges candidates in the job, not grades: a grade does not depend on it.
  const { verify: _verify, ...env } = i.patchbay;
  return sha256(JSON.stringify([i.instance_id, i.base_commit, i.test_patch, i.FAIL_TO_PASS, i.PASS_TO_PASS, env]));
};

/** The largest grade.json read (its statuses: at most 100,000 tests of 2,000 characters). */
const GRADE_FILE_MAX_BYTES = 256 * 1024 * 1024;

const SF = z.object({ success: z.array(z.string()), failure: z.array(z.string()) });
const GradeRecordSchema = z.object({
  instance_id: z.string(),
  outcome: z.enum(["resolved", "unresolved", "empty_patch", "patch_failed", "error"]),
  report: z.object({
    patch_is_None: z.boolean(),
    patch_exists: z.boolean(),
    patch_successfully_applied: z.boolean(),
    resolved: z.boolean(),
    tests_status: z.object({ FAIL_TO_PASS: SF, PASS_TO_PASS: SF, FAIL_TO_FAIL: SF, PASS_TO_FAIL: SF }).optional(),
  }),
  statuses: z.record(z.string(), z.enum(["PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"])),
  error: z.string().optional(),
  ms: z.number(),
  jobId: z.string(),
  patchSha256: z.string(),
  instanceSha256: z.string(),
  gradedAt: z.number().optional(),
});

/** A regular file's text, read without following a link or waiting on a FIFO; undefined for anything else. */
function readOwnFile(file: string, maxBytes: number): string | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    return st.isFile() && st.size <= maxBytes ? readFileSync(fd, "utf8") : undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * The directory of an instance's candidate (0-based) under the run's directory, made if missing:
 * the instance's own for the first, `candidate-<n>` for the others; with `numbered` (a job that
 * judged its own candidates: the instance's directory is that job's), `candidate-<n>` for every one.
 */
export function candidateDir(
  out: string,
  instanceId: string,
  candidate: number,
  o: { numbered?: boolean } = {},
): string {
  makeOutDir(out);
  const inst = join(out, instanceId);
  makeOutDir(inst);
  if (candidate === 0 && !o.numbered) return inst;
  const dir = join(inst, `candidate-${candidate + 1}`);
  makeOutDir(dir);
  return dir;
}

/** The grade recorded in `dir` for this job, patch and instance, if it was graded before. */
export function gradedBefore(
  dir: string,
  jobId: string,
  patch: string,
  instance: EvalInstance,
): GradeRecord | undefined {
  const text = readOwnFile(join(dir, "grade.json"), GRADE_FILE_MAX_BYTES);
  if (text === undefined) return undefined;
  let rec: GradeRecord;
  try {
    rec = GradeRecordSchema.parse(JSON.parse(text));
  } catch {
    return undefined; // a torn or edited file: graded again
  }
  const same =
    rec.instance_id === instance.instance_id &&
    rec.jobId === jobId &&
    rec.patchSha256 === sha256(patch) &&
    rec.instanceSha256 === instanceSha256(instance) &&
    rec.outcome === outcomeOf(rec);
  return same ? rec : undefined;
}

/** The outcome a record's report allows: resolved only when the report says so, and the other way round. */
const outcomeOf = (rec: GradeRecord): GradeRecord["outcome"] =>
  rec.report.resolved ? "resolved" : rec.outcome === "resolved" ? "unresolved" : rec.outcome;

/** Writes a graded candidate's files: report.json (SWE-bench's), test_output.txt, patch.diff, grade.json (last). */
export function writeGraded(dir: string, g: Graded, jobId: string, patch: string, instance: EvalInstance): GradeRecord {
  const { testOutput, ...rest } = g;
  const rec: GradeRecord = {
    ...rest,
    jobId,
    patchSha256: sha256(patch),
    instanceSha256: instanceSha256(instance),
    gradedAt: Date.now(),
  };
  writeOwn(join(dir, "patch.diff"), patch);
  writeOwn(join(dir, "report.json"), JSON.stringify({ [g.instance_id]: g.report }, null, 4) + "\n");
  writeOwn(join(dir, "test_output.txt"), testOutput);
  writeOwn(join(dir, "grade.json"), JSON.stringify(rec, null, 2) + "\n");
  return rec;
}

/**
 * Writes the prediction of a job that judged its candidates into the instance's directory: the
 * picked candidate's SWE-bench report.json and patch.diff (each candidate's own files are in its
 * `candidate-<n>/`). With none picked, the instance has no prediction to report: neither is written,
 * and any an earlier run wrote is removed, so the directory never shows a pick the job did not make.
 */
export function writePicked(out: string, instanceId: string, picked: { rec: GradeRecord; patch: string } | null): void {
  const dir = join(out, instanceId);
  makeOutDir(out);
  makeOutDir(dir);
  if (!picked) {
    for (const f of ["report.json", "patch.diff"]) rmSync(join(dir, f), { force: true });
    return;
  }
  writeOwn(join(dir, "patch.diff"), picked.patch);
  writeOwn(join(dir, "report.json"), JSON.stringify({ [instanceId]: picked.rec.report }, null, 4) + "\n");
}

/** Writes preds.jsonl and summary.json. */
export function writeRunFiles(out: string, preds: Prediction[], summary: RunSummary): void {
  makeOutDir(out);
  writeOwn(join(out, "preds.jsonl"), preds.map((p) => JSON.stringify(p) + "\n").join(""));
  writeOwn(join(out, "summary.json"), JSON.stringify(summary, null, 2) + "\n");
}
