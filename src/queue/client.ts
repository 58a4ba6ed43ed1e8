// The client side of the queue: enqueue, wait, cancel, retry, status, result, watch, list. Specs are
// validated (and local paths checked, src/queue/enqueue-spec.ts) before anything reaches Redis; a spec's
// jobId makes enqueueing idempotent, and reusing it for a different spec is an error.
import { jobOutcome } from "./outcome.js";
import { count } from "../core/count.js";
import { Job, Queue } from "bullmq";
import type { Redis } from "ioredis";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { defaults, loadConfig, type Config } from "../core/config/config.js";
import { recordFinished } from "./batch-index.js";
import { claimProblem } from "./batch-provenance.js";
import { findJob } from "./find-job.js";
import { hintFlags } from "./hints.js";
import { checkWorkerBounds, readWorkerBounds } from "./worker-bounds.js";
import { keys, redisOptions } from "./keys.js";
import { isCandidateJobId } from "../core/candidate-id.js";
import { jobOptions, prepareSpecs } from "./enqueue-spec.js";
import { PatchGoneError } from "./result-bounds.js";
import { recordCancelled, withStoredPatch, type BullKeys } from "./result-record.js";
import { JobSpecError, type JobResult, type JobSpec, type TranscriptEvent } from "../core/spec/spec.js";
import { unknownModelWarning, usdBudgetProblem } from "../agent/prices.js";
import { specHash } from "../core/spec/hash.js";
import { enqueueSpans, type TraceCarrier } from "../observability/trace.js";
import { kinded, PatchbayError } from "../core/errors.js";
import type { JobOrigin } from "../job/repo/source-check.js";
import { MAX_DURATION_MS, MAX_DURATION_WORDS } from "../core/timeout.js";
import {
  confirmWrites,
  duplicateRedis,
  keepConnected,
  openRedis,
  waitSetting,
  type WaitSetting,
} from "../redis/connect.js";
import { keyspaceQueueName, parseRedisUrl } from "../redis/target.js";
import {
  LIST_STATES,
  type ClientOptions,
  type JobState,
  type JobStatusInfo,
  type ListOptions,
  type ListState,
  type WaitOptions,
  type WatchOptions,
} from "./client-types.js";

export { LIST_STATES };
export type { ClientOptions, JobState, JobStatusInfo, ListOptions, ListState, WaitOptions, WatchOptions };

export interface JobData {
  spec: JobSpec;
  enqueuedAt: number;
  /** Set on the jobs of a batch (src/batch/batches.ts): the batch and the line of its file. */
  batch?: { id: string; line: number };
  /** Set by the workers: the stalls already counted as attempts (src/queue/worker.ts). */
  stallsSeen?: number;
  /** The trace context of its enqueue span, and of its newest attempt's (src/observability/trace.ts); set only when traced. */
  trace?: TraceCarrier;
  /**
   * Who enqueued it: the operator's own client ("operator": the CLI, the library) or the HTTP API.
   * A worker reads the host for an operator's job alone as the operator asked; every other job
   * (this unset too) is held to the worker's roots and git hosts (src/job/repo/source-check.ts).
   */
  origin?: JobOrigin;
  /** Set by a job's worker on its candidates (src/queue/candidates.ts): which one this is. */
  candidate?: { n: number; stopAfterVerified?: number; of?: number };
  /** Set by a job's worker once it added its candidates: it waits for them, then picks one. */
  step?: "candidates";
}

/** The job failed for good (BullMQ's failed state): `reason` says why. */
export class JobFailedError extends PatchbayError {
  constructor(
    readonly jobId: string,
    readonly reason: string,
  ) {
    super("failed", `job ${jobId} failed: ${reason}`);
  }
}

/** The id is not (or no longer: finished jobs are kept 7 days) in the queue. */
export class JobNotFoundError extends PatchbayError {
  constructor(
    readonly jobId: string,
    readonly queueName: string,
  ) {
    super("not-found", `no job ${jobId} in queue ${queueName}`);
  }
}

/** A jobId reused for a different spec. */
export class JobConflictError extends PatchbayError {
  constructor(
    readonly jobId: string,
    readonly queueName: string,
  ) {
    super(
      "conflict",
      `job ${jobId} already exists in queue ${queueName} with a different spec (patchbay status ${jobId}); use another --job-id`,
    );
  }
}

