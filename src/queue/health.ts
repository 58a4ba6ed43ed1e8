// A worker only takes jobs it can run. Its engine (docker ping), the sandbox image (inspect) and the
// model's credentials (an API key, an auth token or an SDK profile) are checked at start and before each job; while either fails the worker is paused (it takes no
// jobs), checks again with backoff, and resumes by itself. A job it already holds goes back to the
// queue without counting an attempt. The API's 429/529 throttle the queue instead of failing jobs.
import { loadConfig as sdkProfile } from "@anthropic-ai/sdk/lib/credentials";
import { DelayedError, type Job } from "bullmq";
import { defaults, type Config } from "../core/config/config.js";
import type { ModelError } from "../agent/model.js";
import { loadProviderSdk } from "../agent/clients.js";
import type { Log } from "../observability/log.js";
import type { Backend } from "../backend/types.js";
import { withTimeout } from "../core/timeout.js";

export type Health = { ok: true } | { ok: false; reason: string };

const within = <T>(p: Promise<T>, ms: number, what: string) =>
  withTimeout(p, ms, `${what} did not answer within ${ms} ms`);

/** Can this host run sandboxes: does its backend answer (the Docker engine), and does it have the sandbox image? */
export async function checkBackend(backend: Backend, image: string, timeoutMs: number): Promise<Health> {
  const reason = await within(
    backend.health(image, timeoutMs),
    2 * timeoutMs + 1000,
    `the ${backend.kind} backend`,
  ).catch((err: Error) => err.message);
  return reason === undefined ? { ok: true } : { ok: false, reason };
}

/**
 * Whether the worker has credentials for the model: ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, or a
 * profile the SDK finds (ANTHROPIC_PROFILE, federation variables, the active profile on disk). A
 * worker without any would take each job only to fail it with the SDK's error; it waits instead,
 * and a profile written meanwhile is found at the next check.
 */
export async function checkCredentials(
  config: Pick<Config, "anthropicApiKey" | "anthropicAuthToken" | "provider" | "scripted">,
): Promise<Health> {
  // A scripted model (src/agent/scripted.ts) reaches no API: it needs no credentials at all.
  if (config.scripted) return { ok: true };
  // Bedrock and Vertex: the platforms' chains also reach instance metadata (EC2's IMDS, Google's
  // metadata server), which no file shows, so only a setting the client cannot start without is fatal.
  if (config.provider.name === "vertex" && !config.provider.vertex.region)
    return { ok: false, reason: "PATCHBAY_PROVIDER=vertex needs CLOUD_ML_REGION where the worker runs" };
  // Their SDKs are optional packages: a worker without its provider's says so, with the `npm i`, and takes no job.
  if (config.provider.name !== "anthropic")
    return loadProviderSdk(config.provider).then(
      () => ({ ok: true }),
      (err: Error) => ({ ok: false, reason: err.message }),
    );
  if (config.anthropicApiKey || config.anthropicAuthToken) return { ok: true };
  const profile = await sdkProfile().catch((err: Error) => err);
  if (profile instanceof Error)
    return { ok: false, reason: `the Anthropic SDK's profile cannot be read (${profile.message})` };
  if (profile) return { ok: true };
  return {
    ok: false,
    reason:
      "no Anthropic credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN, or an SDK profile) where the worker runs",
  };
}

/** A worker's whole check: credentials (unless it was given its own model), then the engine and the image. */
export async function checkWorker(backend: Backend, config: Config, ownModel: boolean): Promise<Health> {
  const creds = ownModel ? ({ ok: true } as const) : await checkCredentials(config);
  return creds.ok ? checkBackend(backend, config.image, config.healthTimeoutMs) : creds;
}

export interface HealthGateOptions {
  check: () => Promise<Health>;
  /** Backoff of the checks while unhealthy: from minMs, doubling, up to maxMs. */
  minMs: number;
  maxMs: number;
  log: Log;
  /** Called on each change of state (and on the first check): pause or resume the worker. */
  onChange: (ok: boolean) => Promise<void> | void;
}

/**
 * The worker's health: one line in the log per change of state, none per retry. While unhealthy
 * a timer checks again with backoff; a check already under way is shared by its callers.
 */
export class HealthGate {
  /** undefined before the first check. */
  ok: boolean | undefined;
  reason: string | undefined;
  private inflight: Promise<boolean> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private delay: number;
  private closed = false;

  constructor(private readonly o: HealthGateOptions) {
    this.delay = o.minMs;
  }

  /** Checks now; true when healthy. */
  check(): Promise<boolean> {
    return (this.inflight ??= this.run().finally(() => (this.inflight = undefined)));
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async run(): Promise<boolean> {
    const h = await this.o.check().catch((err: Error): Health => ({ ok: false, reason: err.message }));
    if (this.closed) return h.ok;
    const was = this.ok;
    const wasReason = this.reason;
    this.ok = h.ok;
    this.reason = h.ok ? undefined : h.reason;
    if (h.ok) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.delay = this.o.minMs;
      if (was === false) this.o.log(`healthy again: resumed taking jobs`);
      if (was !== true) await this.o.onChange(true);
    } else {
      if (was !== false) {
        this.o.log(`unhealthy: ${this.reason}; paused, taking no jobs until healthy (checking again with backoff)`, {
          level: "warn",
        });
        await this.o.onChange(false);
      } else if (this.reason !== wasReason) {
        this.o.log(`still paused: ${this.reason}`, { level: "warn" });
      }
      this.schedule();
    }
    return h.ok;
  }

  private schedule(): void {
    if (this.timer || this.closed) return;
    const ms = this.delay;
    this.delay = Math.min(this.delay * 2, this.o.maxMs);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.check();
    }, ms);
    this.timer.unref?.();
  }
}

/**
 * Hands a job this worker holds back to the queue without counting an attempt: it waits `ms` in
 * delayed, then any worker can take it. The processor throws what this returns (BullMQ then
 * leaves the job alone).
 */
export async function handBack(
  job: Job,
  token: string | undefined,
  ms: number = defaults.worker.requeueMs,
): Promise<DelayedError> {
  await job.moveToDelayed(Date.now() + ms, token);
  return new DelayedError(`handed back to the queue for ${ms} ms`);
}

/** Records an infrastructure failure in the job's data; returns how many it had before this one. */
export async function countInfraFailure(job: Job): Promise<number> {
  const data = (job.data ?? {}) as { infraFailures?: number };
  const before = Number(data.infraFailures ?? 0) || 0;
  await job.updateData({ ...data, infraFailures: before + 1 });
  return before;
}

/** Records a hand-back for the worker's Redis connection in the job's data (apart from the engine's count); returns how many it had before. */
export async function countRedisHandBack(job: Job): Promise<number> {
  const data = (job.data ?? {}) as { redisHandBacks?: number };
  const before = Number(data.redisHandBacks ?? 0) || 0;
  await job.updateData({ ...data, redisHandBacks: before + 1 });
  return before;
}

/** How long a 429/529 throttles the queue: the API's retry-after, else the default, within [min, max]. */
export function throttleMs(err: ModelError, c: { throttleMs: number; throttleMaxMs: number }): number {
  const ms = err.retryAfterMs ?? c.throttleMs;
  return Math.round(Math.min(Math.max(ms, defaults.worker.throttleMinMs), c.throttleMaxMs));
}
