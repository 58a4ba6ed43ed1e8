// A job's status as an exit code, shared by `run`, `watch` and `batch wait`. Only plain data here:
// `patchbay --help` loads this.
import type { JobStatusName } from "../core/spec/names.js";

/** 0 completed; 3 verify_failed; 4 a limit (budget, turns, time); 5 cancelled; 1 failed. A new status is a type error here. */
export const STATUS_EXIT: Readonly<Record<JobStatusName, number>> = {
  completed: 0,
  verify_failed: 3,
  budget_exceeded: 4,
  max_turns: 4,
  timeout: 4,
  cancelled: 5,
  failed: 1,
};

/** The exit code for a job's final status (an unknown status is a failure). */
export function exitCodeFor(status: string): number {
  return Object.hasOwn(STATUS_EXIT, status) ? STATUS_EXIT[status as JobStatusName] : 1;
}

/** Exit codes from worst to best: failed (1), verify_failed (3), a limit (4), cancelled (5), completed (0). */
const EXIT_SEVERITY: readonly number[] = [1, 3, 4, 5, 0];

/** One exit code for many jobs: 0 only if every one completed, else the worst job's code. */
export function worstExitCode(statuses: Iterable<string>): number {
  let worst = 0;
  for (const s of statuses) {
    const code = exitCodeFor(s);
    if (EXIT_SEVERITY.indexOf(code) < EXIT_SEVERITY.indexOf(worst)) worst = code;
  }
  return worst;
}

/** For the usage text of the commands that wait for jobs. */
export const STATUS_EXIT_USAGE = `
  0 completed; 3 verify_failed (verify still failed); 4 budget_exceeded, max_turns or timeout;
  5 cancelled; 1 failed, or an error (Redis unreachable, unknown id); 2 usage error`;