/** waitForResult gave up after its timeoutMs; the job runs on. */
export class WaitTimeoutError extends PatchbayError {
  constructor(
    readonly jobId: string,
    readonly timeoutMs: number,
  ) {
    super("timeout", `timed out after ${timeoutMs} ms waiting for job ${jobId}`);
  }
}

/** Options a caller got wrong (an unknown key, a bad value, a wait past 7 days): thrown at once, never ignored. */
export class ClientOptionsError extends kinded("usage") {}

/** Jobs acknowledged by a Redis master that died before a replica had them (a failover lost them). */
export class EnqueueLostError extends kinded("infra") {}

// The options checked at run time too: a script in plain JavaScript gets no excess property check,
// and `{ queue: "x" }` silently meant the default queue.
const ClientOptionsSchema = z.strictObject({
  redisUrl: z.string().min(1).optional(),
  queueName: z.string().min(1).optional(),
  unrefWhenIdle: z.boolean().optional(),
  connectionName: z.string().optional(),
  config: z.custom<Config>((v) => typeof v === "object" && v !== null).optional(),
  origin: z.enum(["operator", "api"]).optional(),
  checkWorkerBounds: z.boolean().optional(),
});
const OPTION_NAMES = Object.keys(ClientOptionsSchema.shape);
const OPTION_ALIASES: Record<string, string> = {
  queue: "queueName",
  url: "redisUrl",
  redis: "redisUrl",
  name: "connectionName",
};

/** Throws ClientOptionsError naming each bad option (and what an unknown one probably meant). */
function checkClientOptions(opts: unknown): void {
  const r = ClientOptionsSchema.safeParse(opts ?? {});
  if (r.success) return;
  const problems = r.error.issues.flatMap((iss) => {
    if (iss.code !== "unrecognized_keys") return [`${iss.path.join(".") || "options"}: ${iss.message}`];
    return iss.keys.map((key) => {
      const hint = OPTION_ALIASES[key] ?? OPTION_NAMES.find((n) => n.toLowerCase() === key.toLowerCase());
      return `unknown option "${key}"${hint ? ` (did you mean "${hint}"?)` : ""}`;
    });
  });
  throw new ClientOptionsError(`PatchbayClient: ${problems.join("; ")}; the options are ${OPTION_NAMES.join(", ")}`);
}

/** A wait's timeoutMs: a number of ms from 0 to 7 days (a Node timer past ~24.8 days fires at once). */
function checkTimeoutMs(ms: number | undefined): void {
  if (ms === undefined || (typeof ms === "number" && ms >= 0 && ms <= MAX_DURATION_MS)) return;
  throw new ClientOptionsError(
    `waitForResult: timeoutMs must be a number of ms from 0 to ${MAX_DURATION_MS} (${MAX_DURATION_WORDS}) (got ${String(ms)})`,
  );
}

/**
 * A client of one queue: enqueue jobs, wait for their results, watch their transcripts, cancel,
 * retry, list. Close it when done (or make it with unrefWhenIdle).
 */
export class PatchbayClient {
  /** The BullMQ queue it enqueues on. */
  readonly queue: Queue<JobData, JobResult>;
  /** Its Redis connection for commands. */
  readonly redis: Redis;
  /** The queue's name ({name} on a Cluster). */
  readonly queueName: string;
  /** The Redis it talks to (for hints that name it). */
  readonly redisUrl: string;
  /** How long Redis keeps what the client writes for a job or batch (PATCHBAY_RETENTION_SEC). */
  readonly retentionSec: number;
  private readonly k: ReturnType<typeof keys>;
  /** The model a spec without one is taken to run with (the workers' default is the same setting, PATCHBAY_MODEL). */
  readonly defaultModel: string;
  /** Who its jobs are from (JobData.origin). */
  readonly origin: JobOrigin;
  private readonly conns = new Set<Redis>();
  /** Replicas an enqueue waits for (PATCHBAY_REDIS_WAIT_REPLICAS). */
  private readonly durability: WaitSetting;
  private busy = 0;

