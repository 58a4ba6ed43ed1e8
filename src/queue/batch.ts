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
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Job } from "bullmq";
import type { Redis } from "ioredis";
import { defaults } from "../config.js";
import { keys } from "./keys.js";
import { defaultClient, JobFailedError, jobOptions, prepareSpecs, type JobData, type PatchbayClient } from "./client.js";
import { emptyResult, JOB_STATUSES, JobSpecError, type JobResult, type JobSpec, type JobStatus, type TranscriptEvent, type Usage } from "../spec.js";
import { safeText } from "../term.js";

// ---------------------------------------------------------------------------------------------
// Types and errors
// ---------------------------------------------------------------------------------------------

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

export interface BatchJob {
  line: number;
  jobId: string;
  state: "waiting" | "running" | "finished";
  startedAt?: number;
  result?: JobSummary;
}

export interface BatchStatus {
  batchId: string;
  name?: string;
  createdAt: number;
  /** When the last line's latest job ended (unset while any runs, and again after a retry). */
  finishedAt?: number;
  total: number;
  /** Lines whose latest job has ended. */
  done: number;
  running: number;
  waiting: number;
  /** By the status of each line's latest job. */
  counts: Record<JobStatus, number>;
  /** Latest jobs whose verify passed / failed (jobs without a verify are in neither). */
  verified: number;
  unverified: number;
  /** Spend of every attempt of every job of the batch, retried ones included. */
  spentUsd: number;
  budgetUsd?: number;
  cancelled: boolean;
  /** Per line, in line order: only with `{ jobs: true }`. */
  jobs?: BatchJob[];
}

export type BatchListEntry = Pick<BatchStatus, "batchId" | "name" | "createdAt" | "finishedAt" | "total" | "done" | "spentUsd" | "budgetUsd" | "cancelled">;

export interface SubmitBatchOptions {
  /** The batch id (letters, digits, _ . -); default: `b-` and a hash of the specs with their lines. */
  name?: string;
  budgetUsd?: number;
  /** The line (in its file) of each spec; default 1, 2, 3... */
  lines?: number[];
}

export interface SubmitBatchResult {
  batchId: string;
  /** Each line's latest job id, in line order. */
  ids: string[];
  /** How many jobs this call put in the queue (0 when the same batch was submitted before). */
  added: number;
}

export interface BatchProgress {
  status: BatchStatus;
  /** Jobs that ended since the previous call, with their summaries (lines' latest jobs only). */
  finished: { jobId: string; result: JobSummary }[];
}

export interface WaitForBatchOptions {
  onProgress?: (p: BatchProgress) => void;
  signal?: AbortSignal;
  /** How often the index is read (default 500 ms). */
  pollMs?: number;
  /** How often jobs without a result are checked in the queue itself (default 5 s; see reconcile). */
  reconcileMs?: number;
}

export class BatchNotFoundError extends Error {
  constructor(readonly batchId: string, readonly queueName: string) {
    super(`no batch ${batchId} in queue ${queueName}`);
  }
}

/** A batch name reused for other specs. */
export class BatchConflictError extends Error {
  constructor(readonly batchId: string, readonly queueName: string) {
    super(`batch ${batchId} already exists in queue ${queueName} with other jobs; use another --name`);
  }
}

/** The order of "worst" statuses, for one exit code for a batch: failed > verify_failed > limits > cancelled > completed. */
export const STATUS_SEVERITY: Record<JobStatus, number> = { failed: 4, verify_failed: 3, timeout: 2, budget_exceeded: 2, max_turns: 2, cancelled: 1, completed: 0 };

const BATCH_ID_RE = /^[A-Za-z0-9_.-]{1,96}$/;
const TTL_SEC = defaults.transcript.ttlSec;
const PARTS = ["meta", "lines", "results", "spend", "started", "finished", "tasks"] as const;
type Part = (typeof PARTS)[number];

export function checkBatchName(name: string): string {
  if (!BATCH_ID_RE.test(name) || name === "." || name === "..") throw new JobSpecError(`batch name must be 1-96 characters from A-Z a-z 0-9 _ . - (got ${JSON.stringify(name)})`);
  return name;
}

