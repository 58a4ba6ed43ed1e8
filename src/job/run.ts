// runJob: one attempt of a job, in five phases, each in a module of its own: acquire (the
// sandbox: acquire.ts), prepare (the repo, setup and the post-setup snapshot: prepare.ts), the
// agent (from the start or from a checkpoint: agent-phase.ts), the rounds of patch and verify
// (rounds.ts), and finalize (the result: finalize.ts). runJob releases whatever the attempt holds
// in every case (acquire.ts release); a timeout or a cancellation still yields the patch of what
// was done.
import { count } from "../core/count.js";
import { loadConfig, type Config } from "../core/config/config.js";
import { JOB_KINDS, kindOf } from "../core/errors.js";
import type { Model } from "../agent/model.js";
import type { CheckpointStore } from "./checkpoint.js";
import type { EgressProxy } from "../net/proxy.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { SandboxPool } from "../sandbox/pool.js";
import type { Backend } from "../backend/types.js";
import { assertJobSpec, JobSpecError, type JobResult, type JobSpec, type TranscriptEvent } from "../core/spec/spec.js";
import { acquire, freshSandbox, release, type Held } from "./acquire.js";
import { admitJob, hideSecrets } from "./admit.js";
import { jobModel } from "../core/config/scripted.js";
import { runAgent } from "./agent-phase.js";
import { jobContext, stoppedStatus, type JobContext } from "./job-context.js";
import { endedEarly, finish } from "./finalize.js";
import { prepare, type Prepared } from "./prepare.js";
import { prepareFromSeed, seedMeta, type Seed } from "./candidates/seed.js";
import { patchAndVerify } from "./rounds.js";
import { SetupError } from "./setup.js";
import { ensureSpan, inSpan } from "../observability/trace.js";
import type { SourceRules } from "./repo/source.js";

/** How runJob runs one attempt of a job; every member is optional. */
export interface RunJobOptions {
  /**
   * The job's id, in its events and on its sandbox.
   * @default the spec's jobId, else local-<the time in base 36>
   */
  jobId?: string;
  /**
   * Which attempt this is (a worker's retries count up).
   * @default 1
   */
  attempt?: number;
  /** Abort with reason "cancelled" (or "timeout"); the job ends with that status and its patch. */
  signal?: AbortSignal;
  /** Gets every transcript event as it happens. */
  onEvent?: (e: TranscriptEvent) => void;
  /**
   * The model client.
   * @default an AnthropicModel for the configured provider (ANTHROPIC_API_KEY, Bedrock or Vertex)
   */
  model?: Model;
  /**
   * Recorded on the sandbox for the reaper (the worker's id).
   * @default this process
   */
  owner?: string;
  /** Labels recorded on the sandbox besides patchbay's own. */
  labels?: Record<string, string>;
  /** How long the job waited in the queue, in ms (recorded in its timings). */
  queuedMs?: number;
  /** Called once the sandbox is ready, e.g. so a worker can kill it on a hard deadline. */
  onSandbox?: (sb: Sandbox) => void;
  /** A worker's warm pool: the sandbox is taken from it when it has one of the job's kind. */
  pool?: Pick<SandboxPool, "take"> & Partial<Pick<SandboxPool, "setupStarted" | "takeBare">>;
  /** See LoopOptions.stopAfterTurn: e.g. a batch's shared budget. */
  stopAfterTurn?: (costUsd: number) => Promise<string | undefined>;
  /** The setup phase's egress proxy (default: the process's own; tests pass one with test-only options). */
  egress?: EgressProxy;
  /** Called with the bridge's loopback port in the container when setup has network. */
  onEgressBridge?: (port: number) => void;
  /** Where this job's checkpoints live: a new attempt goes on from the last one (src/job/checkpoint.ts). */
  checkpoints?: CheckpointStore;
  /**
   * Where its sandboxes run.
   * @default the configured backend (PATCHBAY_BACKEND; see src/backend/index.ts)
   */
  backend?: Backend;
  /**
   * The configuration.
   * @default loadConfig(): the environment's, parsed once
   */
  config?: Config;
  /**
   * A worker's rules for this job's repo (src/job/repo/source-check.ts), held again where the host is
   * read (repoArchive), and a git clone from a listed host follows no redirect off it. Default:
   * none (runJob is the operator's own).
   */
  sources?: SourceRules;
  /**
   * Where the job's sandbox goes once the job is over: a worker hands it to its background
   * removals (src/sandbox/removals.ts), so the result is handed back before the container is
   * removed. Default: removed before runJob returns.
   */
  retire?: (sb: Sandbox) => Promise<void>;
  /**
   * A candidate of a job with candidates: its job's seed, the workspace as setup left it
   * (candidates/seed.ts). The repo is not read and setup does not run; the seed is removed with the attempt.
   */
  seed?: () => Promise<Seed>;
  /**
   * For a spec with candidates over 1: once setup is done, its workspace (the seed) is handed here
   * instead of the agent running, and what this resolves to is the job's result (a worker's queue
   * adds the candidates and waits for them: src/queue/candidates.ts). Without it, such a spec is
   * refused (JobSpecError): its candidates run on a queue's workers. `spec` is the job's as this
   * worker runs it (its policy's caps applied): the candidates share that budget, not the one sent.
   */
  keepSeed?: (seed: Seed, spec: JobSpec) => Promise<JobResult>;
}

