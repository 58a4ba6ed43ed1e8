// Whether the queue's job under a batch line's id is that line's own: made by the batch (its data
// names the batch and the line the id names) for the line's spec (the hash the batch recorded when
// it was submitted). Free jobs cannot take a line's id (src/core/line-id.ts, refused by the JobSpec), but
// a job written to BullMQ by other means can: every part that adopts a line's job (submit, retry,
// wait's reconcile, writeOut, a campaign's publish, and the worker before it runs one) asks here,
// and a job that is not the line's is an error naming it, never the line's result. Pure.
import { PatchbayError } from "../core/errors.js";
import { batchJobId, parseLineJobId } from "../core/line-id.js";
import { specHash } from "../core/spec/hash.js";

/** What the line expects: its batch and number, and its spec's hash (undefined: a batch submitted before the index kept them). */
export interface LineWant {
  batchId: string;
  line: number;
  specHash?: string;
}

/** Why a job under `jobId` with `data` is not the line's, or undefined when it is. */
export function provenanceProblem(jobId: string, data: unknown, want: LineWant): string | undefined {
  const at = parseLineJobId(jobId);
  if (!at || at.batchId !== want.batchId || at.line !== want.line)
    return `its id is none of the line's (${batchJobId(want.batchId, want.line)}, then -r1, -r2, ...)`;
  const d = (data ?? {}) as { batch?: { id?: unknown; line?: unknown }; spec?: unknown };
  if (!d.batch)
    return "it carries no batch: the batch did not enqueue it (a job put under the line's id by other means)";
  if (d.batch.id !== want.batchId || d.batch.line !== want.line)
    return `it says it is line ${String(d.batch.line).slice(0, 20)} of batch ${String(d.batch.id).slice(0, 100)}`;
  if (want.specHash !== undefined && specHash(d.spec) !== want.specHash)
    return "its spec is not the line's (not the hash the batch recorded for it)";
  return undefined;
}

/**
 * A job whose data names a batch must sit under one of that line's ids, and a job under a line's id
 * must name its batch and line: else undefined is returned only for a job of no batch with a free id.
 * What the worker and a cancel check before they write to a batch's index (the spec's hash is the
 * worker's to check against the index).
 */
export function claimProblem(jobId: string, data: unknown): string | undefined {
  const at = parseLineJobId(jobId);
  const batch = (data as { batch?: { id?: unknown; line?: unknown } } | undefined)?.batch;
  if (!at && !batch) return undefined;
  if (!batch) return `its id ${jobId} is a batch line's, but it carries no batch: the batch did not enqueue it`;
  if (!at || at.batchId !== batch.id || at.line !== batch.line)
    return `it says it is line ${String(batch.line).slice(0, 20)} of batch ${String(batch.id).slice(0, 100)}, but its id ${jobId} is none of that line's`;
  return undefined;
}

/** Jobs under lines' ids that are not the lines' own: never taken as results. */
export class LineProvenanceError extends PatchbayError {
  constructor(
    readonly batchId: string,
    readonly problems: { line: number; jobId: string; why: string }[],
  ) {
    const shown = problems.slice(0, 5).map((p) => `job ${p.jobId} is not line ${p.line}'s own: ${p.why}`);
    super(
      "conflict",
      `batch ${batchId}: ${shown.join("; ")}${problems.length > 5 ? `; and ${problems.length - 5} more` : ""}. Not taken as a result: remove that job from the queue (it is no job of this batch), then submit or retry again`,
    );
  }
}
