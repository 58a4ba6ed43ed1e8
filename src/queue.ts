// The client side of the queue: enqueue, wait, cancel, status, result, watch. Specs are validated
// before they reach Redis; a spec's jobId makes enqueueing idempotent.
import { Job, Queue } from "bullmq";
import { Redis } from "ioredis";
import { resolve } from "node:path";
import { defaults, loadConfig } from "./config.js";
import { keys, redisOptions } from "./keys.js";
import { JobSpecError, parseJobSpec, type JobResult, type JobSpec, type TranscriptEvent } from "./spec.js";

export interface JobData {
  spec: JobSpec;
  enqueuedAt: number;
}

export type JobState = "waiting" | "active" | "delayed" | "completed" | "failed" | "prioritized" | "waiting-children" | "unknown";

export interface JobStatusInfo {
  id: string;
  state: JobState;
  attemptsMade: number;
  /** The result's status once the job completed. */
  resultStatus?: JobResult["status"];
  failedReason?: string;
  task?: string;
}

export class JobFailedError extends Error {
  constructor(
    readonly jobId: string,
    reason: string,
  ) {
    super(`job ${jobId} failed: ${reason}`);
  }
}

export interface ClientOptions {
  redisUrl?: string;
  queueName?: string;
}

export class PatchbayClient {
  readonly queue: Queue<JobData, JobResult>;
  readonly redis: Redis;
  private readonly k: ReturnType<typeof keys>;

  constructor(opts: ClientOptions = {}) {
    const config = loadConfig();
    const name = opts.queueName ?? config.queueName;
    this.redis = new Redis(opts.redisUrl ?? config.redisUrl, redisOptions);
    this.redis.on("error", () => {}); // ioredis reconnects by itself; callers see failed commands
    this.queue = new Queue<JobData, JobResult>(name, { connection: this.redis });
    this.queue.on("error", () => {}); // the same outage, already surfaced as failed commands
    this.k = keys(name);
  }

  /** Validates and enqueues one job; returns its id. */
  async enqueue(input: unknown): Promise<string> {
    const [id] = await this.enqueueBatch([input]);
    return id!;
  }

  /** Validates every spec first: one bad spec enqueues nothing (the error names its index). */
  async enqueueBatch(inputs: unknown[]): Promise<string[]> {
    const specs = inputs.map((input, i) => {
      const r = parseJobSpec(input);
      if (!r.ok) throw new JobSpecError(inputs.length > 1 ? `spec #${i + 1}: ${r.error}` : r.error);
      return normalize(r.spec);
    });
    const jobs = await this.queue.addBulk(
      specs.map((spec) => ({
        name: "fix",
        data: { spec, enqueuedAt: Date.now() },
        opts: {
          ...(spec.jobId ? { jobId: spec.jobId } : {}),
          ...(spec.priority ? { priority: spec.priority } : {}),
          attempts: spec.attempts ?? defaults.worker.attempts,
          backoff: { type: "exponential", delay: defaults.worker.backoffMs },
          removeOnComplete: { age: defaults.transcript.ttlSec },
          removeOnFail: { age: defaults.transcript.ttlSec },
        },
      })),
    );
    return jobs.map((j) => j.id!);
  }

  async status(id: string): Promise<JobStatusInfo> {
    const job = await Job.fromId<JobData, JobResult>(this.queue, id);
    if (!job) throw new Error(`no such job: ${id}`);
    const state = (await job.getState()) as JobState;
    return {
      id,
      state,
      attemptsMade: job.attemptsMade,
      ...(job.returnvalue ? { resultStatus: job.returnvalue.status } : {}),
      ...(job.failedReason ? { failedReason: job.failedReason } : {}),
      task: job.data?.spec?.task,
    };
  }

  /** The result of a completed job; undefined while it runs; throws if the job failed for good. */
  async result(id: string): Promise<JobResult | undefined> {
    const job = await Job.fromId<JobData, JobResult>(this.queue, id);
    if (!job) throw new Error(`no such job: ${id}`);
    const state = await job.getState();
    if (state === "completed") return job.returnvalue;
    if (state === "failed") throw new JobFailedError(id, job.failedReason ?? "unknown reason");
    return undefined;
  }

