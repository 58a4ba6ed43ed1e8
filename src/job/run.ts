// runJob: sandbox → repo → setup → agent → verify → patch → result. The sandbox is destroyed in
// every case; a timeout or cancellation still yields the patch of what was done.
import { defaults, loadConfig } from "../config.js";
import { runAgentLoop, type LoopOutcome, type TurnState } from "../agent/loop.js";
import { costUsd } from "../agent/prices.js";
import { AnthropicModel, type Model } from "../agent/model.js";
import { systemPrompt } from "../agent/prompt.js";
import { Checkpointer, mayChangeFiles, outcomeOf, RESUME_NOTE, RESUME_NOTE_PENDING, restoreCheckpoint, specHash, turnStateOf, type CheckpointStore } from "./checkpoint.js";
import { computePatch, GitStepError, PatchTooLargeError, type PatchResult } from "./patch.js";
import { snapshotMaxBytes, takeSnapshot, verifyInFreshSandbox, VerifyError, type Snapshot } from "./verify.js";
import { loadRepo, repoArchive, RepoError, snapshotBaseline, type RepoArchive } from "./repo.js";
import type { EgressProxy, EgressSession } from "../net/proxy.js";
import { Sandbox, TarTooLargeError } from "../sandbox/sandbox.js";
import { SurvivorsError } from "../sandbox/shell.js";
import { SupervisorError } from "../sandbox/supervisor.js";
import type { SandboxRuntime } from "../runtime/types.js";
import { defaultLimits } from "../sandbox/sandbox.js";
import { mountsFor, prepareEgress, runSetup, SetupError, startSetupNetwork } from "./setup.js";
import type { SandboxPool } from "../sandbox/pool.js";
import { assertJobSpec, DEFAULT_EDITOR_TOOL, emptyResult, type EventInput, type JobResult, type JobSpec, type TranscriptEvent } from "../spec.js";
import { Toolbox, type ToolUseBlock } from "../tools/index.js";
import { admitJob, hideSecrets } from "./admit.js";

export interface RunJobOptions {
  jobId?: string;
  attempt?: number;
  /** Abort with reason "cancelled" (or "timeout"); the job ends with that status and its patch. */
  signal?: AbortSignal;
  onEvent?: (e: TranscriptEvent) => void;
  /** Defaults to AnthropicModel (ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL). */
  model?: Model;
  /** Recorded on the sandbox for the reaper (the worker's id), with extra labels. */
  owner?: string;
  labels?: Record<string, string>;
  queuedMs?: number;
  /** Called once the sandbox is ready, e.g. so a worker can kill it on a hard deadline. */
  onSandbox?: (sb: Sandbox) => void;
  /** A worker's warm pool: the sandbox is taken from it when it has one of the job's kind. */
  pool?: Pick<SandboxPool, "take"> & Partial<Pick<SandboxPool, "setupStarted">>;
  /** See LoopOptions.stopAfterTurn: e.g. a batch's shared budget. */
  stopAfterTurn?: (costUsd: number) => Promise<string | undefined>;
  /** The setup phase's egress proxy (default: the process's own; tests pass one with test-only options). */
  egress?: EgressProxy;
  /** Called with the bridge's loopback port in the container when setup has network. */
  onEgressBridge?: (port: number) => void;
  /** Where this job's checkpoints live: a new attempt goes on from the last one (src/job/checkpoint.ts). */
  checkpoints?: CheckpointStore;
  /** What runs its sandboxes (default: the configured backend, see src/runtime/index.ts). */
  backend?: SandboxRuntime;
}

const tail = (s: string, n = 2000) => (s.length > n ? `…${s.slice(-n)}` : s);

