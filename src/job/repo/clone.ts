// A `{ git }` repo cloned on the host, into a temp dir the size bound holds for at every step:
// a local source is measured before it is cloned, a remote clone is watched while it runs, and the
// tree to check out is summed from `git ls-tree` before anything is checked out.
//
// Whether a source is local is src/job/repo/source.ts's classifyGit, the rule the API and the worker's
// admission hold to their roots and hosts. Local sources (a path, or a file: URL) are hostile too: git would follow a `.git` file
// ("gitdir: /another/repo"), a `.git` or `objects` symlink, a `commondir` file, or borrow objects
// through objects/info/alternates, and so put another host repo into the sandbox. A worker accepts
// only (a) a directory whose `.git` is a real directory, or (b) a bare repo directory with no `.git`
// entry in it; in both the git dir has no `commondir`, its `objects` is a real directory with no
// symlink anywhere below it and no info/alternates or info/http-alternates. The checked path is
// what git is given. (Someone who can rewrite the source while it is cloned can still race this.)
//
// Credentials (git-auth.ts): git is given the URL without its userinfo, and the credentials through
// a helper fed from its environment: the URL's own (runJob), else the worker's store's for the host.
// So git records no token (.git/config, reflogs, FETCH_HEAD); every metadata file of the clone is
// still scrubbed of URL userinfo and the secrets before the repo is loaded, and every message shown
// (errors, git's stderr) has them hidden.
import { spawn } from "node:child_process";
import fss from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { HostEnv } from "../../core/config/config.js";
import { credentialHelper, matchCredential, readCredentialStore, redact, scrub, splitUrl, type SplitUrl } from "../../git/auth.js";
import { breathe, Budget, quote, RepoError, tooLarge } from "./common.js";
import { classifyGit } from "./source.js";

export { redact } from "../../git/auth.js";

export type CloneOptions = {
  timeoutSec: number;
  max: number;
  maxEntries: number;
  /** The worker's git-credentials store (config.gitCredentials); none when unset or null. */
  credentials?: string | null;
  /** The host's environment git runs with (config.hostEnv): PATH, HOME, proxies, GIT_SSH_COMMAND. */
  env: HostEnv;
  /** false: an HTTP redirect is not followed (a job held to a host list: the redirect could lead off it); default: git's own (the first request's). */
  followRedirects?: boolean;
};

type Auth = { args: string[]; env: Record<string, string>; secrets: string[] };

/** The clone's directory and the commit checked out (none for an empty repo). */
export interface Clone {
  dir: string;
  commit?: string;
}

