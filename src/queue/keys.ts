// Redis names shared by the queue client and the workers, all under the queue's name.
export const keys = (queue: string) => ({
  events: (jobId: string) => `patchbay:${queue}:events:${jobId}`,
  cancel: (jobId: string) => `patchbay:${queue}:cancel:${jobId}`,
  /** A job's last checkpoint (src/job/checkpoint.ts), removed when the job ends. */
  checkpoint: (jobId: string) => `patchbay:${queue}:checkpoint:${jobId}`,
  /**
   * A finished attempt's result, written in one transaction with its job_finished event and
   * removed once BullMQ has the job completed: a worker that dies in between leaves it, and the
   * next attempt returns it instead of running (and finishing) the job a second time.
   */
  result: (jobId: string) => `patchbay:${queue}:result:${jobId}`,
  /** A finished job's patch when it is too long to keep in its result (src/queue/result-bounds.ts): written once, kept for the retention. */
  patch: (jobId: string) => `patchbay:${queue}:patch:${jobId}`,
  /**
   * A job with candidates: its workspace after setup (the seed: a list of tar chunks, and its meta),
   * kept while its candidates run; and what its candidates share (a hash: how many verified).
   */
  seed: (jobId: string) => `patchbay:${queue}:seed:${jobId}`,
  seedMeta: (jobId: string) => `patchbay:${queue}:seed-meta:${jobId}`,
  candidates: (jobId: string) => `patchbay:${queue}:candidates:${jobId}`,
  cancelChannel: `patchbay:${queue}:cancel`,
  heartbeat: (workerId: string) => `patchbay:${queue}:worker:${workerId}`,
  /** A random id set once per Redis: which deployment a sandbox's owner belongs to (reaper). */
  deployment: `patchbay:${queue}:deployment`,
  /** Batches by creation time (a zset), and one batch's index: meta, lines, results, spend, started, finished, tasks, specs (see batch-index.ts). */
  batches: `patchbay:${queue}:batches`,
  batch: (batchId: string, part: string) => `patchbay:${queue}:batch:${batchId}:${part}`,
  /** Campaigns by creation time (a zset), and one campaign's parts: def (its settings and repos, JSON), changesets (a hash: line → JSON), lock (who publishes, tracks or closes it now). */
  campaigns: `patchbay:${queue}:campaigns`,
  campaign: (campaignId: string, part: "def" | "changesets" | "lock") =>
    `patchbay:${queue}:campaign:${campaignId}:${part}`,
  /** Eval runs by start time (a zset), and one run's parts: record (its summary, JSON, at most 4 MiB), row (what the list shows, JSON). */
  evals: `patchbay:${queue}:evals`,
  eval: (name: string, part: "record" | "row") => `patchbay:${queue}:eval:${name}:${part}`,
});

/** ioredis options BullMQ needs on a blocking connection (and that suit ours). */
export const redisOptions = { maxRetriesPerRequest: null, enableReadyCheck: false } as const;
