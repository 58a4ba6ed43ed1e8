// The git of publishing, on the host where the credentials live: a job's patch made into a commit on
// the target branch's tip, and that commit pushed as a branch (or the branch deleted), leased so that
// a re-publish updates the branch and never overwrites a commit it did not see.
//
// The repository's files are hostile and never touch the host's filesystem: a bare repository per
// remote under the cache dir (reused: a later publish fetches into it), no working tree, the patch
// applied to the base commit's tree in a temporary index (`git apply --cached --3way`, which refuses
// `..`, `.git/` and paths beyond a symlink), the commit made with `commit-tree` (author, committer
// and dates given: the same change makes the same sha), a moved target met with a merge whose base
// is the job's base (publish-git-merge.ts), the commit then made on the tip.
import { count, plural } from "../core/count.js";
import crypto from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { HostEnv } from "../core/config/config.js";
import type { GitCredential } from "../git/credentials.js";
import { DEFAULT_PATCH_MAX_BYTES } from "../job/patch.js";
import { dirBytes, printable } from "../git/run.js";
import {
  DEFAULT_TIMEOUT_MS,
  gitFailure,
  PublishError,
  remoteOf,
  runGit,
  type GitOut,
  type Local,
  type Remote,
} from "./publish-git-run.js";
import { mergeOnto } from "./publish-git-merge.js";

export { PublishError } from "./publish-git-run.js";

interface Net {
  url: string;
  env: HostEnv;
  credential?: GitCredential;
  timeoutMs?: number;
}

export interface PrepareOptions extends Net {
  /** The branch the change is for; undefined: the remote's HEAD branch. */
  target?: string;
  /** The commit the job's patch was made against. */
  baseCommit: string;
  patch: string;
  author: { name: string; email: string };
  message: string;
  /** The job's finish time: author and committer date, so the same change makes the same sha. */
  date: Date;
  cacheDir: string;
  /** Bytes of patch (and of the binary contents it inflates to) at most. */
  maxPatchBytes?: number;
  /** Bytes the repository's clone in the cache may take (default DEFAULT_CACHE_MAX_BYTES). */
  maxCacheBytes?: number;
}

/** What one remote's clone in the publish cache may take: a remote that sends more is not published. */
export const DEFAULT_CACHE_MAX_BYTES = 2 * 1024 ** 3;

export type PreparedChange =
  | { kind: "commit"; sha: string; target: string; onto: string; rebased: boolean; diffstat: string }
  | { kind: "conflict"; target: string; onto: string; files: string[]; detail: string }
  | { kind: "empty" };

export async function prepareChange(o: PrepareOptions): Promise<PreparedChange> {
  const remote = remoteOf(o.url, o.credential);
  const timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const base = checkSha(o.baseCommit, "baseCommit");
  checkPatch(o.patch, o.maxPatchBytes ?? DEFAULT_PATCH_MAX_BYTES);
  const ident = identity(o);
  const maxBytes = o.maxCacheBytes ?? DEFAULT_CACHE_MAX_BYTES;
  const repo: Local = {
    gitDir: await cacheRepo(o.cacheDir, remote, o.env, timeoutMs, maxBytes),
    env: o.env,
    timeoutMs,
  };
  const target = o.target ?? (await remoteHead(remote, o.env, timeoutMs));
  await checkBranch(target, o.env);
  const tip = await fetchTarget(repo, remote, target, maxBytes);
  await ensureCommit(repo, remote, base, maxBytes);
  const tree = await applyPatch(repo, base, o.patch);
  if (tree === (await revParse(repo, `${base}^{tree}`))) return { kind: "empty" };
  const commit = await commitTree(repo, tree, base, o.message, ident);
  if (tip === base)
    return {
      kind: "commit",
      sha: commit,
      target,
      onto: base,
      rebased: false,
      diffstat: await diffstat(repo, base, commit),
    };
  const merged = await mergeOnto(repo, base, tip, commit);
  if (merged.kind === "conflict")
    return { kind: "conflict", target, onto: tip, files: merged.files, detail: merged.detail };
  if (merged.tree === (await revParse(repo, `${tip}^{tree}`))) return { kind: "empty" }; // the target has the change already
  const rebased = await commitTree(repo, merged.tree, tip, o.message, ident);
  return {
    kind: "commit",
    sha: rebased,
    target,
    onto: tip,
    rebased: true,
    diffstat: await diffstat(repo, tip, rebased),
  };
}

