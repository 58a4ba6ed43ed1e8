// Phase 2 of a job (run.ts): the workspace as the agent finds it. The worker loads the repo and
// takes the baseline, then runs setup (with its network, if any). After setup it kills every
// process of the agent's uid, the setup shell included, and takes the baseline again and, for a job
// with verify, the post-setup snapshot (verify.ts); both are read while nothing of that uid runs
// (afterSetup), before the agent's fresh shell starts. The agent's own git repo (where the repo had
// none) and the snapshot are made while the first model request is out: `loaded` settles once they
// are done.
import { defaults } from "../core/config/config.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { defaultLimits, TarTooLargeError } from "../sandbox/sandbox.js";
import type { Held } from "./acquire.js";
import { stoppedStatus, type JobContext } from "./job-context.js";
import { loadRepo, snapshotBaseline } from "./repo/load.js";
import { runSetup, startSetupNetwork } from "./setup.js";
import { snapshotMaxBytes, takeSnapshot, VerifyError, type Snapshot } from "./verify.js";
import { inSpan, spanEvent } from "../observability/trace.js";
import type { ShellState } from "../sandbox/shell-state.js";

export interface Prepared {
  /** The tree the patch is taken against; where git's hash of the files differs from the worker's tree, git's, set before `loaded` settles. */
  baseline: string;
  /** Settles once the workspace is the agent's to use (its repo made, the snapshot taken). */
  loaded: Promise<void>;
  /** ms from the start of the load to ready. */
  sandboxMs: number;
  /** A `{ git }` repo's commit the job started from. */
  baseCommit?: string;
  /** The shell's directory and exported variables as setup left them (where it ran and said): a candidate's shell starts from them. */
  state?: ShellState;
}

/** The workspace ready for the agent, or why the job stopped meanwhile (cancel, timeout). */
export async function prepare(
  ctx: JobContext,
  sandbox: Sandbox,
  held: Held,
  since: number,
): Promise<Prepared | { stopped: { status: "timeout" | "cancelled"; error: string } }> {
  const network = startSetupNetwork(sandbox, held.egress); // with network.setup: the bridge starts while the repo loads
  const repo = await loadRepo(sandbox, ctx.spec.repo, { prepared: held.prepared, deferAgentRepo: true });
  const { agentRepo, checked, commit } = repo;
  let baseline = repo.baseline; // git's hash of the files, once setup waits for it
  held.prepared = undefined;
  const sandboxMs = ctx.elapsed(since);
  held.setupDone?.();
  ctx.emit({ type: "sandbox_ready", container: sandbox.name, ms: sandboxMs });
  spanEvent("sandbox_ready", { "patchbay.sandbox.ready_ms": sandboxMs });
  void sandbox.shell.supervised().catch(() => {}); // while the first model request (or setup) starts; the first command waits for it

  const setup = typeof ctx.spec.setup === "string" ? [ctx.spec.setup] : (ctx.spec.setup ?? []);
  if (setup.length) {
    await agentRepo;
    baseline = await checked;
  }
  const stopped = await inSpan(
    "patchbay.setup",
    { "patchbay.setup.commands": setup.length, "patchbay.setup.network": Boolean(held.egress) },
    () =>
      runSetup(sandbox, setup, {
        timeoutSec: defaults.job.setupTimeoutSec,
        signal: ctx.signal,
        emit: ctx.emit,
        egress: held.egress,
        network,
        onBridge: ctx.opts.onEgressBridge,
      }),
  );
  if (stopped) return { stopped: { status: stoppedStatus(ctx.signal), error: stopped } };
  const diskMb = defaultLimits(ctx.spec.limits).diskMb;
  if (setup.length) {
    const after = await afterSetup(sandbox, ctx.spec.verify ? diskMb : undefined);
    held.snapshot = ctx.spec.verify ? after.done.then((s) => s!) : undefined;
    held.snapshot?.catch(() => {}); // awaited by the restore or the first tool
    const loaded = after.done.then(() => {});
    loaded.catch(() => {}); // awaited by the agent phase
    return {
      baseline: after.baseline,
      loaded,
      sandboxMs,
      ...(commit ? { baseCommit: commit } : {}),
      ...(after.state ? { state: after.state } : {}),
    };
  }
  // Without setup nothing of the repo's has run: verify judges the workspace as loaded plus the
  // patch, kept before anything of the agent's runs (a restored checkpoint, the first tool).
  held.snapshot = ctx.spec.verify ? agentRepo.then(() => snapshotOf(sandbox, diskMb)) : undefined;
  held.snapshot?.catch(() => {}); // awaited by the restore or the first tool
  const prepared: Prepared = { baseline, loaded: agentRepo, sandboxMs, ...(commit ? { baseCommit: commit } : {}) };
  // Git's hash of the files may still be under way (takeBaseline): its tree is the baseline.
  const checkedIn = checked.then((tree) => void (prepared.baseline = tree));
  prepared.loaded = Promise.all([checkedIn, held.snapshot ?? agentRepo]).then(() => {});
  prepared.loaded.catch(() => {}); // awaited by the agent phase
  return prepared;
}

/**
 * The end of setup. What setup produced (installed dependencies, build output) is not the agent's
 * change, and what it left behind (a daemon, a trap in its shell, a shell taken over by ptrace)
 * must not write while the workspace is read. So: the setup shell's directory and exported
 * variables are taken as data; every process of the agent's uid, that shell included, is killed
 * and confirmed dead; the baseline and, for `diskMb` (a job with verify), the snapshot are read
 * while nothing of that uid is alive or can start (Shell.quiesce: none may be alive after either);
 * and only then does the agent's shell start, fresh, from setup's directory and variables.
 * Resolves once the baseline is known; `done` settles once the snapshot is taken and the shell
 * started (the first model request is out meanwhile).
 */
async function afterSetup(
  sandbox: Sandbox,
  diskMb: number | undefined,
): Promise<{ baseline: string; done: Promise<Snapshot | undefined>; state?: ShellState }> {
  const state = await sandbox.shell.captureState();
  let known!: (tree: string) => void;
  const tree = new Promise<string>((r) => (known = r));
  const done = sandbox.shell.quiesce(async () => {
    known(await snapshotBaseline(sandbox));
    return diskMb === undefined ? undefined : snapshotOf(sandbox, diskMb);
  }, state);
  done.catch(() => {}); // its consumers see the rejection
  return { baseline: await Promise.race([tree, done.then(() => tree)]), done, ...(state ? { state } : {}) };
}

/**
 * The post-setup snapshot. One that cannot be taken from a sandbox that still runs (too large, a
 * tree tar cannot read whole: setup's doing) is the workspace's fault, not the host's: not retried.
 */
async function snapshotOf(sb: Sandbox, diskMb: number): Promise<Snapshot> {
  try {
    return await takeSnapshot(sb, snapshotMaxBytes(diskMb));
  } catch (err) {
    if (err instanceof TarTooLargeError)
      throw new VerifyError(`the workspace after setup is too large to keep for verify: ${err.message}`);
    if (await sb.running())
      throw new VerifyError(`the workspace after setup could not be kept for verify: ${(err as Error).message}`);
    throw err;
  }
}