export async function cloneRepo(url: string, ref: string | undefined, opts: CloneOptions): Promise<Clone> {
  const label = `repo.git ${redact(url)}`;
  const split = splitUrl(url);
  if (ref !== undefined && (ref === "" || ref.startsWith("-"))) throw new RepoError(`${label}: bad ref ${quote(ref)}`);
  // Local or remote as git itself reads the value (src/job/repo/source.ts): the worker's admission
  // held the same classification to its roots and hosts.
  const c = classifyGit(url);
  if (c.kind === "unsupported") throw new RepoError(`${label}: not a git URL a worker clones: ${c.why}`);
  const local = c.kind === "local";
  const source = local ? await checkLocalSource(label, c.path, opts) : split.url;
  const auth = local ? undefined : await cloneAuth(split, opts.credentials ?? null);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "patchbay-clone-")); // a failure here is the host's
  try {
    // In the empty clone directory: git clone takes a value that names an existing path (relative
    // to its working directory) as a local repo, whatever it looks like (`host:path`, `https:/…`).
    const clone = await git(["clone", "--quiet", "--no-checkout", ...(local ? ["--no-hardlinks"] : []), "--", source, dir], { ...opts, watch: dir, local, trusted: false, auth, cwd: dir });
    if (clone.code !== 0) throw failure(label, `git clone failed: ${clone.stderr}`, clone);
    if (local && fss.existsSync(path.join(dir, ".git/objects/info/alternates"))) throw new RepoError(`${label}: the local repo borrows objects from another repo (objects/info/alternates)`);
    const commit = await resolve(dir, ref, opts);
    if (commit === undefined && ref !== undefined) throw new RepoError(`${label}: ref ${quote(ref)} not found (no such branch, tag or commit)`);
    if (commit === undefined) return (await scrubGitDir(dir, split.secrets, opts), { dir }); // an empty repo (or a remote HEAD to nowhere): nothing to check out
    const gitBytes = await duBytes(dir);
    const treeBytes = await treeSize(label, dir, commit, opts.max - gitBytes, opts);
    if (gitBytes + treeBytes > opts.max) throw tooLarge(label, gitBytes + treeBytes, opts.max, `${treeBytes} to check out at ${quote(ref ?? "HEAD")}, ${gitBytes} in .git`);
    const co = await git(["-C", dir, "checkout", "--quiet", ref ?? "HEAD", "--"], { ...opts, watch: dir, local: true, trusted: true });
    if (co.code !== 0) throw failure(label, `git checkout of ${quote(ref ?? "HEAD")} failed: ${co.stderr}`, co);
    if ((await revParse(dir, "HEAD", opts)) !== commit) throw new RepoError(`${label}: ref ${quote(ref ?? "HEAD")} is ambiguous`);
    await scrubGitDir(dir, auth?.secrets ?? split.secrets, opts);
    return { dir, commit };
  } catch (err) {
    await fs.rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * The credentials of a remote clone: the URL's own, else the first line of the worker's store for
 * its protocol and host (and path). None: git runs as it did, with the operator's own helpers.
 */
async function cloneAuth(split: SplitUrl, store: string | null | undefined): Promise<Auth | undefined> {
  if (!split.protocol || !split.host) return undefined;
  const stored = split.credential ? undefined : store ? matchCredential(await readCredentialStore(store), split.url) : undefined;
  const credential = split.credential ?? stored?.credential;
  if (!credential) return undefined;
  const secrets = [...split.secrets, ...(stored ? [credential.password || credential.username] : [])].filter(Boolean);
  return { ...credentialHelper(split.protocol, split.host, credential), secrets };
}

/**
 * Every metadata file of the clone (all of .git but its objects and binary index) without URL
 * userinfo or the secrets, before the repo is loaded into the sandbox. Git itself writes the
 * clean URL it was given; this holds whatever a git version or the operator's config (insteadOf
 * with a token) makes it write.
 */
async function scrubGitDir(dir: string, secrets: readonly string[], opts: CloneOptions): Promise<void> {
  const root = path.join(dir, ".git");
  const budget = new Budget("repo.git", opts.maxEntries);
  const visit = async (rel: string): Promise<void> => {
    for (const e of await fs.readdir(path.join(root, rel), { withFileTypes: true })) {
      const name = rel ? `${rel}/${e.name}` : e.name;
      budget.add(name, name.length);
      if (name === "objects" || name === "index") continue;
      if (e.isDirectory()) await visit(name);
      else if (e.isFile()) {
        const file = path.join(root, name);
        const text = await fs.readFile(file, "latin1"); // byte for byte, whatever the encoding
        const clean = scrub(text, secrets.map((s) => Buffer.from(s).toString("latin1")));
        if (clean !== text) await fs.writeFile(file, clean, "latin1");
      }
      await breathe();
    }
  };
  await visit("");
}

/** The git dir of a local source, checked as the header comment says; too large a source is refused before it is copied. */
async function checkLocalSource(label: string, p: string, opts: CloneOptions): Promise<string> {
  const root = path.resolve(p);
  const lst = (rel: string) => fss.lstatSync(path.join(root, rel), { throwIfNoEntry: false });
  const refuse = (why: string) => new RepoError(`${label}: the local repo ${why}; a worker clones only a repo whose git dir is its own`);
  if (!lst("")?.isDirectory()) throw new RepoError(`${label}: the local path does not exist or is not a directory`);
  const dotGit = lst(".git");
  if (dotGit && !dotGit.isDirectory()) throw refuse(`has a .git ${dotGit.isSymbolicLink() ? "symlink" : "file"}, which points at another repo`);
  const gitDir = dotGit ? path.join(root, ".git") : root;
  const rel = (name: string) => path.relative(root, path.join(gitDir, name)) || ".";
  const has = (name: string) => fss.lstatSync(path.join(gitDir, name), { throwIfNoEntry: false });
  if (!has("HEAD") || !has("refs")) throw new RepoError(`${label}: the local path is not a git repository`);
  if (has("commondir")) throw refuse(`shares another repo's git dir (${rel("commondir")})`);
  const objects = has("objects");
  if (!objects?.isDirectory()) throw refuse(`has no objects directory of its own (${rel("objects")} is ${objects ? "a symlink or file" : "missing"})`);
  for (const f of ["alternates", "http-alternates"]) if (has(`objects/info/${f}`)) throw refuse(`borrows objects from another repo (${rel(`objects/info/${f}`)})`);
  const bytes = await objectBytes(label, path.join(gitDir, "objects"), (n) => refuse(`has a symlink in its object store (${rel(`objects/${n}`)})`), opts);
  if (bytes > opts.max) throw tooLarge(label, bytes, opts.max, "in the local repo's object store, before it is cloned");
  return root;
}

/** Total bytes under a local objects dir; a symlink anywhere is refused. */
async function objectBytes(label: string, dir: string, symlink: (name: string) => Error, opts: CloneOptions): Promise<number> {
  const budget = new Budget(label, opts.maxEntries);
  let total = 0;
  const visit = async (rel: string): Promise<void> => {
    for (const e of await fs.readdir(path.join(dir, rel), { withFileTypes: true })) {
      const name = rel ? `${rel}/${e.name}` : e.name;
      budget.add(name, name.length);
      if (e.isSymbolicLink()) throw symlink(name);
      if (e.isDirectory()) await visit(name);
      else if (e.isFile()) total += fss.lstatSync(path.join(dir, name)).size;
      await breathe();
    }
  };
  await visit("");
  return total;
}

/** The commit a ref names as `git checkout` would take it (a remote branch too), or undefined. */
async function resolve(dir: string, ref: string | undefined, opts: CloneOptions): Promise<string | undefined> {
  if (ref === undefined) return revParse(dir, "HEAD", opts);
  return (await revParse(dir, ref, opts)) ?? (await revParse(dir, `refs/remotes/origin/${ref}`, opts));
}

async function revParse(dir: string, rev: string, opts: CloneOptions): Promise<string | undefined> {
  const r = await git(["-C", dir, "rev-parse", "-q", "--verify", "--end-of-options", `${rev}^{commit}`], { ...opts, local: true, trusted: true, stdout: true });
  return r.code === 0 ? r.stdout.trim() : undefined;
}

/**
 * Bytes of the blobs in the commit's tree, from `git ls-tree -r -l -z` read as it streams: git is
 * stopped as soon as the sum passes `budget` or the entries pass the bound.
 */
function treeSize(label: string, dir: string, commit: string, budget: number, opts: CloneOptions): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn("git", [...HARDEN, "-C", dir, "ls-tree", "-r", "-l", "-z", "--full-tree", commit], { env: gitEnv(opts.env, true), stdio: ["ignore", "pipe", "pipe"] });
    let [bytes, entries, rest, over, stderr] = [0, 0, "", false, ""];
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutSec * 1000);
    child.stdout.setEncoding("latin1").on("data", (chunk: string) => {
      const records = (rest + chunk).split("\0");
      rest = records.pop()!;
      for (const rec of records) {
        const [mode, type, , size] = rec.slice(0, rec.indexOf("\t")).split(/ +/);
        if (type === "blob") bytes += Number(size) || 0;
        if (mode !== undefined && ++entries > opts.maxEntries) over = true;
      }
      if (rest.length > 64 * 1024) over = true; // no record is that long
      if (bytes > budget || over) child.kill("SIGKILL");
    });
    child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr = (stderr + c).slice(-2000)));
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      if (entries > opts.maxEntries) return reject(new RepoError(`${label}: the repo has more than ${opts.maxEntries} files`));
      if (bytes > budget) return resolvePromise(bytes); // the caller reports it
      if (code !== 0) return reject(new RepoError(`${label}: git ls-tree failed: ${printable(stderr.trim().slice(-600)) || `exit ${code}`}`));
      resolvePromise(bytes);
    });
  });
}

