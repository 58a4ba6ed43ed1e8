// The daemon: a BullMQ Worker running runJob with `concurrency` sandboxes, plus what BullMQ does
// not have: a per-job hard deadline, cancellation across hosts (a Redis channel), a heartbeat so
// the reaper can tell orphaned containers, transcripts into Redis streams, and a bounded drain.
// startWorker composes the parts, each in its own module: the heartbeat (heartbeat.ts), the reaper
// loop (reaper-loop.ts), the cancel listener (cancel-listener.ts), the health gate (health.ts), the
// job attempt (attempt.ts, with attempt-admit.ts and attempt-outcome.ts), the background removals of
// finished jobs' sandboxes (src/sandbox/removals.ts) and the drain (drain.ts).
import { randomBytes } from "node:crypto";
import { Queue, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { defaults, loadConfig, type Config } from "../core/config/config.js";
import type { Model } from "../agent/model.js";
import { batchHooks } from "./batch-index.js";
import { checkWorker, HealthGate } from "./health.js";
import { prepareSandbox } from "../job/repo/load.js";
import { keys, redisOptions } from "./keys.js";
import { workerLogger, type Log, type LogFormat } from "../observability/log.js";
import { workerMetrics } from "./metrics.js";
import type { JobData } from "./client.js";
import { LABEL, processOwnerId } from "../backend/owner.js";
import { configuredBackend } from "../backend/index.js";
import type { Backend } from "../backend/types.js";
import { SandboxPool, type SandboxKind } from "../sandbox/pool.js";
import type { EgressProxy } from "../net/proxy.js";
import { BackgroundRemovals } from "../sandbox/removals.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { JobResult } from "../core/spec/spec.js";
import { attemptProcessor, type Active } from "./attempt.js";
import { listenForCancels } from "./cancel-listener.js";
import { drain, type DrainParts, type DrainReport } from "./drain.js";
import { deploymentId, ownerAliveFor, startHeartbeat } from "./heartbeat.js";
import { heartbeatValue } from "./worker-bounds.js";
import { startReaperLoop } from "./reaper-loop.js";
import { startTelemetry } from "../observability/telemetry.js";
import { keepConnected, openRedis, waitSetting } from "../redis/connect.js";
import { keyspaceQueueName, parseRedisUrl, type RedisTarget } from "../redis/target.js";

/** How startWorker runs a worker; every member is optional, and each wins over its setting. */
export interface WorkerOptions {
  /**
   * Jobs run at once (each in a sandbox of its own).
   * @default PATCHBAY_CONCURRENCY, else 2
   */
  concurrency?: number;
  /**
   * The Redis of the queue.
   * @default REDIS_URL, else redis://127.0.0.1:6379
   */
  redisUrl?: string;
  /**
   * The queue whose jobs it takes.
   * @default PATCHBAY_QUEUE, else "patchbay"
   */
  queueName?: string;
  /**
   * A model per job (tests and the demo's scripted model).
   * @default an AnthropicModel for the configured provider
   */
  model?: () => Model;
  /**
   * Where log lines go.
   * @default workerLogger (stderr) in logFormat
   */
  log?: Log;
  /**
   * The log's format: text for people, json for log collectors.
   * @default "text"
   */
  logFormat?: LogFormat;
  /**
   * Warm sandboxes kept ready (see src/sandbox/pool.ts); 0 turns the pool off.
   * @default PATCHBAY_POOL, else the concurrency
   */
  pool?: number;
  /** Serve Prometheus metrics at http://HOST:PORT/metrics ("PORT" alone binds 127.0.0.1); off when unset. */
  metricsPort?: number | string;
  /**
   * The setup phase's egress proxy for every job (tests pass one with test-only options: loopback
   * upstreams). No configuration can set this.
   * @default the process's own, in PATCHBAY_EGRESS_DIR
   */
  egress?: EgressProxy;
  /**
   * The environment's settings; the options above win.
   * @default loadConfig() as the worker starts
   */
  config?: Config;
}

/** A running worker. */
export interface WorkerHandle {
  /** The worker's id (PATCHBAY_WORKER_ID, else host:pid:random): the owner of its sandboxes. */
  id: string;
  /** Its BullMQ worker. */
  worker: Worker<JobData, JobResult>;
  /**
   * Stops taking jobs, lets active ones finish until the deadline, then abandons them: each goes
   * back to the queue uncounted, to run again elsewhere (src/queue/drain.ts). Ends by the deadline
   * plus CLEANUP_MS whatever Redis does; the report names the jobs it could not hand back.
   */
  shutdown(deadlineMs?: number): Promise<DrainReport>;
}

/**
 * Starts a worker in this process: it checks its health (credentials, the backend, the image), then
 * takes jobs from the queue and runs each with runJob, until shutdown drains it.
 */
export async function startWorker(opts: WorkerOptions = {}): Promise<WorkerHandle> {
  const b = workerBase(opts);
  const late: Late = {};
  const s = await startServices(b, opts, late);
  const j = await startJobs(b, s, opts, late);
  keepAllConnected(b, j.workerConnection, late);
  await j.health.check(); // healthy: reap, then take jobs; unhealthy: paused, checked again with backoff
  const engine = await b.backend.describe?.();
  b.log(
    `ready: queue ${b.queueName}, concurrency ${j.worker.opts.concurrency}${j.health.ok ? "" : " (paused until healthy)"}${engine ? `; engine ${engine}` : ""}${b.config.scripted ? `; model ${b.config.scripted.name}, SCRIPTED from ${b.config.scripted.file} (no API, no key, nothing priced)` : ""}`,
  );
  return { id: b.id, worker: j.worker, shutdown: shutdownFor(b, s, j, late) };
}

/** What the worker's parts share from its start: its settings, its two Redis connections, the jobs running here. */
interface Base {
  config: Config;
  backend: Backend;
  target: RedisTarget;
  queueName: string;
  k: ReturnType<typeof keys>;
  id: string;
  log: Log;
  redis: Redis;
  sub: Redis;
  connected: () => boolean;
  active: Map<string, Active>;
  concurrency: number;
}

/** What the metrics read before it exists: the warm pool (made once the reaper is there), and the drain once it began. */
interface Late {
  pool?: SandboxPool;
  closing?: Promise<DrainReport>;
}

/** startWorker's first step: it settles the settings (the options over the config) and opens the worker's two Redis connections. */
function workerBase(opts: WorkerOptions): Base {
  const config = opts.config ?? loadConfig();
  const backend = configuredBackend(config, "a worker"); // the local backend only where tests say so
  const target = parseRedisUrl(opts.redisUrl ?? config.redisUrl);
  const queueName = keyspaceQueueName(opts.queueName ?? config.queueName, target); // {name} on a Cluster
  const k = keys(queueName);
  const id = config.workerId ?? processOwnerId;
  const log = opts.log ?? workerLogger(id, { format: opts.logFormat });
  const { redis, sub, connected } = connect(target, config, log);
  const active = new Map<string, Active>();
  const concurrency = opts.concurrency ?? config.concurrency;
  return { config, backend, target, queueName, k, id, log, redis, sub, connected, active, concurrency };
}

/**
 * startWorker's second step: it starts what runs beside the jobs (the background removals, the
 * telemetry, the metrics, the heartbeat) and names the worker's sandboxes (their labels).
 */
async function startServices(b: Base, opts: WorkerOptions, late: Late) {
  const { config, log } = b;
  // Finished jobs' sandboxes are removed after their results are handed back, bounded (src/sandbox/removals.ts).
  const removals = new BackgroundRemovals({
    concurrency: config.removals,
    maxQueued: config.removalsQueued ?? b.concurrency,
    log: (m) => log(m, { level: "warn" }),
  });
  const retire = (sb: Sandbox) => removals.hand(() => sb.destroy());
  const telemetry = await startTelemetry(config.telemetry); // traces, when OTEL_* asks (src/observability/telemetry.ts)
  const metrics = await workerMetrics(opts.metricsPort, () => ({
    activeJobs: b.active.size,
    concurrency: b.concurrency,
    redisConnected: b.connected(),
    draining: late.closing !== undefined,
    pool: late.pool && { idle: late.pool.size, ...late.pool.stats },
    removals: removals.stats,
  }));
  if (metrics.url) log(`metrics: ${metrics.url}`);

  // The beat carries this worker's bounds: a client refuses a spec past them before it is enqueued.
  const heartbeat = await startHeartbeat(
    b.redis,
    b.k.heartbeat(b.id),
    config.heartbeatEveryMs,
    heartbeatValue(config.policy, config.heartbeatEveryMs),
  );
  const deployment = await deploymentId(b.redis, b.k);
  // The instance label tells this worker's boxes from those of another worker with the same id (a
  // PATCHBAY_WORKER_ID given twice, or two workers in one process, which share processOwnerId).
  const instance = randomBytes(6).toString("hex");
  const labels = { [LABEL.queue]: b.queueName, [LABEL.redis]: deployment, [LABEL.instance]: instance };
  return { removals, retire, telemetry, metrics, heartbeat, deployment, instance, labels };
}

type Services = Awaited<ReturnType<typeof startServices>>;

/**
 * startWorker's third step, in this order: the health gate, the reaper loop, the warm pool, the
 * cancel listener, then the BullMQ worker running the attempts (paused until the gate says healthy).
 * The gate and the worker call each other, so they are made in one scope.
 */
async function startJobs(b: Base, s: Services, opts: WorkerOptions, late: Late) {
  const { config, backend, log, redis, k, id } = b;
  // Health (src/queue/health.ts): the credentials, the engine and the sandbox image, at start and before each job. While
  // unhealthy the worker is paused (it takes no jobs) and checks again with backoff; once healthy
  // it reaps what an outage left, then takes jobs again.
  const health = new HealthGate({
    check: () => checkWorker(backend, config, opts.model !== undefined),
    minMs: config.healthMinMs,
    maxMs: config.healthMaxMs,
    log,
    onChange: async (ok) => (ok ? (await reaper.run(), await worker.resume()) : await worker.pause(true)),
  });
  const reaper = startReaperLoop({
    backend,
    ownerAlive: ownerAliveFor({ id, queueName: b.queueName, deployment: s.deployment, redis, k }),
    health,
    log,
    everyMs: config.reapEveryMs,
  });
  const pool = (late.pool = warmPool(b, s, opts));
  const cancels = await listenForCancels({
    sub: b.sub,
    redis,
    k,
    pubSub: config.cancelPubSub,
    pollMs: config.cancelPollMs,
    active: b.active,
  });

  const batch = batchHooks(redis, b.queueName, config.retentionSec); // no-ops for jobs of no batch
  const processor = attemptProcessor({
    config,
    redis,
    k,
    log,
    health,
    batch,
    backend,
    pool,
    metrics: s.metrics,
    owner: id,
    labels: s.labels,
    model: opts.model,
    egress: opts.egress,
    active: b.active,
    rateLimit: (ms) => worker.rateLimit(ms),
    durability: waitSetting(config.redisWait, b.target),
    retire: s.retire,
    // On the worker's own connection (BullMQ closes none it did not open): a job adds its candidates through it.
    queue: new Queue<JobData, JobResult>(b.queueName, { connection: redis }),
  });
  const workerConnection = openRedis(b.target, config, {
    ...redisOptions,
    connectionName: `patchbay-worker-bull:${id}`,
  });
  workerConnection.on("error", () => {}); // reported through `redis` (connect)
  const worker = bullWorker(b.queueName, processor, workerConnection, b.concurrency, config);
  watchWorker(worker, b);
  return { health, reaper, pool, cancels, workerConnection, worker };
}

type Jobs = Awaited<ReturnType<typeof startJobs>>;

/** The warm sandboxes (src/sandbox/pool.ts), labelled as this worker's; those it discards go to the background removals. */
function warmPool(b: Base, s: Services, opts: WorkerOptions): SandboxPool {
  return new SandboxPool({
    backend: b.backend,
    size: opts.pool ?? b.config.poolSize ?? b.concurrency,
    freeSlots: () => b.concurrency - b.active.size,
    slotsToVerify: () => toVerify(b.active),
    image: b.config.image,
    discardBare: (bare) => void s.removals.hand(() => bare.backend.remove(bare.name)),
    owner: b.id,
    labels: s.labels,
    log: (m) => b.log(m, { level: "warn" }),
    prepare: prepareSandbox,
    discard: (sb) => void s.retire(sb),
    runtime: b.config.policy.runtime,
    allowPtrace: b.config.policy.allowPtrace,
  });
}

/** The jobs in the worker's slots that will run verify, with the kind of sandbox it takes (the pool's bare boxes). */
function* toVerify(active: Map<string, Active>): Iterable<readonly [string, SandboxKind]> {
  for (const [id, a] of active) if (a.verifies) yield [id, a.verifies];
}

/** The BullMQ worker's events: its errors and stalls go to the log, a completed job's result record goes from Redis. */
function watchWorker(worker: Worker<JobData, JobResult>, { log, redis, k }: Base): void {
  worker.on("error", (err) => log(`worker error: ${err.message}`, { level: "error" }));
  // BullMQ has the job completed: its result record has done its work.
  worker.on("completed", (job) => void redis.del(k.result(job.id!)).catch(() => {}));
  worker.on("stalled", (jobId) =>
    log(`job ${jobId}: stalled (its worker stopped or lost its lock); back to the queue`, {
      level: "warn",
      job: jobId,
    }),
  );
}

/**
 * A connection ioredis gave up on (status "end": every command on it fails) is connected again at
 * once, until the drain began. Not paused meanwhile (BullMQ's pause and resume around a dead
 * connection can leave its loop waiting): a job taken then goes back uncounted (attempt.ts),
 * BullMQ's calls are retried.
 */
function keepAllConnected({ redis, sub, log }: Base, workerConnection: Redis, late: Late): void {
  for (const [name, c] of [
    ["commands", redis],
    ["cancels", sub],
    ["queue", workerConnection],
  ] as const) {
    keepConnected(
      c,
      () => late.closing !== undefined,
      () => log(`redis: its connection (${name}) ended; connecting again`, { level: "warn" }),
      100,
    );
  }
}

/**
 * The worker's shutdown: one drain (src/queue/drain.ts) however often it is called, then the
 * telemetry's release. The drain's last word on sandboxes, needing no Redis: the engine removes
 * every box labelled as this worker's, of its queue and Redis, and of this very startWorker call
 * (ids may be shared).
 */
function shutdownFor(b: Base, s: Services, j: Jobs, late: Late): WorkerHandle["shutdown"] {
  const { id, queueName, backend } = b;
  const mine = (l: Record<string, string>) =>
    l[LABEL.worker] === id &&
    l[LABEL.queue] === queueName &&
    l[LABEL.redis] === s.deployment &&
    l[LABEL.instance] === s.instance;
  const sweep = () => backend.reap(async (l) => mine(l)).then((r) => r.containers.length + r.volumes.length);
  const parts: DrainParts = {
    log: b.log,
    active: b.active,
    worker: j.worker,
    health: j.health,
    pool: j.pool,
    removals: s.removals,
    heartbeat: s.heartbeat,
    reaper: j.reaper,
    cancels: j.cancels,
    metrics: s.metrics,
    sweep,
    redis: b.redis,
    sub: b.sub,
    workerConnection: j.workerConnection,
  };
  return (deadlineMs = b.config.drainDeadlineMs) =>
    (late.closing ??= drain(parts, deadlineMs).then(async (report) => (await s.telemetry?.release(), report)));
}

/** The worker's two connections (commands, and the cancel channel's subscription); `connected` is false during an outage. */
function connect(
  target: RedisTarget,
  config: Config,
  log: Log,
): { redis: Redis; sub: Redis; connected: () => boolean } {
  const redis = openRedis(target, config, redisOptions);
  const sub = openRedis(target, config, redisOptions);
  // ioredis reconnects by itself; say so once per outage instead of an unhandled error per retry.
  let down = false;
  for (const r of [redis, sub]) {
    r.on("error", (err) => !down && ((down = true), log(`redis: ${err.message}; reconnecting`, { level: "warn" })));
    r.on("ready", () => down && ((down = false), log("redis: connected again")));
  }
  return { redis, sub, connected: () => !down };
}

function bullWorker(
  queueName: string,
  processor: ReturnType<typeof attemptProcessor>,
  connection: Redis,
  concurrency: number,
  config: Config,
): Worker<JobData, JobResult> {
  return new Worker<JobData, JobResult>(queueName, processor, {
    connection,
    concurrency,
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
    // A Redis call of BullMQ's that failed (a connection that closed or ended) is tried again after
    // this, not BullMQ's 15 s: a connection the health gate made again is used at once.
    runRetryDelay: 1000,
    // The deployment's retention, not the enqueuer's: finished jobs (and so their results) go after it.
    removeOnComplete: { age: config.retentionSec },
    removeOnFail: { age: config.retentionSec },
  });
}