  constructor(private readonly opts: ClientOptions = {}) {
    checkClientOptions(opts);
    const config = opts.config ?? loadConfig();
    this.redisUrl = opts.redisUrl ?? config.redisUrl;
    const target = parseRedisUrl(this.redisUrl);
    this.queueName = keyspaceQueueName(opts.queueName ?? config.queueName, target); // {name} on a Cluster
    this.retentionSec = config.retentionSec;
    this.durability = waitSetting(config.redisWait, target);
    this.defaultModel = config.model;
    this.origin = opts.origin ?? "operator";
    this.redis = this.connection(
      openRedis(target, config, {
        ...redisOptions,
        ...(opts.connectionName ? { connectionName: opts.connectionName } : {}),
      }),
    );
    this.queue = new Queue<JobData, JobResult>(this.queueName, { connection: this.redis });
    this.queue.on("error", () => {}); // the same outage, already surfaced as failed commands
    this.k = keys(this.queueName);
  }

  /** Validates and enqueues one job; returns its id. */
  enqueue(input: unknown): Promise<string> {
    return this.hold(async () => (await this.enqueueBatch([input]))[0]!);
  }

  /** Validates every spec first: one bad spec enqueues nothing (the error names its index). */
  async enqueueBatch(inputs: unknown[]): Promise<string[]> {
    // A bad spec rejects (async) before the client is held.
    const specs = prepareSpecs(inputs);
    this.checkModels(specs);
    return this.hold(async () => {
      await this.checkJobIds(specs);
      // A spec past the bounds the live workers published would be refused by them: refused now.
      if (this.opts.checkWorkerBounds !== false) checkWorkerBounds(specs, await readWorkerBounds(this.redis, this.k));
      // Each job carries its enqueue span's context (src/observability/trace.ts): the worker's spans join it.
      const add = async (traces: (TraceCarrier | undefined)[]) =>
        (
          await this.queue.addBulk(
            specs.map((spec, i) => ({
              name: "fix",
              data: {
                spec,
                enqueuedAt: Date.now(),
                origin: this.origin,
                ...(traces[i] ? { trace: traces[i] } : {}),
              } satisfies JobData,
              opts: jobOptions(spec),
            })),
          )
        ).map((j) => j.id!);
      const ids = await enqueueSpans(this.queueName, specs.length, add);
      await this.checkJobIds(specs); // a racing enqueue of the same id with another spec
      await this.confirmEnqueued(
        ids,
        "enqueue them again (a spec with a jobId is enqueued once however often it is sent)",
      );
      return ids;
    });
  }

  /**
   * After an enqueue: on a replica (WAIT, behind Sentinel), else each job looked for; jobs a
   * failover lost are an EnqueueLostError saying what to do (`again`), never silently gone.
   */
  async confirmEnqueued(ids: string[], again: string): Promise<void> {
    await confirmWrites(this.redis, this.durability, async () => {
      const gone = (
        await Promise.all(ids.map(async (id) => ((await this.redis.exists(this.queue.toKey(id))) ? undefined : id)))
      ).filter((id) => id !== undefined);
      if (gone.length)
        throw new EnqueueLostError(
          `${count(gone.length, "job")} (${gone.slice(0, 5).join(", ")}${gone.length > 5 ? ", …" : ""}) were lost in a Redis failover before a replica had them: ${again}`,
        );
    });
  }