export async function runJob(input: JobSpec | unknown, opts: RunJobOptions = {}): Promise<JobResult> {
  const spec = assertJobSpec(input);
  await admitJob(spec); // the worker's policy (src/policy.ts): a spec may narrow its sandbox, never widen it
  opts = hideSecrets(spec, opts); // a { git } URL's credentials show in no event (src/job/admit.ts)
  const config = loadConfig();
  const jobId = opts.jobId ?? spec.jobId ?? `local-${Date.now().toString(36)}`;
  const attempt = opts.attempt ?? 1;
  const emit = (e: EventInput) => opts.onEvent?.({ ts: new Date().toISOString(), jobId, attempt, ...e } as TranscriptEvent);
  const t0 = performance.now();
  const ms = (since: number) => Math.round(performance.now() - since);

  // One signal for the job: the caller's (cancel) and the wall clock (timeout).
  const timeoutSec = spec.timeoutSec ?? defaults.job.timeoutSec;
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort("timeout"), timeoutSec * 1000);
  const onCancel = () => ctl.abort(opts.signal?.reason === "timeout" ? "timeout" : "cancelled");
  if (opts.signal?.aborted) onCancel();
  opts.signal?.addEventListener("abort", onCancel, { once: true });

  emit({ type: "job_started", spec });
  let egress: EgressSession | undefined;
  const ended = (status: JobResult["status"], error: string): JobResult => {
    emit({ type: "job_finished", status, costUsd: 0, turns: 0, error });
    return emptyResult(status, error, { timings: { queuedMs: opts.queuedMs ?? 0, sandboxMs: 0, agentMs: 0, totalMs: ms(t0) }, jobId, attempt, ...(egress ? { egress: { ...egress.stats } } : {}) });
  };
  // Cancelled while it waited in the queue: no sandbox at all.
  if (ctl.signal.aborted) {
    clearTimeout(timer);
    return ended(ctl.signal.reason === "timeout" ? "timeout" : "cancelled", "the job was cancelled before it started");
  }
  let sandbox: Sandbox | undefined;
  let prepared: Promise<RepoArchive> | undefined;
  let snapshot: Promise<Snapshot> | undefined;
  const removals: Promise<void>[] = []; // verify sandboxes being removed
  // The pool makes no warm sandbox while this one is set up: it would compete for the CPU.
  const setupDone = opts.pool?.setupStarted?.();
  try {
    egress = await prepareEgress(spec, opts.egress, emit);
    const tSandbox = performance.now();
    // The repo is read (or cloned) on the host while the sandbox starts.
    prepared = repoArchive(spec.repo);
    prepared.catch(() => {}); // awaited below; a failure there is the job's
    const kind = { image: spec.image ?? config.image, limits: spec.limits, runtime: spec.runtime };
    // A warm sandbox has no extra mounts: a job with a setup egress gets its own.
    sandbox = (egress ? undefined : opts.pool?.take(kind, timeoutSec + 600)) ?? await Sandbox.create({
      ...kind,
      jobId,
      owner: opts.owner,
      labels: opts.labels,
      deadlineSec: timeoutSec + 600,
      mounts: mountsFor(egress),
      backend: opts.backend,
    });
    opts.onSandbox?.(sandbox);
    const network = startSetupNetwork(sandbox, egress); // with network.setup: the bridge starts while the repo loads
    // The agent's own git repo (where the repo had none) is made while the first model request is
    // out: everything that next touches the workspace (setup, a restore, a tool, a checkpoint, the
    // patch) waits for it first.
    let { baseline, agentRepo } = await loadRepo(sandbox, spec.repo, { prepared, deferAgentRepo: true });
    prepared = undefined;
    const sandboxMs = ms(tSandbox);
    setupDone?.();
    emit({ type: "sandbox_ready", container: sandbox.name, ms: sandboxMs });
    void sandbox.shell.supervised().catch(() => {}); // while the first model request (or setup) starts; the first command waits for it

    const setup = typeof spec.setup === "string" ? [spec.setup] : (spec.setup ?? []);
    if (setup.length) await agentRepo;
    const stopped = await runSetup(sandbox, setup, { timeoutSec: defaults.job.setupTimeoutSec, signal: ctl.signal, emit, egress, network, onBridge: opts.onEgressBridge });
    if (stopped) return ended(ctl.signal.reason === "timeout" ? "timeout" : "cancelled", stopped);
    // What setup produced (installed dependencies, build output) is not the agent's change. Setup
    // runs the repo's own commands: whatever they left running is stopped before the snapshot.
    if (setup.length) {
      await sandbox.killAgentProcesses({ keepShell: true });
      baseline = await snapshotBaseline(sandbox);
    }

    // Verify judges the workspace as setup left it plus the patch (verify.ts): that state is kept
    // before anything of the agent's runs (a restored checkpoint, the first tool).
    const sb = sandbox;
    snapshot = spec.verify ? agentRepo.then(() => snapshotOf(sb, defaultLimits(spec.limits).diskMb)) : undefined;
    snapshot?.catch(() => {}); // awaited below
    const loaded = snapshot ? snapshot.then(() => {}) : agentRepo;

    // A new attempt goes on from the last checkpoint of an earlier one, where it fits this workspace.
    const modelName = spec.model ?? config.model;
    const store = opts.checkpoints;
    const restored = store && (await restoreCheckpoint(store, sandbox, baseline, modelName, emit, loaded));
    const cp = store && new Checkpointer({ store, sandbox, baseline, jobId, attempt, specHash: specHash(spec), emit, maxBytes: config.checkpointMaxBytes, restored: restored?.patch });
    // The agent's repo, then the workspace's first fingerprint (the file agent serves one request at
    // a time): both before the first tool, while the first model request is out.
    const settled = loaded.then(() => cp?.start());
    // Spend already counted by the earlier attempt: a batch's running total gets this attempt's part only.
    const before = restored ? costUsd(modelName, restored.usage) : 0;
    const stopAfterTurn = opts.stopAfterTurn && before ? (c: number) => opts.stopAfterTurn!(c - before) : opts.stopAfterTurn;
    const at = { round: restored?.round ?? 1 }; // the verify round the conversation is in

    const tools = spec.tools ?? DEFAULT_EDITOR_TOOL;
    const toolbox = new Toolbox(sandbox, { tools, commandTimeoutSec: spec.commandTimeoutSec ?? defaults.job.commandTimeoutSec });
    const tAgent = performance.now();
    const loop = {
      model: opts.model ?? new AnthropicModel({ apiKey: config.anthropicApiKey, baseURL: config.anthropicBaseUrl }),
      modelName,
      system: systemPrompt({ tools, verify: spec.verify }),
      task: spec.task,
      tools: toolbox.definitions(),
      runTool: async (block: ToolUseBlock, signal?: AbortSignal) => {
        await settled;
        if (mayChangeFiles(block)) cp?.touched();
        const r = await toolbox.run(block, signal);
        // A sandbox that is gone (its engine failed) fails every later tool: this attempt ends here,
        // and the next one goes on from the last checkpoint instead of the model talking to a corpse.
        // A shell that exited is not an error to the model (it may have run `exit`), but may mean the same.
        if ((r.isError || r.processLost) && !signal?.aborted && !(await isRunning(sb))) throw new SandboxLostError(`the sandbox stopped under the job: ${r.content.slice(0, 300)}`);
        return r;
      },
      maxTurns: spec.maxTurns,
      maxTokens: spec.maxTokens,
      budget: spec.budget,
      signal: ctl.signal,
      emit,
      stopAfterTurn,
      onTurn: cp && (async (s: TurnState) => (await settled, cp.take(s, at.round))),
    };
    let outcome = restored?.ended
      ? outcomeOf({ ...restored, ended: restored.ended }, modelName) // the agent had finished: on to its patch and verify
      : await runAgentLoop(restored ? { ...loop, resume: { from: turnStateOf(restored), message: restored.messages.at(-1)?.role === "assistant" ? RESUME_NOTE_PENDING : RESUME_NOTE, sendAll: true } } : loop);
    await settled;
    const rounds = await patchAndVerify({
      sandbox, baseline, spec, snapshot, outcome, at, emit, signal: ctl.signal, removals,
      resume: (from, message) => runAgentLoop({ ...loop, resume: { from, message } }),
      verifySandbox: async () => opts.pool?.take(kind, timeoutSec + 600) ?? Sandbox.create({ ...kind, jobId, owner: opts.owner, labels: opts.labels, deadlineSec: timeoutSec + 600, backend: opts.backend }),
    });
    const { patch, verify } = rounds;
    outcome = rounds.outcome;
    const agentMs = ms(tAgent);

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
      timings: { queuedMs: opts.queuedMs ?? 0, sandboxMs, agentMs, totalMs: ms(t0) },
      ...(outcome.error ? { error: outcome.error } : {}),
      ...(outcome.summary ? { summary: outcome.summary } : {}),
      ...(egress ? { egress: { ...egress.stats } } : {}),
      jobId,
      attempt,
    };
    emit({ type: "job_finished", status: result.status, costUsd: result.costUsd, turns: result.turns, ...(result.error ? { error: result.error } : {}) });
    return result;
  } catch (err) {
    // A failed setup or a repo that cannot be loaded is the job's outcome; anything else (Docker, a retryable API error) is thrown
    // so that the queue retries it; the caller (the worker) records how this attempt ended.
    // Git failing on what the repo or the agent left (a broken baseline) is too, while the sandbox runs.
    if ((err instanceof GitStepError || err instanceof SurvivorsError || err instanceof SupervisorError) && sandbox && (await isRunning(sandbox))) return ended("failed", err.message);
    if (!(err instanceof SetupError || err instanceof RepoError || err instanceof PatchError || err instanceof VerifyError)) throw err;
    return ended("failed", err.message);
  } finally {
    setupDone?.();
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onCancel);
    // An archive made but never loaded (the sandbox failed to start) still has a clone to remove.
    await prepared?.then((a) => a.cleanup(), () => {});
    await egress?.close();
    await sandbox?.destroy();
    await snapshot?.then((s) => s.remove(), () => {});
    await Promise.all(removals);
  }
}

