// One job attempt: BullMQ's processor. Admitted (src/queue/attempt-admit.ts: spec, health, policy,
// stalls, a recorded result), it runs runJob with the worker's backend, pool, labels, model, batch
// budget and checkpoints, under a hard deadline; streams the transcript into Redis; records the
// result with its job_finished event; and on a failure does what src/queue/attempt-outcome.ts decides.
import { count } from "../core/count.js";
import { UnrecoverableError, WaitingChildrenError, Worker, type Queue } from "bullmq";
import { setTimeout as sleep } from "node:timers/promises";
import { defaults } from "../core/config/config.js";
import { usd } from "../core/money.js";
import type { Model, ModelError } from "../agent/model.js";
import { specHash } from "../job/checkpoint.js";
import { redisCheckpoints } from "./checkpoints.js";
import { runJob } from "../job/run.js";
import { workerSourceRules } from "../job/repo/source-check.js";
import type { Backend } from "../backend/types.js";
import type { SandboxKind, SandboxPool } from "../sandbox/pool.js";
import type { EgressProxy } from "../net/proxy.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import {
  emptyResult,
  finishedEvent,
  stamped,
  type JobResult,
  type JobSpec,
  type TranscriptEvent,
} from "../core/spec/spec.js";
import { admitAttempt, type AdmitContext, type Admitted, type QueueJob } from "./attempt-admit.js";
import { classifyFailure, REDIS_HAND_BACKS } from "./attempt-outcome.js";
import { tracedAttempt } from "./attempt-trace.js";
import { countInfraFailure, countRedisHandBack, handBack, throttleMs } from "./health.js";
import { recordResult } from "./result-record.js";
import { confirmWrites, type WaitSetting } from "../redis/connect.js";
import { boundEvent } from "./result-bounds.js";
import { isRedisConnectionError } from "../redis/connection-errors.js";
import type { JobData } from "./client.js";
import {
  cancelKeys,
  candidateEnded,
  candidateOf,
  candidateOptions,
  gatherCandidates,
  type CandidatesContext,
} from "./candidates.js";

/** A job running on this worker, as the cancel listener and the drain see it. */
export interface Active {
  ctl: AbortController;
  sandbox?: Sandbox;
  /** Settles when runJob is over (its sandbox removed, or handed to the background removals). */
  done: Promise<void>;
  /** The newest transcript write: awaited before the result, so `watch` never misses the end. */
  lastWrite: Promise<unknown>;
  /** The job_finished event of a returned result, held to be written with the result record. */
  finished?: TranscriptEvent;
  /** Set on the failure path: its job_finished is written at once. */
  failing?: boolean;
  /** The kind of sandbox its verify takes, where it runs verify here (the pool keeps a bare box for it: PoolOptions.slotsToVerify). */
  verifies?: SandboxKind;
}

export interface AttemptContext extends AdmitContext {
  backend: Backend;
  pool: SandboxPool;
  metrics: { observe(e: TranscriptEvent): void };
  /** The worker's id: the owner of its sandboxes. */
  owner: string;
  /** Labels of its sandboxes (queue, deployment): the reaper judges owners by them. */
  labels: Record<string, string>;
  model?: () => Model;
  /** The setup phase's egress proxy (WorkerOptions.egress); unset: the process's own. */
  egress?: EgressProxy;
  /** The jobs running here: an attempt adds itself and removes itself when it ends. */
  active: Map<string, Active>;
  /** Throttles the whole queue (BullMQ's worker.rateLimit). */
  rateLimit(ms: number): Promise<void>;
  /** How the result record is confirmed on replicas (WAIT; src/redis/connect.ts): a failover must not lose a result it acknowledged. */
  durability: WaitSetting;
  /** Where a finished job's sandbox goes: the worker's background removals (src/sandbox/removals.ts), after the result. */
  retire?: (sb: Sandbox) => Promise<void>;
  /** The worker's queue: a job with candidates adds them to it (src/queue/candidates.ts). */
  queue: Queue<JobData, JobResult>;
}

/** What the candidates' executor takes of an attempt's context. */
const candidatesOf = (ctx: AttemptContext): CandidatesContext => ({
  redis: ctx.redis,
  k: ctx.k,
  queue: ctx.queue,
  seedMaxBytes: ctx.config.seedMaxBytes,
  retentionSec: ctx.config.retentionSec,
});