export const batchJobId = (batchId: string, line: number, retry = 0) => `${batchId}-L${line}${retry ? `-r${retry}` : ""}`;
const retryOf = (jobId: string) => Number(/-r(\d+)$/.exec(jobId)?.[1] ?? 0);

// ---------------------------------------------------------------------------------------------
// Batch files
// ---------------------------------------------------------------------------------------------

export interface BatchLine {
  line: number;
  spec: JobSpec;
}

/** A batch file with bad lines: `errors` are `file:line: message`, one per bad line. */
export class BatchFileError extends Error {
  constructor(readonly errors: string[]) {
    super(`nothing enqueued:\n${errors.join("\n")}`);
  }
}

/**
 * One JobSpec per line (blank lines skipped), each validated as enqueue does (schema, local paths
 * made absolute and checked). Any bad line: BatchFileError naming every one of them.
 */
export function parseBatchFile(text: string, file = "batch"): BatchLine[] {
  const out: BatchLine[] = [];
  const errors: string[] = [];
  text.split("\n").forEach((raw, i) => {
    if (!raw.trim()) return;
    try {
      const parsed: unknown = JSON.parse(raw);
      out.push({ line: i + 1, spec: prepareSpecs([parsed])[0]! });
    } catch (err) {
      errors.push(`${file}:${i + 1}: ${err instanceof SyntaxError ? "not valid JSON: " : ""}${(err as Error).message}`);
    }
  });
  if (errors.length) throw new BatchFileError(errors);
  if (!out.length) throw new BatchFileError([`${file}: no jobs in the file`]);
  return out;
}

export function readBatchFile(file: string): BatchLine[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new BatchFileError([`${file}: ${(err as Error).message}`]);
  }
  return parseBatchFile(text, file);
}

/** JSON with sorted keys, so two specs compare by content. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x) => (x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1))) : x));
}

/** The batch's content hash: its specs (local paths absolute) with their lines. */
export function batchHash(lines: BatchLine[]): string {
  const h = createHash("sha256");
  for (const { line, spec } of lines) h.update(`${line}\n${canonical(spec)}\n`);
  return h.digest("hex");
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
function scripted(redis: Redis): Scripted {
  if (!defined.has(redis)) {
    redis.defineCommand("pbBatchFinish", { numberOfKeys: 7, lua: LUA_FINISH });
    redis.defineCommand("pbBatchSpend", { numberOfKeys: 2, lua: LUA_SPEND });
    redis.defineCommand("pbBatchStart", { numberOfKeys: 2, lua: LUA_START });
    redis.defineCommand("pbBatchSwitch", { numberOfKeys: 3, lua: LUA_SWITCH });
    defined.add(redis);
  }
  return redis as Scripted;
}

function batchKeys(queueName: string, batchId: string): Record<Part, string> {
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
    filesChanged: r.filesChanged.length,
    finishedAt: Date.now(),
  };
}

/** Records a finished job in its batch's index (one round trip). */
async function recordFinished(redis: Redis, queueName: string, batch: { id: string; line: number }, jobId: string, attempt: number, r: JobResult, onlyIfAbsent = false): Promise<boolean> {
  const bk = batchKeys(queueName, batch.id);
  const n = await scripted(redis).pbBatchFinish(
    ...PARTS.map((p) => bk[p]),
    jobId,
    String(batch.line),
    `${jobId}#${attempt}`,
    String(r.costUsd),
    JSON.stringify(summarize(r, batch.line)),
    onlyIfAbsent ? "1" : "0",
    TTL_SEC,
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
  finish(data: JobData, jobId: string, attempt: number, result: JobResult): Promise<void>;
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
    async finish(data, jobId, attempt, result) {
      if (!data?.batch) return;
      await recordFinished(redis, queueName, data.batch, jobId, attempt, result);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The client's side
// ---------------------------------------------------------------------------------------------

const num = (s: string | undefined) => (s === undefined || s === "" ? undefined : Number(s));

function fromMeta(batchId: string, m: Record<string, string>, running: number): BatchStatus {
  const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, Number(m[`n:${s}`] ?? 0)])) as Record<JobStatus, number>;
  const total = Number(m.total ?? 0);
  const done = Number(m.done ?? 0);
  return {
    batchId,
    ...(m.name ? { name: m.name } : {}),
    createdAt: Number(m.createdAt ?? 0),
    ...(m.finishedAt ? { finishedAt: Number(m.finishedAt) } : {}),
    total,
    done,
    running,
    waiting: Math.max(0, total - done - running),
    counts,
    verified: Number(m.verified ?? 0),
    unverified: Number(m.unverified ?? 0),
    spentUsd: Number(m.spent ?? 0),
    ...(num(m.budgetUsd) !== undefined ? { budgetUsd: num(m.budgetUsd) } : {}),
    cancelled: m.cancelled === "1",
  };
}

