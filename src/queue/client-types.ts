// The shapes of the queue client's API (client.ts): its options, what it says of a job, and the
// option bags of its calls, each member saying what it does and what it defaults to.
import type { JobOutcome } from "./outcome.js";
import type { Config } from "../core/config/config.js";
import type { JobOrigin } from "../job/repo/source-check.js";

/** A job's state in BullMQ's queue (`unknown`: no such job). */
export type JobState =
  "waiting" | "active" | "delayed" | "completed" | "failed" | "prioritized" | "waiting-children" | "unknown";
/** The states `list` looks in, in this order. */
export const LIST_STATES = ["active", "waiting", "prioritized", "delayed", "completed", "failed"] as const;
/** A state `list` can be asked for. */
export type ListState = (typeof LIST_STATES)[number];

/** Where a job is, as PatchbayClient.status and list say it. */
export interface JobStatusInfo {
  /** The job's id. */
  id: string;
  /**
   * What a user reads (src/queue/outcome.ts, as the dashboard and the API say it): the result's
   * status once the job finished (completed, failed, cancelled, …), `failed` for a job BullMQ failed
   * for good, else `waiting` or `running`.
   */
  outcome: JobOutcome;
  /** Why it did not complete: the result's error, or BullMQ's failed reason. */
  error?: string;
  /** BullMQ's state: `completed` means the worker returned a result, whatever its status. */
  state: JobState;
  /** Attempts made so far (a worker's retries count). */
  attemptsMade: number;
  /** The spec's task. */
  task?: string;
  /** When it was enqueued, epoch ms. */
  createdAt?: number;
  /** When a worker first took it, epoch ms. */
  startedAt?: number;
  /** When it finished, epoch ms. */
  finishedAt?: number;
}

/** How a PatchbayClient reaches its queue; each is checked, and an unknown one is refused. */
export interface ClientOptions {
  /**
   * The Redis of the queue (redis://, rediss://, a Sentinel group or a Cluster: docs/redis.md).
   * @default REDIS_URL, else redis://127.0.0.1:6379
   */
  redisUrl?: string;
  /**
   * The queue's name.
   * @default PATCHBAY_QUEUE, else "patchbay"
   */
  queueName?: string;
  /**
   * Let the process exit while the client is idle (no call in progress), so a script needs no
   * close(). The module-level functions (enqueue, waitForResult, ...) use a client with this on.
   * @default false
   */
  unrefWhenIdle?: boolean;
  /**
   * Refuse at enqueue a spec past the bounds the queue's live workers publish (WorkerBoundsError).
   * false leaves the refusal to the workers themselves (each still refuses, as its policy says).
   * @default true
   */
  checkWorkerBounds?: boolean;
  /** CLIENT SETNAME of its Redis connections (the dashboard names its own, to be counted). */
  connectionName?: string;
  /**
   * The environment's settings; the options above win.
   * @default loadConfig() when the client is made
   */
  config?: Config;
  /**
   * Who its jobs are from (JobData.origin): the operator's own, or the HTTP API's.
   * @default "operator"
   */
  origin?: JobOrigin;
}

/** How waitForResult waits. */
export interface WaitOptions {
  /**
   * Give up (WaitTimeoutError) after this many ms, at most 7 days.
   * @default no limit: wait as long as it takes
   */
  timeoutMs?: number;
  /** Aborting stops the wait (it rejects with the signal's reason); the job runs on. */
  signal?: AbortSignal;
  /**
   * Emit a process warning (code PATCHBAY_NO_WORKER) when no worker is listening.
   * @default true
   */
  warnIfNoWorker?: boolean;
}

/** How watch reads a job's transcript. */
export interface WatchOptions {
  /**
   * Follow the job until it ends; false yields what is there now and returns.
   * @default true
   */
  follow?: boolean;
  /** Aborting ends the watch after the events already read. */
  signal?: AbortSignal;
}

/** Which jobs list returns. */
export interface ListOptions {
  /**
   * The most jobs returned, newest first.
   * @default 50
   */
  limit?: number;
  /**
   * Only jobs in these states.
   * @default every state of LIST_STATES
   */
  states?: readonly ListState[];
}