/** What an attempt carries from its start to its end. */
interface Running extends Admitted {
  jobId: string;
  entry: Active;
  checkpoints?: ReturnType<typeof redisCheckpoints>;
  onEvent: (e: TranscriptEvent) => void;
  /** What a resumed attempt took over from the earlier one. */
  spentBefore(): number;
}

/** A job abandoned at the drain deadline goes back to the queue at once, uncounted; its checkpoint stays. */
const abandon = (job: QueueJob, token: string | undefined) => handBack(job, token);

export function attemptProcessor(ctx: AttemptContext): (job: QueueJob, token?: string) => Promise<JobResult> {
  return async (job, token) => {
    const admitted = await admitAttempt(ctx, job, token).catch(async (err: unknown) => {
      throw await beforeRun(ctx, job, token, err);
    });
    return "recorded" in admitted
      ? admitted.recorded
      : tracedAttempt(job, admitted.attempt, ctx.owner, () => runAttempt(ctx, job, token, admitted));
  };
}

/** A job's entry in the worker's active map, before its sandbox. */
function newActive(verifies: SandboxKind | undefined): Active {
  return { ctl: new AbortController(), done: Promise.resolve(), lastWrite: Promise.resolve(), verifies };
}

/**
 * The kind of sandbox a job's verify takes, where the job runs verify in this attempt: not a job of
 * candidates over 1 (its candidates verify, each in a job of its own), nor its step that picks one.
 */
function verifyKind(ctx: AttemptContext, job: QueueJob, spec: JobSpec): SandboxKind | undefined {
  if (spec.verify === undefined || job.data.step === "candidates") return undefined;
  const cand = candidateOf(job);
  if ((spec.candidates ?? 1) > 1 && !(cand && "parent" in cand)) return undefined;
  return { image: spec.image ?? ctx.config.image, limits: spec.limits, runtime: spec.runtime };
}

async function runAttempt(
  ctx: AttemptContext,
  job: QueueJob,
  token: string | undefined,
  a: Admitted,
): Promise<JobResult> {
  const { spec, attempt } = a;
  const jobId = job.id!;
  const entry = newActive(verifyKind(ctx, job, spec));
  ctx.active.set(jobId, entry);
  // A cancelled job, or a batch whose budget is spent (or that was cancelled): it ends at once, without a sandbox.
  const early = await (async () => {
    if (await ctx.redis.exists(...cancelKeys(ctx.k, jobId))) entry.ctl.abort("cancelled");
    return ctx.batch.start(job.data, jobId, attempt);
  })().catch(async (err: unknown) => {
    ctx.active.delete(jobId);
    ctx.pool.slotsChanged();
    throw await beforeRun(ctx, job, token, err);
  });
  // No warm sandbox is made while this job is being set up (it would compete for the CPU).
  const setupDone = ctx.pool.setupStarted();
  const checkpoints = ctx.config.checkpoints
    ? redisCheckpoints(
        ctx.redis,
        ctx.k.checkpoint(jobId),
        jobId,
        specHash(spec),
        ctx.config.checkpointMaxBytes,
        ctx.config.retentionSec,
      )
    : undefined;
  const r: Running = { ...a, jobId, entry, checkpoints, ...transcript(ctx, job, entry, setupDone) };
  const deadline = hardDeadline(ctx, r, (spec.timeoutSec ?? defaults.job.timeoutSec) * 1000);
  ctx.log(`job ${jobId} attempt ${attempt}: started`, { job: jobId, attempt });
  if (early) r.onEvent(stamped(finishedEvent(early), jobId, attempt));
  const emit = (e: Parameters<typeof stamped>[0]) => r.onEvent(stamped(e, jobId, attempt));
  const run = early
    ? Promise.resolve(early)
    : job.data.step === "candidates" // its candidates ended: BullMQ handed the job back to pick one
      ? gatherCandidates(candidatesOf(ctx), job, token, spec, emit)
      : runJob(spec, {
          jobId,
          attempt,
          config: ctx.config, // the worker's: `worker --scripted FILE` is not in the environment
          backend: ctx.backend,
          signal: entry.ctl.signal,
          onEvent: r.onEvent,
          owner: ctx.owner,
          labels: ctx.labels,
          model: ctx.model?.(),
          ...(ctx.egress ? { egress: ctx.egress } : {}),
          queuedMs: Date.now() - (job.data.enqueuedAt ?? job.timestamp),
          onSandbox: (sb) => (entry.sandbox = sb),
          pool: ctx.pool,
          stopAfterTurn: ctx.batch.stopAfterTurn(job.data, jobId, attempt),
          checkpoints,
          retire: ctx.retire,
          sources: workerSourceRules(job.data.origin, ctx.config), // held again where the repo is read
          ...candidateOptions(candidatesOf(ctx), job, token, spec, emit),
        });
  entry.done = run.then(
    () => {},
    () => {},
  );
  void entry.done.then(setupDone);
  try {
    const result = await Promise.race([run, deadline.expired]);
    if (entry.ctl.signal.reason === "abandoned") throw await abandon(job, token);
    return await recordAttempt(ctx, job, r, result);
  } catch (err) {
    if (err instanceof WaitingChildrenError) throw err; // its candidates added: it waits for them (candidates.ts)
    throw await failedAttempt(ctx, job, token, r, err);
  } finally {
    deadline.clear();
    ctx.active.delete(jobId);
    ctx.pool.slotsChanged();
  }
}