interface RoundsInput {
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
}

/**
 * Each round: every process of the agent's killed, the patch, then verify judging exactly that
 * patch in a sandbox of its own made from the snapshot (verify.ts). A failed verify goes back to
 * the model (within the same budgets) while rounds are left and the agent had finished.
 */
async function patchAndVerify(o: RoundsInput): Promise<{ patch: PatchResult; verify?: JobResult["verify"]; outcome: LoopOutcome }> {
  let outcome = o.outcome;
  let patch: PatchResult | undefined;
  let verify: JobResult["verify"];
  const rounds = o.spec.verifyRounds ?? defaults.job.verifyRounds;
  for (; ; o.at.round++) {
    // Nothing the agent started may still run: it could change files under the patch.
    await o.sandbox.killAgentProcesses();
    try {
      patch = await takePatch(o.sandbox, o.baseline);
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
      r = await verifyInFreshSandbox({ sandbox: o.verifySandbox, snapshot: await o.snapshot, patch, command: o.spec.verify, timeoutSec: defaults.job.verifyTimeoutSec, signal: o.signal });
    } catch (err) {
      // The verify tree could not be made (the patch does not apply to it): failed, with the patch.
      if (!(err instanceof VerifyError)) throw err;
      return { patch, verify, outcome: { ...outcome, status: "failed", error: err.message } };
    }
    o.removals.push(r.removed);
    verify = { exitCode: r.exitCode, outputTail: tail(r.output) };
    o.emit({ type: "verify", command: o.spec.verify, ...verify, ms: Math.round(performance.now() - t), round: o.at.round });
    if (verify.exitCode === 0 || outcome.status !== "completed" || o.signal.aborted) return { patch, verify, outcome };
    if (o.at.round > rounds) {
      return { patch, verify, outcome: { ...outcome, status: "verify_failed", error: `verify failed (exit ${verify.exitCode}) after ${o.at.round} round${o.at.round === 1 ? "" : "s"}` } };
    }
    outcome = await o.resume(outcome, verifyFeedback(o.spec.verify, verify, o.at.round, rounds));
  }
}

