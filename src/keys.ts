// Redis names shared by the queue client and the workers, all under the queue's name.
export const keys = (queue: string) => ({
  events: (jobId: string) => `patchbay:${queue}:events:${jobId}`,
  cancel: (jobId: string) => `patchbay:${queue}:cancel:${jobId}`,
  cancelChannel: `patchbay:${queue}:cancel`,
  heartbeat: (workerId: string) => `patchbay:${queue}:worker:${workerId}`,
});

/** ioredis options BullMQ needs on a blocking connection (and that suit ours). */
export const redisOptions = { maxRetriesPerRequest: null, enableReadyCheck: false } as const;
