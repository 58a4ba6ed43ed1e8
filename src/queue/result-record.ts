// A finished attempt's result, recorded in Redis in one transaction with its job_finished event
// (src/queue/keys.ts: result). BullMQ marks the job completed only after the processor returns; a
// worker killed in between would leave a job whose transcript says it finished but that runs
// again. With the record, the next attempt returns the recorded result instead: one finished
// attempt per job, whatever dies when.
import type { ChainableCommander, Redis } from "ioredis";
import { defaults } from "../config.js";
import { JobResult, type TranscriptEvent } from "../spec.js";
import type { keys } from "./keys.js";

/** Appends a transcript event to a transaction: the job's stream, bounded, with its TTL renewed. */
export const appendEvent = (m: ChainableCommander, k: ReturnType<typeof keys>, e: TranscriptEvent): ChainableCommander =>
  m.xadd(k.events(e.jobId), "MAXLEN", "~", defaults.transcript.maxLen, "*", "e", JSON.stringify(e)).expire(k.events(e.jobId), defaults.transcript.ttlSec);

/** Writes the held job_finished event and the result together. */
export async function recordResult(redis: Redis, k: ReturnType<typeof keys>, jobId: string, finished: TranscriptEvent | undefined, result: JobResult): Promise<void> {
  const m = redis.multi();
  if (finished) appendEvent(m, k, finished);
  await m.set(k.result(jobId), JSON.stringify(result), "EX", defaults.transcript.ttlSec).exec();
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
