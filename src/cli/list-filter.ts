// What `patchbay list` filters on. A job's status (docs/jobspec.md#statuses: completed, cancelled,
// verify_failed, ...) is what list shows and what --status takes; until a job has finished it is
// `waiting` or `running` (src/queue/outcome.ts: the dashboard's and the API's words too).
// --state takes BullMQ's queue states alone, and says so: the queue's "completed" holds every job
// whose worker returned a result (cancelled and verify_failed ones too), "failed" the jobs BullMQ
// failed for good. Pure: no Redis here.
import { JOB_STATUSES } from "../core/spec/names.js";

/** BullMQ's queue states list reads (`--state`). */
export const QUEUE_STATES = ["active", "waiting", "prioritized", "delayed", "completed", "failed"] as const;
export type QueueStateName = (typeof QUEUE_STATES)[number];
/** The queue states a job not finished yet is in, by what list calls it. */
const UNFINISHED: Record<string, readonly QueueStateName[]> = {
  waiting: ["waiting", "prioritized", "delayed"],
  running: ["active"],
};
/** What `--status` takes: a final status, or `waiting` / `running` for a job not finished yet. */
export const LIST_STATUSES = [...JOB_STATUSES, "waiting", "running"] as const;

/** Why `values` are not queue states (a status named as a state gets the flag that takes it), or undefined. */
export function badStates(values: readonly string[]): string | undefined {
  const bad = values.filter((s) => !(QUEUE_STATES as readonly string[]).includes(s));
  if (!bad.length) return undefined;
  const statuses = bad.filter((s) => (JOB_STATUSES as readonly string[]).includes(s));
  return statuses.length
    ? `--state takes queue states (${QUEUE_STATES.join(", ")}); '${statuses.join(", ")}' is a job's status: use --status ${statuses.join(",")}`
    : `--state takes ${QUEUE_STATES.join(", ")}, not '${bad.join(", ")}' (a job's status goes to --status)`;
}

/** Why `values` are not statuses list can filter on, or undefined. */
export function badStatuses(values: readonly string[]): string | undefined {
  const bad = values.filter((s) => !(LIST_STATUSES as readonly string[]).includes(s));
  return bad.length ? `--status takes ${LIST_STATUSES.join(", ")}, not '${bad.join(", ")}'` : undefined;
}

/** The queue states that can hold a job of one of `statuses` (a final status: completed or failed). */
export function statesFor(statuses: readonly string[]): QueueStateName[] {
  return QUEUE_STATES.filter((q) =>
    statuses.some((s) => (UNFINISHED[s] ? UNFINISHED[s].includes(q) : q === "completed" || q === "failed")),
  );
}
