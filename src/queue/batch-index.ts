// Batches: many jobs under one id, with an index in Redis that stays cheap at 10,000 jobs, a shared
// USD budget, retry of some lines, cancel, and a summary.
//
// The index of a batch (keys.batch(id, part)), written by submit/retry and by the workers:
//   meta      hash   name, createdAt, total, hash (of the specs), budgetUsd, spent, cancelled,
//                    submitted, finishedAt, and counters of the lines' latest jobs: done,
//                    n:<status>, verified, unverified
//   lines     hash   line → its latest job id (`<batch>-L<line>`, then `-r1`, `-r2`... per retry)
//   results   hash   job id → a compact JSON summary of its result (JobSummary), set when it ends
//   spend     hash   `<job id>#<attempt>` → the attempt's spend so far (USD)
//   started   hash   job id → epoch ms, while it runs
//   finished  list   job ids in the order they ended (what `wait` follows)
//   tasks     hash   line → the task's first 200 characters (for the summary)
// plus keys.batches, a zset of batch ids by creation time. Every change of the counters happens in
// a Lua script, so `status` is one HGETALL and a finished job costs the worker one round trip.
import type { Redis } from "ioredis";
import { loadConfig } from "../config.js";
import { keys } from "./keys.js";
import type { JobData } from "./client.js";
import { emptyResult, filesChangedCount, type JobResult, type JobStatus, type Usage } from "../spec.js";

/** How long a batch's index lives: the deployment's retention (PATCHBAY_RETENTION_SEC), as results and transcripts. */
export const ttlSec = () => loadConfig().retentionSec;
export const PARTS = ["meta", "lines", "results", "spend", "started", "finished", "tasks"] as const;
type Part = (typeof PARTS)[number];

/** What the index keeps of a finished job: enough for status, progress and the summary. */
export interface JobSummary {
  line: number;
  status: JobStatus;
  verified?: boolean;
  costUsd: number;
  usage: Usage;
  turns: number;
  totalMs: number;
  attempt?: number;
  /** The first 300 characters. */
  error?: string;
  filesChanged: number;
  finishedAt: number;
}

// ---------------------------------------------------------------------------------------------
// Lua: every change of the counters, atomic
// ---------------------------------------------------------------------------------------------

// Shared: un-count / count a summary of a line's latest job in meta.
const LUA_COUNT = `
local function count(meta, summary, by)
  local s = cjson.decode(summary)
  redis.call('HINCRBY', meta, 'n:' .. s.status, by)
  redis.call('HINCRBY', meta, 'done', by)
  if s.verified == true then redis.call('HINCRBY', meta, 'verified', by) elseif s.verified == false then redis.call('HINCRBY', meta, 'unverified', by) end
end
local function touch(ttl)
  for i = 1, #KEYS do redis.call('EXPIRE', KEYS[i], ttl) end
end
`;

// KEYS: meta lines results spend started finished tasks
// ARGV: jobId line spendField cost summary onlyIfAbsent ttl now
const LUA_FINISH = `${LUA_COUNT}
local prev = redis.call('HGET', KEYS[3], ARGV[1])
if prev and ARGV[6] == '1' then return 0 end
local old = tonumber(redis.call('HGET', KEYS[4], ARGV[3]) or '0')
local cost = tonumber(ARGV[4])
if cost > old then
  redis.call('HSET', KEYS[4], ARGV[3], ARGV[4])
  redis.call('HINCRBYFLOAT', KEYS[1], 'spent', cost - old)
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[5])
redis.call('HDEL', KEYS[5], ARGV[1])
redis.call('RPUSH', KEYS[6], ARGV[1])
if redis.call('HGET', KEYS[2], ARGV[2]) == ARGV[1] then
  if prev then count(KEYS[1], prev, -1) end
  count(KEYS[1], ARGV[5], 1)
  if tonumber(redis.call('HGET', KEYS[1], 'done') or '0') >= tonumber(redis.call('HGET', KEYS[1], 'total') or '0') then
    redis.call('HSET', KEYS[1], 'finishedAt', ARGV[8])
  end
end
touch(ARGV[7])
return 1
`;

// A running job's spend after a model response: returns { spent, budget or "" }.
// KEYS: meta spend   ARGV: spendField cost
const LUA_SPEND = `
local old = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local cost = tonumber(ARGV[2])
local spent
if cost > old then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  spent = redis.call('HINCRBYFLOAT', KEYS[1], 'spent', cost - old)
else
  spent = redis.call('HGET', KEYS[1], 'spent') or '0'
end
return { spent, redis.call('HGET', KEYS[1], 'budgetUsd') or '' }
`;

// A job about to start: marks it started; returns { spent, budget, cancelled }.
// KEYS: meta started   ARGV: jobId now
const LUA_START = `
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return redis.call('HMGET', KEYS[1], 'spent', 'budgetUsd', 'cancelled')
`;

// A retried line: its latest job becomes the new one; the old one's summary is un-counted and the
// new one's counted if it already ended (the job is enqueued before this runs).
// KEYS: meta lines results   ARGV: line oldId newId
const LUA_SWITCH = `${LUA_COUNT}
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
local prev = redis.call('HGET', KEYS[3], ARGV[2])
if prev then count(KEYS[1], prev, -1) end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
local now = redis.call('HGET', KEYS[3], ARGV[3])
if now then count(KEYS[1], now, 1) end
redis.call('HDEL', KEYS[1], 'finishedAt', 'cancelled')
return 1
`;

