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
//   specs     hash   line → its spec's hash (src/core/spec/hash.ts): what a job under the line's id must
//                    carry to be taken as the line's (src/queue/batch-provenance.ts); a batch
//                    submitted before this part was kept has none, and its jobs are checked by their
//                    batch and line alone
// plus keys.batches, a zset of batch ids by creation time. Every change of the counters happens in
// a Lua script (src/queue/lua/), so `status` is one HGETALL and a finished job costs the worker one
// round trip.
import type { Redis } from "ioredis";
import { luaCommand } from "../core/lua.js";
import { usd } from "../core/money.js";
import { keys } from "./keys.js";
import { claimProblem, provenanceProblem } from "./batch-provenance.js";
import type { JobData } from "./client.js";
import { emptyResult, filesChangedCount, type JobResult, type JobStatus, type Usage } from "../core/spec/spec.js";

export const PARTS = ["meta", "lines", "results", "spend", "started", "finished", "tasks", "specs"] as const;
type Part = (typeof PARTS)[number];

/** What the index keeps of a finished job: enough for status, progress and the summary. */
export interface JobSummary {
  /** The batch line the job is of. */
  line: number;
  /** The result's status. */
  status: JobStatus;
  /** Whether its verify passed; unset where it had none. */
  verified?: boolean;
  /** What the attempt cost, in dollars. */
  costUsd: number;
  /** The tokens it used. */
  usage: Usage;
  /** Its model turns. */
  turns: number;
  /** Its wall-clock time in ms. */
  totalMs: number;
  /** Which attempt ended the job. */
  attempt?: number;
  /** Why it failed: the first 300 characters. */
  error?: string;
  /** How many files its patch changes. */
  filesChanged: number;
  /** When it ended, epoch ms. */
  finishedAt: number;
  /** Set when a scripted model answered: nothing was priced. */
  scripted?: true;
}

// The index's scripts: every change of the counters, atomic (src/queue/lua/*.lua; their headers say
// their KEYS, ARGV and replies).
const FINISH = luaCommand<number>("queue/lua/finish-job-8.lua");
const SPEND = luaCommand<[string, string]>("queue/lua/add-spend-2.lua");
const START = luaCommand<(string | null)[]>("queue/lua/start-job-2.lua");
const SWITCH = luaCommand<number>("queue/lua/switch-line-3.lua");

type Args = (string | number)[];
export interface Scripted {
  pbBatchFinish(...args: Args): Promise<number>;
  pbBatchSpend(...args: Args): Promise<[string, string]>;
  pbBatchStart(...args: Args): Promise<(string | null)[]>;
  pbBatchSwitch(...args: Args): Promise<number>;
}

/** The index's scripts on this connection. */
export function scripted(redis: Redis): Scripted {
  return {
    pbBatchFinish: (...a) => FINISH(redis, ...a),
    pbBatchSpend: (...a) => SPEND(redis, ...a),
    pbBatchStart: (...a) => START(redis, ...a),
    pbBatchSwitch: (...a) => SWITCH(redis, ...a),
  };
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
    ...(r.scripted ? { scripted: true as const } : {}),
  };
}

/** Records a finished job in its batch's index (one round trip). */
/**
 * `ttlSec`: how long a batch's index lives, the deployment's retention (config.retentionSec) as for
 * results and transcripts. `onlyIfAbsent`: a result already there stays. `spentBefore`: what earlier
 * attempts of the job already added to the batch's spend.
 */
export async function recordFinished(
  redis: Redis,
  queueName: string,
  batch: { id: string; line: number },
  jobId: string,
  attempt: number,
  r: JobResult,
  o: { ttlSec: number; onlyIfAbsent?: boolean; spentBefore?: number },
): Promise<boolean> {
  const { onlyIfAbsent = false, spentBefore = 0 } = o;
  const bk = batchKeys(queueName, batch.id);
  const n = await scripted(redis).pbBatchFinish(
    ...PARTS.map((p) => bk[p]),
    jobId,
    String(batch.line),
    `${jobId}#${attempt}`,
    String(Math.max(0, r.costUsd - spentBefore)),
    JSON.stringify(summarize(r, batch.line)),
    onlyIfAbsent ? "1" : "0",
    o.ttlSec,
    Date.now(),
  );
  return n === 1;
}

