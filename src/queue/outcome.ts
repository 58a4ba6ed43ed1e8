// A job's status in one word, from its queue state and its result: the vocabulary the CLI, the API
// and the dashboard show first. A finished job's status is its result's (docs/jobspec.md#statuses:
// completed, verify_failed, cancelled, …); BullMQ's state (waiting, active, completed, failed) is
// only where it is in the queue, and "completed" there means a result was handed back, whatever its
// status (a cancelled job is "completed" to BullMQ). A job not finished is "waiting" or "running".
import { JOB_STATUSES, type JobStatus } from "../core/spec/spec.js";

/** What a job is now, as shown first: a finished job's status, else where it stands. */
export type JobOutcome = JobStatus | "waiting" | "running" | "unknown";

/** The states in which a job waits its turn (BullMQ's: waiting, prioritized, delayed, waiting-children). */
const WAITING = new Set(["waiting", "prioritized", "delayed", "waiting-children"]);

/** Whether a string is one of the result statuses (docs/jobspec.md#statuses). */
export const isJobStatus = (s: unknown): s is JobStatus =>
  typeof s === "string" && (JOB_STATUSES as readonly string[]).includes(s);

/**
 * A job's outcome from its queue state and its result's status (undefined while it has none). A
 * result's status wins whatever the state (BullMQ may still call the job active while its result is
 * stored); a job BullMQ failed without a result (a crash, its attempts spent) is "failed".
 */
export function jobOutcome(state: string, resultStatus?: unknown): JobOutcome {
  if (isJobStatus(resultStatus)) return resultStatus;
  if (state === "failed") return "failed";
  if (state === "active") return "running";
  if (WAITING.has(state)) return "waiting";
  return "unknown"; // completed without a status (not a patchbay result), or gone
}