/** The commit a branch of the remote is at, or undefined (`git ls-remote`). */
export async function remoteBranch(o: Net & { branch: string }): Promise<string | undefined> {
  await checkBranch(o.branch, o.env);
  const remote = remoteOf(o.url, o.credential);
  const ref = `refs/heads/${o.branch}`;
  const out = await runGit(["ls-remote", "--", remote.url, ref], {
    env: o.env,
    timeoutMs: o.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    remote,
    maxStdout: 64 * 1024,
  });
  if (out.code !== 0) throw readFailure(remote, out);
  for (const line of out.stdout.split("\n")) {
    const [sha, name] = line.split("\t");
    if (name === ref && sha && /^[0-9a-f]{40,64}$/.test(sha)) return sha;
  }
  return undefined;
}

export type PushResult = { kind: "pushed" } | { kind: "unchanged" } | { kind: "foreign"; remoteSha: string };

export interface PushOptions extends Net {
  cacheDir: string;
  sha: string;
  branch: string;
  /** The commit the branch was left at by the last publish; null: the branch must not exist yet. */
  expect: string | null;
  /** Push over a branch at a commit that is neither `expect` nor `sha` (leased against what was seen). */
  force?: boolean;
  /** `git push -o` (GitLab's merge_request.create). */
  pushOptions?: string[];
}

/**
 * The branch set to `sha`, leased: at `sha` already, nothing is pushed; at a commit other than
 * `expect`, nothing is pushed unless `force`. A lease lost to a push in between is `foreign` too.
 * A branch gone since the last publish (deleted on the forge) is made again: nothing is lost.
 */
export async function pushBranch(o: PushOptions): Promise<PushResult> {
  const remote = remoteOf(o.url, o.credential);
  const sha = checkSha(o.sha, "sha");
  if (o.expect !== null) checkSha(o.expect, "expect");
  for (const p of o.pushOptions ?? [])
    if (/[\0\r\n]/.test(p) || !p) throw new PublishError("usage", `bad push option ${JSON.stringify(p.slice(0, 100))}`);
  const gitDir = repoPath(o.cacheDir, remote);
  if (!(await exists(path.join(gitDir, "HEAD"))))
    throw new PublishError("usage", `nothing prepared for ${remote.shown} under ${o.cacheDir}: prepareChange first`);
  const seen = await remoteBranch({ ...o, branch: o.branch });
  if (seen === sha) return { kind: "unchanged" };
  if (seen !== undefined && seen !== o.expect && !o.force) return { kind: "foreign", remoteSha: seen };
  const options = (o.pushOptions ?? []).flatMap((p) => ["-o", p]);
  const r = await push(
    gitDir,
    remote,
    o,
    [`--force-with-lease=refs/heads/${o.branch}:${seen ?? ""}`, ...options],
    `${sha}:refs/heads/${o.branch}`,
  );
  if (r === "ok") return { kind: "pushed" };
  const now = await remoteBranch({ ...o, branch: o.branch });
  if (now === sha) return { kind: "unchanged" };
  if (now === undefined)
    throw new PublishError(
      "git",
      `branch ${o.branch} of ${remote.shown} changed while it was pushed, and is gone now: publish again`,
    );
  return { kind: "foreign", remoteSha: now };
}

export type DeleteResult = { kind: "deleted" } | { kind: "absent" } | { kind: "foreign"; remoteSha: string };

