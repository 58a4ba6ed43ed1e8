// The queue's jobs under a batch's line ids, read with the spec hashes the batch recorded, in one
// round trip, and judged by src/queue/batch-provenance.ts: what submit, retry, reconcile, writeOut
// and a campaign's publish read before they take a line's job as the line's.
import type { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { provenanceProblem } from "../queue/batch-provenance.js";

/** A line of a batch and a job id under it. */
export interface LineRef {
  /** The line. */
  line: number;
  /** The job id. */
  jobId: string;
}

/** What BatchClient.lineJobs found of the queue's jobs under lines' ids. */
export interface LineJobs {
  /** Per entry: whether the queue has a job under its id. */
  exists: boolean[];
  /** The entries whose job is there and is not the line's own. */
  problems: (LineRef & { why: string })[];
}

/** Reads each entry's job data and its line's recorded spec hash; `specsKey` is the batch's `specs` part. */
export async function readLineJobs(
  redis: Redis,
  queue: Queue,
  specsKey: string,
  batchId: string,
  entries: readonly LineRef[],
): Promise<LineJobs> {
  if (!entries.length) return { exists: [], problems: [] };
  const m = redis.multi();
  for (const e of entries) m.hmget(queue.toKey(e.jobId), "timestamp", "data");
  m.hmget(specsKey, ...entries.map((e) => String(e.line)));
  const res = (await m.exec()) ?? [];
  const hashes = (res.at(-1)?.[1] ?? []) as (string | null)[];
  const exists: boolean[] = [];
  const problems: LineJobs["problems"] = [];
  entries.forEach((e, i) => {
    // A key of another type, or a hash without BullMQ's timestamp, is no job (src/queue/find-job.ts).
    const [err, v] = res[i] ?? [null, null];
    const [timestamp, data] = (err ? [null, null] : v) as [string | null, string | null];
    exists.push(Boolean(timestamp));
    if (!timestamp) return;
    const why = provenanceProblem(e.jobId, parseData(data), {
      batchId,
      line: e.line,
      ...(hashes[i] ? { specHash: hashes[i] } : {}),
    });
    if (why) problems.push({ ...e, why });
  });
  return { exists, problems };
}

function parseData(raw: string | null): unknown {
  try {
    return raw ? JSON.parse(raw) : undefined;
  } catch {
    return undefined;
  }
}