export { SetupError };
/** The sandbox stopped while the agent worked (the engine failed): the job is retried, from its last checkpoint. */
export class SandboxLostError extends Error {}

/** What the model is told after a failed verify: clearly the verify command's output, not a tool's. */
function verifyFeedback(command: string, v: NonNullable<JobResult["verify"]>, round: number, rounds: number): string {
  const left = rounds - round + 1;
  return [
    `The verify command failed with exit code ${v.exitCode}. It ran in a fresh shell after your turn ended: \`${command}\``,
    "Here is the end of its output (this is the verify command's output, not a tool result):",
    "<verify_output>",
    v.outputTail,
    "</verify_output>",
    `Fix the cause and end your turn when done; verify will run again (${left} more ${left === 1 ? "time" : "times"} at most).`,
  ].join("\n");
}

/** The patch could not be taken from a sandbox that still runs: the workspace's fault, not the host's. */
export class PatchError extends Error {}

/**
 * The post-setup snapshot. One that cannot be taken from a sandbox that still runs (too large, a
 * tree tar cannot read whole: setup's doing) is the workspace's fault, not the host's: not retried.
 */
async function snapshotOf(sb: Sandbox, diskMb: number): Promise<Snapshot> {
  try {
    return await takeSnapshot(sb, snapshotMaxBytes(diskMb));
  } catch (err) {
    if (err instanceof TarTooLargeError) throw new VerifyError(`the workspace after setup is too large to keep for verify: ${err.message}`);
    if (await isRunning(sb)) throw new VerifyError(`the workspace after setup could not be kept for verify: ${(err as Error).message}`);
    throw err;
  }
}

const isRunning = (sandbox: Sandbox) => sandbox.running();

async function takePatch(sandbox: Sandbox, baseline: string): Promise<PatchResult> {
  try {
    return await computePatch(sandbox, baseline);
  } catch (err) {
    // A sandbox that is gone (the engine failed) is retried elsewhere; anything else would fail the same way again.
    if (err instanceof PatchTooLargeError || (await isRunning(sandbox))) throw new PatchError(`the patch could not be taken: ${(err as Error).message}`);
    throw err;
  }
}
