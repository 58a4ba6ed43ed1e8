// How a failed job attempt ends: one ordered table, the first row whose test holds decides.
//
//   abandon    the drain's deadline passed: back to the queue at once, uncounted (another worker runs it)
//   throttle   the API rate limited or overloaded (429/529) once the SDK's retries are spent: the
//              queue's account, not the job's; the queue takes no job for a while, this one goes back
//              with no attempt counted
//   hand-back  the engine failed under the job (a fresh health check says so) and had already once
//              before for this job: back to the queue uncounted, to a healthy worker. The first such
//              failure counts as an attempt, so a job that keeps breaking engines still fails in time
//   hand-back  (redis) the worker's Redis connection failed under the job (closed, ended, a server
//              loading or demoted: src/redis/connection-errors.ts): not the job's doing, so back to the queue
//              uncounted, up to REDIS_HAND_BACKS times for a job, counted apart from the engine's
//              (then it counts, so a job whose attempts break connections still ends; and when the
//              hand-backs cannot be counted, the job is not handed back)
//   retry      attempts are left (failures and stalls both count) and the error may pass
//   fail       for good: out of attempts, or an UnrecoverableError (it never gets better)
//
// Which of these an error may come to is its kind's (src/core/errors.ts), in ON_FAILURE below: one
// table from kinds to what a failure of that kind may do. What an attempt does for each action is
// src/queue/attempt.ts's (failedAttempt).
import { UnrecoverableError } from "bullmq";
import { kindOf, type ErrorKind } from "../core/errors.js";
import { isRedisConnectionError } from "../redis/connection-errors.js";

export type FailureAction = "abandon" | "throttle" | "hand-back" | "retry" | "fail";

/** What a failure is judged by. */
export interface FailureFacts {
  err: unknown;
  /** The job was abandoned at the drain's deadline (its signal's reason is "abandoned"). */
  abandoned: boolean;
  /** Attempts used before this one (failed attempts and stalls: BullMQ's attemptsMade counts failures only). */
  used: number;
  /** The job's attempts in all. */
  attempts: number;
  /** A fresh check of the engine and the sandbox image; true when healthy. Asked only when a row needs it, once. */
  engineHealthy(): Promise<boolean>;
  /** Counts an infrastructure failure on the job; resolves to how many it had before. Asked only when a row needs it, once. */
  countInfraFailure(): Promise<number>;
  /** Counts a hand-back for the worker's Redis connection (its own count); how many before. Infinity when it cannot be counted. */
  countRedisHandBack(): Promise<number>;
}

export interface FailureOutcome {
  action: FailureAction;
  /** For retry and fail: the engine failed under the job (its error says so). */
  engineFailed: boolean;
}

/** The facts a row reads: the two that cost a check (or write the job) asked lazily, once. */
interface Judged {
  err: unknown;
  abandoned: boolean;
  used: number;
  attempts: number;
  /** Not the model's failure nor one that never gets better, and the engine is unhealthy now. */
  engineFailed(): Promise<boolean>;
  infraFailuresBefore(): Promise<number>;
  redisHandBacksBefore(): Promise<number>;
}

interface Row {
  action: FailureAction;
  when: (f: Judged) => boolean | Promise<boolean>;
}

/**
 * What a failure of each kind may do, past the drain's abandon:
 *   throttle   the queue is throttled and the job goes back uncounted
 *   retry      retried while attempts are left (not the engine's: it is not asked)
 *   engine     retried while attempts are left, or handed back when the engine failed under it again
 *   fail       fails once: it never gets better
 * A kind that never reaches the worker (a job's own failure is its result) still has its row.
 */
export const ON_FAILURE: Readonly<Record<ErrorKind, "throttle" | "retry" | "engine" | "fail">> = {
  throttle: "throttle",
  model: "retry",
  "sandbox-lost": "engine",
  "sandbox-step": "engine",
  infra: "engine",
  config: "engine", // the worker's settings, not the job's: another worker may run it
  internal: "engine",
  cancelled: "engine", // an abort that is not the job's cancel or timeout (those end as results)
  timeout: "engine",
  repo: "fail",
  setup: "fail",
  patch: "fail",
  verify: "fail",
  spec: "fail",
  usage: "fail",
  "not-found": "fail",
  conflict: "fail",
  tool: "fail",
  image: "fail",
  failed: "fail",
};

const onFailure = (err: unknown) => (err instanceof UnrecoverableError ? "fail" : ON_FAILURE[kindOf(err)]);
const neverBetter = (err: unknown) => onFailure(err) === "fail";

/** How many times a job is handed back uncounted for its worker's Redis connection failing under it. */
export const REDIS_HAND_BACKS = 3;

const TABLE: readonly Row[] = [
  { action: "abandon", when: (f) => f.abandoned },
  { action: "throttle", when: (f) => onFailure(f.err) === "throttle" },
  {
    action: "hand-back",
    when: async (f) => isRedisConnectionError(f.err) && (await f.redisHandBacksBefore()) < REDIS_HAND_BACKS,
  },
  { action: "hand-back", when: async (f) => (await f.engineFailed()) && (await f.infraFailuresBefore()) > 0 },
  { action: "retry", when: (f) => f.used + 1 < f.attempts && !neverBetter(f.err) },
  { action: "fail", when: () => true },
];

const once = <T>(f: () => Promise<T>): (() => Promise<T>) => {
  let p: Promise<T> | undefined;
  return () => (p ??= f());
};

export async function classifyFailure(facts: FailureFacts): Promise<FailureOutcome> {
  const { err } = facts;
  const engineHealthy = once(() => facts.engineHealthy());
  const f: Judged = {
    ...facts,
    // A Redis connection's failure is not the engine's, whatever the health check says meanwhile.
    engineFailed: once(
      async () => !isRedisConnectionError(err) && onFailure(err) === "engine" && !(await engineHealthy()),
    ),
    infraFailuresBefore: once(() => facts.countInfraFailure()),
    redisHandBacksBefore: once(() => facts.countRedisHandBack()),
  };
  for (const row of TABLE) {
    if (!(await row.when(f))) continue;
    const engineFailed = row.action === "retry" || row.action === "fail" ? await f.engineFailed() : false;
    return { action: row.action, engineFailed };
  }
  throw new Error("unreachable: the last row of the failure table always holds");
}
