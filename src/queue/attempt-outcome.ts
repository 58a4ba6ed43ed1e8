// How a failed job attempt ends: one ordered table, the first row whose test holds decides.
//
//   abandon    the drain's deadline passed: back to the queue at once, uncounted (another worker runs it)
//   throttle   the API rate limited or overloaded (429/529) once the SDK's retries are spent: the
//              queue's account, not the job's; the queue takes no job for a while, this one goes back
//              with no attempt counted
//   hand-back  the engine failed under the job (a fresh health check says so) and had already once
//              before for this job: back to the queue uncounted, to a healthy worker. The first such
//              failure counts as an attempt, so a job that keeps breaking engines still fails in time
//   retry      attempts are left (failures and stalls both count) and the error may pass
//   fail       for good: out of attempts, or an UnrecoverableError (it never gets better)
//
// This is startWorker's classification as it was, moved here unchanged so that it lives in one place.
// Issue 24's error taxonomy (a root PatchbayError with a kind) replaces the tests of the rows with a
// table from kinds to these actions; the actions, and what an attempt does for each
// (src/queue/attempt.ts: failedAttempt), stay as they are.
import { UnrecoverableError } from "bullmq";
import { isThrottle, ModelError } from "../agent/model.js";

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
}

interface Row {
  action: FailureAction;
  when: (f: Judged) => boolean | Promise<boolean>;
}

const neverBetter = (err: unknown) => err instanceof UnrecoverableError;

const TABLE: readonly Row[] = [
  { action: "abandon", when: (f) => f.abandoned },
  { action: "throttle", when: (f) => isThrottle(f.err) },
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
    engineFailed: once(async () => !(err instanceof ModelError) && !neverBetter(err) && !(await engineHealthy())),
    infraFailuresBefore: once(() => facts.countInfraFailure()),
  };
  for (const row of TABLE) {
    if (!(await row.when(f))) continue;
    const engineFailed = row.action === "retry" || row.action === "fail" ? await f.engineFailed() : false;
    return { action: row.action, engineFailed };
  }
  throw new Error("unreachable: the last row of the failure table always holds");
}