  /**
   * A model id this version does not know is sent as it is, with a warning (PATCHBAY_UNKNOWN_MODEL);
   * a USD budget on a model whose price is unknown cannot be held, so that spec is refused.
   */
  private checkModels(specs: JobSpec[]): void {
    const warned = new Set<string>();
    specs.forEach((spec, i) => {
      const problem = usdBudgetProblem(spec.model ?? this.defaultModel, spec.budget?.usd);
      if (problem) throw new JobSpecError(`${specs.length > 1 ? `spec #${i + 1}: ` : ""}invalid JobSpec: ${problem}`);
      const warning = spec.model === undefined || warned.has(spec.model) ? undefined : unknownModelWarning(spec.model);
      if (warning) process.emitWarning(warning, { code: "PATCHBAY_UNKNOWN_MODEL" });
      if (spec.model !== undefined) warned.add(spec.model);
    });
  }

  /** Same id, same spec: fine (idempotent). Same id, another spec: JobConflictError. */
  private async checkJobIds(specs: JobSpec[]): Promise<void> {
    const seen = new Map<string, string>();
    for (const spec of specs) {
      if (!spec.jobId) continue;
      const mine = specHash(spec);
      if (seen.has(spec.jobId) && seen.get(spec.jobId) !== mine) throw new JobConflictError(spec.jobId, this.queueName);
      seen.set(spec.jobId, mine);
      const existing = await findJob<JobData, JobResult>(this.queue, spec.jobId);
      if (existing?.data?.spec && specHash(existing.data.spec) !== mine)
        throw new JobConflictError(spec.jobId, this.queueName);
    }
  }

  private async job(id: string): Promise<Job<JobData, JobResult>> {
    const job = await findJob<JobData, JobResult>(this.queue, id);
    if (!job) throw new JobNotFoundError(id, this.queueName);
    return job;
  }

  /** Where a job is; throws JobNotFoundError for an id not in the queue. */
  status(id: string): Promise<JobStatusInfo> {
    return this.hold(async () => {
      const state = await this.queue.getJobState(id); // before the job: see result()
      return info(await this.job(id), state);
    });
  }

  /** The result of a completed job; undefined while it runs; throws if the job failed for good. */
  result(id: string): Promise<JobResult | undefined> {
    return this.hold(async () => {
      // State first, then the job: BullMQ writes returnvalue/failedReason in the same step that moves
      // the job, so a job read after its final state carries them (read before, it may not yet).
      const state = await this.queue.getJobState(id);
      if (state !== "completed" && state !== "failed") {
        if (state === "unknown") await this.job(id); // throws JobNotFoundError
        return undefined;
      }
      const job = await this.job(id);
      // A long patch is kept under its own key (src/queue/result-bounds.ts): put back here, whole.
      if (state === "completed") return job.returnvalue && withStoredPatch(this.redis, this.k, id, job.returnvalue);
      throw new JobFailedError(id, job.failedReason || "unknown reason");
    });
  }

  /** Whether any worker of this queue is alive (its heartbeat key exists). */
  hasWorker(): Promise<boolean> {
    return this.hold(async () => {
      let cursor = "0";
      do {
        const [next, found] = await this.redis.scan(cursor, "MATCH", this.k.heartbeat("*"), "COUNT", 1000);
        if (found.length) return true;
        cursor = next;
      } while (cursor !== "0");
      return false;
    });
  }

  /**
   * Waits for a job to finish (polling, so it rides out a Redis restart). Throws JobFailedError,
   * JobNotFoundError, WaitTimeoutError after opts.timeoutMs, or the signal's reason.
   */
  async waitForResult(id: string, opts: WaitOptions = {}): Promise<JobResult> {
    checkTimeoutMs(opts.timeoutMs); // a bad timeout rejects (async) before the client is held
    return this.hold(async () => {
      const stop = new AbortController();
      const signals = [stop.signal, ...(opts.signal ? [opts.signal] : [])];
      if (opts.timeoutMs !== undefined) signals.push(AbortSignal.timeout(opts.timeoutMs));
      const signal = AbortSignal.any(signals);
      const stopped = new Promise<never>((_, reject) => {
        const fail = () =>
          // The caller's own reason is passed on as it is, as fetch and node:timers do with a signal's
          // reason (WaitOptions.signal promises it), so it need not be an Error.
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
          reject(
            signal.reason instanceof DOMException && signal.reason.name === "TimeoutError"
              ? new WaitTimeoutError(id, opts.timeoutMs!)
              : signal.reason,
          );
        if (signal.aborted) fail();
        else signal.addEventListener("abort", fail, { once: true });
      });
      stopped.catch(() => {});
      try {
        if (opts.warnIfNoWorker !== false) void this.warnIfNoWorker(id, signal);
        for (let delay = 100; ; delay = Math.min(delay * 1.5, 1000)) {
          try {
            const r = await Promise.race([this.result(id), stopped]);
            if (r) return r;
          } catch (err) {
            if (
              err instanceof JobFailedError ||
              err instanceof JobNotFoundError ||
              err instanceof PatchGoneError ||
              signal.aborted
            )
              throw err;
            // Redis unreachable for a moment: keep waiting.
          }
          await Promise.race([sleep(delay, undefined, { signal }).catch(() => {}), stopped]);
        }
      } finally {
        stop.abort();
      }
    });
  }

  private async warnIfNoWorker(id: string, signal: AbortSignal): Promise<void> {
    const alive = await Promise.race([
      this.hasWorker().catch(() => true),
      sleep(5000, true, { signal }).catch(() => true),
    ]);
    if (!alive && !signal.aborted) {
      process.emitWarning(
        `no worker is listening on queue '${this.queueName}': job ${id} waits until one starts (npx patchbay worker${this.hintFlags()})`,
        { code: "PATCHBAY_NO_WORKER" },
      );
    }
  }

  /** ` --queue Q` and ` --redis-url U` where they are not the defaults: what a printed command needs to reach this queue. */
  hintFlags(): string {
    return hintFlags(this.queueName, this.redisUrl);
  }

  /**
   * Cancels a job wherever it is. A waiting or delayed job is cancelled at once, in one step: out
   * of the wait list, completed with a cancelled result and its transcript ended, so status, list,
   * result and watch all see it finished. An active one (or one a worker took meanwhile) is told
   * through a Redis channel every worker listens on (and the mark, polled): it stops within a
   * second or two.
   */
  cancel(id: string): Promise<"cancelled" | "signalled" | "finished"> {
    return this.hold(async () => {
      const job = await this.job(id);
      const state = await job.getState();
      if (state === "completed" || state === "failed") return "finished";
      // A candidate is ended by a worker however early, never moved here: BullMQ must count it
      // done for its job (src/queue/candidates.ts), which waits for every one.
      if (state !== "active" && !isCandidateJobId(id)) {
        const o = { retentionSec: this.retentionSec, maxLen: defaults.transcript.maxLen };
        const r = await recordCancelled(
          this.redis,
          this.queue.keys as BullKeys,
          this.queue.toKey(id),
          this.k,
          { id, spec: job.data.spec, enqueuedAt: job.data.enqueuedAt },
          o,
        );
        if (r) {
          // Only a line's own job is recorded in its batch (src/queue/batch-provenance.ts).
          if (job.data?.batch && !claimProblem(id, job.data))
            await recordFinished(this.redis, this.queueName, job.data.batch, id, 1, r, {
              ttlSec: this.retentionSec,
              onlyIfAbsent: true,
            });
          return "cancelled";
        }
      }
      await this.redis.set(this.k.cancel(id), "1", "EX", this.retentionSec);
      await this.redis.publish(this.k.cancelChannel, id);
      return "signalled";
    });
  }

  /**
   * Runs a finished job (completed or failed) again under its id; a job that has not finished is left
   * as it is and its state returned. Its cancel mark and recorded result go first: else the new run
   * would be cancelled at once, or (a result record left by a worker that died just after finishing)
   * return the old result. Throws JobNotFoundError for an id that is not in the queue.
   */
  retry(id: string): Promise<{ retried: true } | { retried: false; state: JobState }> {
    return this.hold(async () => {
      const job = await this.job(id);
      const state = await job.getState();
      if (state !== "completed" && state !== "failed") return { retried: false, state };
      await this.redis.del(this.k.cancel(id), this.k.result(id));
      await job.retry(state);
      return { retried: true };
    });
  }

  /**
   * The transcript events of a job, live: yields what is there, then follows until the job ends.
   * Throws JobNotFoundError for an id that is not in the queue.
   */
  async *watch(id: string, opts: WatchOptions = {}): AsyncGenerator<TranscriptEvent> {
    this.acquire();
    const reader = this.connection(duplicateRedis(this.redis, "patchbay-reader"));
    const follow = opts.follow !== false;
    let last = "0";
    const read = async (block: boolean) => {
      const args = block ? ["BLOCK", 1000] : [];
      const res = await reader.xread("COUNT", 1000, ...(args as []), "STREAMS", this.k.events(id), last);
      return (res?.[0]?.[1] ?? []).map(
        ([entryId, fields]) => ((last = entryId), JSON.parse(fields[1]!) as TranscriptEvent),
      );
    };
    try {
      await this.job(id);
      for (;;) {
        const events = await read(follow);
        yield* events;
        if (events.length) continue;
        if (!follow || opts.signal?.aborted) return;
        const st = await this.status(id).catch((err) =>
          err instanceof JobNotFoundError ? undefined : { state: "unknown" },
        );
        if (!st || st.state === "completed" || st.state === "failed") {
          yield* await read(false); // what was written just before the end
          return;
        }
      }
    } finally {
      reader.disconnect();
      this.conns.delete(reader);
      this.release();
    }
  }

  /** Recent jobs, newest first (by enqueue time), at most `limit`, optionally of some states only. */
  list(opts: ListOptions = {}): Promise<JobStatusInfo[]> {
    const limit = opts.limit ?? 50;
    return this.hold(async () => {
      const perState = await Promise.all(
        (opts.states ?? LIST_STATES).map(async (state) =>
          (await this.queue.getJobs([state], 0, limit - 1)).filter(Boolean).map((j) => info(j, state)),
        ),
      );
      return perState
        .flat()
        .sort((a, b) => (b.createdAt ?? 0) - (a.createdAt ?? 0))
        .slice(0, limit);
    });
  }

  /** Closes its connections; a watch in progress ends. */
  async close(): Promise<void> {
    await this.queue.close();
    for (const r of this.conns) r.disconnect();
    this.conns.clear();
  }

  /** Tracks a connection: errors are surfaced as failed commands (ioredis reconnects by itself). */
  private connection(r: Redis): Redis {
    this.conns.add(r);
    r.on("error", () => {});
    keepConnected(r, () => !this.conns.has(r)); // one ioredis gave up on; not one the client closed (no longer in conns)
    if (this.opts.unrefWhenIdle) r.on("connect", () => this.applyRef(r));
    return r;
  }

  /** Runs one call with the client's sockets keeping the process alive (see unrefWhenIdle); for helpers such as src/batch/batches.ts. */
  async hold<T>(fn: () => Promise<T>): Promise<T> {
    this.acquire();
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  private acquire(): void {
    if (++this.busy === 1) for (const r of this.conns) this.applyRef(r);
  }

  private release(): void {
    if (--this.busy === 0) for (const r of this.conns) this.applyRef(r);
  }

  private applyRef(r: Redis): void {
    if (!this.opts.unrefWhenIdle) return;
    const socket = (r as unknown as { stream?: { ref?(): void; unref?(): void } }).stream;
    if (this.busy > 0) socket?.ref?.();
    else socket?.unref?.();
  }
}

function info(job: Job<JobData, JobResult>, state: JobState): JobStatusInfo {
  const error = job.failedReason || job.returnvalue?.error;
  return {
    id: job.id!,
    outcome: jobOutcome(state, job.returnvalue?.status),
    ...(error ? { error } : {}),
    state,
    attemptsMade: job.attemptsMade,
    task: job.data?.spec?.task,
    createdAt: job.data?.enqueuedAt ?? job.timestamp,
    ...(job.processedOn ? { startedAt: job.processedOn } : {}),
    ...(job.finishedOn ? { finishedAt: job.finishedOn } : {}),
  };
}

// The library API as plain functions over one default client (REDIS_URL, PATCHBAY_QUEUE). Its
// sockets do not keep the process alive between calls: a script exits by itself when done.
let client: PatchbayClient | undefined;
const c = () => (client ??= new PatchbayClient({ unrefWhenIdle: true }));
/** The client behind the module-level functions (src/batch/batches.ts uses it too). */
export const defaultClient = (): PatchbayClient => c();
/** PatchbayClient.enqueue on the default client: validates and enqueues one job, resolves to its id. */
export const enqueue = (spec: unknown) => c().enqueue(spec);
/** PatchbayClient.enqueueBatch on the default client: every spec validated first, then all enqueued. */
export const enqueueBatch = (specs: unknown[]) => c().enqueueBatch(specs);
/** PatchbayClient.waitForResult on the default client: resolves to the job's result once it finished. */
export const waitForResult = (id: string, opts?: WaitOptions) => c().waitForResult(id, opts);
/** PatchbayClient.cancel on the default client. */
export const cancel = (id: string) => c().cancel(id);
/** PatchbayClient.status on the default client. */
export const status = (id: string) => c().status(id);
/** PatchbayClient.result on the default client: the result, or undefined while the job runs. */
export const result = (id: string) => c().result(id);
/** PatchbayClient.watch on the default client: the job's transcript events, live. */
export const watch = (id: string, opts?: WatchOptions) => c().watch(id, opts);
/** PatchbayClient.list on the default client: recent jobs, newest first. */
export const list = (opts?: ListOptions) => c().list(opts);
/** Closes the default client's connections at once (optional: they never keep a script alive). */
export async function closeDefaultClient(): Promise<void> {
  await client?.close();
  client = undefined;
}
