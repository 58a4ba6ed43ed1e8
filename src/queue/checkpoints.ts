// The worker's checkpoint store: one Redis hash per job, `attempt` and `data`. An older attempt (a
// worker that lost its lock and did not notice yet) never overwrites a newer attempt's checkpoint
// (lua/save-checkpoint-1.lua). What a checkpoint holds and how it is checked: src/job/checkpoint.ts.
import { count } from "../core/count.js";
import type { Redis } from "ioredis";
import { parseCheckpoint, type CheckpointStore } from "../job/checkpoint.js";
import { luaCommand } from "../core/lua.js";

const SAVE = luaCommand<number>("queue/lua/save-checkpoint-1.lua");

/**
 * The store of one job: removed when the job ends, else `retentionSec` after its last save
 * (config.retentionSec, as the transcript). A stored checkpoint over `maxBytes` is not read.
 */
export function redisCheckpoints(
  redis: Redis,
  key: string,
  jobId: string,
  hash: string,
  maxBytes: number,
  retentionSec: number,
): CheckpointStore & { remove(): Promise<void> } {
  return {
    async load() {
      // Bounded before it is read: Redis content is not trusted blindly.
      const len = await redis.hstrlen(key, "data");
      if (!len) return undefined;
      if (len > maxBytes)
        return { ok: false, reason: `the checkpoint is ${count(len, "byte")}, over the ${maxBytes}-byte bound` };
      const raw = await redis.hget(key, "data");
      return raw ? parseCheckpoint(raw, jobId, hash) : undefined;
    },
    async save(c) {
      await SAVE(redis, key, String(c.attempt), JSON.stringify(c), String(retentionSec));
    },
    async remove() {
      await redis.del(key);
    },
  };
}