/**
 * The attempt's transcript: its events into the job's Redis stream (job_finished held for the
 * result record), metrics and progress. Events that come while a write is out go together in the
 * next one (one MULTI, the TTL renewed once): a turn's burst (its response and tool call, the
 * result and the next request) costs one round trip, not one each (the fleet bench, docs/capacity.md).
 */
function transcript(
  ctx: AttemptContext,
  job: QueueJob,
  entry: Active,
  setupDone: () => void,
): Pick<Running, "onEvent" | "spentBefore"> {
  let spentBefore = 0;
  const events = eventWriter(ctx, entry);
  const onEvent = (e: TranscriptEvent) => {
    if (e.type === "sandbox_ready") setupDone();
    ctx.metrics.observe(e);
    if (e.type === "resume" && e.restored) spentBefore = e.costUsd;
    if (e.type === "job_finished" && !entry.failing) {
      entry.finished = e; // written with the result record (which the dashboard reads once it is there: no progress)
      return;
    }
    events(e);
    // The progress the dashboard shows is the turn: a model_response says it (its tool calls, the same turn, add nothing).
    if (e.type === "model_response") void job.updateProgress({ type: e.type, turn: e.turn }).catch(() => {});
  };
  return { onEvent, spentBefore: () => spentBefore };
}

/**
 * Writes events in order on one connection, those that wait for a write in flight together;
 * entry.lastWrite settles once all so far are written. The stream's TTL is set with the first
 * write and again with the result record (result-record.ts): XADD keeps a key's TTL, and no
 * attempt runs for a retention period, so the writes between are a plain XADD each, or a
 * pipeline of them, with no MULTI and no EXPIRE (four commands and Redis' MULTI machinery on both
 * sides became one per event: the worker's CPU per job at 1 x 4, bench/speed-queue.ts).
 */
function eventWriter(ctx: AttemptContext, entry: Active): (e: TranscriptEvent) => void {
  let pending: TranscriptEvent[] = [];
  let flushing: Promise<void> | undefined;
  let ttlSet = false;
  const flush = async (): Promise<void> => {
    while (pending.length) {
      const batch = pending;
      pending = [];
      const key = ctx.k.events(batch[0]!.jobId);
      const args = (e: TranscriptEvent) =>
        [key, "MAXLEN", "~", defaults.transcript.maxLen, "*", "e", JSON.stringify(boundEvent(e))] as const;
      if (!ttlSet || batch.length > 1) {
        const p = ttlSet ? ctx.redis.pipeline() : ctx.redis.multi();
        for (const e of batch) p.xadd(...args(e));
        if (!ttlSet) p.expire(key, ctx.config.retentionSec);
        const r = await p.exec().catch(() => null);
        // Set once the write landed: a failed one (Redis away) sets it with the next write.
        if (!ttlSet) ttlSet = Boolean(r && r.every(([err]) => !err));
      } else await ctx.redis.xadd(...args(batch[0]!)).catch(() => {});
    }
    flushing = undefined;
  };
  return (e) => {
    pending.push(e);
    entry.lastWrite = flushing ??= Promise.resolve().then(flush); // after this tick: the events emitted with this one go along
  };
}

