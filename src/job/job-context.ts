// One attempt's context, which every phase of runJob (run.ts) reads: the spec and the config, the
// job's id and attempt, the event emitter, the one signal that cancels (or times out) the job, the
// wall clock, and the timings.
import type { Config } from "../core/config/config.js";
import { defaults } from "../core/config/config.js";
import { configuredBackend } from "../backend/index.js";
import type { Backend } from "../backend/types.js";
import { stamped, type EventInput, type JobSpec } from "../core/spec/spec.js";
import type { RunJobOptions } from "./run.js";

export interface JobContext {
  readonly spec: JobSpec;
  readonly config: Config;
  readonly opts: RunJobOptions;
  /** What runs the job's sandboxes: opts.backend, else config.backend's. */
  readonly backend: Backend;
  readonly jobId: string;
  readonly attempt: number;
  readonly timeoutSec: number;
  /** Aborted with "cancelled" (the caller's signal) or "timeout" (the job's wall clock). */
  readonly signal: AbortSignal;
  /** A property, not a method: the phases hand it on as it is (`emit: ctx.emit`); it reads no `this`. */
  readonly emit: (e: EventInput) => void;
  /** ms since the attempt began. */
  elapsed(since?: number): number;
  readonly t0: number;
}

/** The context, and what to call when the attempt ends (the timer and the caller's listener go). */
export function jobContext(
  spec: JobSpec,
  config: Config,
  opts: RunJobOptions,
): { ctx: JobContext; dispose: () => void } {
  const jobId = opts.jobId ?? spec.jobId ?? `local-${Date.now().toString(36)}`;
  const attempt = opts.attempt ?? 1;
  const backend = opts.backend ?? configuredBackend(config, "a job run outside a worker"); // first: a throw leaves no timer
  const timeoutSec = spec.timeoutSec ?? defaults.job.timeoutSec;
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort("timeout"), timeoutSec * 1000);
  const onCancel = () => ctl.abort(opts.signal?.reason === "timeout" ? "timeout" : "cancelled");
  if (opts.signal?.aborted) onCancel();
  opts.signal?.addEventListener("abort", onCancel, { once: true });
  const t0 = performance.now();
  const ctx: JobContext = {
    spec,
    config,
    opts,
    jobId,
    attempt,
    timeoutSec,
    t0,
    backend,
    signal: ctl.signal,
    emit: (e) => opts.onEvent?.(stamped(e, jobId, attempt)),
    elapsed: (since = t0) => Math.round(performance.now() - since),
  };
  const dispose = () => {
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onCancel);
  };
  return { ctx, dispose };
}

/** The status a stopped job ends with: the wall clock's, or a cancellation. */
export const stoppedStatus = (signal: AbortSignal) => (signal.reason === "timeout" ? "timeout" : "cancelled");
