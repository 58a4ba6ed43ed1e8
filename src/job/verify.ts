// Verify judges exactly baseline + patch. The workspace as setup left it (ignored files and .git
// included) is kept on the worker's host as a tar, taken before the agent touches anything; each
// verify round gets a sandbox of its own (same image, limits and hardening, no network) whose
// /workspace is that snapshot with the round's patch applied, and nothing else of the agent's: no
// file the patch leaves out, no .git, /tmp or process of the agent's, no earlier round's leftovers.
import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
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
    const old = await stat(full).then((s) => now - s.mtimeMs > maxAgeMs, () => false);
    if (!old && alive(pid)) continue;
    await rm(full, { recursive: true, force: true }).then(() => n++, () => {});
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

// As the agent's uid in the verify sandbox, after the snapshot is in, with the patch on stdin: what
// it creates and deletes is read from the patch itself (its `diff --git` headers; renames are off,
// so each names one path, C-quoted where git quotes it). Setup may have left an ignored file where
// the patch creates one, or a file, symlink or directory where it needs the other kind: those are
// cleared, but never a path the patch deletes or changes (git apply does that itself, in order).
// Directories the patch writes into get the owner's write bit for the apply (setup may have taken
// it: directory modes are not part of a patch), given back after. Then git apply under a git dir,
// config and attributes of ours, as a checkpoint's restore does.
const APPLY_PY = String.raw`
import os, sys, stat, shutil, subprocess, tempfile
patch = sys.stdin.buffer.read()
ESC = {ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12, ord("r"): 13, ord('"'): 34, ord("\\"): 92}
def unquote(b):
    # git's C quoting: "..." with \a \b \t \n \v \f \r \" \\ and \ooo octal bytes
    out, i = bytearray(), 1
    while i < len(b) - 1:
        c = b[i]
        if c == 92:
            n = b[i + 1]
            if 48 <= n <= 55: out.append(int(b[i + 1:i + 4], 8)); i += 4; continue
            out.append(ESC[n]); i += 2; continue
        out.append(c); i += 1
    return bytes(out)
def header_path(line):
    rest = line[len(b"diff --git "):]
    if rest.startswith(b'"'):
        end, i = None, 1
        while i < len(rest):
            if rest[i] == 92: i += 2; continue
            if rest[i] == 34: end = i; break
            i += 1
        return unquote(rest[:end + 1])[2:]
    n = (len(rest) - 5) // 2  # "a/P b/P", the same P twice
    return rest[2:2 + n]
created, deleted, touched, cur = set(), set(), set(), None
for line in patch.split(b"\n"):
    if line.startswith(b"diff --git "): cur = header_path(line); touched.add(cur)
    elif cur is not None and line.startswith(b"new file mode "): created.add(cur)
    elif cur is not None and line.startswith(b"deleted file mode "): deleted.add(cur)
    elif line.startswith(b"@@") or line.startswith(b"GIT binary patch"): cur = None
root = b"/workspace"
def full(rel): return os.path.join(root, rel)
def remove(p):
    if os.path.isdir(p) and not os.path.islink(p): shutil.rmtree(p)
    else: os.unlink(p)
def clear_dir(p, rel):
    # An existing directory where the patch creates a file: what the patch does not delete in it goes.
    for name in os.listdir(p):
        q, r = os.path.join(p, name), rel + b"/" + name
        if any(d == r or d.startswith(r + b"/") for d in deleted):
            if os.path.isdir(q) and not os.path.islink(q): clear_dir(q, r)
        else: remove(q)
for rel in sorted(created):
    parts = rel.split(b"/")
    for i in range(1, len(parts)):
        a = b"/".join(parts[:i])
        st = os.lstat(full(a)) if os.path.lexists(full(a)) else None
        if st is None: break
        if stat.S_ISDIR(st.st_mode): continue
        if a not in deleted: os.unlink(full(a))
        break
    p = full(rel)
    if os.path.lexists(p) and rel not in deleted:
        if os.path.isdir(p) and not os.path.islink(p): clear_dir(p, rel)
        else: os.unlink(p)
modes = {}
for rel in touched:
    d = os.path.dirname(full(rel))
    while d.startswith(root) and d not in modes and os.path.isdir(d) and not os.path.islink(d):
        m = os.lstat(d).st_mode
        modes[d] = m
        if not m & stat.S_IWUSR or not m & stat.S_IXUSR: os.chmod(d, stat.S_IMODE(m) | stat.S_IRWXU)
        d = os.path.dirname(d)
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
finally:
    shutil.rmtree(d, ignore_errors=True)
for dpath, m in modes.items():
    if os.path.isdir(dpath) and not os.path.islink(dpath) and stat.S_IMODE(m) != stat.S_IMODE(os.lstat(dpath).st_mode): os.chmod(dpath, stat.S_IMODE(m))
sys.exit(r.returncode)
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
  patch: Pick<PatchResult, "patch">;
  command: string;
  timeoutSec: number;
  signal?: AbortSignal;
}

/** One verify round in a sandbox of its own: the snapshot, the patch, the command; the sandbox removed after. */
export async function verifyInFreshSandbox(o: VerifyOptions): Promise<VerifyRun> {
  const sb = await o.sandbox();
  let ok = false;
  try {
    // A tree tar made but cannot extract (paths past PATH_MAX, say) is setup's doing, as long as the sandbox runs.
    const loaded = await sb.putTarStream("/workspace", createReadStream(o.snapshot.file)).catch(async (err: Error) => {
      throw (await sb.running()) ? new VerifyError(`the workspace as setup left it could not be rebuilt for verify: ${err.message.slice(-600)}`) : err;
    });
    if (!loaded) throw new VerifyError("the verify sandbox's image has no tar: the snapshot could not be loaded");
    const applied = await sb.exec(["python3", "-I", "-S", "-c", APPLY_PY], { stdin: o.patch.patch, timeoutSec: 600, cwd: "/workspace", maxBytes: 64 * 1024 });
    if (applied.exitCode !== 0) throw new VerifyError(`the patch does not apply to the workspace as setup left it (git apply exit ${applied.exitCode}): ${applied.stderr.trim().slice(-400)}`);
    const r = await sb.runFresh(`cd /workspace && { ${o.command}\n}`, { timeoutSec: o.timeoutSec, signal: o.signal });
    ok = true;
    const removed = sb.destroy().catch(() => {}); // a failed removal is retried by the reaper (src/sandbox/docker.ts)
    return { exitCode: r.exitCode, output: r.output, container: sb.name, removed };
  } finally {
    if (!ok) await sb.destroy();
  }
}