// ---------------------------------------------------------------------------------------------
// The worker's side
// ---------------------------------------------------------------------------------------------

export interface BatchHooks {
  /**
   * Before anything else of a job: why it must not run, or undefined. A job under a batch line's id
   * must be that line's own (its batch, its line, the spec the batch recorded for it), and a job
   * naming a batch must sit under one of its line's ids (src/queue/batch-provenance.ts): one written
   * to BullMQ by other means fails closed, and writes nothing to any batch's index.
   */
  provenance(data: JobData, jobId: string): Promise<string | undefined>;
  /**
   * Before a job of a batch starts (marks it started): a result to end it with at once, without a
   * sandbox, when the batch's budget is spent or the batch was cancelled; else undefined.
   */
  start(data: JobData, jobId: string, attempt: number): Promise<JobResult | undefined>;
  /** runJob's stopAfterTurn for a job of a batch: adds its spend, and stops it once the budget is spent. */
  stopAfterTurn(
    data: JobData,
    jobId: string,
    attempt: number,
  ): ((costUsd: number) => Promise<string | undefined>) | undefined;
  /** Records the job's result summary in the batch's index (the job's final result, or a failure for good). */
  /** `spentBefore`: the part of the result's cost an earlier attempt already added (a resumed job's). */
  finish(data: JobData, jobId: string, attempt: number, result: JobResult, spentBefore?: number): Promise<void>;
}

/** What a worker calls for the jobs of batches; every hook does nothing for a job of no batch. */
/** The worker's side of a batch; `ttlSec` is the deployment's retention (config.retentionSec). */
export function batchHooks(redis: Redis, queueName: string, ttlSec: number): BatchHooks {
  const budgetNote = (spent: number, budget: number) => `the batch's budget of ${usd(budget)} is spent (${usd(spent)})`;
  return {
    async provenance(data, jobId) {
      const claim = claimProblem(jobId, data);
      if (claim || !data?.batch) return claim;
      const { id, line } = data.batch;
      const bk = batchKeys(queueName, id);
      const [[, created], [, hash]] = (await redis
        .multi()
        .hget(bk.meta, "createdAt")
        .hget(bk.specs, String(line))
        .exec()) as [[null, string | null], [null, string | null]];
      if (!created) return `it names batch ${id.slice(0, 100)}, which is not in this queue`;
      return provenanceProblem(jobId, data, { batchId: id, line, ...(hash ? { specHash: hash } : {}) });
    },
    async start(data, jobId, attempt) {
      if (!data?.batch) return undefined;
      const bk = batchKeys(queueName, data.batch.id);
      const [spent, budget, cancelled] = await scripted(redis).pbBatchStart(bk.meta, bk.started, jobId, Date.now());
      if (cancelled)
        return emptyResult("cancelled", "the batch was cancelled before this job started", { jobId, attempt });
      if (budget && Number(spent ?? 0) >= Number(budget))
        return emptyResult("budget_exceeded", `${budgetNote(Number(spent), Number(budget))}; the job did not start`, {
          jobId,
          attempt,
        });
      return undefined;
    },
    stopAfterTurn(data, jobId, attempt) {
      if (!data?.batch) return undefined;
      const bk = batchKeys(queueName, data.batch.id);
      return async (costUsd) => {
        const [spent, budget] = await scripted(redis).pbBatchSpend(
          bk.meta,
          bk.spend,
          `${jobId}#${attempt}`,
          String(costUsd),
        );
        return budget && Number(spent) >= Number(budget) ? budgetNote(Number(spent), Number(budget)) : undefined;
      };
    },
    async finish(data, jobId, attempt, result, spentBefore = 0) {
      if (!data?.batch) return;
      await recordFinished(redis, queueName, data.batch, jobId, attempt, result, { ttlSec, spentBefore });
    },
  };
}
