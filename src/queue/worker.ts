// The daemon: a BullMQ Worker running runJob with `concurrency` sandboxes, plus what BullMQ does
// not have: a per-job hard deadline, cancellation across hosts (a Redis channel), a heartbeat so
// the reaper can tell orphaned containers, transcripts into Redis streams, and a bounded drain.
import { Backoffs, UnrecoverableError, Worker, type Job } from "bullmq";
import { Redis } from "ioredis";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { defaults, loadConfig } from "../config.js";
import { isThrottle, ModelError, type Model } from "../agent/model.js";
import { batchHooks } from "./batch-index.js";
import { checkEngine, countInfraFailure, handBack, HealthGate, throttleMs } from "./health.js";
import { runJob } from "../job/run.js";
import { sweepSnapshots } from "../job/verify.js";
import { policyProblem } from "../job/admit.js";
import { redisCheckpoints, specHash } from "../job/checkpoint.js";
import { prepareSandbox } from "../job/repo.js";
import { keys, redisOptions } from "./keys.js";
import { appendEvent, recordedResult, recordResult } from "./result-record.js";
import { workerLogger, type Log, type LogFormat } from "../log.js";
import { workerMetrics } from "../metrics.js";
import type { JobData } from "./client.js";
import { LABEL, localOwnerAlive, ownerIsLocal, processOwnerId } from "../runtime/owner.js";
import { reap } from "../sandbox/reaper.js";
import { defaultRuntime } from "../runtime/index.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { SandboxPool } from "../sandbox/pool.js";
import { emptyResult, parseJobSpec, type JobResult, type TranscriptEvent } from "../spec.js";

export interface WorkerOptions {
  concurrency?: number;
  redisUrl?: string;
  queueName?: string;
  /** A model per job (tests and the demo's scripted model); default: AnthropicModel. */
  model?: () => Model;
  /** Where log lines go; default: workerLogger (stderr) in logFormat. */
  log?: Log;
  logFormat?: LogFormat;
  /** Warm sandboxes kept ready (see src/sandbox/pool.ts); default PATCHBAY_POOL, else the concurrency; 0: off. */
  pool?: number;
  /** Serve Prometheus metrics at http://HOST:PORT/metrics ("PORT" alone binds 127.0.0.1); off when unset. */
  metricsPort?: number | string;
}

export interface WorkerHandle {
  id: string;
  worker: Worker<JobData, JobResult>;
  /** Stops taking jobs, lets active ones finish until the deadline, then abandons them (they run again elsewhere after the lock lapses). */
  shutdown(deadlineMs?: number): Promise<void>;
}

interface Active {
  ctl: AbortController;
  sandbox?: Sandbox;
  /** Settles when runJob is over (its sandbox destroyed). */
  done: Promise<void>;
  /** The newest transcript write: awaited before the result, so `watch` never misses the end. */
  lastWrite: Promise<unknown>;
  /** The job_finished event of a returned result, held to be written with the result record. */
  finished?: TranscriptEvent;
  /** Set on the failure path: its job_finished is written at once. */
  failing?: boolean;
}

/** The job's own backoff after `used` attempts, by BullMQ's strategies. */
async function backoffMs(job: Job, used: number): Promise<number> {
  const backoff = Backoffs.normalize(job.opts.backoff ?? 0);
  return (backoff && (await Backoffs.calculate(backoff, used, new Error("stalled"), job))) || 0;
}

/** A job abandoned at the drain deadline goes back to the queue at once, uncounted; its checkpoint stays. */
const abandon = (job: Job, token: string | undefined) => handBack(job, token);

