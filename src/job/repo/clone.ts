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
// Every git process here is src/git/run.ts's: its hardening, environment, process-group kill,
// timeout and scrubbing are the same as publish's; this file says only what its steps differ in
// (the clone talks to the source with the transport it names and the operator's git config; the
// steps in our own clone after it talk to nothing and have no config of the host's).
//
// Credentials (src/git/credentials.ts): git is given the URL without its userinfo, and the credentials through
// a helper fed from its environment: the URL's own (runJob), else the worker's store's for the host.
// So git records no token (.git/config, reflogs, FETCH_HEAD); every metadata file of the clone is
// still scrubbed of URL userinfo and the secrets before the repo is loaded, and every message shown
// (errors, git's stderr) has them hidden.
import { count } from "../../core/count.js";
import fss from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { HostEnv } from "../../core/config/config.js";
import {
  credentialHelper,
  matchCredential,
  readCredentialStore,
  redact,
  scrub,
  splitUrl,
  type SplitUrl,
} from "../../git/credentials.js";
import { dirBytes, runGit, type GitOut, type GitRun } from "../../git/run.js";
import { Budget, quote, RepoError, tooLarge } from "./common.js";
import { breathe } from "./breathe.js";
import { classifyGit } from "./source.js";

export { redact } from "../../git/credentials.js";

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
    const clone = await git(
      ["clone", "--quiet", "--no-checkout", ...(local ? ["--no-hardlinks"] : []), "--", source, dir],
      opts,
      {
        userConfig: true,
        transports: [local ? "local" : "remote"],
        ...(opts.followRedirects === false ? { followRedirects: false } : {}),
        auth,
        secrets: auth?.secrets ?? split.secrets,
        maxDir: { dir, bytes: opts.max },
        cwd: dir,
      },
    );
    if (clone.code !== 0) throw failure(label, "git clone failed", clone, opts.max);
    if (local && fss.existsSync(path.join(dir, ".git/objects/info/alternates")))
      throw new RepoError(`${label}: the local repo borrows objects from another repo (objects/info/alternates)`);
    const commit = await resolve(dir, ref, opts);
    if (commit === undefined && ref !== undefined)
      throw new RepoError(`${label}: ref ${quote(ref)} not found (no such branch, tag or commit)`);
    if (commit === undefined) return (await scrubGitDir(dir, split.secrets, opts), { dir }); // an empty repo (or a remote HEAD to nowhere): nothing to check out
    const gitBytes = await dirBytes(dir);
    const treeBytes = await treeSize(label, dir, commit, opts.max - gitBytes, opts);
    if (gitBytes + treeBytes > opts.max)
      throw tooLarge(
        label,
        gitBytes + treeBytes,
        opts.max,
        `${treeBytes} to check out at ${quote(ref ?? "HEAD")}, ${gitBytes} in .git`,
      );
    const co = await git(["-C", dir, "checkout", "--quiet", ref ?? "HEAD", "--"], opts, {
      userConfig: false,
      maxDir: { dir, bytes: opts.max },
    });
    if (co.code !== 0) throw failure(label, `git checkout of ${quote(ref ?? "HEAD")} failed`, co, opts.max);
    if ((await revParse(dir, "HEAD", opts)) !== commit)
      throw new RepoError(`${label}: ref ${quote(ref ?? "HEAD")} is ambiguous`);
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
  const stored = split.credential
    ? undefined
    : store
      ? matchCredential(await readCredentialStore(store), split.url)
      : undefined;
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
        const clean = scrub(
          text,
          secrets.map((s) => Buffer.from(s).toString("latin1")),
        );
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
  const refuse = (why: string) =>
    new RepoError(`${label}: the local repo ${why}; a worker clones only a repo whose git dir is its own`);
  if (!lst("")?.isDirectory()) throw new RepoError(`${label}: the local path does not exist or is not a directory`);
  const dotGit = lst(".git");
  if (dotGit && !dotGit.isDirectory())
    throw refuse(`has a .git ${dotGit.isSymbolicLink() ? "symlink" : "file"}, which points at another repo`);
  const gitDir = dotGit ? path.join(root, ".git") : root;
  const rel = (name: string) => path.relative(root, path.join(gitDir, name)) || ".";
  const has = (name: string) => fss.lstatSync(path.join(gitDir, name), { throwIfNoEntry: false });
  if (!has("HEAD") || !has("refs")) throw new RepoError(`${label}: the local path is not a git repository`);
  if (has("commondir")) throw refuse(`shares another repo's git dir (${rel("commondir")})`);
  const objects = has("objects");
  if (!objects?.isDirectory())
    throw refuse(
      `has no objects directory of its own (${rel("objects")} is ${objects ? "a symlink or file" : "missing"})`,
    );
  for (const f of ["alternates", "http-alternates"])
    if (has(`objects/info/${f}`)) throw refuse(`borrows objects from another repo (${rel(`objects/info/${f}`)})`);
  const bytes = await objectBytes(
    label,
    path.join(gitDir, "objects"),
    (n) => refuse(`has a symlink in its object store (${rel(`objects/${n}`)})`),
    opts,
  );
  if (bytes > opts.max) throw tooLarge(label, bytes, opts.max, "in the local repo's object store, before it is cloned");
  return root;
}

