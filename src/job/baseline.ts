// The baseline: the tree of /workspace once the repo is in (and again after setup), hashed into
// the private store by root git (git-store.ts), with the agent's own repo made where the
// workspace had none. The patch (patch.ts) is diffed against it.
import { PRIVATE_DIR } from "../runtime/types.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { BuiltPack } from "./blob-pack.js";
import { GIT, GitStepError, INDEX, INDEX_TREE, REFRESH, ROOT, STORE, treeScript } from "./git-store.js";

// As the agent (setpriv drops to uid 1000 with no capabilities): the symlinks the archive API
// refused (NUL-separated pairs on stdin), then the names the repo tracks, as plain data: git never
// ignores a tracked file, so those enter the baseline even when .gitignore matches them. Then, as
// root, the baseline tree in the store. (Where there is no repo, the agent's is made after the
// baseline, from it: see DEFERRED_SCRIPT.)
const AGENT_GIT = `A=(git -c safe.directory='*' -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.autocrlf=false -c commit.gpgSign=false -c user.name=patchbay -c user.email=patchbay@localhost)`;
const AGENT_PART = `
while IFS= read -r -d "" n && IFS= read -r -d "" t; do ln -s -- "$t" "$n"; done
${AGENT_GIT}
"\${A[@]}" ls-files -z 2>/dev/null || true`;

// What follows a baseline, in one exec, while the first model request is out: the smudge where
// it was deferred (PB_SMUDGE: see BASELINE_SCRIPT), then (PB_SHARE) the agent's repo.
// The agent's repo when the workspace had none, from the baseline just made instead of hashing
// every file a second time (git's object writes are what a load costs here): the store's objects
// copied as they are, and the baseline's index with its stat data, so the agent's git status is
// fast. Root only reads its own store and pipes it; everything under /workspace/.git is written
// by the agent's uid. (A pack through index-pack measured slower than a second git add.)
const DEFERRED_SCRIPT = `${GIT}
if [ -n "\${PB_SMUDGE:-}" ] && [ ! -f ${INDEX_TREE} ] && [ -f ${INDEX} ]; then
  if (export GIT_WORK_TREE=/workspace GIT_INDEX_FILE=${INDEX}; smudge "$PB_SMUDGE"); then echo "$1" > ${INDEX_TREE}; fi
fi
[ "\${PB_SHARE:-0}" = 1 ] && [ ! -e .git ] && [ ! -L .git ] || exit 0
commit=$("\${G[@]}" commit-tree -m "patchbay: baseline" "$1")
t=; [ -f ${INDEX_TREE} ] && t=$(< ${INDEX_TREE})
as_agent() { env -i HOME=/home/agent PATH="$PATH" LANG=C.UTF-8 GIT_CONFIG_NOSYSTEM=1 setpriv --reuid=1000 --regid=1000 --groups=1000 --inh-caps=-all bash --noprofile --norc -c "$@"; }
{
  # The index comes on fd 3 (root's file, opened by root); without one, the agent's git reads the tree.
  read -r -d '' make_repo <<'EOS' || true
${AGENT_GIT}
"\${A[@]}" init -q -b main && tar -C .git -x && "\${A[@]}" update-ref refs/heads/main "$1" &&
if [ "$2" = index ]; then cat <&3 > .git/index; else "\${A[@]}" read-tree HEAD; fi
EOS
  # A convenience: if it cannot be made, the job goes on without it, as with a repo git cannot read.
  if [ -f ${INDEX} ] && [ "$t" = "$1" ]; then idx=${INDEX} how=index; else idx=/dev/null how=tree; fi
  tar -C ${STORE} -c objects | as_agent "$make_repo" _ "$commit" "$how" 3< "$idx" >&2 || echo "patchbay: the agent's git repo could not be made" >&2
}`;

