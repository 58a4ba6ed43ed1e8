// A job's repo into the sandbox's /workspace: a tar stream built on the host (a local directory,
// a host-side git clone, or a tar/tar.gz), piped into tar in the sandbox, then a baseline tree id
// that the final patch is diffed against. The repo is hostile input: every source is bounded
// (bytes, entries, name lengths, depth), read without blocking the event loop for long, and a
// repo that cannot be loaded fails as a RepoError, which is not retried.
import fs from "node:fs/promises";
import path from "node:path";
import { prepareStore, takeBaseline, writeBaseline } from "../baseline.js";
import { tarArchive } from "./archive.js";
import { DEFAULT_REPO_MAX_BYTES, DEFAULT_REPO_MAX_ENTRIES, RepoError, type RepoArchive } from "./common.js";
import { dirArchive } from "./walk.js";
import { cloneRepo, redact } from "./clone.js";
import type { HostEnv } from "../../core/config/config.js";
import { checkSource, type SourceRules } from "./source.js";
import type { Sandbox } from "../../sandbox/sandbox.js";
import { PatchbayError } from "../../core/errors.js";

export {
  DEFAULT_REPO_MAX_BYTES,
  DEFAULT_REPO_MAX_ENTRIES,
  LIMITS as REPO_LIMITS,
  RepoError,
  type RepoArchive,
} from "./common.js";

export type RepoSource = { path: string } | { git: string; ref?: string } | { archive: string };

export interface RepoArchiveOptions {
  /** Bound on the total bytes of regular files, `.git` included (default 1 GiB). A `{ git }` clone is held to it before checkout. */
  maxBytes?: number;
  /** Bound on the number of entries: files, directories, symlinks (default 1,000,000). */
  maxEntries?: number;
  /** Bound on the host-side `git clone` and `git checkout` (default 600 s each). */
  gitTimeoutSec?: number;
  /** What a host-side clone of a `{ git }` repo runs with: the host's environment and the worker's credentials store (from the Config). */
  git?: { env: HostEnv; credentials?: string };
  /** The worker's rules for the job's repo (src/job/repo/source.ts): checked here, before the host is read. */
  sources?: SourceRules;
}

export interface LoadedRepo {
  /** Tree id of the starting working tree: uncommitted changes included, ignored files excluded. */
  baseline: string;
  /** A `{ git }` repo's commit the job started from (what a campaign publishes the patch onto). */
  commit?: string;
  /** With `deferAgentRepo`: settles once the agent's git repo is made and the baseline's smudge done (see takeBaseline); never rejects. */
  agentRepo: Promise<void>;
  /**
   * With `deferAgentRepo`: the baseline as git's hash of the files says, which replaces `baseline`
   * where it differs; rejects where git failed (takeBaseline). Without: `baseline` is that already.
   */
  checked: Promise<string>;
  files: number;
  bytes: number;
  ms: number;
}

export async function repoArchive(given: RepoSource, opts: RepoArchiveOptions = {}): Promise<RepoArchive> {
  // The worker's admission held the repo to these rules already (src/job/repo/source-check.ts); they
  // hold here too, where the host is read, and a local repo is read at the real path checked.
  const v = opts.sources ? checkSource(given, opts.sources) : { ok: true as const, repo: given };
  if (!v?.ok)
    throw new RepoError(
      `repo${v ? `.${v.field}` : ""}: refused by this worker's rules for a job's repo (PATCHBAY_LOCAL_REPO_ROOTS, PATCHBAY_API_GIT_HOSTS)`,
    );
  const repo: RepoSource = v.repo;
  const max = opts.maxBytes ?? DEFAULT_REPO_MAX_BYTES;
  const maxEntries = opts.maxEntries ?? DEFAULT_REPO_MAX_ENTRIES;
  if ("path" in repo) {
    const st = await fs.stat(repo.path).catch(() => undefined);
    if (!st) throw new RepoError(`repo.path: ${repo.path} does not exist`);
    if (!st.isDirectory()) throw new RepoError(`repo.path: ${repo.path} is not a directory`);
    return dirArchive(path.resolve(repo.path), true, max, maxEntries, `repo.path ${repo.path}`);
  }
  if ("git" in repo) {
    if (!opts.git)
      throw new PatchbayError(
        "usage",
        "repoArchive: a { git } repo needs opts.git (the host's environment and credentials, from the Config)",
      );
    const followRedirects = opts.sources?.gitHosts === undefined; // a listed host's redirect could lead anywhere
    const { dir, commit } = await cloneRepo(repo.git, repo.ref, {
      timeoutSec: opts.gitTimeoutSec ?? 600,
      max,
      maxEntries,
      env: opts.git.env,
      credentials: opts.git.credentials,
      followRedirects,
    });
    const rm = () => fs.rm(dir, { recursive: true, force: true });
    try {
      // A fresh clone has nothing ignored worth filtering: it is tarred whole.
      const archive = await dirArchive(dir, false, max, maxEntries, `repo.git ${redact(repo.git)}`, { rm });
      return commit ? Object.assign(archive, { commit }) : archive;
    } catch (err) {
      await rm();
      throw err;
    }
  }
  if ("archive" in repo) return tarArchive(repo.archive, max, maxEntries);
  throw new RepoError("repo: expected exactly one of { path }, { git, ref? }, { archive }");
}

