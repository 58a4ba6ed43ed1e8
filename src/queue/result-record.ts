// A finished attempt's result, recorded in Redis in one transaction with its job_finished event
// (src/queue/keys.ts: result). BullMQ marks the job completed only after the processor returns; a
// worker killed in between would leave a job whose transcript says it finished but that runs
// again. With the record, the next attempt returns the recorded result instead: one finished
// attempt per job, whatever dies when.
//
// Everything here enters Redis bounded (src/queue/result-bounds.ts): events and results are cut
// where they could grow with what the agent did, and a long patch is kept once, under its own key
// (keys.patch), written in the same transaction as the result that names it. Every key lives for
// the deployment's retention (PATCHBAY_RETENTION_SEC).
import type { ChainableCommander, Redis } from "ioredis";
import { luaCommand } from "../core/lua.js";
import {
  emptyResult,
  finishedEvent,
  JobResult,
  stamped,
  type JobSpec,
  type TranscriptEvent,
} from "../core/spec/spec.js";
import type { keys } from "./keys.js";
import { attachPatch, boundEvent, boundResult } from "./result-bounds.js";

const CANCEL_WAITING = luaCommand<number>("queue/lua/cancel-waiting-10.lua");

type Keys = ReturnType<typeof keys>;

/** Appends a transcript event (bounded) to a transaction: the job's stream, capped in length, with its TTL renewed. */
export const appendEvent = (
  m: ChainableCommander,
  k: Keys,
  e: TranscriptEvent,
  retentionSec: number,
  maxLen: number,
): ChainableCommander =>
  m
    .xadd(k.events(e.jobId), "MAXLEN", "~", maxLen, "*", "e", JSON.stringify(boundEvent(e)))
    .expire(k.events(e.jobId), retentionSec);

/**
 * Writes the held job_finished event, the bounded result and (when it is long) the patch together.
 * Returns the result as stored: what the worker hands BullMQ as the job's return value.
 */
export function recordResult(
  redis: Redis,
  k: Keys,
  jobId: string,
  finished: TranscriptEvent | undefined,
  result: JobResult,
  o: { retentionSec: number; maxLen: number },
): { stored: JobResult; written: Promise<unknown> } {
  const b = boundResult(result);
  const m = redis.multi();
  if (b.patch !== undefined) m.set(k.patch(jobId), b.patch, "EX", o.retentionSec);
  if (finished) appendEvent(m, k, finished, o.retentionSec, o.maxLen);
  m.set(k.result(jobId), JSON.stringify(b.result), "EX", o.retentionSec);
  return { stored: b.result, written: m.exec().then(failed) };
}

/** A MULTI's replies: the first error among them is thrown (EXEC itself does not reject on one). */
function failed(replies: [Error | null, unknown][] | null): void {
  const err = replies?.find(([e]) => e)?.[0];
  if (err) throw new Error(`Redis refused to store the job's result: ${err.message}`, { cause: err });
}

/** The recorded result of an earlier attempt, if any (checked against the schema: Redis content is not trusted blindly). */
export async function recordedResult(redis: Redis, key: string): Promise<JobResult | undefined> {
  const raw = await redis.get(key).catch(() => null);
  if (!raw) return undefined;
  try {
    const p = JobResult.safeParse(JSON.parse(raw));
    return p.success ? p.data : undefined;
  } catch {
    return undefined;
  }
}

/** A stored result made whole: its patch read back from its key when it was kept there (throws PatchGoneError when it is gone). */
export async function withStoredPatch(redis: Redis, k: Keys, jobId: string, r: JobResult): Promise<JobResult> {
  if (!r.patchStored) return r;
  return attachPatch({ jobId, ...r }, await redis.get(k.patch(jobId)));
}

/** BullMQ's keys of a queue that a cancel of a waiting job moves it between (Queue.keys). */
export type BullKeys = Record<"wait" | "paused" | "prioritized" | "delayed" | "completed" | "events", string>;

/**
 * Cancels a job no worker has taken, in one step (queue/lua/cancel-waiting-10.lua): its cancel mark
 * is set either way; a job still waiting leaves the wait list for the completed set with a cancelled
 * result, recorded as a worker's would be, and its transcript ends with job_finished. Returns that
 * result, or undefined when the job was not waiting (a worker has it, or it finished).
 */
export async function recordCancelled(
  redis: Redis,
  bull: BullKeys,
  jobKey: string,
  k: Keys,
  job: { id: string; spec: JobSpec; enqueuedAt?: number },
  o: { retentionSec: number; maxLen: number },
): Promise<JobResult | undefined> {
  const jobId = job.id;
  const now = Date.now();
  const queuedMs = Math.max(0, now - (job.enqueuedAt ?? now));
  // The words and the transcript a worker gives a job cancelled before it started (runJob's).
  const result = boundResult(
    emptyResult("cancelled", "the job was cancelled before it started", {
      jobId,
      attempt: 1,
      timings: { queuedMs, sandboxMs: 0, agentMs: 0, totalMs: 0 },
    }),
  ).result;
  const started = boundEvent(stamped({ type: "job_started", spec: job.spec }, jobId, 1));
  const finished = boundEvent(stamped(finishedEvent(result), jobId, 1));
  const done = await CANCEL_WAITING(
    redis,
    bull.wait,
    bull.paused,
    bull.prioritized,
    bull.delayed,
    bull.completed,
    jobKey,
    k.result(jobId),
    k.events(jobId),
    bull.events,
    k.cancel(jobId),
    jobId,
    JSON.stringify(result),
    JSON.stringify(started),
    JSON.stringify(finished),
    o.retentionSec,
    o.maxLen,
    now,
  );
  return done === 1 ? result : undefined;
}
