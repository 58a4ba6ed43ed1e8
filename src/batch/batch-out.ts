// `patchbay batch results --out DIR` (BatchClient.writeOut): each line's latest job written out, its
// patch, result and transcript, after the job is checked to be the line's own (a job under the
// line's id that is not is that line's error.txt, never its patch); then the batch's summary.
import { join } from "node:path";
import { makeOutDir, OutputLinkError, writeOwn } from "../core/out-files.js";
import { emptyResult, type JobResult, type TranscriptEvent } from "../core/spec/spec.js";
import { JobFailedError, type PatchbayClient } from "../queue/client.js";
import { summaryMarkdown, type BatchSummary } from "./batch-summary.js";
import type { BatchJob, WriteOutOptions } from "./batch-types.js";
import type { LineRef } from "./batch-lines.js";

/** What writeOut needs of a BatchClient. */
export interface BatchReader {
  readonly c: PatchbayClient;
  summary(batchId: string): Promise<BatchSummary>;
  checkLine(batchId: string, j: LineRef): Promise<void>;
}

/** Writes DIR/<jobId>/{patch.diff,transcript.jsonl,result.json[,transcript.html]} per line, then DIR/summary.{json,md}. */
export async function writeBatchOut(
  b: BatchReader,
  batchId: string,
  dir: string,
  opts: WriteOutOptions = {},
): Promise<BatchSummary> {
  const summary = await b.summary(batchId);
  makeOutDir(dir); // ./patchbay-out/<batch> may be the repo's own (src/core/out-files.ts)
  const html = await transcriptRenderer();
  const queue = [...summary.jobs];
  const one = async (j: BatchJob) => {
    const jobDir = join(dir, j.jobId);
    makeOutDir(jobDir);
    await b.checkLine(batchId, j);
    const result = await finalResult(b.c, j);
    const events: TranscriptEvent[] = [];
    for await (const e of b.c.watch(j.jobId, { follow: false })) events.push(e);
    writeOwn(join(jobDir, "patch.diff"), result.patch);
    writeOwn(join(jobDir, "result.json"), JSON.stringify(result, null, 2) + "\n");
    writeOwn(join(jobDir, "transcript.jsonl"), events.map((e) => JSON.stringify(e) + "\n").join(""));
    if (html) writeOwn(join(jobDir, "transcript.html"), html(events, { patch: result.patch }));
  };
  await Promise.all(
    Array.from({ length: opts.concurrency ?? 8 }, async () => {
      for (let j = queue.shift(); j; j = queue.shift())
        await one(j).catch((err: Error) =>
          err instanceof OutputLinkError
            ? Promise.reject(err)
            : writeOwn(join(dir, j.jobId, "error.txt"), `${err.message}\n`),
        );
    }),
  );
  writeOwn(join(dir, "summary.json"), JSON.stringify(summary, null, 2) + "\n");
  writeOwn(join(dir, "summary.md"), summaryMarkdown(summary));
  return summary;
}

/** A finished job's full result from the queue (its summary when the queue no longer has it). */
async function finalResult(c: PatchbayClient, j: BatchJob): Promise<JobResult> {
  const fallback = () => {
    const s = j.result;
    return emptyResult(s?.status ?? "failed", s?.error ?? "no result", {
      jobId: j.jobId,
      ...(s
        ? { costUsd: s.costUsd, usage: s.usage, turns: s.turns, ...(s.attempt ? { attempt: s.attempt } : {}) }
        : {}),
    });
  };
  // The worker records the summary just before the queue marks the job completed: that moment
  // is waited for (it grows on a loaded host; 5 s once cut a batch's patch to its summary's nothing).
  try {
    return await c.waitForResult(j.jobId, { timeoutMs: RESULT_WAIT_MS, warnIfNoWorker: false });
  } catch (err) {
    if (err instanceof JobFailedError)
      return emptyResult("failed", err.reason, {
        jobId: j.jobId,
        ...(j.result ? { costUsd: j.result.costUsd, usage: j.result.usage } : {}),
      });
    return fallback();
  }
}

/** How long a finished job's full result is waited for, past its batch's record of it. */
const RESULT_WAIT_MS = 120_000;

/** The dashboard's transcript page renderer, when src/web/ has it (optional). */
async function transcriptRenderer(): Promise<
  ((events: TranscriptEvent[], opts: { patch?: string }) => string) | undefined
> {
  const where = "../web/html.js"; // a variable: the build does not depend on it
  try {
    const mod = (await import(where)) as {
      renderTranscriptHtml?: (events: TranscriptEvent[], opts: { patch?: string }) => string;
    };
    return typeof mod.renderTranscriptHtml === "function" ? mod.renderTranscriptHtml : undefined;
  } catch {
    return undefined;
  }
}