  /** Waits for a job to finish (polling, so it rides out a Redis restart). */
  async waitForResult(id: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<JobResult> {
    const deadline = Date.now() + (opts.timeoutMs ?? Infinity);
    let delay = 100;
    for (;;) {
      try {
        const r = await this.result(id);
        if (r) return r;
      } catch (err) {
        if (err instanceof JobFailedError || /no such job/.test((err as Error).message)) throw err;
        // Redis unreachable for a moment: keep waiting.
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for job ${id}`);
      if (opts.signal?.aborted) throw new Error("aborted");
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 1.5, 1000);
    }
  }

  /**
   * Cancels a job wherever it is. A waiting or delayed job is marked: the worker that takes it
   * ends it at once as cancelled, with no sandbox. An active one is told through a Redis channel
   * every worker listens on (and the mark, polled), so it stops within a second or two.
   */
  async cancel(id: string): Promise<"cancelled" | "signalled" | "finished"> {
    const job = await Job.fromId(this.queue, id);
    if (!job) throw new Error(`no such job: ${id}`);
    const state = await job.getState();
    if (state === "completed" || state === "failed") return "finished";
    await this.redis.set(this.k.cancel(id), "1", "EX", defaults.transcript.ttlSec);
    await this.redis.publish(this.k.cancelChannel, id);
    return state === "active" ? "signalled" : "cancelled";
  }

  /** The transcript events of a job, live: yields what is there, then follows until the job ends. */
  async *watch(id: string, opts: { follow?: boolean; signal?: AbortSignal } = {}): AsyncGenerator<TranscriptEvent> {
    const reader = this.redis.duplicate();
    reader.on("error", () => {});
    const follow = opts.follow !== false;
    let last = "0";
    const read = async (block: boolean) => {
      const args = block ? ["BLOCK", 1000] : [];
      const res = (await reader.xread("COUNT", 1000, ...(args as []), "STREAMS", this.k.events(id), last)) as [string, [string, string[]][]][] | null;
      const events = (res?.[0]?.[1] ?? []).map(([entryId, fields]) => ((last = entryId), JSON.parse(fields[1]!) as TranscriptEvent));
      return events;
    };
    try {
      for (;;) {
        const events = await read(follow);
        yield* events;
        if (events.length) continue;
        if (!follow || opts.signal?.aborted) return;
        const st = await this.status(id).catch(() => undefined);
        if (!st || st.state === "completed" || st.state === "failed") {
          yield* await read(false); // what was written just before the end
          return;
        }
      }
    } finally {
      reader.disconnect();
    }
  }

  async list(limit = 50): Promise<JobStatusInfo[]> {
    const jobs = await this.queue.getJobs(["active", "waiting", "prioritized", "delayed", "completed", "failed"], 0, limit - 1);
    return Promise.all(jobs.filter(Boolean).map((j) => this.status(j.id!)));
  }

  async close(): Promise<void> {
    await this.queue.close();
    this.redis.disconnect();
  }
}

/** Local paths become absolute at enqueue time: the worker runs elsewhere. */
function normalize(spec: JobSpec): JobSpec {
  const repo = spec.repo;
  if ("path" in repo) return { ...spec, repo: { path: resolve(repo.path) } };
  if ("archive" in repo) return { ...spec, repo: { archive: resolve(repo.archive) } };
  if ("git" in repo && /^(\.|\/|~)/.test(repo.git)) return { ...spec, repo: { ...repo, git: resolve(repo.git) } };
  return spec;
}

// The library API as plain functions over one default client (REDIS_URL, PATCHBAY_QUEUE).
let client: PatchbayClient | undefined;
const c = () => (client ??= new PatchbayClient());
export const enqueue = (spec: unknown) => c().enqueue(spec);
export const enqueueBatch = (specs: unknown[]) => c().enqueueBatch(specs);
export const waitForResult = (id: string, opts?: { timeoutMs?: number }) => c().waitForResult(id, opts);
export const cancel = (id: string) => c().cancel(id);
export const status = (id: string) => c().status(id);
export const result = (id: string) => c().result(id);
export const watch = (id: string) => c().watch(id);
export async function closeDefaultClient(): Promise<void> {
  await client?.close();
  client = undefined;
}