/**
 * BullMQ has no job timeout: runJob aborts itself at timeoutSec. If it is still not done a grace
 * period later (Docker hung, say), its sandbox is killed and the job ends as a timeout here.
 */
function hardDeadline(
  ctx: AttemptContext,
  r: Running,
  timeoutMs: number,
): { expired: Promise<JobResult>; clear(): void } {
  const { jobId, attempt, entry } = r;
  let hard: NodeJS.Timeout | undefined;
  const expired = new Promise<JobResult>((resolve) => {
    hard = setTimeout(() => {
      const error = `the job did not stop at its ${timeoutMs / 1000} s timeout; its sandbox was killed`;
      ctx.log(`job ${jobId}: ${error}`, { job: jobId, attempt, level: "warn" });
      entry.ctl.abort("timeout");
      void entry.sandbox?.destroy().catch(() => {});
      const result = emptyResult("timeout", error, { jobId, attempt });
      r.onEvent(stamped(finishedEvent(result), jobId, attempt));
      resolve(result);
    }, timeoutMs + ctx.config.hardDeadlineGraceMs);
  });
  return { expired, clear: () => clearTimeout(hard) };
}

/** A finished attempt: its result recorded with its job_finished event, its checkpoint gone, its batch told. */
async function recordAttempt(ctx: AttemptContext, job: QueueJob, r: Running, result: JobResult): Promise<JobResult> {
  const { jobId, attempt, entry } = r;
  await Promise.race([entry.lastWrite, sleep(5000)]);
  // BullMQ keeps the bounded result (src/queue/result-bounds.ts), never the agent's lists or a
  // long patch: that is written once, with the record, and the result names it. Such a result is
  // only true once that write landed, so it is awaited; a plain record is a safety net (5 s).
  const record = () =>
    recordResult(ctx.redis, ctx.k, jobId, entry.finished, result, {
      retentionSec: ctx.config.retentionSec,
      maxLen: defaults.transcript.maxLen,
    });
  const rec = record();
  await (rec.stored.patchStored ? rec.written : Promise.race([rec.written, sleep(5000)]));
  await r.checkpoints?.remove().catch(() => {});
  const toBatch = () =>
    ctx.batch
      .finish(job.data, jobId, attempt, result, r.spentBefore())
      .catch((err: Error) => ctx.log(`job ${jobId}: batch index: ${err.message}`, { job: jobId, level: "warn" }));
  await toBatch();
  await candidateEnded(candidatesOf(ctx), job, result).catch((err: Error) =>
    ctx.log(`job ${jobId}: stopping the other candidates: ${err.message}`, { job: jobId, level: "warn" }),
  );
  // The record and the batch's line on a replica before BullMQ completes the job: after a failover
  // the promoted replica has them, and a rerun returns the record instead of running the agent again.
  const confirmed = await confirmWrites(ctx.redis, ctx.durability, async () => {
    if (await ctx.redis.exists(ctx.k.result(jobId))) return;
    ctx.log(`job ${jobId}: its result record was lost in a Redis failover; written again`, {
      job: jobId,
      level: "warn",
    });
    await record().written;
    await toBatch();
  }).catch(
    (err: Error) => (
      ctx.log(`job ${jobId}: confirming its result on a replica: ${err.message}`, { job: jobId, level: "warn" }),
      true
    ),
  );
  if (!confirmed)
    ctx.log(`job ${jobId}: no replica confirmed its result within ${ctx.durability.timeoutMs} ms (WAIT)`, {
      job: jobId,
      level: "warn",
    });
  ctx.log(
    `job ${jobId} attempt ${attempt}: ${result.status} in ${result.timings.totalMs} ms (${count(result.turns, "turn")}, ${result.scripted ? "scripted" : usd(result.costUsd)})`,
    { job: jobId, attempt, status: result.status },
  );
  return rec.stored;
}

/** BullMQ's own signals, thrown on purpose: a hand-back, a throttle, a failure for good. */
const CONTROL = new Set([
  "UnrecoverableError",
  "DelayedError",
  "RateLimitError",
  "WaitingError",
  "WaitingChildrenError",
]);

