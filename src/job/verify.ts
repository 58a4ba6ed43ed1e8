// Verify judges exactly the baseline plus the patch. Before the agent touches anything, the worker
// keeps the workspace as setup left it (ignored files and .git included) on its host as a tar: the
// snapshot. Each verify round gets a sandbox of its own (the same image, limits and hardening, no
// network) whose /workspace is that snapshot with the round's patch applied, and nothing else of
// the agent's: no file the patch leaves out, no .git, /tmp or process of the agent's, and nothing
// an earlier round left.
import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { asset } from "../core/assets.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { PatchResult } from "./patch.js";
import { kinded } from "../core/errors.js";

/** The verify tree could not be made (the snapshot is too large, the patch does not apply to it): the job fails once. */
export class VerifyError extends kinded("verify") {}

export interface Snapshot {
  /** A tar of /workspace after setup, on the worker's host. */
  file: string;
  bytes: number;
  remove(): Promise<void>;
}

/** The snapshot's bound: the workspace is bounded by its volume (diskMb); tar adds headers (sparse files stay sparse). */
export const snapshotMaxBytes = (diskMb: number) => 2 * diskMb * 1024 * 1024 + 64 * 1024 * 1024;

// Snapshot directories carry their process's pid: one left by a process that died (kill -9) is
// removed by the next sweep on the host (up to twice a workspace's size each, on the worker's disk).
const SNAPSHOT_PREFIX = "patchbay-verify-";

/**
 * Removes the snapshot directories in `dir` (default: the temp dir) of processes that are gone, or
 * older than `maxAgeMs` (a pid reused since, or another pid namespace's). Resolves to how many.
 */
export async function sweepSnapshots(dir = tmpdir(), maxAgeMs = 24 * 3600_000, now = Date.now()): Promise<number> {
  let n = 0;
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const pid = Number(new RegExp(`^${SNAPSHOT_PREFIX}(\\d+)-`).exec(name)?.[1]);
    if (!pid || pid === process.pid) continue;
    const full = join(dir, name);
    const old = await stat(full).then(
      (s) => now - s.mtimeMs > maxAgeMs,
      () => false,
    );
    if (!old && alive(pid)) continue;
    await rm(full, { recursive: true, force: true }).then(
      () => n++,
      () => {},
    );
  }
  return n;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Takes the post-setup snapshot of `sb`'s /workspace. */
export async function takeSnapshot(sb: Sandbox, maxBytes: number): Promise<Snapshot> {
  const dir = await mkdtemp(join(tmpdir(), `${SNAPSHOT_PREFIX}${process.pid}-`));
  const file = join(dir, "workspace.tar");
  const remove = () => rm(dir, { recursive: true, force: true });
  try {
    const bytes = await sb.exportTar("/workspace", createWriteStream(file, { mode: 0o600 }), maxBytes);
    return { file, bytes, remove };
  } catch (err) {
    await remove();
    throw err;
  }
}

// As the agent's uid in the verify sandbox: clears what is in the patch's way, then git apply (see the file).
const APPLY_PY = asset("job/py/verify_apply.py");

/**
 * Applies `patch` to a sandbox's /workspace as the agent's uid, the way verify does (verify_apply.py:
 * what is in the patch's way cleared, then git apply). Resolves to git apply's exit code and stderr.
 * The eval's grading applies a model patch and a test patch with it too.
 */
export function applyPatch(sb: Sandbox, patch: string): Promise<{ exitCode: number; stderr: string }> {
  return sb.exec(["python3", "-I", "-S", "-c", APPLY_PY], {
    stdin: patch,
    timeoutSec: 600,
    cwd: "/workspace",
    maxBytes: 64 * 1024,
  });
}

export interface VerifyRun {
  exitCode: number;
  output: string;
  /** The verify sandbox's container. */
  container: string;
  /** Settles once that sandbox is removed (its removal does not hold up the round). */
  removed: Promise<void>;
}

export interface VerifyOptions {
  /** A fresh sandbox of the job's kind (from the warm pool, or created). */
  sandbox: () => Promise<Sandbox>;
  snapshot: Snapshot;
  patch: Pick<PatchResult, "patch">;
  command: string;
  timeoutSec: number;
  signal?: AbortSignal;
  /** Where the sandbox goes once the command ran: a worker's background removals (src/sandbox/removals.ts); else removed here. */
  retire?: (sb: Sandbox) => Promise<void>;
}

/** One verify round in a sandbox of its own: the snapshot, the patch, the command; the sandbox removed after. */
export async function verifyInFreshSandbox(o: VerifyOptions): Promise<VerifyRun> {
  const sb = await o.sandbox();
  let ok = false;
  try {
    // A tree tar made but cannot extract (paths past PATH_MAX, say) is setup's doing, as long as the sandbox runs.
    const loaded = await sb.putTarStream("/workspace", createReadStream(o.snapshot.file)).catch(async (err: Error) => {
      throw (await sb.running())
        ? new VerifyError(`the workspace as setup left it could not be rebuilt for verify: ${err.message.slice(-600)}`)
        : err;
    });
    if (!loaded) throw new VerifyError("the verify sandbox's image has no tar: the snapshot could not be loaded");
    const applied = await applyPatch(sb, o.patch.patch);
    if (applied.exitCode !== 0)
      throw new VerifyError(
        `the patch does not apply to the workspace as setup left it (git apply exit ${applied.exitCode}): ${applied.stderr.trim().slice(-400)}`,
      );
    const r = await sb.runFresh(`cd /workspace && { ${o.command}\n}`, { timeoutSec: o.timeoutSec, signal: o.signal });
    ok = true;
    // Handed on (or its removal started), not awaited: a failed removal is retried by the reaper.
    const removed = (o.retire ? o.retire(sb) : sb.destroy()).catch(() => {});
    return { exitCode: r.exitCode, output: r.output, container: sb.name, removed };
  } finally {
    if (!ok) await sb.destroy();
  }
}