type Scripted = Redis & {
  pbBatchFinish(...args: (string | number)[]): Promise<number>;
  pbBatchSpend(...args: (string | number)[]): Promise<[string, string]>;
  pbBatchStart(...args: (string | number)[]): Promise<(string | null)[]>;
  pbBatchSwitch(...args: (string | number)[]): Promise<number>;
};

const defined = new WeakSet<Redis>();
export function scripted(redis: Redis): Scripted {
  if (!defined.has(redis)) {
    redis.defineCommand("pbBatchFinish", { numberOfKeys: 7, lua: LUA_FINISH });
    redis.defineCommand("pbBatchSpend", { numberOfKeys: 2, lua: LUA_SPEND });
    redis.defineCommand("pbBatchStart", { numberOfKeys: 2, lua: LUA_START });
    redis.defineCommand("pbBatchSwitch", { numberOfKeys: 3, lua: LUA_SWITCH });
    defined.add(redis);
  }
  return redis as Scripted;
}

export function batchKeys(queueName: string, batchId: string): Record<Part, string> {
  const k = keys(queueName);
  return Object.fromEntries(PARTS.map((p) => [p, k.batch(batchId, p)])) as Record<Part, string>;
}

/** The compact summary of a result, as the index keeps it. */
export function summarize(r: JobResult, line: number): JobSummary {
  return {
    line,
    status: r.status,
    ...(r.verified !== undefined ? { verified: r.verified } : {}),
    costUsd: r.costUsd,
    usage: r.usage,
    turns: r.turns,
    totalMs: r.timings.totalMs,
    ...(r.attempt !== undefined ? { attempt: r.attempt } : {}),
    ...(r.error ? { error: r.error.slice(0, 300) } : {}),
    filesChanged: filesChangedCount(r), // the whole count, also where the list was cut
    finishedAt: Date.now(),
  };
}

/** Records a finished job in its batch's index (one round trip). */
export async function recordFinished(redis: Redis, queueName: string, batch: { id: string; line: number }, jobId: string, attempt: number, r: JobResult, onlyIfAbsent = false, spentBefore = 0): Promise<boolean> {
  const bk = batchKeys(queueName, batch.id);
  const n = await scripted(redis).pbBatchFinish(
    ...PARTS.map((p) => bk[p]),
    jobId,
    String(batch.line),
    `${jobId}#${attempt}`,
    String(Math.max(0, r.costUsd - spentBefore)),
    JSON.stringify(summarize(r, batch.line)),
    onlyIfAbsent ? "1" : "0",
    ttlSec(),
    Date.now(),
  );
  return n === 1;
}

// ---------------------------------------------------------------------------------------------
// The worker's side
// ---------------------------------------------------------------------------------------------

export interface BatchHooks {
  /**
   * Before a job of a batch starts (marks it started): a result to end it with at once, without a
   * sandbox, when the batch's budget is spent or the batch was cancelled; else undefined.
   */
  start(data: JobData, jobId: string, attempt: number): Promise<JobResult | undefined>;
  /** runJob's stopAfterTurn for a job of a batch: adds its spend, and stops it once the budget is spent. */
  stopAfterTurn(data: JobData, jobId: string, attempt: number): ((costUsd: number) => Promise<string | undefined>) | undefined;
  /** Records the job's result summary in the batch's index (the job's final result, or a failure for good). */
  /** `spentBefore`: the part of the result's cost an earlier attempt already added (a resumed job's). */
  finish(data: JobData, jobId: string, attempt: number, result: JobResult, spentBefore?: number): Promise<void>;
}

/** What a worker calls for the jobs of batches; every hook does nothing for a job of no batch. */
export function batchHooks(redis: Redis, queueName: string): BatchHooks {
  const budgetNote = (spent: number, budget: number) => `the batch's budget of $${budget.toFixed(2)} is spent ($${spent.toFixed(4)})`;
  return {
    async start(data, jobId, attempt) {
      if (!data?.batch) return undefined;
      const bk = batchKeys(queueName, data.batch.id);
      const [spent, budget, cancelled] = await scripted(redis).pbBatchStart(bk.meta, bk.started, jobId, Date.now());
      if (cancelled) return emptyResult("cancelled", "the batch was cancelled before this job started", { jobId, attempt });
      if (budget && Number(spent ?? 0) >= Number(budget)) return emptyResult("budget_exceeded", `${budgetNote(Number(spent), Number(budget))}; the job did not start`, { jobId, attempt });
      return undefined;
    },
    stopAfterTurn(data, jobId, attempt) {
      if (!data?.batch) return undefined;
      const bk = batchKeys(queueName, data.batch.id);
      return async (costUsd) => {
        const [spent, budget] = await scripted(redis).pbBatchSpend(bk.meta, bk.spend, `${jobId}#${attempt}`, String(costUsd));
        return budget && Number(spent) >= Number(budget) ? budgetNote(Number(spent), Number(budget)) : undefined;
      };
    },
    async finish(data, jobId, attempt, result, spentBefore = 0) {
      if (!data?.batch) return;
      await recordFinished(redis, queueName, data.batch, jobId, attempt, result, false, spentBefore);
    },
  };
}