/**
 * An error before the attempt ran (admitting it, its cancel flag, its batch's start): said in the
 * log (BullMQ would retry or fail it without a word). When it is the worker's Redis connection's,
 * the job goes back uncounted (a worker whose connection ended must not spend every job's attempts
 * in a millisecond each; worker.ts connects it again).
 */
async function beforeRun(
  ctx: AttemptContext,
  job: QueueJob,
  token: string | undefined,
  err: unknown,
): Promise<unknown> {
  if (err instanceof Error && CONTROL.has(err.name)) return err;
  const jobId = job.id!;
  const message = err instanceof Error ? err.message : String(err);
  if (isRedisConnectionError(err) && (await countRedisHandBack(job).catch(() => Infinity)) < REDIS_HAND_BACKS) {
    const back = await handBack(job, token).catch(() => undefined);
    if (back) {
      ctx.log(
        `job ${jobId}: ${message} before it ran (this worker's Redis connection failed): back to the queue, no attempt counted`,
        { job: jobId, level: "warn" },
      );
      return back;
    }
  }
  ctx.log(`job ${jobId}: error before it ran: ${message}`, { job: jobId, level: "error" });
  return err;
}

/** A failed attempt, classified (src/queue/attempt-outcome.ts) and acted on; returns what the processor throws. */
async function failedAttempt(
  ctx: AttemptContext,
  job: QueueJob,
  token: string | undefined,
  r: Running,
  err: unknown,
): Promise<unknown> {
  const { jobId, attempt, entry, used, attempts } = r;
  const { log, health } = ctx;
  const outcome = await classifyFailure({
    err,
    abandoned: entry.ctl.signal.reason === "abandoned",
    used,
    attempts,
    engineHealthy: () => health.check(),
    countInfraFailure: () => countInfraFailure(job).catch(() => 0),
    countRedisHandBack: () => countRedisHandBack(job).catch(() => Infinity),
  });
  switch (outcome.action) {
    case "abandon":
      return abandon(job, token);
    case "throttle": {
      const ms = throttleMs(err as ModelError, ctx.config);
      log(
        `job ${jobId} attempt ${attempt}: ${(err as Error).message}; throttling the queue for ${ms} ms, the job goes back to the queue (no attempt counted)`,
        { job: jobId, attempt, level: "warn" },
      );
      await ctx.rateLimit(ms);
      return Worker.RateLimitError();
    }
    case "hand-back": {
      const why = isRedisConnectionError(err)
        ? "this worker's Redis connection failed under it"
        : `the engine failed (${health.reason})`;
      const back = await handBack(job, token).catch(() => undefined);
      if (back) {
        log(
          `job ${jobId} attempt ${attempt}: ${(err as Error).message}; ${why}: back to the queue, no attempt counted`,
          { job: jobId, attempt, level: "warn" },
        );
        return back;
      }
      // It could not be handed back (the queue's connection is down too): it counts, as BullMQ will
      // count it once it can, so its end is written here as for any counted failure.
    }
  }
  // attemptsMade and stalls, not attempt: a throttle or a hand-back starts a job again without counting.
  const retry = outcome.action === "retry" || (outcome.action === "hand-back" && used + 1 < attempts);
  const error = `${(err as Error).message}${outcome.engineFailed ? ` (the engine failed: ${health.reason})` : ""}${retry ? ` (attempt ${used + 1} of ${attempts}; the queue runs it again after a backoff)` : ""}`;
  entry.failing = true;
  r.onEvent(stamped(finishedEvent(emptyResult("failed", error)), jobId, attempt));
  await Promise.race([entry.lastWrite, sleep(5000)]);
  if (!retry) await r.checkpoints?.remove().catch(() => {});
  if (!retry)
    await ctx.batch.finish(job.data, jobId, attempt, emptyResult("failed", error, { jobId, attempt })).catch(() => {});
  log(`job ${jobId} attempt ${attempt}: error: ${error}`, { job: jobId, attempt, level: "error" });
  // Out of attempts once stalls are counted, though BullMQ (which counts failures only) would retry.
  if (!retry && !(err instanceof UnrecoverableError)) return new UnrecoverableError((err as Error).message);
  return err;
}