export async function startWorker(opts: WorkerOptions = {}): Promise<WorkerHandle> {
  const config = loadConfig();
  // The local backend isolates nothing: a worker runs on it only where tests say so.
  if (config.backend !== "docker" && !config.testBackends) throw new Error(`PATCHBAY_BACKEND=${config.backend} runs repos with no isolation: a worker refuses it (PATCHBAY_TEST_BACKENDS=1 is for tests and simulations only)`);
  const runtime = defaultRuntime();
  const queueName = opts.queueName ?? config.queueName;
  const k = keys(queueName);
  const id = config.workerId ?? processOwnerId;
  const log = opts.log ?? workerLogger(id, { format: opts.logFormat });
  const redisUrl = opts.redisUrl ?? config.redisUrl;
  const redis = new Redis(redisUrl, redisOptions);
  const sub = new Redis(redisUrl, redisOptions);
  const active = new Map<string, Active>();
  const batch = batchHooks(redis, queueName); // no-ops for jobs of no batch
  // ioredis reconnects by itself; say so once per outage instead of an unhandled error per retry.
  let down = false;
  for (const r of [redis, sub]) {
    r.on("error", (err) => !down && ((down = true), log(`redis: ${err.message}; reconnecting`, { level: "warn" })));
    r.on("ready", () => down && ((down = false), log("redis: connected again")));
  }

  let pool: SandboxPool | undefined; // made below, once the reaper has run
  const metrics = await workerMetrics(opts.metricsPort, () => ({ activeJobs: active.size, concurrency: opts.concurrency ?? config.concurrency, redisConnected: !down, draining: closing !== undefined, pool: pool && { idle: pool.size, ...pool.stats } }));
  if (metrics.url) log(`metrics: ${metrics.url}`);

  // Heartbeat: the reaper on any host treats containers of a worker without one as orphans.
  const heartbeatTtlSec = Math.ceil((3 * config.heartbeatEveryMs) / 1000);
  const beat = () => redis.set(k.heartbeat(id), String(Date.now()), "EX", heartbeatTtlSec).catch(() => {});
  await beat();
  const heartbeat = setInterval(beat, config.heartbeatEveryMs);

  // This Redis's id: a sandbox labelled with another belongs to a deployment sharing this engine
  // under the same queue name (a compose stack beside a host's workers), whose heartbeats are not here.
  await redis.set(k.deployment, randomBytes(8).toString("hex"), "NX");
  const deployment = (await redis.get(k.deployment)) ?? "";

  // In this boot and pid namespace a process's pid tells (not by hostname: hosts can share one);
  // elsewhere a worker of this queue lives while it beats. Sandboxes of other owners (library users,
  // other queues or deployments) are left to their deadline. Workers in containers have pid
  // namespaces of their own, so those of one engine go by heartbeat.
  const ownerAlive = async (owner: string, labels: Record<string, string>) => {
    if (owner === id) return true;
    if (ownerIsLocal(owner, labels)) return localOwnerAlive(owner, labels);
    if (labels[LABEL.queue] !== queueName) return true;
    if (labels[LABEL.redis] && labels[LABEL.redis] !== deployment) return true;
    return (await redis.exists(k.heartbeat(owner))) === 1;
  };
  // Health (src/queue/health.ts): the engine and the sandbox image, at start and before each job. While
  // unhealthy the worker is paused (it takes no jobs) and checks again with backoff; once healthy
  // it reaps what an outage left, then takes jobs again.
  const health = new HealthGate({
    check: () => checkEngine(runtime, config.image, config.healthTimeoutMs),
    minMs: config.healthMinMs,
    maxMs: config.healthMaxMs,
    log,
    onChange: async (ok) => (ok ? (await runReaper(), await worker.resume()) : await worker.pause(true)),
  });
  const runReaper = async () => {
    if (health.ok === false) return; // the gate checks the engine meanwhile
    try {
      const again = await runtime.retryRemovals();
      if (again) log(`removed ${again} sandboxes whose removal had failed`);
      const r = await reap(ownerAlive, runtime);
      if (r.containers.length || r.volumes.length) log(`reaped ${r.containers.length} containers, ${r.volumes.length} volumes`);
      const snapshots = await sweepSnapshots();
      if (snapshots) log(`removed ${snapshots} verify snapshots of workers that are gone`);
    } catch (err) {
      log(`reaper: ${(err as Error).message}`, { level: "warn" });
      void health.check(); // the engine gone while idle: pause now rather than at the next job
    }
  };
  const reaper = setInterval(runReaper, config.reapEveryMs);
  pool = new SandboxPool({ backend: runtime, size: opts.pool ?? config.poolSize ?? opts.concurrency ?? config.concurrency, owner: id, labels: { [LABEL.queue]: queueName, [LABEL.redis]: deployment }, log: (m) => log(m, { level: "warn" }), prepare: prepareSandbox });

  // Cancellation from any host: `patchbay cancel` publishes the job id here.
  if (config.cancelPubSub) {
    await sub.subscribe(k.cancelChannel);
    sub.on("message", (_channel, jobId: string) => active.get(jobId)?.ctl.abort("cancelled"));
  }
  // Pub/sub is not durable (a message sent during a Redis blip is lost): the cancel key is also
  // polled for the jobs running here.
  const cancelPoll = setInterval(() => {
    for (const [jobId, a] of active) {
      if (!a.ctl.signal.aborted) void redis.exists(k.cancel(jobId)).then((n) => n && a.ctl.abort("cancelled"), () => {});
    }
  }, config.cancelPollMs);

  // A job that ends without running (out of attempts): its transcript and batch say why, and its checkpoint goes.
  const finishFailed = async (job: Job<JobData, JobResult>, attempt: number, error: string) => {
    const jobId = job.id!;
    const e: TranscriptEvent = { ts: new Date().toISOString(), jobId, attempt, type: "job_finished", status: "failed", costUsd: 0, turns: 0, error };
    await appendEvent(redis.multi(), k, e, config.retentionSec, defaults.transcript.maxLen).exec().catch(() => {});
    await redis.del(k.checkpoint(jobId)).catch(() => {});
    await batch.finish(job.data, jobId, attempt, emptyResult("failed", error, { jobId, attempt })).catch(() => {});
  };

  const processor = async (job: Job<JobData, JobResult>, token?: string): Promise<JobResult> => {
    const parsed = parseJobSpec(job.data?.spec);
    if (!parsed.ok) throw new UnrecoverableError(parsed.error); // a bad spec never gets better
    const spec = parsed.spec;
    const jobId = job.id!;
    // Taken just as this worker turned unhealthy (the gate pauses it): back to the queue, uncounted.
    if (!(await health.check())) {
      log(`job ${jobId}: handed back to the queue, no attempt counted (this worker is unhealthy)`, { job: jobId, level: "warn" });
      throw await handBack(job, token);
    }
    const attempt = job.attemptsStarted || job.attemptsMade + 1; // counts stalled re-runs too
    // A spec past this worker's policy (src/policy.ts) never gets better: it fails once, saying why.
    const refused = await policyProblem(spec, config);
    if (refused) {
      log(`job ${jobId} attempt ${attempt}: ${refused}`, { job: jobId, attempt, level: "warn" });
      await finishFailed(job, attempt, refused);
      throw new UnrecoverableError(refused);
    }
    // A stall (the worker running the job died, or lost its lock) counts as an attempt, with the
    // job's backoff; BullMQ's own stall limit is set out of reach so that this one decides.
    const stalls = job.stalledCounter ?? 0;
    const attempts = job.opts.attempts ?? 1;
    const used = job.attemptsMade + stalls;
    if (stalls > Number(job.data.stallsSeen ?? 0)) {
      await job.updateData({ ...job.data, stallsSeen: stalls });
      if (used >= attempts) {
        const error = `the worker running this job stopped under it ${stalls} time${stalls === 1 ? "" : "s"} (killed, or it lost its lock): no attempts left (${used} of ${attempts} used)`;
        log(`job ${jobId} attempt ${attempt}: ${error}`, { job: jobId, attempt, level: "error" });
        await finishFailed(job, attempt, error);
        throw new UnrecoverableError(error);
      }
      const ms = await backoffMs(job, used);
      log(`job ${jobId}: its worker stopped under it (stall ${stalls}; ${used} of ${attempts} attempts used): runs again in ${ms} ms`, { job: jobId, attempt, level: "warn" });
      throw await handBack(job, token, ms);
    }
    // An earlier attempt finished (its result and job_finished are recorded) and its worker died
    // before BullMQ had the job completed: that result stands, and nothing runs again.
    const recorded = await recordedResult(redis, k.result(jobId));
    if (recorded) {
      log(`job ${jobId} attempt ${attempt}: an earlier attempt finished (${recorded.status}) before its worker stopped; its recorded result stands`, { job: jobId, attempt });
      await batch.finish(job.data, jobId, recorded.attempt ?? attempt, recorded).catch(() => {});
      await redis.del(k.checkpoint(jobId)).catch(() => {});
      return recorded;
    }
    const entry: Active = { ctl: new AbortController(), done: Promise.resolve(), lastWrite: Promise.resolve() };
    active.set(jobId, entry);
    if (await redis.exists(k.cancel(jobId))) entry.ctl.abort("cancelled");
    // A batch whose budget is spent (or that was cancelled): the job ends at once, without a sandbox.
    const early = await batch.start(job.data, jobId, attempt).catch((err: unknown) => (active.delete(jobId), Promise.reject(err)));
    // No warm sandbox is made while this job is being set up (it would compete for the CPU).
    const setupDone = pool.setupStarted();
    const checkpoints = config.checkpoints ? redisCheckpoints(redis, k.checkpoint(jobId), jobId, specHash(spec), config.checkpointMaxBytes) : undefined;
    let spentBefore = 0; // what a resumed attempt took over from the earlier one
    const onEvent = (e: TranscriptEvent) => {
      if (e.type === "sandbox_ready") setupDone();
      metrics.observe(e);
      if (e.type === "resume" && e.restored) spentBefore = e.costUsd;
      if (e.type === "job_finished" && !entry.failing) {
        entry.finished = e; // written with the result record
        void job.updateProgress({ type: e.type }).catch(() => {});
        return;
      }
      // In order on one connection; ioredis queues them while Redis is away.
      entry.lastWrite = appendEvent(redis.multi(), k, e, config.retentionSec, defaults.transcript.maxLen).exec().catch(() => {});
      if (e.type === "tool_call" || e.type === "model_response" || e.type === "job_finished") void job.updateProgress({ type: e.type, turn: "turn" in e ? e.turn : undefined }).catch(() => {});
    };
    // BullMQ has no job timeout: runJob aborts itself at timeoutSec. If it is still not done a grace
    // period later (Docker hung, say), its sandbox is killed and the job ends as a timeout here.
    const timeoutMs = (spec.timeoutSec ?? defaults.job.timeoutSec) * 1000;
    let hard: NodeJS.Timeout | undefined;
    const hardDeadline = new Promise<JobResult>((resolve) => {
      hard = setTimeout(() => {
        const error = `the job did not stop at its ${timeoutMs / 1000} s timeout; its sandbox was killed`;
        log(`job ${jobId}: ${error}`, { job: jobId, attempt, level: "warn" });
        entry.ctl.abort("timeout");
        void entry.sandbox?.destroy().catch(() => {});
        onEvent({ ts: new Date().toISOString(), jobId, attempt, type: "job_finished", status: "timeout", costUsd: 0, turns: 0, error });
        resolve(emptyResult("timeout", error, { jobId, attempt }));
      }, timeoutMs + config.hardDeadlineGraceMs);
    });
    log(`job ${jobId} attempt ${attempt}: started`, { job: jobId, attempt });
    if (early) onEvent({ ts: new Date().toISOString(), jobId, attempt, type: "job_finished", status: early.status, costUsd: 0, turns: 0, error: early.error });
    const run = early ? Promise.resolve(early) : runJob(spec, {
      jobId,
      attempt,
      backend: runtime,
      signal: entry.ctl.signal,
      onEvent,
      owner: id,
      labels: { [LABEL.queue]: queueName, [LABEL.redis]: deployment },
      model: opts.model?.(),
      queuedMs: Date.now() - (job.data.enqueuedAt ?? job.timestamp),
      onSandbox: (sb) => (entry.sandbox = sb),
      pool,
      stopAfterTurn: batch.stopAfterTurn(job.data, jobId, attempt),
      checkpoints,
    });
    entry.done = run.then(() => {}, () => {});
    void entry.done.then(setupDone);
    try {
      const result = await Promise.race([run, hardDeadline]);
      if (entry.ctl.signal.reason === "abandoned") throw await abandon(job, token);
      await Promise.race([entry.lastWrite, sleep(5000)]);
      // BullMQ keeps the bounded result (src/queue/result-bounds.ts), never the agent's lists or a
      // long patch: that is written once, with the record, and the result names it. Such a result is
      // only true once that write landed, so it is awaited; a plain record is a safety net (5 s).
      const rec = recordResult(redis, k, jobId, entry.finished, result, { retentionSec: config.retentionSec, maxLen: defaults.transcript.maxLen });
      await (rec.stored.patchStored ? rec.written : Promise.race([rec.written, sleep(5000)]));
      await checkpoints?.remove().catch(() => {});
      await batch.finish(job.data, jobId, attempt, result, spentBefore).catch((err: Error) => log(`job ${jobId}: batch index: ${err.message}`, { job: jobId, level: "warn" }));
      log(`job ${jobId} attempt ${attempt}: ${result.status} in ${result.timings.totalMs} ms (${result.turns} turns, $${result.costUsd.toFixed(4)})`, { job: jobId, attempt, status: result.status });
      return rec.stored;
    } catch (err) {
      if (entry.ctl.signal.reason === "abandoned") throw await abandon(job, token);
      // The API rate limited or overloaded once the SDK's retries are spent: the queue's account, not
      // the job's. The queue takes no job for a while (the API's retry-after, capped); this one goes
      // back to the queue with no attempt counted.
      if (isThrottle(err)) {
        const ms = throttleMs(err, config);
        log(`job ${jobId} attempt ${attempt}: ${err.message}; throttling the queue for ${ms} ms, the job goes back to the queue (no attempt counted)`, { job: jobId, attempt, level: "warn" });
        await worker.rateLimit(ms);
        throw Worker.RateLimitError();
      }
      // The engine failed under the job (it answers no more, or lost the image; a fresh check says so,
      // and this worker pauses): the first such failure counts as an attempt, later ones send the job
      // back uncounted, to a healthy worker. A job that keeps breaking engines still fails in time.
      const infra = !(err instanceof ModelError) && !(err instanceof UnrecoverableError) && !(await health.check());
      if (infra && (await countInfraFailure(job).catch(() => 0)) > 0) {
        log(`job ${jobId} attempt ${attempt}: ${(err as Error).message}; the engine failed (${health.reason}): back to the queue, no attempt counted`, { job: jobId, attempt, level: "warn" });
        throw await handBack(job, token);
      }
      // attemptsMade and stalls, not attempt: a throttle or a hand-back starts a job again without counting.
      const retry = used + 1 < attempts && !(err instanceof UnrecoverableError);
      const error = `${(err as Error).message}${infra ? ` (the engine failed: ${health.reason})` : ""}${retry ? ` (attempt ${used + 1} of ${attempts}; the queue runs it again after a backoff)` : ""}`;
      entry.failing = true;
      onEvent({ ts: new Date().toISOString(), jobId, attempt, type: "job_finished", status: "failed", costUsd: 0, turns: 0, error });
      await Promise.race([entry.lastWrite, sleep(5000)]);
      if (!retry) await checkpoints?.remove().catch(() => {});
      if (!retry) await batch.finish(job.data, jobId, attempt, emptyResult("failed", error, { jobId, attempt })).catch(() => {});
      log(`job ${jobId} attempt ${attempt}: error: ${error}`, { job: jobId, attempt, level: "error" });
      // Out of attempts once stalls are counted, though BullMQ (which counts failures only) would retry.
      if (!retry && !(err instanceof UnrecoverableError)) throw new UnrecoverableError((err as Error).message);
      throw err;
    } finally {
      clearTimeout(hard);
      active.delete(jobId);
    }
  };

  const workerConnection = new Redis(redisUrl, redisOptions);
  workerConnection.on("error", () => {}); // reported through `redis` above
  const worker = new Worker<JobData, JobResult>(queueName, processor, {
    connection: workerConnection,
    concurrency: opts.concurrency ?? config.concurrency,
    lockDuration: config.lockDurationMs,
    lockRenewTime: config.lockRenewMs,
    stalledInterval: config.stalledIntervalMs,
    maxStalledCount: defaults.worker.maxStalledCount,
    // Started by the health gate once healthy (worker.resume()), not before.
    autorun: false,
    // A limiter that never limits by count: it makes every worker of the queue honour the
    // throttle a 429/529 sets with worker.rateLimit (BullMQ ignores that key without one).
    limiter: { max: 1_000_000_000, duration: 1000 },
    maximumRateLimitDelay: config.throttleMaxMs,
    // The deployment's retention, not the enqueuer's: finished jobs (and so their results) go after it.
    removeOnComplete: { age: config.retentionSec },
    removeOnFail: { age: config.retentionSec },
  });
  worker.on("error", (err) => log(`worker error: ${err.message}`, { level: "error" }));
  // BullMQ has the job completed: its result record has done its work.
  worker.on("completed", (job) => void redis.del(k.result(job.id!)).catch(() => {}));
  worker.on("stalled", (jobId) => log(`job ${jobId}: stalled (its worker stopped or lost its lock); back to the queue`, { job: jobId, level: "warn" }));
  await health.check(); // healthy: reap, then take jobs; unhealthy: paused, checked again with backoff
  log(`ready: queue ${queueName}, concurrency ${worker.opts.concurrency}${health.ok ? "" : " (paused until healthy)"}`);

  let closing: Promise<void> | undefined;
  const shutdown = (deadlineMs = config.drainDeadlineMs) =>
    (closing ??= (async () => {
      log(`draining (${active.size} active, deadline ${deadlineMs} ms)`);
      health.close();
      const pooled = pool.close(); // warm sandboxes go at once; no more are made
      clearInterval(heartbeat);
      clearInterval(reaper);
      // worker.close() waits for active jobs with no timeout of its own: race it with the deadline.
      const drained = await Promise.race([worker.close().then(() => true), sleep(deadlineMs).then(() => false)]);
      if (!drained) {
        // Abandon what is left: stop its agent loop, let runJob remove its sandbox, and never
        // settle its processor, so the lock lapses and another worker runs the job again.
        log(`deadline passed: abandoning ${active.size} jobs (they will run again on another worker)`);
        const left = [...active.values()];
        for (const a of left) a.ctl.abort("abandoned");
        // Its patch is of no use to anyone now: the sandbox goes at once rather than after one.
        await Promise.race([Promise.all(left.map((a) => Promise.all([a.done, a.sandbox?.destroy().catch(() => {})]))), sleep(20_000)]);
      }
      clearInterval(cancelPoll);
      await pooled;
      await metrics.close();
      await sub.quit().catch(() => sub.disconnect());
      await redis.del(k.heartbeat(id)).catch(() => {});
      await redis.quit().catch(() => redis.disconnect());
      workerConnection.disconnect(); // passed in, so BullMQ leaves it open
      log("stopped");
    })());
  return { id, worker, shutdown };
}