/** Total bytes under a local objects dir; a symlink anywhere is refused. */
async function objectBytes(
  label: string,
  dir: string,
  symlink: (name: string) => Error,
  opts: CloneOptions,
): Promise<number> {
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
  const r = await git(["-C", dir, "rev-parse", "-q", "--verify", "--end-of-options", `${rev}^{commit}`], opts, {
    userConfig: false,
    maxStdout: 4096,
  });
  return r.code === 0 ? r.stdout.trim() : undefined;
}

/**
 * Bytes of the blobs in the commit's tree, from `git ls-tree -r -l -z` read as it streams: git is
 * stopped as soon as the sum passes `budget` or the entries pass the bound.
 */
async function treeSize(
  label: string,
  dir: string,
  commit: string,
  budget: number,
  opts: CloneOptions,
): Promise<number> {
  let [bytes, entries, rest, over] = [0, 0, "", false];
  const onStdout = (chunk: string) => {
    const records = (rest + chunk).split("\0");
    rest = records.pop()!;
    for (const rec of records) {
      const [mode, type, , size] = rec.slice(0, rec.indexOf("\t")).split(/ +/);
      if (type === "blob") bytes += Number(size) || 0;
      if (mode !== undefined && ++entries > opts.maxEntries) over = true;
    }
    if (rest.length > 64 * 1024) over = true; // no record is that long
    return bytes > budget || over;
  };
  const r = await git(["-C", dir, "ls-tree", "-r", "-l", "-z", "--full-tree", commit], opts, {
    userConfig: false,
    onStdout,
  });
  if (entries > opts.maxEntries)
    throw new RepoError(`${label}: the repo has more than ${count(opts.maxEntries, "file")}`);
  if (bytes > budget) return bytes; // the caller reports it
  if (r.code !== 0) throw new RepoError(`${label}: git ls-tree failed: ${r.stderr || `exit ${r.code}`}`);
  return bytes;
}

/** The error for a failed git run: the repo's (RepoError), unless the host ran out of disk or is read-only. */
function failure(label: string, what: string, r: GitOut, max: number): Error {
  if (r.tooLarge !== undefined) return tooLarge(label, r.tooLarge, max, "the clone directory while git was writing it");
  const message = `${label}: ${what}: ${r.stderr || "(no output)"}`;
  if (/No space left on device|Read-only file system|Disk quota exceeded/i.test(r.stderr)) return new Error(message);
  return new RepoError(message);
}

/** A git step of the clone: the job's timeout and what the step differs in; src/git/run.ts does the rest. */
const git = (args: string[], opts: CloneOptions, step: Omit<GitRun, "env" | "timeoutMs">) =>
  runGit(args, { env: opts.env, timeoutMs: opts.timeoutSec * 1000, ...step });