/**
 * Puts the repo into /workspace and records the baseline. `prepared` is an archive already being
 * made (e.g. cloned while the sandbox was starting); its cleanup is done here either way.
 */
/** `pack: false`: git in the sandbox writes every object itself (the worker's pack left out: a test's reference). */
export async function loadRepo(
  sb: Sandbox,
  repo: RepoSource,
  opts: RepoArchiveOptions & {
    prepared?: Promise<RepoArchive>;
    via?: "stream" | "archive";
    deferAgentRepo?: boolean;
    pack?: false;
  } = {},
): Promise<LoadedRepo> {
  const t0 = Date.now();
  const archive = await (opts.prepared ?? repoArchive(repo, opts));
  // A repo found bad while it streams (an archive changed since its scan, a file grown past the
  // bound) breaks the upload; the engine's error would hide that it is the repo's fault.
  let broken: Error | undefined;
  archive.stream.once("error", (err) => (broken = err));
  // The worker's tree of what it sent is made while the sandbox's tar writes the last bytes.
  if (opts.pack !== false)
    archive.stream.once(
      "end",
      () =>
        void sb
          .splitsStdin()
          .then((yes) => yes && archive.blobs.tree())
          .catch(() => {}),
    );
  // Into a fresh workspace, every file is written from here on (the baseline's smudge uses it).
  const loadedSince = Math.floor(Date.now() / 1000);
  try {
    // Through tar in the sandbox (one exec); the archive API where the image has no tar (`via`
    // "archive" takes it anyway: the tests hold the two to the same tree).
    if (opts.via === "archive" || !(await sb.putTarStream("/workspace", archive.stream)))
      await sb.files.putArchive("/workspace", archive.stream);
    if (broken) throw broken; // a stream cut short is never a loaded repo
  } catch (err) {
    throw broken instanceof RepoError ? broken : err;
  } finally {
    await archive.cleanup();
  }
  // The pack goes into the store ahead of git's hash: by the file agent, or where it cannot, split
  // off stdin with `head -c` (only where that is exact). Where it holds the tree of all that was
  // sent, that tree is the baseline at once, and the pack is finished and put after ready, in the
  // exec of git's hash (takeBaseline).
  const blobs = opts.pack !== false && (await sb.splitsStdin()) ? archive.blobs : undefined;
  const sent = blobs?.tree();
  // The pack is begun after what follows ready (its first hashing is synchronous).
  const pack = blobs && new Promise<void>((r) => setImmediate(r)).then(() => blobs.finish());
  const b = await takeBaseline(sb, archive.symlinks, { pack, sent, loadedSince, deferSmudge: opts.deferAgentRepo });
  const baseline = opts.deferAgentRepo ? b.tree : await b.checked;
  if (!opts.deferAgentRepo) await b.agentRepo;
  return {
    baseline,
    agentRepo: b.agentRepo,
    checked: b.checked,
    files: archive.files,
    bytes: archive.bytes,
    ms: Date.now() - t0,
    ...(archive.commit ? { commit: archive.commit } : {}),
  };
}

/** A new baseline: the tree of /workspace as it is now (e.g. after setup commands, whose output is not the agent's change). */
export function snapshotBaseline(sb: Sandbox): Promise<string> {
  // From the load's index: only what setup changed is hashed again.
  return writeBaseline(sb, [], { keepIndex: true });
}

/**
 * What loading a repo asks of a new sandbox first, done ahead while a warm one waits (the worker's
 * pool `prepare`): the image's tools probed, the private git store made.
 */
export async function prepareSandbox(sb: Sandbox): Promise<void> {
  await sb.probeTools();
  await prepareStore(sb);
}