/** The error for a failed git run: the repo's (RepoError), unless the host ran out of disk or is read-only. */
function failure(label: string, message: string, r: GitResult): Error {
  if (r.tooLarge !== undefined) return tooLarge(label, r.tooLarge, r.max, "the clone directory while git was writing it");
  if (/No space left on device|Read-only file system|Disk quota exceeded/i.test(r.stderr)) return new Error(`${label}: ${message}`);
  return new RepoError(`${label}: ${message}`);
}

// Hooks, fsmonitor, submodules and exotic transports are off for every host git run; file:// and
// local paths only for a checked local source or our own clone.
const HARDEN = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "submodule.recurse=false", "-c", "protocol.allow=never"];
const PROTOCOLS = ["https", "http", "ssh", "git"].flatMap((p) => ["-c", `protocol.${p}.allow=always`]);
// Set by the operator's shell or a hook, these would point git at another repo.
const REPO_VARS = ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM"];

/**
 * The clone keeps the operator's global config (credentials, proxies, insteadOf); what runs in our
 * own clone afterwards (rev-parse, ls-tree, checkout) has no system or global config at all, so
 * no filter, autocrlf or hook of the host's applies to the repo's files.
 */
function gitEnv(host: HostEnv, trusted: boolean): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...host, GIT_TERMINAL_PROMPT: "0", GIT_SSH_COMMAND: host.GIT_SSH_COMMAND ?? "ssh -o BatchMode=yes" };
  for (const v of REPO_VARS) delete env[v];
  // Traces would print what git runs and sends (a credential helper's answer among it) to stderr.
  for (const v of Object.keys(env)) if (v.startsWith("GIT_TRACE") || v === "GIT_CURL_VERBOSE") delete env[v];
  return trusted ? { ...env, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" } : env;
}