/**
 * Runs one attempt of a job with no queue: the sandbox, the repo, setup, the agent, the patch and
 * verify rounds. Resolves to the result, whatever happened (a timeout or cancellation too, with the
 * patch of what was done); rejects on a spec that is not valid or that the worker's policy refuses
 * (JobSpecError). `input` is a JobSpec or any value at all (JSON off the wire): it is validated here.
 */
export async function runJob(input: unknown, opts: RunJobOptions = {}): Promise<JobResult> {
  const config = opts.config ?? loadConfig(); // runJob is an edge too: the library's one-job entry
  // The worker's policy (src/job/policy.ts): a spec may narrow its sandbox, never widen it, nor spend past its caps.
  const spec = await admitJob(assertJobSpec(input), config);
  if ((spec.candidates ?? 1) > 1 && !opts.keepSeed)
    throw new JobSpecError(
      `candidates: ${count(spec.candidates ?? 1, "candidate")} run on a queue's workers: enqueue the job (patchbay enqueue), or run it with candidates 1`,
    );
  opts = hideSecrets(spec, opts); // a { git } URL's credentials show in no event (src/job/admit.ts)
  const { ctx, dispose } = jobContext(spec, config, opts);
  ctx.emit({
    type: "job_started",
    spec,
    model: jobModel(spec, config),
    ...(config.scripted ? { scripted: true as const } : {}),
  });
  // Cancelled while it waited in the queue: no sandbox at all.
  if (ctx.signal.aborted) {
    dispose();
    return endedEarly(ctx, stoppedStatus(ctx.signal), "the job was cancelled before it started");
  }
  const held: Held = { removals: [] };
  try {
    // A worker's attempt span is the phases' parent; runJob alone gets a span of its own.
    return await ensureSpan("patchbay.job", { "patchbay.job.id": ctx.jobId, "patchbay.attempt": ctx.attempt }, () =>
      attempt(ctx, held),
    );
  } catch (err) {
    if (await isTheJobs(err, held.sandbox)) return endedEarly(ctx, "failed", (err as Error).message, held.egress);
    throw err; // the host's or the engine's (or a retryable API error): the queue retries it
  } finally {
    dispose();
    await release(held, opts.retire);
  }
}

async function attempt(ctx: JobContext, held: Held): Promise<JobResult> {
  const since = performance.now();
  const sandbox = await inSpan("patchbay.sandbox.acquire", { "patchbay.backend": ctx.backend.kind }, () =>
    acquire(ctx, held),
  );
  const seed = ctx.opts.seed;
  const prep = await inSpan("patchbay.prepare", { "patchbay.seeded": Boolean(seed) }, async () =>
    seed ? prepareFromSeed(ctx, sandbox, held, await seed(), since) : prepare(ctx, sandbox, held, since),
  );
  if ("stopped" in prep) return endedEarly(ctx, prep.stopped.status, prep.stopped.error, held.egress);
  if (ctx.opts.keepSeed && (ctx.spec.candidates ?? 1) > 1) {
    const kept = await seedOf(held, prep);
    try {
      return await ctx.opts.keepSeed(kept, ctx.spec);
    } finally {
      await kept.remove();
    }
  }
  const tAgent = performance.now();
  const agent = await inSpan("patchbay.agent", { "patchbay.round": 1 }, () => runAgent(ctx, sandbox, prep));
  await agent.settled;
  const rounds = await patchAndVerify({
    sandbox,
    baseline: prep.baseline,
    spec: ctx.spec,
    snapshot: held.snapshot,
    outcome: agent.outcome,
    at: agent.at,
    emit: ctx.emit,
    signal: ctx.signal,
    removals: held.removals,
    resume: agent.resume,
    verifySandbox: () => freshSandbox(ctx),
    retire: ctx.opts.retire,
  });
  return finish(ctx, {
    ...rounds,
    timings: { sandboxMs: prep.sandboxMs, agentMs: ctx.elapsed(tAgent) },
    egress: held.egress,
    baseCommit: prep.baseCommit,
  });
}

/** The job's seed: the post-setup snapshot (a spec with candidates has verify, so one is taken), no longer the attempt's to release. */
async function seedOf(held: Held, prep: Prepared): Promise<Seed> {
  await prep.loaded;
  const snapshot = await held.snapshot!;
  held.snapshot = undefined; // removed once keepSeed is done with it
  return { ...snapshot, meta: seedMeta(prep) };
}

/**
 * A failure that is the job's outcome (failed once, not retried): one of JOB_KINDS (src/core/errors.ts:
 * a failed setup, a repo that cannot be loaded, a patch or a verify tree that cannot be made); or a
 * step in the sandbox that failed on what the repo or the agent left (git, processes outliving a
 * kill, a supervisor unable to run) while the sandbox still runs. Anything else is thrown on: the
 * worker's table (src/queue/attempt-outcome.ts) decides by its kind.
 */
async function isTheJobs(err: unknown, sandbox: Sandbox | undefined): Promise<boolean> {
  const kind = kindOf(err);
  if (JOB_KINDS.has(kind)) return true;
  return kind === "sandbox-step" && !!sandbox && (await sandbox.running());
}

export { SetupError };
export { SandboxLostError } from "./agent-phase.js";
export { PatchError } from "./rounds.js";
