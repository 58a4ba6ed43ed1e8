// Before a job attempt runs (src/queue/attempt.ts): the checks that end it, or hand it back, without
// a sandbox. A bad spec and a spec past this worker's policy fail once; a job taken just as the worker
// turned unhealthy goes back uncounted; a stall counts as an attempt, with the job's backoff; an
// earlier attempt's recorded result stands. Each ends by throwing what BullMQ reads (an
// UnrecoverableError, or handBack's DelayedError) or by returning the result.
import { count } from "../core/count.js";
import { Backoffs, UnrecoverableError, type Job } from "bullmq";
import type { Redis } from "ioredis";
import { defaults, type Config } from "../core/config/config.js";
import { policyProblem } from "../job/admit.js";
import { admitSource } from "../job/repo/source-check.js";
import { credentialOriginProblem } from "../job/credentials.js";
import type { Log } from "../observability/log.js";
import { emptyResult, finishedEvent, parseJobSpec, stamped, type JobResult, type JobSpec } from "../core/spec/spec.js";
import type { BatchHooks } from "./batch-index.js";
import type { JobData } from "./client.js";
import { handBack, type HealthGate } from "./health.js";
import type { keys } from "./keys.js";
import { appendEvent, recordedResult } from "./result-record.js";
import { candidateOf } from "./candidates.js";

export interface AdmitContext {
  config: Config;
  redis: Redis;
  k: ReturnType<typeof keys>;
  log: Log;
  health: Pick<HealthGate, "check" | "reason">;
  batch: BatchHooks;
}

export type QueueJob = Job<JobData, JobResult>;

/** An attempt that is to run: its spec, its number, and the attempts used before it of the job's total. */
export interface Admitted {
  spec: JobSpec;
  attempt: number;
  used: number;
  attempts: number;
}

/** The attempt to run, or the recorded result of an earlier one; throws to end or hand back the job. */
export async function admitAttempt(
  ctx: AdmitContext,
  job: QueueJob,
  token: string | undefined,
): Promise<Admitted | { recorded: JobResult }> {
  const { log } = ctx;
  const parsed = parseJobSpec(job.data?.spec);
  if (!parsed.ok) throw new UnrecoverableError(parsed.error); // a bad spec never gets better
  const jobId = job.id!;
  // A job under a batch line's id that the batch did not make (or one claiming a batch it is not
  // of): it never runs, and no batch's index hears of it; whoever adopts the line sees it failed.
  const claimed = candidateOf(job); // a candidate only where its job added it (src/queue/candidates.ts)
  const forged = claimed && "refused" in claimed ? claimed.refused : await ctx.batch.provenance(job.data, jobId);
  if (forged) {
    const error = `not run: ${forged}`;
    log(`job ${jobId}: ${error}`, { job: jobId, level: "error" });
    await finishFailed(ctx, job, job.attemptsMade + 1, error, { batch: false });
    throw new UnrecoverableError(error);
  }
  // Taken just as this worker turned unhealthy (the gate pauses it): back to the queue, uncounted.
  if (!(await ctx.health.check())) {
    log(`job ${jobId}: handed back to the queue, no attempt counted (this worker is unhealthy)`, {
      job: jobId,
      level: "warn",
    });
    throw await handBack(job, token);
  }
  const attempt = job.attemptsStarted || job.attemptsMade + 1; // counts stalled re-runs too
  // Its repo against this worker's roots and git hosts, for who enqueued it (src/job/repo/source-check.ts),
  // egress credentials named by a job the operator did not send (src/job/credentials.ts), and a spec
  // past this worker's policy (src/job/policy.ts): none gets better, each fails once, saying why.
  const source = admitSource(parsed.spec, job.data.origin, ctx.config);
  const spec = "spec" in source ? source.spec : parsed.spec;
  const refused =
    "refused" in source
      ? source.refused
      : (credentialOriginProblem(spec, job.data.origin) ?? (await policyProblem(spec, ctx.config)));
  if (refused) {
    log(`job ${jobId} attempt ${attempt}: ${refused}`, { job: jobId, attempt, level: "warn" });
    await finishFailed(ctx, job, attempt, refused);
    throw new UnrecoverableError(refused);
  }
  // An earlier attempt finished (its result and job_finished are recorded) and its worker died, or
  // a Redis failover lost BullMQ's completion, before the job was completed: that result stands,
  // nothing runs again, and the stall that brought it back counts for nothing.
  const recorded = await recordedResult(ctx.redis, ctx.k.result(jobId));
  if (recorded) {
    log(
      `job ${jobId} attempt ${attempt}: an earlier attempt finished (${recorded.status}) before its worker stopped; its recorded result stands`,
      { job: jobId, attempt },
    );
    await ctx.batch.finish(job.data, jobId, recorded.attempt ?? attempt, recorded).catch(() => {});
    await ctx.redis.del(ctx.k.checkpoint(jobId)).catch(() => {});
    return { recorded };
  }
  const { used, attempts } = await accountStalls(ctx, job, token, attempt);
  return { spec, attempt, used, attempts };
}

