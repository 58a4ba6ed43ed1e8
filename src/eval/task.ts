// What an instance becomes for the workers: one JobSpec per candidate, the task built from the
// problem statement alone. The instance's tests (test_patch, FAIL_TO_PASS, PASS_TO_PASS) are in no
// spec: they exist only in the grading sandbox (grade.ts); and the repo's history past base_commit,
// where the fix and those tests usually are, is taken out of the workspace before the agent starts.
import { asset } from "../core/assets.js";
import { MAX_TASK_CHARS } from "../core/spec/spec.js";
import type { EvalInstance } from "./types.js";

/** The words around an instance's problem statement: the task the agent gets. */
export const TASK_PREAMBLE =
  "Resolve the issue below in the repository in /workspace. Change the code, not the tests: the change " +
  "is judged by tests you have not seen.\n\n<issue>\n";

/** The task of an instance (the problem statement, cut to the JobSpec's bound with a marker). */
export function taskOf(instance: EvalInstance): string {
  const room = MAX_TASK_CHARS - TASK_PREAMBLE.length - 64;
  const text =
    instance.problem_statement.length > room
      ? `${instance.problem_statement.slice(0, room)}\n[… cut: the problem statement is longer]`
      : instance.problem_statement;
  return `${TASK_PREAMBLE}${text}\n</issue>\n`;
}

/** The first setup command of an eval job: the repo's history past base_commit taken out of the agent's view (see the file). */
export const HIDE_FUTURE_HISTORY = asset("eval/sh/hide-future-history.sh");

const setupOf = (setup: string | string[] | undefined) => [
  HIDE_FUTURE_HISTORY,
  ...(setup === undefined ? [] : typeof setup === "string" ? [setup] : setup),
];

/** One JobSpec per candidate of each instance, in order: instance 1's K candidates, then instance 2's. */
export function evalSpecs(instances: readonly EvalInstance[], o: { model?: string; candidates: number }): object[] {
  const specs: object[] = [];
  for (const inst of instances) {
    const env = inst.patchbay;
    for (let c = 0; c < o.candidates; c++)
      specs.push({
        task: taskOf(inst),
        repo: { git: env.repo, ref: inst.base_commit },
        ...(env.image ? { image: env.image } : {}),
        setup: setupOf(env.setup),
        ...(env.network ? { network: env.network } : {}),
        ...(o.model ? { model: o.model } : {}),
      });
  }
  return specs;
}

/** The instance and candidate (0-based) of a batch line (1-based), given K candidates. */
export const lineOf = (line: number, candidates: number) => ({
  index: Math.floor((line - 1) / candidates),
  candidate: (line - 1) % candidates,
});
