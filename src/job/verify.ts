// Verify judges exactly baseline + patch. The workspace as setup left it (ignored files and .git
// included) is kept on the worker's host as a tar, taken before the agent touches anything; each
// verify round gets a sandbox of its own (same image, limits and hardening, no network) whose
// /workspace is that snapshot with the round's patch applied, and nothing else of the agent's: no
// file the patch leaves out, no .git, /tmp or process of the agent's, no earlier round's leftovers.
import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { PatchResult } from "./patch.js";

/** The verify tree could not be made (the snapshot is too large, the patch does not apply to it): the job fails once. */
export class VerifyError extends Error {}

export interface Snapshot {
  /** A tar of /workspace after setup, on the worker's host. */
  file: string;
  bytes: number;
  remove(): Promise<void>;
}

/** The snapshot's bound: the workspace is bounded by its volume (diskMb); tar adds headers (sparse files stay sparse). */
export const snapshotMaxBytes = (diskMb: number) => 2 * diskMb * 1024 * 1024 + 64 * 1024 * 1024;

/** Takes the post-setup snapshot of `sb`'s /workspace. */
export async function takeSnapshot(sb: Sandbox, maxBytes: number): Promise<Snapshot> {
  const dir = await mkdtemp(join(tmpdir(), "patchbay-verify-"));
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

// As the agent's uid in the verify sandbox, after the snapshot is in: every path the patch creates
// is cleared first (setup may have left an ignored file there, or a file or symlink where the
// patch needs a directory), then git apply under a git dir, config and attributes of ours, as a
// checkpoint's restore does. stdin: one line `{"added": N}`, N bytes of NUL-separated paths, the patch.
const APPLY_PY = String.raw`
import os, sys, json, stat, shutil, subprocess, tempfile
inp = sys.stdin.buffer
n = json.loads(inp.readline())["added"]
added = [p for p in inp.read(n).split(b"\0") if p]
patch = inp.read()
def clear(rel):
    p = b"/workspace"
    parts = rel.split(b"/")
    for i, part in enumerate(parts):
        p = os.path.join(p, part)
        try: st = os.lstat(p)
        except FileNotFoundError: return
        if i == len(parts) - 1 or not stat.S_ISDIR(st.st_mode):
            if stat.S_ISDIR(st.st_mode): shutil.rmtree(p)
            else: os.unlink(p)
            return
for rel in added: clear(rel)
if not patch: sys.exit(0)
d = tempfile.mkdtemp(prefix=".patchbay-apply.")
env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1", "HOME": d, "XDG_CONFIG_HOME": d}
try:
    subprocess.run(["git", "init", "-q", "--bare", d + "/g"], env=env, check=True)
    with open(d + "/g/info/attributes", "w") as f: f.write("* -text !eol -filter -ident !diff !merge !working-tree-encoding\n")
    env.update(GIT_DIR=d + "/g", GIT_WORK_TREE="/workspace")
    git = ["git", "-c", "core.bare=false", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.autocrlf=false", "-c", "core.symlinks=true", "-c", "core.filemode=true"]
    r = subprocess.run(git + ["apply", "--binary", "--whitespace=nowarn", "-"], input=patch, env=env, cwd="/workspace", stderr=subprocess.PIPE)
    sys.stderr.buffer.write(r.stderr[-2000:])
    sys.exit(r.returncode)
finally:
    shutil.rmtree(d, ignore_errors=True)
`;

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
  patch: Pick<PatchResult, "patch" | "added">;
  command: string;
  timeoutSec: number;
  signal?: AbortSignal;
}

/** One verify round in a sandbox of its own: the snapshot, the patch, the command; the sandbox removed after. */
export async function verifyInFreshSandbox(o: VerifyOptions): Promise<VerifyRun> {
  const sb = await o.sandbox();
  let ok = false;
  try {
    if (!(await sb.putTarStream("/workspace", createReadStream(o.snapshot.file)))) throw new VerifyError("the verify sandbox's image has no tar: the snapshot could not be loaded");
    const stdin = Buffer.concat([Buffer.from(`${JSON.stringify({ added: o.patch.added.length })}\n`), o.patch.added, Buffer.from(o.patch.patch)]);
    const applied = await sb.exec(["python3", "-I", "-S", "-c", APPLY_PY], { stdin, timeoutSec: 600, cwd: "/workspace", maxBytes: 64 * 1024 });
    if (applied.exitCode !== 0) throw new VerifyError(`the patch does not apply to the workspace as setup left it (git apply exit ${applied.exitCode}): ${applied.stderr.trim().slice(-400)}`);
    const r = await sb.runFresh(`cd /workspace && { ${o.command}\n}`, { timeoutSec: o.timeoutSec, signal: o.signal });
    ok = true;
    const removed = sb.destroy().catch(() => {}); // a failed removal is retried by the reaper (src/sandbox/docker.ts)
    return { exitCode: r.exitCode, output: r.output, container: sb.name, removed };
  } finally {
    if (!ok) await sb.destroy();
  }
}
