// The eval's shared shapes: a task set's instance (SWE-bench's fields plus patchbay's own), a
// prediction, a test's status, the per-instance report SWE-bench's harness writes and the run's
// summary. instance.ts parses them, parse/ reads test output, report.ts grades and sums, grade.ts
// grades one prediction in a sandbox, run.ts runs a set through the workers, store.ts keeps a run
// in Redis for the dashboard.
import type { JobSpec } from "../core/spec/spec.js";

/** The result formats a test command's output is read in: one parser each (src/eval/parse/). */
export const TEST_FORMATS = ["pytest", "unittest", "tap", "junit"] as const;
export type TestFormat = (typeof TEST_FORMATS)[number];

/** One test's status, with SWE-bench's names (its `TestStatus`). */
export type TestStatus = "PASSED" | "FAILED" | "SKIPPED" | "ERROR" | "XFAIL";

/** How an instance's tests run in the grading sandbox: patchbay's own fields. */
export interface EvalTest {
  /** A bash command run in /workspace after the patches (e.g. `python3 -m unittest -v`). */
  command: string;
  /** What its output is read as. */
  format: TestFormat;
  /** junit: the XML file the command writes, relative to /workspace (else the output itself is read as XML). */
  file?: string;
  /** The command's time limit in seconds (default 600). */
  timeoutSec?: number;
}

/** patchbay's own fields of an instance: where its repo is and how its environment is made. */
export interface EvalEnv {
  /** A git URL, or a local path (absolute, or relative to the set file) of a git repository. */
  repo: string;
  /** The sandbox image (default: the configured one). */
  image?: string;
  /** Setup commands, as in a JobSpec; they run in the agent's sandbox and in the grading sandbox. */
  setup?: string | string[];
  /** The setup network, as in a JobSpec (`{ setup: { allow: [...] } }`). */
  network?: JobSpec["network"];
  /**
   * The agent's own judge, as a JobSpec's `verify`: its job runs it after the agent, and with
   * `--candidates K` it judges the K candidates of one job, which picks one. Never the instance's
   * tests (those stay in the grading sandbox).
   */
  verify?: string;
  /** How the tests run and are read. */
  test: EvalTest;
}

/** One task of a set, in SWE-bench's instance format. */
export interface EvalInstance {
  instance_id: string;
  /** SWE-bench's `owner/name` (shown; where the repo is is `patchbay.repo`). */
  repo: string;
  base_commit: string;
  problem_statement: string;
  /** The instance's tests: applied only in the grading sandbox, never shown to the agent. */
  test_patch: string;
  FAIL_TO_PASS: string[];
  PASS_TO_PASS: string[];
  /** The gold patch (the fix without its tests), where the set has one. */
  patch?: string;
  patchbay: EvalEnv;
}

/** A prediction in SWE-bench's format. */
export interface Prediction {
  instance_id: string;
  /** The patch to grade; null or "" is an empty patch. */
  model_patch: string | null;
  model_name_or_path: string;
}

/** Success and failure lists of one category of tests. */
export interface SuccessFailure {
  success: string[];
  failure: string[];
}

/** The inner object of SWE-bench's report.json (`{ [instance_id]: InstanceReport }`). */
export interface InstanceReport {
  patch_is_None: boolean;
  patch_exists: boolean;
  patch_successfully_applied: boolean;
  resolved: boolean;
  tests_status?: {
    FAIL_TO_PASS: SuccessFailure;
    PASS_TO_PASS: SuccessFailure;
    FAIL_TO_FAIL: SuccessFailure;
    PASS_TO_FAIL: SuccessFailure;
  };
}

/**
 * What grading one prediction came to. `resolved`/`unresolved`: the tests ran; `empty_patch`: there
 * was nothing to grade; `patch_failed`: the model patch does not apply to the base commit after
 * setup; `error`: anything else (setup failed, the test patch does not apply, the sandbox failed).
 */
export type GradeOutcome = "resolved" | "unresolved" | "empty_patch" | "patch_failed" | "error";

/** One graded prediction: SWE-bench's report and patchbay's account of it. */
export interface Graded {
  instance_id: string;
  outcome: GradeOutcome;
  report: InstanceReport;
  /** Each test's status as parsed from the output. */
  statuses: Record<string, TestStatus>;
  /** The test command's output (bounded), for test_output.txt. */
  testOutput: string;
  /** Why, for outcome error and patch_failed. */
  error?: string;
  /** Wall time of the grading, ms. */
  ms: number;
}

/** One instance of a run as patchbay accounts for it (in the summary's `patchbay.instances`). */
export interface InstanceAccount {
  instance_id: string;
  /**
   * The outcome of the instance's prediction (SWE-bench's one per instance): the first candidate's,
   * or where a verify judged the candidates, the picked one's (empty_patch when none was picked);
   * "pending" while it is not graded.
   */
  outcome: GradeOutcome | "pending";
  /** Candidates run (K), and how many of them resolved it. */
  candidates: number;
  resolvedCandidates: number;
  /** Every candidate's spend, USD, and tokens. */
  costUsd: number;
  inputTokens: number;
  outputTokens: number;
  /** The jobs' wall time (their results' totalMs summed), the model's share of it (model_response ms summed), grading's. */
  jobMs: number;
  modelMs: number;
  gradeMs: number;
  /** Wall time not spent waiting on the model: jobMs - modelMs + gradeMs. */
  harnessMs: number;
  /** The candidates' job ids, in order. */
  jobIds: string[];
  /**
   * Set where a verify judged the K candidates in one job (`--candidates K` with a verify command):
   * the number (from 1) of the candidate the job picked, null when it picked none.
   */
  picked?: number | null;
}

/** patchbay's fields of a run summary, under its `patchbay` key. */
export interface EvalTotals {
  /** The run's name. */
  run: string;
  model: string;
  /** Candidates per instance (K). */
  candidates: number;
  costUsd: number;
  inputTokens: number;
  outputTokens: number;
  /** From the first job's start to the last grade's end, ms. */
  wallMs: number;
  /** costUsd / resolved_instances; null when none resolved. */
  costPerResolvedUsd: number | null;
  /** pass@k (the unbiased estimator over each instance's K candidates) for k = 1 and k = K, keyed "1", "K". */
  passAtK: Record<string, number>;
  /**
   * best-of-K: of the instances whose candidates a verify judged (and that finished), the fraction
   * whose picked candidate resolved; null when no instance was judged. Beside pass@1 (a candidate
   * at random) and pass@K (an oracle picking), it is what the judge's own pick achieves.
   */
  bestOfK?: number | null;
  /** How many finished instances a verify judged: best-of-K's denominator. */
  judged?: number;
  /** Harness overhead per instance: its median and the total, ms. */
  harnessMs: { median: number; total: number };
  instances: InstanceAccount[];
}

/** A run's summary: SWE-bench's schema_version 2 fields, then patchbay's. */
export interface RunSummary {
  total_instances: number;
  submitted_instances: number;
  completed_instances: number;
  resolved_instances: number;
  unresolved_instances: number;
  empty_patch_instances: number;
  error_instances: number;
  completed_ids: string[];
  incomplete_ids: string[];
  empty_patch_ids: string[];
  submitted_ids: string[];
  resolved_ids: string[];
  unresolved_ids: string[];
  error_ids: string[];
  schema_version: 2;
  patchbay: EvalTotals;
}
