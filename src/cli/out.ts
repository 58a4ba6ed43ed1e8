// A job's files on disk, for `run` (queued or --local) and `result --out`: patch.diff, result.json,
// transcript.jsonl and transcript.html (the page `patchbay view` writes, as `batch wait` does).
import { count } from "../core/count.js";
import { readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import type { JobResult, TranscriptEvent } from "../core/spec/spec.js";
import { makeOutDir, writeOwn } from "../core/out-files.js";
import { stringFlag, UsageError, type Values } from "./command.js";

/** Where `run` writes: --out, else ./patchbay-out/<queue>/<job id> (so two queues' job 7 do not meet). */
export function outDir(values: Values, queueName: string, id: string): string {
  return resolve(stringFlag(values, "out") ?? join("patchbay-out", queueName, id));
}

/** An --out that holds files already is refused unless --force: a run must not silently overwrite another's results. */
export function checkOut(values: Values): void {
  const out = stringFlag(values, "out");
  if (out === undefined || values.force) return;
  const dir = resolve(out);
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return; // not there yet (or not a directory: writing will say so)
  }
  if (entries.length > 0)
    throw new UsageError(
      `--out ${dir} is not empty (${count(entries.length, "entry", "entries")}): pass --force to write over it, or name another directory`,
    );
}

/** The files writeJobFiles writes into its directory, in the order a message names them. */
export const JOB_FILES = ["patch.diff", "transcript.jsonl", "transcript.html", "result.json"] as const;

/** "wrote DIR/: patch.diff, …": what writeJobFiles wrote, every file named. */
export const wroteJobFiles = (dir: string): string =>
  `wrote ${join(dir, "/")}: ${JOB_FILES.slice(0, -1).join(", ")} and ${JOB_FILES[JOB_FILES.length - 1]}`;

/** Writes the four files; returns the patch's path. */
export async function writeJobFiles(
  dir: string,
  result: JobResult,
  events: readonly TranscriptEvent[],
): Promise<string> {
  makeOutDir(dir);
  writeOwn(join(dir, "patch.diff"), result.patch);
  writeOwn(join(dir, "result.json"), JSON.stringify(result, null, 2) + "\n");
  writeOwn(join(dir, "transcript.jsonl"), events.map((e) => JSON.stringify(e) + "\n").join(""));
  const { renderTranscriptHtml } = await import("../web/html.js");
  writeOwn(join(dir, "transcript.html"), renderTranscriptHtml(events, { patch: result.patch }));
  return join(dir, "patch.diff");
}