const percentile = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]! : 0);

export interface BatchSummary {
  batchId: string;
  name?: string;
  createdAt: string;
  finishedAt?: string;
  total: number;
  counts: Record<JobStatus, number>;
  /** Latest jobs: verify passed, failed, or there was none (or it never ran). */
  verify: { verified: number; unverified: number; none: number };
  /** The latest attempt of each line, and everything spent (retried jobs and failed attempts too). */
  costUsd: { latest: number; all: number; budget?: number };
  tokens: Usage;
  jobMs: { p50: number; p95: number; max: number };
  /** The most common errors of the latest jobs, most common first (at most 10). */
  errors: { error: string; count: number }[];
  jobs: (BatchJob & { task?: string })[];
}

/** Batches through one PatchbayClient (its Redis, its queue). */
export class BatchClient {
  constructor(readonly c: PatchbayClient) {}

  private bk(batchId: string) {
    return batchKeys(this.c.queueName, batchId);
  }

  /**
   * Validates every spec, then enqueues them all under one batch id. Idempotent: each line's job
   * id is `<batch>-L<line>`, so the same batch submitted again (after a crash, say) adds only the
   * jobs that are not there yet. A name already used for other specs: BatchConflictError.
   */
  submit(inputs: unknown[] | BatchLine[], opts: SubmitBatchOptions = {}): Promise<SubmitBatchResult> {
    let lines: BatchLine[];
    try {
      if (opts.budgetUsd !== undefined && !(Number.isFinite(opts.budgetUsd) && opts.budgetUsd > 0)) throw new JobSpecError(`budgetUsd must be a positive number (got ${opts.budgetUsd})`);
      lines = isBatchLines(inputs) ? inputs : prepareSpecs(inputs).map((spec, i) => ({ line: opts.lines?.[i] ?? i + 1, spec }));
      if (!lines.length) throw new JobSpecError("a batch needs at least one job");
      if (new Set(lines.map((l) => l.line)).size !== lines.length) throw new JobSpecError("two specs of a batch have the same line");
      // The job id comes from the batch: a spec's own jobId is not used.
      lines = lines.map(({ line, spec }) => ({ line, spec: spec.jobId ? (({ jobId: _, ...rest }) => rest)(spec) : spec }));
      if (opts.name !== undefined) checkBatchName(opts.name);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.c.hold(async () => {
      const hash = batchHash(lines);
      const batchId = opts.name ?? `b-${hash.slice(0, 16)}`;
      const bk = this.bk(batchId);
      const r = this.c.redis;
      const existing = await r.hget(bk.meta, "hash");
      if (existing && existing !== hash) throw new BatchConflictError(batchId, this.c.queueName);
      const now = Date.now();
      const m = r.multi();
      m.hsetnx(bk.meta, "hash", hash).hsetnx(bk.meta, "createdAt", String(now)).hsetnx(bk.meta, "total", String(lines.length));
      if (opts.name) m.hsetnx(bk.meta, "name", opts.name);
      if (opts.budgetUsd !== undefined) m.hset(bk.meta, "budgetUsd", String(opts.budgetUsd));
      m.zadd(keys(this.c.queueName).batches, "NX", now, batchId);
      for (const { line, spec } of lines) m.hsetnx(bk.lines, String(line), batchJobId(batchId, line)).hsetnx(bk.tasks, String(line), spec.task.slice(0, 200));
      for (const p of PARTS) m.expire(bk[p], TTL_SEC);
      m.hget(bk.meta, "hash");
      const res = (await m.exec()) ?? [];
      if (res.at(-1)?.[1] !== hash) throw new BatchConflictError(batchId, this.c.queueName); // a racing submit of other specs
      const latest = await r.hgetall(bk.lines);
      // Lines not retried yet whose job is not in the queue: (re)add them.
      const first = lines.filter(({ line }) => latest[line] === batchJobId(batchId, line));
      const exists = await Promise.all(first.map(({ line }) => r.exists(this.c.queue.toKey(batchJobId(batchId, line)))));
      const todo = first.filter((_, i) => !exists[i]);
      if (todo.length) {
        await this.c.queue.addBulk(
          todo.map(({ line, spec }) => ({
            name: "fix",
            data: { spec, enqueuedAt: now, batch: { id: batchId, line } } satisfies JobData,
            opts: { ...jobOptions(spec), jobId: batchJobId(batchId, line) },
          })),
        );
      }
      await r.hset(bk.meta, "submitted", "1");
      return { batchId, ids: lines.map(({ line }) => latest[line] ?? batchJobId(batchId, line)), added: todo.length };
    });
  }

  /** Counts from one HGETALL (and an HLEN); with `{ jobs: true }` also every line's latest job. */
  status(batchId: string, opts: { jobs?: boolean } = {}): Promise<BatchStatus> {
    return this.c.hold(async () => {
      const bk = this.bk(batchId);
      const r = this.c.redis;
      if (!opts.jobs) {
        const [[, meta], [, running]] = (await r.multi().hgetall(bk.meta).hlen(bk.started).exec()) as [[null, Record<string, string>], [null, number]];
        if (!meta.createdAt) throw new BatchNotFoundError(batchId, this.c.queueName);
        return fromMeta(batchId, meta, running);
      }
      const res = (await r.multi().hgetall(bk.meta).hgetall(bk.lines).hgetall(bk.results).hgetall(bk.started).exec()) as [null, Record<string, string>][];
      const [meta, lines, results, started] = res.map(([, v]) => v) as [Record<string, string>, Record<string, string>, Record<string, string>, Record<string, string>];
      if (!meta.createdAt) throw new BatchNotFoundError(batchId, this.c.queueName);
      const jobs: BatchJob[] = [];
      for (const [line, jobId] of Object.entries(lines)) {
        const summary = results[jobId];
        const startedAt = started[jobId];
        jobs.push({
          line: Number(line),
          jobId,
          state: summary ? "finished" : startedAt ? "running" : "waiting",
          ...(startedAt ? { startedAt: Number(startedAt) } : {}),
          ...(summary ? { result: JSON.parse(summary) as JobSummary } : {}),
        });
      }
      jobs.sort((a, b) => a.line - b.line);
      const st = fromMeta(batchId, meta, jobs.filter((j) => j.state === "running").length);
      return { ...st, jobs };
    });
  }

  /** Batches, newest first. */
  list(opts: { limit?: number } = {}): Promise<BatchListEntry[]> {
    return this.c.hold(async () => {
      const zkey = keys(this.c.queueName).batches;
      const ids = await this.c.redis.zrevrange(zkey, 0, (opts.limit ?? 50) - 1);
      const metas = await Promise.all(ids.map((id) => this.c.redis.hgetall(this.bk(id).meta)));
      const out: BatchListEntry[] = [];
      const gone: string[] = [];
      ids.forEach((batchId, i) => {
        const m = metas[i]!;
        if (!m.createdAt) return void gone.push(batchId); // expired
        const s = fromMeta(batchId, m, 0);
        out.push({ batchId, ...(s.name ? { name: s.name } : {}), createdAt: s.createdAt, ...(s.finishedAt ? { finishedAt: s.finishedAt } : {}), total: s.total, done: s.done, spentUsd: s.spentUsd, ...(s.budgetUsd !== undefined ? { budgetUsd: s.budgetUsd } : {}), cancelled: s.cancelled });
      });
      if (gone.length) await this.c.redis.zrem(zkey, ...gone);
      return out;
    });
  }

  /**
   * Cancels a batch: jobs not started yet end as cancelled without a sandbox when a worker takes
   * them; running ones are told as `patchbay cancel` does and stop within seconds.
   */
  cancel(batchId: string): Promise<{ signalled: number; waiting: number }> {
    return this.c.hold(async () => {
      const st = await this.status(batchId, { jobs: true });
      const k = keys(this.c.queueName);
      const running = st.jobs!.filter((j) => j.state === "running").map((j) => j.jobId);
      const m = this.c.redis.multi().hset(this.bk(batchId).meta, "cancelled", "1");
      for (const id of running) m.set(k.cancel(id), "1", "EX", TTL_SEC).publish(k.cancelChannel, id);
      await m.exec();
      return { signalled: running.length, waiting: st.jobs!.filter((j) => j.state === "waiting").length };
    });
  }

  /**
   * Runs again the lines whose latest job ended with one of `statuses` (default: every status but
   * completed), as new jobs (`<batch>-L<line>-r<n>`) of the same batch; their results replace the
   * old ones in the status and summary. Clears a cancel. Returns the new job ids.
   */
  retry(batchId: string, opts: { statuses?: readonly JobStatus[] } = {}): Promise<{ ids: string[]; missing: number[] }> {
    const statuses = new Set(opts.statuses ?? JOB_STATUSES.filter((s) => s !== "completed"));
    return this.c.hold(async () => {
      const st = await this.status(batchId, { jobs: true });
      const chosen = st.jobs!.filter((j) => j.result && statuses.has(j.result.status));
      const bk = this.bk(batchId);
      const now = Date.now();
      const add: { line: number; oldId: string; newId: string; spec: JobSpec }[] = [];
      const missing: number[] = [];
      for (const j of chosen) {
        const old = await Job.fromId<JobData, JobResult>(this.c.queue, j.jobId);
        if (!old?.data?.spec) {
          missing.push(j.line); // removed from the queue (finished jobs are kept 7 days)
          continue;
        }
        add.push({ line: j.line, oldId: j.jobId, newId: batchJobId(batchId, j.line, retryOf(j.jobId) + 1), spec: old.data.spec });
      }
      if (add.length) {
        await this.c.queue.addBulk(
          add.map(({ line, newId, spec }) => ({
            name: "fix",
            data: { spec, enqueuedAt: now, batch: { id: batchId, line } } satisfies JobData,
            opts: { ...jobOptions(spec), jobId: newId },
          })),
        );
        const s = scripted(this.c.redis);
        await this.c.redis.hdel(bk.meta, "cancelled");
        await Promise.all(add.map(({ line, oldId, newId }) => s.pbBatchSwitch(bk.meta, bk.lines, bk.results, String(line), oldId, newId)));
      }
      return { ids: add.map((a) => a.newId), missing };
    });
  }

  /**
   * Waits until every line's latest job has ended; calls onProgress after each read of the index
   * with the jobs that ended since. Jobs the index has no result for are also looked up in the
   * queue now and then (a job BullMQ failed without a worker recording it, e.g. one that stalled
   * too often, or one removed from the queue): see reconcile.
   */
  async wait(batchId: string, opts: WaitForBatchOptions = {}): Promise<BatchStatus> {
    const pollMs = opts.pollMs ?? 500;
    const reconcileMs = opts.reconcileMs ?? 5000;
    const bk = this.bk(batchId);
    let cursor = 0;
    let lastReconcile = Date.now();
    const suspects = new Map<string, number>();
    for (;;) {
      opts.signal?.throwIfAborted();
      const st = await this.readOrRetry(() => this.status(batchId));
      const ids = await this.readOrRetry(() => this.c.hold(() => this.c.redis.lrange(bk.finished, cursor, cursor + 999)));
      cursor += ids.length;
      const summaries = ids.length ? await this.readOrRetry(() => this.c.hold(() => this.c.redis.hmget(bk.results, ...ids))) : [];
      let finished = ids.flatMap((jobId, i) => (summaries[i] ? [{ jobId, result: JSON.parse(summaries[i]!) as JobSummary }] : []));
      if (finished.length) {
        // Only each line's latest job: not the attempts a retry replaced (a second wait after a retry).
        const latest = await this.readOrRetry(() => this.c.hold(() => this.c.redis.hmget(bk.lines, ...finished.map((f) => String(f.result.line)))));
        finished = finished.filter((f, i) => latest[i] === f.jobId);
      }
      opts.onProgress?.({ status: st, finished });
      if (ids.length === 1000) continue; // more to read at once
      if (st.done >= st.total) return this.status(batchId, { jobs: true });
      if (Date.now() - lastReconcile >= reconcileMs) {
        lastReconcile = Date.now();
        await this.reconcile(batchId, suspects).catch(() => {});
      }
      await sleep(pollMs, undefined, { signal: opts.signal });
    }
  }

  /** Redis unreachable for a moment: keep trying (as waitForResult does). */
  private async readOrRetry<T>(fn: () => Promise<T>): Promise<T> {
    for (let delay = 200; ; delay = Math.min(delay * 2, 2000)) {
      try {
        return await fn();
      } catch (err) {
        if (err instanceof BatchNotFoundError) throw err;
        await sleep(delay);
      }
    }
  }

  /**
   * Jobs without a result in the index, looked up in the queue: one BullMQ failed for good is
   * recorded as failed (with its reason); one that completed, or is not in the queue at all, seen
   * so twice in a row, is recorded from its return value or as failed. A worker's own record wins.
   */
  async reconcile(batchId: string, suspects = new Map<string, number>()): Promise<number> {
    return this.c.hold(async () => {
      const st = await this.status(batchId, { jobs: true });
      const meta = await this.c.redis.hget(this.bk(batchId).meta, "submitted");
      const pending = st.jobs!.filter((j) => j.state !== "finished").slice(0, 2000);
      let fixed = 0;
      await Promise.all(
        pending.map(async (j) => {
          const state = await this.c.queue.getJobState(j.jobId);
          let result: JobResult | undefined;
          if (state === "failed") {
            const job = await Job.fromId<JobData, JobResult>(this.c.queue, j.jobId);
            result = emptyResult("failed", job?.failedReason ?? "the job failed", { jobId: j.jobId, ...(job ? { attempt: Math.max(1, job.attemptsMade) } : {}) });
          } else if ((state === "completed" || (state === "unknown" && meta === "1")) && (suspects.get(j.jobId) ?? 0) >= 1) {
            const job = state === "completed" ? await Job.fromId<JobData, JobResult>(this.c.queue, j.jobId) : undefined;
            result = job?.returnvalue ?? emptyResult("failed", `job ${j.jobId} is not in queue ${this.c.queueName} (removed?)`, { jobId: j.jobId });
          } else if (state === "completed" || state === "unknown") {
            suspects.set(j.jobId, (suspects.get(j.jobId) ?? 0) + 1);
          }
          if (result && (await recordFinished(this.c.redis, this.c.queueName, { id: batchId, line: j.line }, j.jobId, result.attempt ?? 1, result, true))) fixed++;
        }),
      );
      return fixed;
    });
  }

  /** The summary of a batch (status with every job, the tasks, the totals). */
  summary(batchId: string): Promise<BatchSummary> {
    return this.c.hold(async () => {
      const st = await this.status(batchId, { jobs: true });
      const tasks = await this.c.redis.hgetall(this.bk(batchId).tasks);
      return summarizeBatch(st, tasks);
    });
  }

  /**
   * Writes DIR/<jobId>/{patch.diff,transcript.jsonl,result.json} (and transcript.html where the
   * dashboard's renderer is there) for each line's latest job, then DIR/summary.json and
   * DIR/summary.md. Returns the summary.
   */
  async writeOut(batchId: string, dir: string, opts: { concurrency?: number } = {}): Promise<BatchSummary> {
    const summary = await this.summary(batchId);
    mkdirSync(dir, { recursive: true });
    const html = await transcriptRenderer();
    const queue = [...summary.jobs];
    const one = async (j: BatchJob) => {
      const jobDir = join(dir, j.jobId);
      mkdirSync(jobDir, { recursive: true });
      const result = await this.finalResult(j);
      const events: TranscriptEvent[] = [];
      for await (const e of this.c.watch(j.jobId, { follow: false })) events.push(e);
      writeFileSync(join(jobDir, "patch.diff"), result.patch);
      writeFileSync(join(jobDir, "result.json"), JSON.stringify(result, null, 2) + "\n");
      writeFileSync(join(jobDir, "transcript.jsonl"), events.map((e) => JSON.stringify(e) + "\n").join(""));
      if (html) writeFileSync(join(jobDir, "transcript.html"), html(events, { patch: result.patch }));
    };
    await Promise.all(
      Array.from({ length: opts.concurrency ?? 8 }, async () => {
        for (let j = queue.shift(); j; j = queue.shift()) await one(j).catch((err: Error) => writeFileSync(join(dir, j!.jobId, "error.txt"), `${err.message}\n`));
      }),
    );
    writeFileSync(join(dir, "summary.json"), JSON.stringify(summary, null, 2) + "\n");
    writeFileSync(join(dir, "summary.md"), summaryMarkdown(summary));
    return summary;
  }

  /** A finished job's full result from the queue (its summary when the queue no longer has it). */
  private async finalResult(j: BatchJob): Promise<JobResult> {
    const fallback = () => {
      const s = j.result;
      return emptyResult(s?.status ?? "failed", s?.error ?? "no result", { jobId: j.jobId, ...(s ? { costUsd: s.costUsd, usage: s.usage, turns: s.turns, ...(s.attempt ? { attempt: s.attempt } : {}) } : {}) });
    };
    // The worker records the summary just before the queue marks the job completed: a moment's wait.
    for (let i = 0; i < 50; i++) {
      try {
        const r = await this.c.result(j.jobId);
        if (r) return r;
      } catch (err) {
        if (err instanceof JobFailedError) return emptyResult("failed", err.reason, { jobId: j.jobId, ...(j.result ? { costUsd: j.result.costUsd, usage: j.result.usage } : {}) });
        return fallback();
      }
      await sleep(100);
    }
    return fallback();
  }
}

function isBatchLines(x: unknown[]): x is BatchLine[] {
  return x.length > 0 && x.every((e) => e !== null && typeof e === "object" && "line" in e && "spec" in e && Object.keys(e).length === 2);
}

/** The dashboard's transcript page renderer, when src/web/ has it (optional). */
async function transcriptRenderer(): Promise<((events: TranscriptEvent[], opts: { patch?: string }) => string) | undefined> {
  const where = "./web/html.js"; // a variable: the build does not depend on it
  try {
    const mod = (await import(where)) as { renderTranscriptHtml?: (events: TranscriptEvent[], opts: { patch?: string }) => string };
    return typeof mod.renderTranscriptHtml === "function" ? mod.renderTranscriptHtml : undefined;
  } catch {
    return undefined;
  }
}

/** Most common errors: by their first line, digits kept (exit codes tell causes apart). */
export function summarizeBatch(st: BatchStatus, tasks: Record<string, string> = {}): BatchSummary {
  const jobs = st.jobs ?? [];
  const done = jobs.filter((j) => j.result).map((j) => j.result!);
  const tokens = done.reduce((u, r) => ({ inputTokens: u.inputTokens + r.usage.inputTokens, outputTokens: u.outputTokens + r.usage.outputTokens, cacheReadTokens: u.cacheReadTokens + r.usage.cacheReadTokens, cacheWriteTokens: u.cacheWriteTokens + r.usage.cacheWriteTokens }), { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 });
  const ms = done.map((r) => r.totalMs).sort((a, b) => a - b);
  const errors = new Map<string, number>();
  for (const r of done) if (r.error && r.status !== "completed") {
    const e = r.error.split("\n")[0]!.trim().slice(0, 200);
    errors.set(e, (errors.get(e) ?? 0) + 1);
  }
  return {
    batchId: st.batchId,
    ...(st.name ? { name: st.name } : {}),
    createdAt: new Date(st.createdAt).toISOString(),
    ...(st.finishedAt ? { finishedAt: new Date(st.finishedAt).toISOString() } : {}),
    total: st.total,
    counts: st.counts,
    verify: { verified: st.verified, unverified: st.unverified, none: st.total - st.verified - st.unverified },
    costUsd: { latest: round(done.reduce((s, r) => s + r.costUsd, 0)), all: round(st.spentUsd), ...(st.budgetUsd !== undefined ? { budget: st.budgetUsd } : {}) },
    tokens,
    jobMs: { p50: percentile(ms, 50), p95: percentile(ms, 95), max: ms.at(-1) ?? 0 },
    errors: [...errors].sort((a, b) => b[1] - a[1]).slice(0, 10).map(([error, count]) => ({ error, count })),
    jobs: jobs.map((j) => ({ ...j, ...(tasks[j.line] !== undefined ? { task: tasks[j.line] } : {}) })),
  };
}

const round = (x: number) => Math.round(x * 1e6) / 1e6;

/** Text from a job or a task in a Markdown table cell: one line, no controls, no table or markup syntax. */
export function mdCell(s: string, max = 120): string {
  let one = safeText(s, { oneLine: true }).replace(/\s+/g, " ").trim();
  if (one.length > max) one = `${one.slice(0, max - 1)}…`;
  return one.replace(/[\\`*_[\]<>|#!~&]/g, (ch) => (ch === "&" ? "&amp;" : `\\${ch}`));
}

const usd = (x: number) => `$${x.toFixed(4)}`;
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

export function summaryMarkdown(s: BatchSummary): string {
  const counts = JOB_STATUSES.filter((k) => s.counts[k]).map((k) => `${k} ${s.counts[k]}`).join(", ");
  const lines = [
    `# Batch ${mdCell(s.batchId)}${s.name && s.name !== s.batchId ? ` (${mdCell(s.name)})` : ""}`,
    "",
    `- Jobs: ${s.total} (${counts || "none finished"})`,
    `- Verify: ${s.verify.verified} passed, ${s.verify.unverified} failed, ${s.verify.none} without a verify`,
    `- Cost: ${usd(s.costUsd.latest)} for the latest attempts, ${usd(s.costUsd.all)} spent in all${s.costUsd.budget !== undefined ? ` (budget $${s.costUsd.budget.toFixed(2)})` : ""}`,
    `- Tokens: ${s.tokens.inputTokens} input, ${s.tokens.outputTokens} output, ${s.tokens.cacheReadTokens} cache reads, ${s.tokens.cacheWriteTokens} cache writes`,
    `- Job time: p50 ${secs(s.jobMs.p50)}, p95 ${secs(s.jobMs.p95)}, max ${secs(s.jobMs.max)}`,
    `- Created ${s.createdAt}${s.finishedAt ? `, finished ${s.finishedAt}` : ""}`,
    "",
  ];
  if (s.errors.length) {
    lines.push("## Most common errors", "", "| Count | Error |", "| ---: | --- |", ...s.errors.map((e) => `| ${e.count} | ${mdCell(e.error, 200)} |`), "");
  }
  lines.push("## Jobs", "", "| Line | Job | Status | Verified | Cost | Tokens in / out / cache read | Time | Task | Error |", "| ---: | --- | --- | --- | ---: | --- | ---: | --- | --- |");
  for (const j of s.jobs) {
    const r = j.result;
    const v = r?.verified === undefined ? "" : r.verified ? "yes" : "no";
    const tok = r ? `${r.usage.inputTokens} / ${r.usage.outputTokens} / ${r.usage.cacheReadTokens}` : "";
    lines.push(`| ${j.line} | ${mdCell(j.jobId)} | ${r ? r.status : j.state} | ${v} | ${r ? usd(r.costUsd) : ""} | ${tok} | ${r ? secs(r.totalMs) : ""} | ${mdCell(j.task ?? "", 80)} | ${mdCell(r?.error ?? "", 120)} |`);
  }
  return lines.join("\n") + "\n";
}

// ---------------------------------------------------------------------------------------------
// The library API over the default client (REDIS_URL, PATCHBAY_QUEUE)
// ---------------------------------------------------------------------------------------------

let batches: BatchClient | undefined;
const b = () => (batches ??= new BatchClient(defaultClient()));
/** Enqueues specs as one batch: `{ batchId, ids, added }`. (`enqueueBatch(specs)` enqueues plain jobs and returns their ids.) */
export const submitBatch = (specs: unknown[], opts?: SubmitBatchOptions) => b().submit(specs, opts);
export const batchStatus = (batchId: string, opts?: { jobs?: boolean }) => b().status(batchId, opts);
export const waitForBatch = (batchId: string, opts?: WaitForBatchOptions) => b().wait(batchId, opts);
export const retryBatch = (batchId: string, opts?: { statuses?: readonly JobStatus[] }) => b().retry(batchId, opts);
export const cancelBatch = (batchId: string) => b().cancel(batchId);
export const listBatches = (opts?: { limit?: number }) => b().list(opts);
export const batchSummary = (batchId: string) => b().summary(batchId);
