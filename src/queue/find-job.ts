// A job of the queue by id, or undefined. BullMQ keeps a job's hash beside the queue's own keys
// under the same prefix (`meta` a hash, `id` a counter, `events` a stream, …) and Job.fromId reads
// whatever hash is there, so an id from a client could name one of those: a key without the
// `timestamp` BullMQ writes on every add, or of another type, is no job.
import { Job, type Queue } from "bullmq";

export async function findJob<D, R>(queue: Queue, id: string): Promise<Job<D, R> | undefined> {
  try {
    const job = await Job.fromId<D, R>(queue, id);
    return job?.timestamp ? job : undefined;
  } catch (err) {
    if (/WRONGTYPE/.test((err as Error).message)) return undefined;
    throw err;
  }
}