type GitResult = { code: number; stderr: string; stdout: string; tooLarge?: number; max: number };
type GitRun = CloneOptions & { local: boolean; trusted: boolean; watch?: string; stdout?: boolean; auth?: Auth; cwd?: string };

/**
 * Host git with no prompt and a hard timeout. With `watch`, the directory's size is polled every
 * 0.5 s and git is killed once it passes the bound: a remote clone has no size limit of its own.
 * Git runs in its own process group, killed whole: a transport helper (git-remote-http) downloads
 * packs itself and would go on writing after its parent git is gone.
 */
function git(args: string[], run: GitRun): Promise<GitResult> {
  const protocols = run.local ? ["-c", "protocol.file.allow=always"] : PROTOCOLS;
  return new Promise((resolvePromise, reject) => {
    const redirects = run.followRedirects === false ? ["-c", "http.followRedirects=false"] : [];
    const child = spawn("git", [...HARDEN, ...protocols, "-c", "protocol.ext.allow=never", ...redirects, ...(run.auth?.args ?? []), ...args], {
      env: { ...gitEnv(run.env, run.trusted), ...run.auth?.env },
      stdio: ["ignore", run.stdout ? "pipe" : "ignore", "pipe"],
      detached: true,
      ...(run.cwd ? { cwd: run.cwd } : {}),
    });
    const kill = () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    };
    let [stderr, stdout, tooBig, timedOut, cut] = ["", "", undefined as number | undefined, false, false];
    const timer = setTimeout(() => ((timedOut = true), kill()), run.timeoutSec * 1000);
    child.stdout?.setEncoding("utf8").on("data", (c: string) => (stdout = (stdout + c).slice(-4096)));
    child.stderr!.setEncoding("utf8").on("data", (c: string) => {
      stderr += c;
      if (stderr.length > 4000) [stderr, cut] = [stderr.slice(-2000), true];
    });
    const stopWatch = run.watch ? watchSize(run.watch, run.max, (n) => ((tooBig = n), kill())) : () => {};
    const done = () => (clearTimeout(timer), stopWatch());
    child.on("error", (err) => (done(), reject(err)));
    child.on("close", (code) => {
      done();
      // Secrets are hidden in whole lines, before anything is cut (a cut could leave half a token).
      const lines = stderr.split("\n").slice(cut ? 1 : 0);
      const tail = printable(scrub(lines.join("\n").trim(), run.auth?.secrets).split("\n").slice(-5).join("\n")).slice(-600) || "(no output)";
      resolvePromise({ code: code ?? -1, stderr: timedOut ? `killed after ${run.timeoutSec}s: ${tail}` : tail, stdout, tooLarge: tooBig, max: run.max });
    });
  });
}

/** A remote's messages reach git's stderr: control characters (terminal escapes) are shown escaped. */
const printable = (text: string) => text.replace(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

/** Polls `du` on dir; `over(bytes)` once it holds more than max. Returns a stop function. */
function watchSize(dir: string, max: number, over: (bytes: number) => void): () => void {
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void duBytes(dir)
      .then((n) => n > max && (clearInterval(timer), over(n)))
      .finally(() => (busy = false));
  }, 500);
  return () => clearInterval(timer);
}

/** Apparent bytes under dir, by `du` in a child process (0 if du cannot say). */
function duBytes(dir: string): Promise<number> {
  return new Promise((resolvePromise) => {
    const du = spawn("du", ["-s", "-b", dir], { stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    du.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    du.on("error", () => resolvePromise(0));
    du.on("close", () => resolvePromise(Number.parseInt(out, 10) || 0));
  });
}