/** The branch deleted if it is still at `expect` (leased); at another commit it stays. */
export async function deleteBranch(o: Net & { branch: string; expect: string }): Promise<DeleteResult> {
  const remote = remoteOf(o.url, o.credential);
  const expect = checkSha(o.expect, "expect");
  const seen = await remoteBranch(o);
  if (seen === undefined) return { kind: "absent" };
  if (seen !== expect) return { kind: "foreign", remoteSha: seen };
  // git push wants a repository to run in; a deletion sends no object, so an empty one does.
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "patchbay-delete-"));
  try {
    const init = await runGit(["init", "--bare", "--quiet", "--template=", dir], { env: o.env, timeoutMs: 60_000 });
    if (init.code !== 0) throw gitFailure(`git init ${dir}`, init);
    const r = await push(
      dir,
      remote,
      o,
      [`--force-with-lease=refs/heads/${o.branch}:${expect}`],
      `:refs/heads/${o.branch}`,
    );
    if (r === "ok") return { kind: "deleted" };
    const now = await remoteBranch(o);
    return now === undefined ? { kind: "absent" } : { kind: "foreign", remoteSha: now };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** `git push --porcelain`: "ok", "stale" when the lease was lost; a refusal for rights is a PublishError saying so. */
async function push(
  gitDir: string,
  remote: Remote,
  o: Net & { branch: string },
  flags: string[],
  refspec: string,
): Promise<"ok" | "stale"> {
  const out = await runGit(["push", "--porcelain", "--no-verify", ...flags, "--", remote.url, refspec], {
    env: o.env,
    timeoutMs: o.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    remote,
    gitDir,
    maxStdout: 64 * 1024,
  });
  const line = out.stdout.split("\n").find((l) => l.split("\t")[1]?.endsWith(`:refs/heads/${o.branch}`));
  const [flag, , summary = ""] = line?.split("\t") ?? [];
  if (out.code === 0 && flag !== undefined && flag !== "!") return "ok";
  if (flag === "!" && /stale info|fetch first|non-fast-forward/.test(summary)) return "stale";
  const said = printable(summary).slice(0, 300);
  const failed = { ...out, stderr: [said, out.stderr].filter(Boolean).join("\n") };
  if (flag === "!" && /remote rejected/.test(summary)) throw rightsError(remote, failed);
  if (rightsOrGit(out) === "rights") throw rightsError(remote, failed);
  throw gitFailure(`git push to ${remote.shown}`, failed);
}

const readFailure = (remote: Remote, out: GitOut) =>
  rightsOrGit(out) === "rights"
    ? gitFailure(`the credentials for ${remote.host} cannot read ${remote.shown}`, out, "rights")
    : gitFailure(`git cannot read ${remote.shown}`, out);
const rightsError = (remote: Remote, out: GitOut) =>
  gitFailure(`the credentials for ${remote.host} cannot push to ${remote.shown}`, out, "rights");
const RIGHTS =
  /\b(?:401|403)\b|Permission denied|Authentication failed|could not read Username|access denied|not authorized|unauthorized|forbidden/i;
const rightsOrGit = (out: GitOut) => (RIGHTS.test(out.stderr) ? "rights" : "git");

/** The bare repo for a remote: named by a hash of its URL (without credentials). */
const repoPath = (cacheDir: string, remote: Remote) =>
  path.join(cacheDir, `${crypto.createHash("sha256").update(remote.url).digest("hex").slice(0, 24)}.git`);

async function cacheRepo(
  cacheDir: string,
  remote: Remote,
  env: HostEnv,
  timeoutMs: number,
  maxBytes: number,
): Promise<string> {
  const gitDir = repoPath(cacheDir, remote);
  await fs.mkdir(cacheDir, { recursive: true, mode: 0o700 });
  // A clone over the bound (the bound lowered since, or left by a version without one) is started again.
  if ((await exists(path.join(gitDir, "HEAD"))) && (await dirBytes(gitDir)) <= maxBytes) return gitDir;
  await fs.rm(gitDir, { recursive: true, force: true });
  const out = await runGit(["init", "--bare", "--quiet", "--template=", gitDir], { env, timeoutMs });
  if (out.code !== 0) throw gitFailure(`git init ${gitDir}`, out);
  return gitDir;
}

async function remoteHead(remote: Remote, env: HostEnv, timeoutMs: number): Promise<string> {
  const out = await runGit(["ls-remote", "--symref", "--", remote.url, "HEAD"], {
    env,
    timeoutMs,
    remote,
    maxStdout: 64 * 1024,
  });
  if (out.code !== 0) throw readFailure(remote, out);
  const m = /^ref: refs\/heads\/(\S+)\tHEAD$/m.exec(out.stdout);
  if (!m) throw new PublishError("missing", `${remote.shown} has no HEAD branch: name the target branch`);
  return m[1]!;
}

/** The target branch fetched into refs/patchbay/heads/: its tip. */
async function fetchTarget(repo: Local, remote: Remote, target: string, maxBytes: number): Promise<string> {
  const ref = `refs/patchbay/heads/${target}`;
  const out = await runGit(
    [
      "fetch",
      "--quiet",
      "--no-tags",
      "--no-write-fetch-head",
      "--no-recurse-submodules",
      "--",
      remote.url,
      `+refs/heads/${target}:${ref}`,
    ],
    { ...repo, remote, maxDir: { dir: repo.gitDir, bytes: maxBytes } },
  );
  await checkCacheSize(repo, remote, out, target, maxBytes);
  if (out.code !== 0 && /couldn't find remote ref/i.test(out.stderr))
    throw new PublishError("missing", `the branch ${JSON.stringify(target)} is not in ${remote.shown}`);
  if (out.code !== 0) throw readFailure(remote, out);
  const tip = await revParse(repo, `${ref}^{commit}`);
  if (!tip) throw new PublishError("git", `git fetch ${remote.shown}: ${target} fetched but not found`);
  return tip;
}

/** The base commit, fetched by id when the target's history does not hold it. */
async function ensureCommit(repo: Local, remote: Remote, sha: string, maxBytes: number): Promise<void> {
  if (await revParse(repo, `${sha}^{commit}`)) return;
  const out = await runGit(
    [
      "fetch",
      "--quiet",
      "--no-tags",
      "--no-write-fetch-head",
      "--no-recurse-submodules",
      "--",
      remote.url,
      `${sha}:refs/patchbay/bases/${sha}`,
    ],
    { ...repo, remote, maxDir: { dir: repo.gitDir, bytes: maxBytes } },
  );
  await checkCacheSize(repo, remote, out, sha, maxBytes);
  if (out.code === 0 && (await revParse(repo, `${sha}^{commit}`))) return;
  throw new PublishError(
    "missing",
    `the base commit ${sha} is not in ${remote.shown} (not on the target branch, and the server did not give it by id)${out.code ? `: ${out.stderr}` : ""}`,
  );
}

/**
 * After a fetch into the cache: one stopped as the clone passed its bound (or done before the watch
 * saw it pass) removes the clone (a later publish starts it again) and is an error saying why.
 */
async function checkCacheSize(repo: Local, remote: Remote, out: GitOut, what: string, maxBytes: number): Promise<void> {
  if (!out.tooLarge && !(out.code === 0 && (await dirBytes(repo.gitDir)) > maxBytes)) return;
  await fs.rm(repo.gitDir, { recursive: true, force: true });
  throw new PublishError(
    "git",
    `git fetch ${remote.shown} (${what.slice(0, 200)}) stopped: its clone in the publish cache grew past ${maxBytes.toLocaleString("en-US")} ${plural(maxBytes, "byte")}, the most a repository's clone may take there; the clone was removed`,
  );
}

/** The patch applied to the base's tree in a temporary index: the tree it makes. */
async function applyPatch(repo: Local, base: string, patch: string): Promise<string> {
  const index = path.join(repo.gitDir, `patchbay-index-${crypto.randomBytes(8).toString("hex")}`);
  const run = { ...repo, extraEnv: { GIT_INDEX_FILE: index } };
  try {
    const read = await runGit(["read-tree", base], run);
    if (read.code !== 0) throw gitFailure(`git read-tree ${base}`, read);
    const apply = await runGit(["apply", "--cached", "--3way", "--allow-empty", "--whitespace=nowarn", "-"], {
      ...run,
      input: patch,
    });
    if (apply.code !== 0) throw gitFailure(`the patch does not apply to ${base}`, apply, "patch");
    const tree = await runGit(["write-tree"], run);
    if (tree.code !== 0) throw gitFailure("git write-tree", tree);
    return tree.stdout.trim();
  } finally {
    await fs.rm(index, { force: true });
    await fs.rm(`${index}.lock`, { force: true });
  }
}

type Ident = Record<string, string>;

function identity(o: PrepareOptions): Ident {
  const { name, email } = o.author;
  if (!name.trim() || /[\0\n<>]/.test(name) || !email.trim() || /[\0\n<>\s]/.test(email))
    throw new PublishError("usage", `bad commit author ${JSON.stringify(`${name} <${email}>`.slice(0, 200))}`);
  if (Number.isNaN(o.date.getTime())) throw new PublishError("usage", "bad commit date");
  if (o.message.includes("\0")) throw new PublishError("usage", "the commit message holds a NUL byte");
  const date = `@${Math.floor(o.date.getTime() / 1000)} +0000`;
  return {
    GIT_AUTHOR_NAME: name,
    GIT_AUTHOR_EMAIL: email,
    GIT_AUTHOR_DATE: date,
    GIT_COMMITTER_NAME: name,
    GIT_COMMITTER_EMAIL: email,
    GIT_COMMITTER_DATE: date,
  };
}

async function commitTree(repo: Local, tree: string, parent: string, message: string, ident: Ident): Promise<string> {
  // --no-gpg-sign: no signing whatever a config says (a local step has none of the user's anyway).
  const out = await runGit(["commit-tree", "--no-gpg-sign", tree, "-p", parent, "-F", "-"], {
    ...repo,
    extraEnv: ident,
    input: message,
  });
  if (out.code !== 0) throw gitFailure("git commit-tree", out);
  return out.stdout.trim();
}

async function diffstat(repo: Local, from: string, to: string): Promise<string> {
  const out = await runGit(["diff-tree", "--stat=100", "--no-renames", "-r", from, to], {
    ...repo,
    maxStdout: 64 * 1024,
  });
  if (out.code !== 0 && !out.overflow) throw gitFailure("git diff-tree --stat", out);
  return printable(out.stdout.trimEnd()); // newlines stay
}

export async function revParse(repo: Local, rev: string): Promise<string | undefined> {
  const out = await runGit(["rev-parse", "-q", "--verify", "--end-of-options", rev], { ...repo, maxStdout: 1024 });
  return out.code === 0 ? out.stdout.trim() : undefined;
}

function checkSha(sha: string, name: string): string {
  if (!/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(sha))
    throw new PublishError("usage", `${name} is not a full commit id: ${JSON.stringify(sha.slice(0, 80))}`);
  return sha;
}

/** A branch name git accepts, and no option. */
async function checkBranch(branch: string, env: HostEnv): Promise<void> {
  const bad = () => new PublishError("usage", `not a branch name: ${JSON.stringify(branch.slice(0, 200))}`);
  if (!branch || branch.startsWith("-") || branch.length > 255) throw bad();
  const out = await runGit(["check-ref-format", `refs/heads/${branch}`], { env, timeoutMs: 30_000 });
  if (out.code !== 0) throw bad();
}

/** Over the bound, or inflating to more than it (a binary patch is deflated): refused before git sees it. */
function checkPatch(patch: string, max: number): void {
  const bytes = Buffer.byteLength(patch);
  if (bytes > max)
    throw new PublishError(
      "patch",
      `the patch is ${count(bytes, "byte")}, over the ${count(max, "byte")} a publish takes`,
    );
  let inflated = 0;
  for (const m of patch.matchAll(/^(?:literal|delta) (\d+)$/gm)) inflated += Number(m[1]);
  if (inflated > max)
    throw new PublishError(
      "patch",
      `the patch's binary contents inflate to ${count(inflated, "byte")}, over the ${count(max, "byte")} a publish takes`,
    );
}

const exists = (p: string) =>
  fs.stat(p).then(
    () => true,
    () => false,
  );
