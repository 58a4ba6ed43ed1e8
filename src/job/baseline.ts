// The baseline: the tree of /workspace once the repo is loaded (and again after setup), against
// which the patch (patch.ts) is taken. Root git hashes the files into the store (git-store.ts);
// where the workspace has no repo of its own, the agent gets one, made from the baseline.
// If `sent` (the tree id computed on the host while packing) is given, return it as the baseline
// now; then write the pack into the store and let git hash the files; `checked` resolves to git's
// tree, which replaces `sent` where they differ.
import { asset } from "../core/assets.js";
import type { PutFile, Sandbox } from "../sandbox/sandbox.js";
import type { BuiltPack } from "./repo/blob-pack.js";
import { GIT, GitStepError, ROOT, STORE, TREE_ID, treeScript } from "./git-store.js";

// The scripts (src/job/sh/, each with a header saying what it takes and prints): the baseline as
// root (baseline.sh), which runs its first part as the agent (baseline-agent.sh: the symlinks the
// archive API refused, the names the repo tracks); then, in one exec while the first model request
// is out, what may follow it (deferred.sh: a deferred smudge, and the agent's own repo where the
// workspace had none, made as the agent from the baseline by agent-repo.sh).
const BASELINE_SCRIPT = GIT + asset("job/sh/baseline.sh");
const AGENT_GIT = asset("job/sh/agent-git.sh");
const AGENT_PART = AGENT_GIT + asset("job/sh/baseline-agent.sh");
const DEFERRED_SCRIPT = GIT + asset("job/sh/deferred.sh");
const AGENT_REPO = AGENT_GIT + asset("job/sh/agent-repo.sh");

export interface Baseline {
  tree: string;
  /**
   * Settles once what follows the baseline is done: the smudge where it was deferred (the index
   * is trusted only after it), and the agent's own git repo where the workspace had none (from the
   * baseline: one commit). Never rejects: the repo is a convenience, and a job goes on without it;
   * without the smudge there is no stat cache, as when a smudge fails.
   */
  agentRepo: Promise<void>;
  /**
   * The baseline as git's own hash of the bytes on disk says: `tree`, or where the worker's tree of
   * what it sent (taken at once: see takeBaseline) differs, git's, which is then the baseline.
   * Rejects where git failed, as a baseline taken at once would have. Settles before agentRepo.
   */
  checked: Promise<string>;
}

/**
 * Makes /workspace a git repo if it is not one (one baseline commit) and returns the tree id of
 * the working tree as it is now. `symlinks` are made first, as the agent's uid.
 */
export async function writeBaseline(
  sb: Sandbox,
  symlinks: { name: string; target: string }[] = [],
  opts: { keepIndex?: boolean; pack?: BuiltPack } = {},
): Promise<string> {
  const b = await takeBaseline(sb, symlinks, opts);
  const tree = await b.checked;
  await b.agentRepo;
  return tree;
}

/**
 * writeBaseline, returning as soon as the baseline tree is known: the agent's repo is made after
 * it (~90 ms here), e.g. while the first model request is out. Nothing else may touch the sandbox
 * until `agentRepo` settles. `sent` is the tree the worker made of all it sent (BlobPack.tree):
 * where given (no symlinks to make, a first baseline) it is returned at once, and git hashes the
 * files, the pack put ahead of it, after (`checked`): a 50,000-file load is ready ~1 s sooner, its
 * hash done while the first model request is out. `pack` may still be being made.
 */
export async function takeBaseline(
  sb: Sandbox,
  symlinks: { name: string; target: string }[] = [],
  opts: {
    keepIndex?: boolean;
    pack?: BuiltPack | Promise<BuiltPack | undefined>;
    sent?: string;
    loadedSince?: number;
    deferSmudge?: boolean;
  } = {},
): Promise<Baseline> {
  const links = Buffer.from(symlinks.map((l) => `${l.name}\0${l.target}\0`).join(""));
  const linksEnv = [
    `PB_LINKS=${symlinks.length ? 1 : 0}`,
    ...(opts.loadedSince !== undefined && Number.isInteger(opts.loadedSince)
      ? [`PB_LOADED_SINCE=${opts.loadedSince}`]
      : []),
  ];
  const args = [AGENT_PART, ...(opts.keepIndex ? ["keep"] : [])];
  const run = async (env: string[]) => treeScript(sb, WHAT, BASELINE_SCRIPT, args, links, env, putOf(await opts.pack));
  const sent =
    opts.sent !== undefined && TREE_ID.test(opts.sent) && !symlinks.length && !opts.keepIndex ? opts.sent : undefined;
  if (sent === undefined) {
    const b = await run([...linksEnv, ...(opts.deferSmudge ? ["PB_DEFER_SMUDGE=1"] : [])]);
    return { tree: b.tree, agentRepo: deferred(sb, b), checked: Promise.resolve(b.tree) };
  }
  // The worker's tree is the baseline for now: git hashes the bytes on disk (its smudge not
  // deferred: the agent waits for this anyway), and its tree is the baseline.
  const later = run(linksEnv);
  const checked = later.then((b) => b.tree);
  checked.catch(() => {}); // its consumers see the rejection; a process is never ended by it meanwhile
  return {
    tree: sent,
    agentRepo: later.then(
      (b) => deferred(sb, b),
      () => {},
    ),
    checked,
  };
}

/**
 * The worker's pack of the repo's files (see blob-pack.ts), put into the store before the script
 * runs: git add then finds every blob and tree stored.
 */
function putOf(p: BuiltPack | undefined): PutFile[] {
  if (!p || !/^[0-9a-f]{40}$/.test(p.name)) return [];
  return [
    { path: `${STORE}/objects/pack/pack-${p.name}.pack`, data: p.pack },
    { path: `${STORE}/objects/pack/pack-${p.name}.idx`, data: p.idx },
  ];
}

const WHAT = "loadRepo: making the baseline with git";

/** What is left after a baseline (the smudge, the agent's repo), in one exec; never rejects. */
function deferred(sb: Sandbox, { tree, before }: { tree: string; before: string[] }): Promise<void> {
  const smudge = before.map((l) => /^smudge (\d+)$/.exec(l)?.[1]).find(Boolean);
  const env = [...(smudge ? [`PB_SMUDGE=${smudge}`] : []), ...(before.includes("agent-repo") ? ["PB_SHARE=1"] : [])];
  return env.length
    ? sb.exec(["bash", "-c", DEFERRED_SCRIPT, "patchbay", tree, AGENT_REPO], { timeoutSec: 600, env, ...ROOT }).then(
        () => {},
        () => {},
      )
    : Promise.resolve();
}

/** Makes the private store ahead of a job (a warm sandbox): the baseline then finds it made. */
export async function prepareStore(sb: Sandbox): Promise<void> {
  const r = await sb.exec(["bash", "-c", `${GIT}:`], { timeoutSec: 60, ...ROOT });
  if (r.exitCode !== 0)
    throw new GitStepError(`making the private git store failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-300)}`);
}
