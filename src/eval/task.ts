// What an instance becomes for the workers: one JobSpec per candidate (or one judging K candidates
// itself, where the instance has a verify command), the task built from the problem statement
// alone. The instance's tests (test_patch, FAIL_TO_PASS, PASS_TO_PASS) are in no
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

/** How an eval run asks for its jobs: the model, K, and the verify of instances that name none. */
export interface EvalPlanOptions {
  model?: string;
  /** Candidates per instance (K). */
  candidates: number;
  /** The run-wide verify (`--verify`): the judge of every instance without its own `patchbay.verify`. */
  verify?: string;
}

/**
 * One line of an eval's batch: instance `index`'s job. `judged`: the job runs all K candidates
 * itself (its spec's `candidates`) and picks one by verify; else it is candidate `candidate` (0-based)
 * of K independent jobs.
 */
export type EvalLine = { index: number; judged: true } | { index: number; judged: false; candidate: number };

/** An eval's batch: the specs, in order, and what each line is (`lines[i]` is line i + 1's). */
export interface EvalPlan {
  specs: object[];
  lines: EvalLine[];
}

/** The verify command that judges an instance's job: its own, else the run's (undefined: none). */
export const verifyOf = (inst: EvalInstance, runVerify?: string): string | undefined =>
  inst.patchbay.verify ?? runVerify;

/**
 * The batch of a run, in instance order. An instance with a verify command and K > 1 is one job
 * with `candidates: K` (its worker runs setup once and the K candidates as jobs of their own, and
 * picks one by verify); any other instance is K independent jobs, as without a judge.
 */
export function evalPlan(instances: readonly EvalInstance[], o: EvalPlanOptions): EvalPlan {
  const plan: EvalPlan = { specs: [], lines: [] };
  instances.forEach((inst, index) => {
    const env = inst.patchbay;
    const verify = verifyOf(inst, o.verify);
    const spec = {
      task: taskOf(inst),
      repo: { git: env.repo, ref: inst.base_commit },
      ...(env.image ? { image: env.image } : {}),
      setup: setupOf(env.setup),
      ...(env.network ? { network: env.network } : {}),
      ...(verify !== undefined ? { verify } : {}),
      ...(o.model ? { model: o.model } : {}),
    };
    if (verify !== undefined && o.candidates > 1) {
      plan.specs.push({ ...spec, candidates: o.candidates });
      plan.lines.push({ index, judged: true });
      return;
    }
    for (let candidate = 0; candidate < o.candidates; candidate++) {
      plan.specs.push(spec);
      plan.lines.push({ index, judged: false, candidate });
    }
  });
  return plan;
}

/** One JobSpec per job of the run, in order (evalPlan's specs). */
export const evalSpecs = (instances: readonly EvalInstance[], o: EvalPlanOptions): object[] =>
  evalPlan(instances, o).specs;
