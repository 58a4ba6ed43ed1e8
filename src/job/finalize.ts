// Phase 5 of a job (run.ts): the result and its job_finished event. This module also ends an
// attempt early (cancelled while queued, stopped in setup, a failure that is the job's own) and
// says which failures those are: runJob throws every other one for the queue to retry.
import type { LoopOutcome } from "../agent/loop.js";
import { priceKnown } from "../agent/prices.js";
import { jobModel } from "../core/config/scripted.js";
import type { EgressSession } from "../net/proxy.js";
import { emptyResult, finishedEvent, type JobResult, type JobStatus } from "../core/spec/spec.js";
import type { JobContext } from "./job-context.js";
import type { PatchResult } from "./patch.js";
import { pointSpan, resultAttrs } from "../observability/trace.js";

/** Which model the job ran with, and whether its cost could be counted (a scripted model's is never priced: 0, `scripted`). */
function modelOf(ctx: JobContext): Pick<JobResult, "model" | "priceUnknown" | "scripted"> {
  const model = jobModel(ctx.spec, ctx.config);
  if (ctx.config.scripted) return { model, scripted: true };
  return { model, ...(priceKnown(model) ? {} : { priceUnknown: true as const }) };
}

export interface Timings {
  sandboxMs: number;
  agentMs: number;
}

/** The result of an attempt whose agent ran: its outcome, the patch verify judged, the timings. */
export function finish(
  ctx: JobContext,
  o: {
    outcome: LoopOutcome;
    patch: PatchResult;
    verify?: JobResult["verify"];
    timings: Timings;
    egress?: EgressSession;
    baseCommit?: string;
  },
): JobResult {
  const { outcome, patch, verify } = o;
  const result: JobResult = {
    status: outcome.status,
    patch: patch.patch,
    diffstat: patch.diffstat,
    filesChanged: patch.filesChanged,
    ...(verify ? { verify, verified: verify.exitCode === 0 } : {}),
    stopReason: outcome.stopReason,
    turns: outcome.turns,
    usage: outcome.usage,
    costUsd: outcome.costUsd,
    ...modelOf(ctx),
    timings: { queuedMs: ctx.opts.queuedMs ?? 0, ...o.timings, totalMs: ctx.elapsed() },
    ...(outcome.error ? { error: outcome.error } : {}),
    ...(outcome.summary ? { summary: outcome.summary } : {}),
    ...(o.egress ? { egress: egressOf(o.egress) } : {}),
    jobId: ctx.jobId,
    attempt: ctx.attempt,
    ...(o.baseCommit ? { baseCommit: o.baseCommit } : {}),
  };
  ctx.emit(finishedEvent(result));
  pointSpan("patchbay.result", resultAttrs(result));
  return result;
}

/** An attempt that ended before its agent ran: no patch, no usage, and why. */
export function endedEarly(ctx: JobContext, status: JobStatus, error: string, egress?: EgressSession): JobResult {
  const result = emptyResult(status, error, {
    ...modelOf(ctx),
    timings: { queuedMs: ctx.opts.queuedMs ?? 0, sandboxMs: 0, agentMs: 0, totalMs: ctx.elapsed() },
    jobId: ctx.jobId,
    attempt: ctx.attempt,
    ...(egress ? { egress: egressOf(egress) } : {}),
  });
  ctx.emit(finishedEvent(result));
  pointSpan("patchbay.result", resultAttrs(result));
  return result;
}

/** A result's egress: the session's counts, and what it refused (the hosts a campaign's pull request names). */
function egressOf(session: EgressSession): NonNullable<JobResult["egress"]> {
  const refusals = [...session.refusals];
  return { ...session.stats, ...(refusals.length ? { refusals } : {}) };
}