// The baseline's index is kept (root's, in the private store) with its stat data, so that the
// patch re-hashes only the files whose stat data changed. The agent (uid 1000) can give a file
// back its old mtime and size, but not its ctime, and git compares ctime (trustctime, checkStat
// default). Debian's git compares seconds only, though: an entry whose ctime falls in the second
// the baseline ends (or the one before) could be rewritten by the agent within that same second
// and look unchanged, so such entries lose their stat data ("smudged": index-info records none)
// and are always hashed again.
const BASELINE_SCRIPT = `${GIT}
# A second baseline (after setup) starts from the first one's index, where its stat data is
# trusted (baseline.tree names it): only what setup changed is hashed. An index without
# baseline.tree is never used. What an earlier run left goes in one process (each costs ~8 ms),
# and none where nothing is left (a first baseline).
keep=; [ "\${2:-}" = keep ] && [ -f ${INDEX} ] && [ -f ${INDEX_TREE} ] && keep=1
old=(${INDEX_TREE} ${REFRESH} ${INDEX}.lock ${PRIVATE_DIR}/tracked ${PRIVATE_DIR}/have); [ -n "$keep" ] || old+=(${INDEX})
for f in "\${old[@]}"; do if [ -e "$f" ] || [ -L "$f" ]; then rm -f "\${old[@]}"; break; fi; done
# The agent's part has nothing to do with no symlinks to make and no .git to read: three
# processes saved.
if [ "\${PB_LINKS:-1}" = 1 ] || [ -e .git ] || [ -L .git ]; then
  env -i HOME=/home/agent PATH="$PATH" LANG=C.UTF-8 GIT_CONFIG_NOSYSTEM=1 \
    setpriv --reuid=1000 --regid=1000 --groups=1000 --inh-caps=-all bash --noprofile --norc -c "$1" > ${PRIVATE_DIR}/tracked
fi
export GIT_WORK_TREE=/workspace GIT_INDEX_FILE=${INDEX}
# The smudge window starts before the add: a file written while git hashed it is smudged too.
printf -v started '%(%s)T' -1
"\${G[@]}" add -A
# Tracked names not in the index yet that are files or symlinks now, without ".." or ".git" parts
# (git would refuse the lot): git never ignores a tracked file. (None without a repo: no processes.)
if [ -s ${PRIVATE_DIR}/tracked ]; then
  "\${G[@]}" ls-files -z | sort -z > ${PRIVATE_DIR}/have
  sort -z ${PRIVATE_DIR}/tracked | comm -z -13 ${PRIVATE_DIR}/have - | while IFS= read -r -d "" n; do
    case "/$n/" in */../*|*/./*|*/.git/*|//*) continue;; esac
    if [ -f "$n" ] || [ -L "$n" ]; then printf '%s\\0' "$n"; fi
  done | "\${G[@]}" update-index --add -z --stdin || true
fi
tree=$("\${G[@]}" write-tree)
# Without a smudge that surely worked, no stat cache (no baseline.tree): the patch then hashes
# every file. What was hashed within the window has no stat data yet: the first patch or
# checkpoint two seconds on gives it some, once (refresh). The store needs no ref: nothing in it
# is ever pruned, and it goes with the sandbox.
# PB_LOADED_SINCE: the second the load began writing a fresh workspace. Where that is within the
# window, every file is in it and smudge would fail: its scan is skipped. (A clock off by a second
# can only skip a smudge that would have worked: no stat cache until the refresh, as on failure.)
# PB_DEFER_SMUDGE: the smudge is left to the script run after the baseline (DEFERRED_SCRIPT), off
# the path to the first model request; until it ran, no baseline.tree: the index is not trusted.
if [ "\${PB_LOADED_SINCE:-0}" -lt $(( started - 1 )) ]; then
  if [ "\${PB_DEFER_SMUDGE:-0}" = 1 ]; then echo "smudge $started"; elif smudge "$started"; then echo "$tree" > ${INDEX_TREE}; fi
fi
echo "$started $tree" > ${REFRESH}
# No repo in the workspace: the caller makes the agent's from this baseline (DEFERRED_SCRIPT).
if [ ! -e .git ] && [ ! -L .git ]; then echo agent-repo; fi
echo "$tree"`;

export interface Baseline {
  tree: string;
  /**
   * Settles once what follows the baseline is done: the smudge where it was deferred (the index
   * is trusted only after it), and the agent's own git repo where the workspace had none (from the
   * baseline: one commit). Never rejects: the repo is a convenience, and a job goes on without it;
   * without the smudge there is no stat cache, as when a smudge fails.
   */
  agentRepo: Promise<void>;
}

/**
 * Makes /workspace a git repo if it is not one (one baseline commit) and returns the tree id of
 * the working tree as it is now. `symlinks` are made first, as the agent's uid.
 */
export async function writeBaseline(sb: Sandbox, symlinks: { name: string; target: string }[] = [], opts: { keepIndex?: boolean; pack?: BuiltPack } = {}): Promise<string> {
  const b = await takeBaseline(sb, symlinks, opts);
  await b.agentRepo;
  return b.tree;
}

/**
 * writeBaseline, returning as soon as the baseline tree is known: the agent's repo is made after
 * it (~90 ms here), e.g. while the first model request is out. Nothing else may touch the sandbox
 * until `agentRepo` settles.
 */
export async function takeBaseline(sb: Sandbox, symlinks: { name: string; target: string }[] = [], opts: { keepIndex?: boolean; pack?: BuiltPack; loadedSince?: number; deferSmudge?: boolean } = {}): Promise<Baseline> {
  const links = Buffer.from(symlinks.map((l) => `${l.name}\0${l.target}\0`).join(""));
  // The worker's pack of the repo's files (see blob-pack.ts) goes into the store before the script
  // runs: git add then finds every blob stored.
  const p = opts.pack && /^[0-9a-f]{40}$/.test(opts.pack.name) ? opts.pack : undefined;
  const put = p ? [{ path: `${STORE}/objects/pack/pack-${p.name}.pack`, data: p.pack }, { path: `${STORE}/objects/pack/pack-${p.name}.idx`, data: p.idx }] : [];
  const linksEnv = [`PB_LINKS=${symlinks.length ? 1 : 0}`, ...(opts.loadedSince !== undefined && Number.isInteger(opts.loadedSince) ? [`PB_LOADED_SINCE=${opts.loadedSince}`] : [])];
  const defer = opts.deferSmudge ? ["PB_DEFER_SMUDGE=1"] : [];
  const { tree, before } = await treeScript(sb, "loadRepo: making the baseline with git", BASELINE_SCRIPT, [AGENT_PART, ...(opts.keepIndex ? ["keep"] : [])], links, [...linksEnv, ...defer], put);
  // What is left (the smudge, the agent's repo) runs in one exec after the baseline is known.
  const smudge = before.map((l) => /^smudge (\d+)$/.exec(l)?.[1]).find(Boolean);
  const env = [...(smudge ? [`PB_SMUDGE=${smudge}`] : []), ...(before.includes("agent-repo") ? ["PB_SHARE=1"] : [])];
  const agentRepo = env.length ? sb.exec(["bash", "-c", DEFERRED_SCRIPT, "patchbay", tree], { timeoutSec: 600, env, ...ROOT }).then(() => {}, () => {}) : Promise.resolve();
  return { tree, agentRepo };
}

/** Makes the private store ahead of a job (a warm sandbox): the baseline then finds it made. */
export async function prepareStore(sb: Sandbox): Promise<void> {
  const r = await sb.exec(["bash", "-c", `${GIT}:`], { timeoutSec: 60, ...ROOT });
  if (r.exitCode !== 0) throw new GitStepError(`making the private git store failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-300)}`);
}
