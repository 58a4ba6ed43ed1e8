// Grading one prediction, as SWE-bench's harness does it, in a sandbox of its own on this host's
// backend: the instance's repo at its base commit, its setup (with its setup network), then the
// model patch, then the test patch (the instance's tests, which no agent ever saw), then the test
// command; its output (or the JUnit file it wrote) is read per test (parse/) and judged against
// FAIL_TO_PASS and PASS_TO_PASS (report.ts). The sandbox is a job's in all but the agent: the same
// phases make it (acquire and prepare, src/job/), with the same image, limits, hardening and
// network rules, and it is removed whatever happens.
import { loadConfig, type Config } from "../core/config/config.js";
import { kindOf as errorKind } from "../core/errors.js";
import { assertJobSpec, type TranscriptEvent } from "../core/spec/spec.js";
import type { Backend } from "../backend/types.js";
import { acquire, release, type Held } from "../job/acquire.js";
import { admitJob } from "../job/admit.js";
import { jobContext } from "../job/job-context.js";
import { prepare } from "../job/prepare.js";
import { applyPatch } from "../job/verify.js";
import type { EgressProxy } from "../net/proxy.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { parseTestOutput } from "./parse/index.js";
import { instanceReport, untrustedRun } from "./report.js";
import type { EvalInstance, Graded, GradeOutcome, Prediction } from "./types.js";

/** The most of a test command's output kept (its head and tail) and read per test. */
export const TEST_OUTPUT_MAX_BYTES = 16 * 1024 * 1024;
/**
 * What the sandbox keeps of the output: its head and tail with a notice between them must fit the
 * parsers' bound (MAX_OUTPUT_CHARS, 16 Mi characters, a byte at most a character), or they read the
 * head alone and lose the tail, where the runner prints its results.
 */
const KEPT_OUTPUT_BYTES = TEST_OUTPUT_MAX_BYTES - 64 * 1024;
/** A test command's time limit when the instance names none, in seconds. */
export const TEST_TIMEOUT_SEC = 600;

/** How gradePrediction grades; every member is optional. */
export interface GradeOptions {
  /** The configuration. @default loadConfig() */
  config?: Config;
  /** Where the grading sandbox runs. @default the configured backend */
  backend?: Backend;
  /** The setup phase's egress proxy (tests pass one of their own). @default the process's own */
  egress?: EgressProxy;
  /** Aborting stops the grading; the prediction is graded `error`. */
  signal?: AbortSignal;
  /** The grading sandbox's job id (its labels, its events). @default `grade-<instance_id>-<time>` */
  jobId?: string;
  /** Gets the grading's events (its setup commands, their output's tail). */
  onEvent?: (e: TranscriptEvent) => void;
}

/** Grades `pred` for `instance` (whose `patchbay.repo` is a git URL or an absolute path). Never rejects on the prediction's or the repo's faults. */
export async function gradePrediction(instance: EvalInstance, pred: Prediction, o: GradeOptions = {}): Promise<Graded> {
  const t0 = performance.now();
  const done = (outcome: GradeOutcome, rest: Partial<Graded> & Pick<Graded, "report">): Graded => ({
    instance_id: instance.instance_id,
    outcome,
    statuses: {},
    testOutput: "",
    ...rest,
    ms: Math.round(performance.now() - t0),
  });
  const patch = pred.model_patch ?? "";
  if (!patch.trim())
    return done("empty_patch", { report: instanceReport(instance, {}, { patch: pred.model_patch, applied: false }) });
  const notGraded = instanceReport(instance, {}, { patch, applied: false });
  try {
    return await inSandbox(instance, patch, o, done);
  } catch (err) {
    // A failed setup, a repo that cannot be loaded or a sandbox that failed: the instance's error, said why.
    return done("error", { report: notGraded, error: `${errorKind(err)}: ${(err as Error).message}`.slice(0, 2000) });
  }
}

async function inSandbox(
  instance: EvalInstance,
  patch: string,
  o: GradeOptions,
  done: (outcome: GradeOutcome, rest: Partial<Graded> & Pick<Graded, "report">) => Graded,
): Promise<Graded> {
  const config = o.config ?? loadConfig();
  const env = instance.patchbay;
  const testTimeout = env.test.timeoutSec ?? TEST_TIMEOUT_SEC;
  const spec = await admitJob(
    assertJobSpec({
      task: `grade ${instance.instance_id}`,
      repo: { git: env.repo, ref: instance.base_commit },
      ...(env.image ? { image: env.image } : {}),
      ...(env.setup ? { setup: env.setup } : {}),
      ...(env.network ? { network: env.network } : {}),
      timeoutSec: testTimeout + 1800,
    }),
    config,
  );
  const jobId = o.jobId ?? `grade-${instance.instance_id}-${Date.now().toString(36)}`;
  const { ctx, dispose } = jobContext(spec, config, {
    jobId,
    backend: o.backend,
    egress: o.egress,
    signal: o.signal,
    onEvent: o.onEvent,
  });
  const held: Held = { removals: [] };
  try {
    const sandbox = await acquire(ctx, held);
    const prep = await prepare(ctx, sandbox, held, performance.now());
    if ("stopped" in prep) throw new Error(`grading stopped during setup: ${prep.stopped.error}`);
    await prep.loaded;
    const applied = await applyPatch(sandbox, patch);
    if (applied.exitCode !== 0)
      return done("patch_failed", {
        report: instanceReport(instance, {}, { patch, applied: false }),
        error: `the model patch does not apply to the base commit after setup (git apply exit ${applied.exitCode}): ${applied.stderr.trim().slice(-600)}`,
      });
    const tests = await applyPatch(sandbox, instance.test_patch);
    if (tests.exitCode !== 0)
      return done("error", {
        report: instanceReport(instance, {}, { patch, applied: true }),
        error: `the test patch does not apply after the model patch (git apply exit ${tests.exitCode}): ${tests.stderr.trim().slice(-600)}`,
      });
    const run = await sandbox.runFresh(`cd /workspace && { ${env.test.command}\n}`, {
      timeoutSec: testTimeout,
      signal: ctx.signal,
      maxOutputBytes: KEPT_OUTPUT_BYTES,
    });
    if (run.aborted) throw new Error("grading was stopped while the tests ran");
    const text = env.test.format === "junit" && env.test.file ? await junitFile(sandbox, env.test.file) : run.output;
    const statuses = parseTestOutput(env.test.format, text);
    const testOutput = run.timedOut
      ? `${run.output}\n[patchbay: the tests timed out after ${testTimeout} s]`
      : run.output;
    // A failed command whose output names no failing test printed passing lines it did not earn.
    const untrusted = untrustedRun(statuses, run.exitCode);
    if (untrusted)
      return done("error", {
        report: instanceReport(instance, statuses, { patch, applied: false }),
        statuses,
        testOutput,
        error: untrusted,
      });
    const report = instanceReport(instance, statuses, { patch, applied: true });
    return done(report.resolved ? "resolved" : "unresolved", { report, statuses, testOutput });
  } finally {
    dispose();
    await release(held);
  }
}

/** The JUnit file the test command wrote, read as the agent's uid (a file the repo's code made is hostile: bounded). */
async function junitFile(sandbox: Sandbox, file: string): Promise<string> {
  const path = file.startsWith("/") ? file : `/workspace/${file}`;
  const bytes = await sandbox.files.read(path, { maxBytes: TEST_OUTPUT_MAX_BYTES }).catch((err: Error) => {
    throw new Error(`the JUnit file ${JSON.stringify(file)} could not be read: ${err.message}`);
  });
  return bytes.toString("utf8");
}