/**
 * A stall (the worker running the job died, or lost its lock) counts as an attempt, with the job's
 * backoff; BullMQ's own stall limit is set out of reach so that this one decides. A new stall ends
 * the job (no attempts left) or hands it back for its backoff; else the attempts used are returned.
 */
async function accountStalls(
  ctx: AdmitContext,
  job: QueueJob,
  token: string | undefined,
  attempt: number,
): Promise<{ used: number; attempts: number }> {
  const jobId = job.id!;
  const stalls = job.stalledCounter ?? 0;
  const attempts = job.opts.attempts ?? 1;
  const used = job.attemptsMade + stalls;
  if (stalls <= Number(job.data.stallsSeen ?? 0)) return { used, attempts };
  await job.updateData({ ...job.data, stallsSeen: stalls });
  if (used >= attempts) {
    const error = `the worker running this job stopped under it ${count(stalls, "time")} (killed, or it lost its lock): no attempts left (${used} of ${attempts} used)`;
    ctx.log(`job ${jobId} attempt ${attempt}: ${error}`, { job: jobId, attempt, level: "error" });
    await finishFailed(ctx, job, attempt, error);
    throw new UnrecoverableError(error);
  }
  const ms = await backoffMs(job, used);
  ctx.log(
    `job ${jobId}: its worker stopped under it (stall ${stalls}; ${used} of ${count(attempts, "attempt")} used): runs again in ${ms} ms`,
    { job: jobId, attempt, level: "warn" },
  );
  throw await handBack(job, token, ms);
}

/** The job's own backoff after `used` attempts, by BullMQ's strategies. */
async function backoffMs(job: Job, used: number): Promise<number> {
  const backoff = Backoffs.normalize(job.opts.backoff ?? 0);
  return (backoff && (await Backoffs.calculate(backoff, used, new Error("stalled"), job))) || 0;
}

/** A job that ends without running (out of attempts): its transcript and batch say why, and its checkpoint goes. */
async function finishFailed(
  ctx: AdmitContext,
  job: QueueJob,
  attempt: number,
  error: string,
  o: { batch: boolean } = { batch: true },
): Promise<void> {
  const { redis, k } = ctx;
  const jobId = job.id!;
  const result = emptyResult("failed", error, { jobId, attempt });
  await appendEvent(
    redis.multi(),
    k,
    stamped(finishedEvent(result), jobId, attempt),
    ctx.config.retentionSec,
    defaults.transcript.maxLen,
  )
    .exec()
    .catch(() => {});
  await redis.del(k.checkpoint(jobId)).catch(() => {});
  if (o.batch) await ctx.batch.finish(job.data, jobId, attempt, result).catch(() => {});
}
