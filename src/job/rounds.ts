// Phase 4 of a job (run.ts): the rounds. In each round the worker kills every process of the
// agent's uid and takes the patch; then verify judges exactly that patch, in a sandbox of its own
// made from the post-setup snapshot (verify.ts). While rounds are left and the agent had finished,
// a failed verify goes back to the model, within the same budgets.
import { count } from "../core/count.js";
import type { LoopOutcome } from "../agent/loop.js";
import { defaults } from "../core/config/config.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { EventInput, JobResult, JobSpec } from "../core/spec/spec.js";
import { computePatch, PatchTooLargeError, type PatchResult } from "./patch.js";
import { verifyInFreshSandbox, VerifyError, type Snapshot } from "./verify.js";
import { kinded } from "../core/errors.js";
import { inSpan } from "../observability/trace.js";

const tail = (s: string, n = 2000) => (s.length > n ? `…${s.slice(-n)}` : s);

export interface RoundsInput {
  sandbox: Sandbox;
  baseline: string;
  spec: JobSpec;
  snapshot?: Promise<Snapshot>;
  outcome: LoopOutcome;
  /** The verify round, shared with the checkpoints. */
  at: { round: number };
  emit: (e: EventInput) => void;
  signal: AbortSignal;
  /** Where each round's verify sandbox goes to be removed (awaited at the job's end). */
  removals: Promise<void>[];
  /** The agent again, after a failed verify. */
  resume: (from: LoopOutcome, message: string) => Promise<LoopOutcome>;
  verifySandbox: () => Promise<Sandbox>;
  /** A worker's background removals, which each verify sandbox is handed to (see verify.ts). */
  retire?: (sb: Sandbox) => Promise<void>;
}

/**
 * Each round: every process of the agent's killed, the patch, then verify judging exactly that
 * patch in a sandbox of its own made from the snapshot (verify.ts). A failed verify goes back to
 * the model (within the same budgets) while rounds are left and the agent had finished.
 */
export async function patchAndVerify(
  o: RoundsInput,
): Promise<{ patch: PatchResult; verify?: JobResult["verify"]; outcome: LoopOutcome }> {
  let outcome = o.outcome;
  let patch: PatchResult | undefined;
  let verify: JobResult["verify"];
  const rounds = o.spec.verifyRounds ?? defaults.job.verifyRounds;
  for (; ; o.at.round++) {
    // Nothing the agent started may still run: it could change files under the patch.
    await o.sandbox.killAgentProcesses();
    try {
      patch = await inSpan("patchbay.patch", { "patchbay.round": o.at.round }, async (span) => {
        const p = await takePatch(o.sandbox, o.baseline);
        span.setAttributes({ "patchbay.files_changed": p.filesChanged.length, "patchbay.patch.bytes": p.bytes });
        return p;
      });
    } catch (err) {
      // A later round's patch that cannot be taken: the result keeps the one the last verify judged.
      if (!(err instanceof PatchError && patch)) throw err;
      return { patch, verify, outcome: { ...outcome, status: "failed", error: err.message } };
    }
    o.emit({ type: "patch", filesChanged: patch.filesChanged, diffstat: patch.diffstat, bytes: patch.bytes });
    if (!o.spec.verify || !o.snapshot || o.signal.aborted) return { patch, verify, outcome };
    const t = performance.now();
    let r: Awaited<ReturnType<typeof verifyInFreshSandbox>>;
    try {
      const input = {
        sandbox: o.verifySandbox,
        snapshot: await o.snapshot,
        patch,
        command: o.spec.verify,
        timeoutSec: defaults.job.verifyTimeoutSec,
        signal: o.signal,
        retire: o.retire,
      };
      r = await inSpan("patchbay.verify", { "patchbay.round": o.at.round }, async (span) => {
        const v = await verifyInFreshSandbox(input);
        span.setAttribute("patchbay.verify.exit_code", v.exitCode);
        return v;
      });
    } catch (err) {
      // The verify tree could not be made (the patch does not apply to it): failed, with the patch.
      if (!(err instanceof VerifyError)) throw err;
      return { patch, verify, outcome: { ...outcome, status: "failed", error: err.message } };
    }
    o.removals.push(r.removed);
    verify = { exitCode: r.exitCode, outputTail: tail(r.output) };
    o.emit({
      type: "verify",
      command: o.spec.verify,
      ...verify,
      ms: Math.round(performance.now() - t),
      round: o.at.round,
    });
    if (verify.exitCode === 0 || outcome.status !== "completed" || o.signal.aborted) return { patch, verify, outcome };
    if (o.at.round > rounds) {
      return {
        patch,
        verify,
        outcome: {
          ...outcome,
          status: "verify_failed",
          error: `verify failed (exit ${verify.exitCode}) after ${count(o.at.round, "round")}`,
        },
      };
    }
    outcome = await o.resume(outcome, verifyFeedback(o.spec.verify, verify, o.at.round, rounds));
  }
}

/** What the model is told after a failed verify: clearly the verify command's output, not a tool's. */
function verifyFeedback(command: string, v: NonNullable<JobResult["verify"]>, round: number, rounds: number): string {
  const left = rounds - round + 1;
  return [
    `The verify command failed with exit code ${v.exitCode}. It ran in a fresh shell after your turn ended: \`${command}\``,
    "Here is the end of its output (this is the verify command's output, not a tool result):",
    "<verify_output>",
    v.outputTail,
    "</verify_output>",
    `Fix the cause and end your turn when done; verify will run again (${count(left, "more time")} at most).`,
  ].join("\n");
}

/** The patch could not be taken from a sandbox that still runs: the workspace's fault, not the host's. */
export class PatchError extends kinded("patch") {}

async function takePatch(sandbox: Sandbox, baseline: string): Promise<PatchResult> {
  try {
    return await computePatch(sandbox, baseline);
  } catch (err) {
    // A sandbox that is gone (the engine failed) is retried elsewhere; anything else would fail the same way again.
    if (err instanceof PatchTooLargeError || (await sandbox.running()))
      throw new PatchError(`the patch could not be taken: ${(err as Error).message}`);
    throw err;
  }
}
