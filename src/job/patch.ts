// Git in the container: the baseline tree when a repo is loaded, and the final patch against it.
// Both trees are written from throwaway indexes, so the agent's own index, commits, branches and
// stashes don't matter, and nothing in the repo's own config (filters, diff.noprefix, external
// diff, textconv, color…) applies.
import { isUtf8 } from "node:buffer";
import { loadConfig } from "../config.js";
import { PRIVATE_DIR } from "../sandbox/docker.js";
import type { PutFile, Sandbox } from "../sandbox/sandbox.js";
import type { BuiltPack } from "./blob-pack.js";

export interface PatchResult {
  /** `git diff --binary` from the baseline tree to the final working tree; "" when nothing changed. */
  patch: string;
  diffstat: string;
  filesChanged: string[];
  /** Size of `patch` in bytes (UTF-8). */
  bytes: number;
  /** Always false on a returned result: an oversized patch throws PatchTooLargeError instead. */
  truncated: boolean;
  /** The tree the patch leads to (in the private store). */
  tree: string;
}

export interface PatchOptions {
  maxBytes?: number;
  /** The previous round's patch tree and the tree right after its verify: what that verify changed is left out. */
  afterVerify?: { patchTree: string; verifyTree: string };
  /** false: no stat cache (every file hashed again), for the bench's same-run baseline. */
  statCache?: boolean;
  /** 4: the old staging exec plus three `git diff` execs, for the bench's same-run baseline. */
  execs?: 1 | 4;
}

/** Git ran in the sandbox and failed: the workspace's doing while the sandbox still runs, not the host's. */
export class GitStepError extends Error {}

export const DEFAULT_PATCH_MAX_BYTES = 50 * 1024 * 1024;

/** A patch over the bound is never cut (a cut patch does not apply); the stat and file list still come along. */
export class PatchTooLargeError extends Error {
  readonly truncated = true;
  constructor(
    readonly maxBytes: number,
    readonly diffstat: string,
    readonly filesChanged: string[],
  ) {
    super(`the patch is larger than ${maxBytes} bytes (${filesChanged.length} files changed); it was not returned because a truncated patch would not apply`);
  }
}

// Both the baseline and the final tree are hashed from the files as they are on disk into a
// private store at /patchbay (root's tmpfs, mode 0700: the agent can neither read nor plant
// objects there), by root git under a configuration that is ours alone: no system, global or repo
// config, no hooks, no fsmonitor, and an info/attributes that switches off every attribute the
// repo's .gitattributes could use to rewrite content (filters, text/eol conversion, ident,
// working-tree-encoding). So neither a repo-supplied filter nor a planted object can make the
// patch differ from the bytes on disk. The workspace's own .git is the agent's, and untrusted.
const STORE = `${PRIVATE_DIR}/git`;
const INDEX = `${PRIVATE_DIR}/baseline.index`;
const INDEX_TREE = `${PRIVATE_DIR}/baseline.tree`;
/** "<second the baseline's add started> <baseline tree>" while the baseline's index awaits its refresh. */
const REFRESH = `${PRIVATE_DIR}/baseline.refresh`;
const ATTRIBUTES = "* -text !eol -filter -ident !diff !merge !working-tree-encoding\n";
const GIT = `set -euo pipefail
export GIT_DIR=${STORE} GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 HOME=${PRIVATE_DIR} XDG_CONFIG_HOME=${PRIVATE_DIR}
G=(git -c safe.directory='*' -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.autocrlf=false -c core.safecrlf=false \
-c core.symlinks=true -c core.filemode=true -c core.ignorecase=false -c core.precomposeunicode=false -c core.bigFileThreshold=512m \
-c core.trustctime=true -c core.checkStat=default -c core.untrackedCache=false -c core.splitIndex=false -c index.skipHash=false \
-c commit.gpgSign=false -c user.name=patchbay -c user.email=patchbay@localhost)
umask 077
if [ ! -f ${STORE}/HEAD ]; then # (the worker's pack may be in place already: see writeBaseline)
  "\${G[@]}" init -q --bare ${STORE}
  printf '%s' '${ATTRIBUTES}' > ${STORE}/info/attributes
fi
cd /workspace
# smudge STARTED: the entries of $GIT_INDEX_FILE whose file's ctime is in the second before
# STARTED or later lose their stat data (hashed again by every later add). Fails when every file
# is that recent (a small repo loads within a second): no stat data would be left to use.
smudge() {
  local recent=$(( $1 - 1 ))
  [ -n "$(find . -path ./.git -prune -o \\( -type f -o -type l \\) ! -newerct "@$recent" -print -quit)" ] || return 1
  find . -path ./.git -prune -o \\( -type f -o -type l \\) -newerct "@$recent" -print0 | sed -z 's|^\\./||' > ${PRIVATE_DIR}/recent
  entries_of ${PRIVATE_DIR}/recent | "\${G[@]}" update-index -z --index-info
}
# entries_of FILE: the index entries (ls-files -s -z) of the NUL-separated paths in FILE. One pass
# with gawk (a path is everything after an entry's first tab, so any name is whole); without gawk,
# git's pathspecs, whose matching costs entries x paths (seconds at 50,000 files).
entries_of() {
  if command -v gawk > /dev/null; then
    "\${G[@]}" ls-files -s -z | LC_ALL=C gawk 'BEGIN { RS = ORS = "\\0" } FILENAME == ARGV[1] { want[$0]; next } substr($0, index($0, "\\t") + 1) in want' "$1" -
  else
    xargs -0 -r "\${G[@]}" --literal-pathspecs ls-files -s -z -- < "$1"
  fi
}
# refresh TREE: once, two seconds or more after baseline TREE was taken, the entries it left
# without stat data (all of them when the load took under a second) are hashed again, and those
# still as in the baseline get stat data, under the same smudge rule. The index still holds
# exactly the baseline's blobs: a file the agent changed is compared, not taken.
refresh() {
  local since tree now tmp=${PRIVATE_DIR}/refresh.index
  read -r since tree < ${REFRESH} || return 0
  printf -v now '%(%s)T' -1
  [ "$tree" = "$1" ] && [ "$now" -ge $(( since + 2 )) ] || return 0
  rm -f ${REFRESH} "$tmp" "$tmp.lock"
  local -x GIT_WORK_TREE=/workspace GIT_INDEX_FILE=$tmp # this function's own index: the caller's is untouched
  if [ -f ${INDEX} ] && [ -f ${INDEX_TREE} ] && [ "$(< ${INDEX_TREE})" = "$1" ]; then cp ${INDEX} "$tmp"; else "\${G[@]}" read-tree "$1"; fi
  "\${G[@]}" update-index -q --ignore-missing --refresh > /dev/null || true
  if smudge "$now"; then mv "$tmp" ${INDEX}; echo "$1" > ${INDEX_TREE}; else rm -f "$tmp"; fi
}
`;

/** The prelude of every git script here (store, config, `smudge`, `refresh`), for tests of its functions. */
export const GIT_PRELUDE = GIT;

// As the agent (setpriv drops to uid 1000 with no capabilities): the symlinks the archive API
// refused (NUL-separated pairs on stdin), a repo if there is none (for the agent's convenience;
// with fast paths it is made after the baseline, from it: see DEFERRED_SCRIPT), then the names the repo
// tracks, as plain data: git never ignores a tracked file, so those enter the baseline even when
// .gitignore matches them. Then, as root, the baseline tree in the store.
const AGENT_GIT = `A=(git -c safe.directory='*' -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.autocrlf=false -c commit.gpgSign=false -c user.name=patchbay -c user.email=patchbay@localhost)`;
const AGENT_PART = `
while IFS= read -r -d "" n && IFS= read -r -d "" t; do ln -s -- "$t" "$n"; done
${AGENT_GIT}
if [ ! -e .git ] && [ ! -L .git ] && [ "\${PB_SHARE_REPO:-0}" != 1 ]; then
  "\${A[@]}" init -q -b main && "\${A[@]}" add -A && "\${A[@]}" commit -q --no-verify --allow-empty -m "patchbay: baseline"
fi
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
# The agent's part has nothing to do with no symlinks to make, no .git to read and none to make
# here: three processes saved.
if [ "\${PB_LINKS:-1}" = 1 ] || [ -e .git ] || [ -L .git ] || [ "\${PB_SHARE_REPO:-0}" != 1 ]; then
  env -i HOME=/home/agent PATH="$PATH" LANG=C.UTF-8 GIT_CONFIG_NOSYSTEM=1 PB_SHARE_REPO="\${PB_SHARE_REPO:-0}" \
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
if [ "\${PB_STAT_CACHE:-1}" = 1 ]; then
  if [ "\${PB_LOADED_SINCE:-0}" -lt $(( started - 1 )) ]; then
    if [ "\${PB_DEFER_SMUDGE:-0}" = 1 ]; then echo "smudge $started"; elif smudge "$started"; then echo "$tree" > ${INDEX_TREE}; fi
  fi
  echo "$started $tree" > ${REFRESH}
fi
# No repo in the workspace: the caller makes the agent's from this baseline (DEFERRED_SCRIPT).
if [ "\${PB_SHARE_REPO:-0}" = 1 ] && [ ! -e .git ] && [ ! -L .git ]; then echo agent-repo; fi
echo "$tree"`;

// Seeding the index with the baseline keeps files that were tracked though ignored; `add -A` then
// records edits, new (non-ignored) files and deletions exactly as they are on disk.
// With "$2 $3" (the previous patch's tree and the tree right after its verify): paths that verify
// changed and that are still as verify left them go back to the previous patch's version, so a
// verify's byproducts never enter a later round's patch.
// The final tree's index, from the kept baseline index where it is this baseline's (the stat
// cache), else from the baseline tree; then everything on disk added.
const stageIndex = (index: string) => `if [ "\${PB_STAT_CACHE:-1}" = 1 ] && [ -f ${REFRESH} ]; then refresh "$1"; fi
export GIT_WORK_TREE=/workspace GIT_INDEX_FILE=${index}
[ -e "$GIT_INDEX_FILE.lock" ] && rm -f "$GIT_INDEX_FILE.lock" # left by a run killed at its timeout
t=; [ -f ${INDEX_TREE} ] && t=$(< ${INDEX_TREE})
if [ "\${PB_STAT_CACHE:-1}" = 1 ] && [ -f ${INDEX} ] && [ "$t" = "$1" ]; then cp ${INDEX} "$GIT_INDEX_FILE"; else "\${G[@]}" read-tree "$1"; fi
"\${G[@]}" add -A
`;
const STAGE = `${GIT}${stageIndex(`${PRIVATE_DIR}/final.index`)}
if [ $# -ge 3 ]; then
  "\${G[@]}" diff-tree -r -z --no-renames --name-only "$2" "$3" | sort -z > ${PRIVATE_DIR}/by-verify
  "\${G[@]}" diff-index --cached -z --no-renames --name-only "$3" | sort -z > ${PRIVATE_DIR}/since
  comm -z -23 ${PRIVATE_DIR}/by-verify ${PRIVATE_DIR}/since > ${PRIVATE_DIR}/restore
  "\${G[@]}" update-index -z --force-remove --stdin < ${PRIVATE_DIR}/restore
  xargs -0 -r "\${G[@]}" --literal-pathspecs ls-tree -r -z --full-tree "$2" -- < ${PRIVATE_DIR}/restore | "\${G[@]}" update-index -z --index-info
  rm -f ${PRIVATE_DIR}/by-verify ${PRIVATE_DIR}/since ${PRIVATE_DIR}/restore
fi
tree=$("\${G[@]}" write-tree)
printf '%s' '${ATTRIBUTES}' > ${STORE}/info/attributes
`;
const STAGE_SCRIPT = `${STAGE}echo "$tree"`;

// The diff runs in the bare store with no work tree, so only our info/attributes apply.
const DIFF_ENV = [`GIT_DIR=${STORE}`, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1", `HOME=${PRIVATE_DIR}`, `XDG_CONFIG_HOME=${PRIVATE_DIR}`];
const DIFF = ["git", "-c", "safe.directory=*", "diff", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--full-index", "--src-prefix=a/", "--dst-prefix=b/"];
/** DIFF as words of a bash script. */
const DIFF_SH = DIFF.map((a) => `'${a}'`).join(" ");
/** Bound on the file list and on the diffstat of one patch. */
const LIST_MAX = 16 * 1024 * 1024;
const TREE_ID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
const ROOT = { user: "0:0", cwd: PRIVATE_DIR } as const;

/** Runs a script that prints a tree id last; with the lines before it. */
async function treeScript(sb: Sandbox, what: string, script: string, args: string[], stdin: string | Buffer = "", env: string[] = [], put: PutFile[] = []): Promise<{ tree: string; before: string[] }> {
  const r = await sb.exec(["bash", "-c", script, "patchbay", ...args], { stdin, env, timeoutSec: 600, put, ...ROOT });
  const before = r.stdout.toString("utf8").trim().split("\n");
  const tree = before.pop() ?? "";
  if (r.exitCode !== 0 || !TREE_ID.test(tree)) throw new GitStepError(`${what} failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
  return { tree, before };
}

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
export async function writeBaseline(sb: Sandbox, symlinks: { name: string; target: string }[] = [], opts: { keepIndex?: boolean; statCache?: boolean; pack?: BuiltPack } = {}): Promise<string> {
  const b = await takeBaseline(sb, symlinks, opts);
  await b.agentRepo;
  return b.tree;
}

/**
 * writeBaseline, returning as soon as the baseline tree is known: the agent's repo is made after
 * it (~90 ms here), e.g. while the first model request is out. Nothing else may touch the sandbox
 * until `agentRepo` settles.
 */
export async function takeBaseline(sb: Sandbox, symlinks: { name: string; target: string }[] = [], opts: { keepIndex?: boolean; statCache?: boolean; pack?: BuiltPack; loadedSince?: number; deferSmudge?: boolean } = {}): Promise<Baseline> {
  const links = Buffer.from(symlinks.map((l) => `${l.name}\0${l.target}\0`).join(""));
  const share = fastDefaults().shareRepo === false ? [] : ["PB_SHARE_REPO=1"];
  // The worker's pack of the repo's files (see blob-pack.ts) goes into the store before the script
  // runs: git add then finds every blob stored.
  const p = opts.pack && /^[0-9a-f]{40}$/.test(opts.pack.name) ? opts.pack : undefined;
  const put = p ? [{ path: `${STORE}/objects/pack/pack-${p.name}.pack`, data: p.pack }, { path: `${STORE}/objects/pack/pack-${p.name}.idx`, data: p.idx }] : [];
  const linksEnv = [`PB_LINKS=${symlinks.length ? 1 : 0}`, ...(opts.loadedSince !== undefined && Number.isInteger(opts.loadedSince) ? [`PB_LOADED_SINCE=${opts.loadedSince}`] : [])];
  const defer = opts.deferSmudge ? ["PB_DEFER_SMUDGE=1"] : [];
  const { tree, before } = await treeScript(sb, "loadRepo: making the baseline with git", BASELINE_SCRIPT, [AGENT_PART, ...(opts.keepIndex ? ["keep"] : [])], links, [...statCacheEnv(opts.statCache), ...share, ...linksEnv, ...defer], put);
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

/** The tree of /workspace as it is now (e.g. right after a verify), hashed into the private store. */
export function currentTree(sb: Sandbox, baseline: string): Promise<string> {
  return treeScript(sb, "computePatch: hashing the tree", STAGE_SCRIPT, [baseline]).then((r) => r.tree);
}

// One exec for the whole patch: stage the final tree, then the file list, the stat and the binary
// diff, each into the private store (the diff cut at maxBytes + 1, so an oversized patch is known
// without sending it), then a header with their sizes and the three files. The diff runs in the
// bare store with no work tree, so only our info/attributes apply.
const PATCH_SCRIPT = `${STAGE}
unset GIT_WORK_TREE GIT_INDEX_FILE
cd ${PRIVATE_DIR}
D=(${DIFF_SH})
set +o pipefail
part() { local out=$1 max=$2; shift 2; "\${D[@]}" "$@" "$BASE" "$tree" | head -c "$max" > "$out"; local s=\${PIPESTATUS[0]}; [ "$s" = 0 ] || [ "$s" = 141 ]; }
BASE=$1
part ${PRIVATE_DIR}/out.names ${LIST_MAX} --name-only -z
part ${PRIVATE_DIR}/out.stat ${LIST_MAX} --stat=120
part ${PRIVATE_DIR}/out.patch "$((PB_MAX + 1))" --binary
printf '%s %s %s %s\\n' "$tree" $(stat -c %s ${PRIVATE_DIR}/out.names ${PRIVATE_DIR}/out.stat ${PRIVATE_DIR}/out.patch)
cat ${PRIVATE_DIR}/out.names ${PRIVATE_DIR}/out.stat ${PRIVATE_DIR}/out.patch`;

export async function computePatch(sb: Sandbox, baseline: string, opts: PatchOptions = {}): Promise<PatchResult> {
  const v = opts.afterVerify;
  for (const id of [baseline, ...(v ? [v.patchTree, v.verifyTree] : [])]) if (!TREE_ID.test(id)) throw new Error(`computePatch: bad tree id "${id}"`);
  const maxBytes = opts.maxBytes ?? DEFAULT_PATCH_MAX_BYTES;
  const args = [baseline, ...(v ? [v.patchTree, v.verifyTree] : [])];
  opts = { ...fastDefaults(), ...opts };
  if (opts.execs === 4) return computePatchFourExecs(sb, baseline, args, maxBytes, opts.statCache);
  const env = [`PB_MAX=${maxBytes}`, ...statCacheEnv(opts.statCache)];
  const r = await sb.exec(["bash", "-c", PATCH_SCRIPT, "patchbay", ...args], { env, timeoutSec: 600, maxBytes: maxBytes + 2 * LIST_MAX + 4096, ...ROOT });
  const nl = r.stdout.indexOf(10);
  const [final = "", ...sizes] = r.stdout.subarray(0, Math.max(0, nl)).toString("latin1").split(" ");
  const [nNames, nStat, nPatch] = sizes.map(Number);
  if (r.exitCode !== 0 || !TREE_ID.test(final) || sizes.length !== 3 || !(nNames! + nStat! + nPatch! === r.stdout.length - nl - 1)) {
    throw new GitStepError(`computePatch: staging and diffing the final tree failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
  }
  const body = r.stdout.subarray(nl + 1);
  const filesChanged = body.subarray(0, nNames).toString("utf8").split("\0").filter(Boolean);
  const diffstat = body.subarray(nNames, nNames! + nStat!).toString("utf8");
  if (nPatch! > maxBytes) throw new PatchTooLargeError(maxBytes, diffstat, filesChanged);
  return finish(sb, body.subarray(nNames! + nStat!), { baseline, final, diffstat, filesChanged, maxBytes });
}

// A checkpoint needs the patch alone, after every turn that may have changed files: the final
// tree staged as above, its id, then only the binary diff, straight out (the exec's bound cuts
// it); no diff at all when the tree is the last checkpoint's ($2). Few processes: on these
// machines each one costs more than git's hashing of a 1,000-file tree.
const CHECKPOINT_SCRIPT = `${GIT}${stageIndex(`${PRIVATE_DIR}/checkpoint.index`)}tree=$("\${G[@]}" write-tree)
echo "$tree"
[ "$tree" != "\${2:-}" ] || exit 0
unset GIT_WORK_TREE GIT_INDEX_FILE
cd ${PRIVATE_DIR}
printf '%s' '${ATTRIBUTES}' > ${STORE}/info/attributes
exec ${DIFF_SH} --binary "$1" "$tree"`;

/**
 * The patch alone, for a checkpoint: what computePatch's `patch` would be, in fewer processes,
 * with the tree it leads to. With `last` (the previous checkpoint's), an unchanged tree costs no
 * diff. With `afterVerify`, or a patch that is not UTF-8, it is computePatch's.
 */
export async function checkpointDiff(sb: Sandbox, baseline: string, opts: PatchOptions & { last?: { tree: string; patch: string } } = {}): Promise<{ patch: string; tree: string }> {
  if (!TREE_ID.test(baseline)) throw new Error(`checkpointPatch: bad tree id "${baseline}"`);
  const maxBytes = opts.maxBytes ?? DEFAULT_PATCH_MAX_BYTES;
  const full = async () => computePatch(sb, baseline, opts).then((p) => ({ patch: p.patch, tree: p.tree }));
  if (opts.afterVerify || !loadConfig().fastPaths) return full();
  const last = opts.last && TREE_ID.test(opts.last.tree) ? opts.last : undefined;
  const r = await sb.exec(["bash", "-c", CHECKPOINT_SCRIPT, "patchbay", baseline, ...(last ? [last.tree] : [])], { env: statCacheEnv(opts.statCache), timeoutSec: 600, maxBytes: maxBytes + 128, ...ROOT });
  const nl = r.stdout.indexOf(10);
  const tree = r.stdout.subarray(0, Math.max(0, nl)).toString("latin1");
  if ((r.exitCode !== 0 && !r.truncated) || !TREE_ID.test(tree)) throw new GitStepError(`checkpointPatch: staging and diffing failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
  if (last && tree === last.tree) return last;
  const patch = r.stdout.subarray(nl + 1);
  if (r.truncated || patch.length > maxBytes) throw new PatchTooLargeError(maxBytes, "", []);
  return isUtf8(patch) ? { patch: patch.toString("utf8"), tree } : full();
}

/** checkpointDiff's patch alone. */
export const checkpointPatch = async (sb: Sandbox, baseline: string, opts: PatchOptions = {}): Promise<string> => (await checkpointDiff(sb, baseline, opts)).patch;

/** The old way, kept for the bench's same-run baseline: a staging exec, then three `git diff` execs. */
async function computePatchFourExecs(sb: Sandbox, baseline: string, args: string[], maxBytes: number, statCache?: boolean): Promise<PatchResult> {
  const r = await sb.exec(["bash", "-c", STAGE_SCRIPT, "patchbay", ...args], { timeoutSec: 600, env: statCacheEnv(statCache), ...ROOT });
  const final = r.stdout.toString("utf8").trim().split("\n").pop() ?? "";
  if (r.exitCode !== 0 || !TREE_ID.test(final)) throw new GitStepError(`computePatch: staging the final tree failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
  const diff = (a: string[], max?: number) => git(sb, [...DIFF, ...a, baseline, final], max);
  const [patchOut, stat, names] = await Promise.all([diff(["--binary"], maxBytes), diff(["--stat=120"]), diff(["--name-only", "-z"])]);
  const filesChanged = names.stdout.toString("utf8").split("\0").filter(Boolean);
  const diffstat = stat.stdout.toString("utf8");
  if (patchOut.truncated) throw new PatchTooLargeError(maxBytes, diffstat, filesChanged);
  return finish(sb, patchOut.stdout, { baseline, final, diffstat, filesChanged, maxBytes });
}

async function finish(sb: Sandbox, patch: Buffer, p: { baseline: string; final: string; diffstat: string; filesChanged: string[]; maxBytes: number }): Promise<PatchResult> {
  if (!isUtf8(patch)) {
    // Rare (a non-UTF-8 text file changed): those files are diffed again as binary.
    await markBinary(sb, patch, p.filesChanged);
    const again = await git(sb, [...DIFF, "--binary", p.baseline, p.final], p.maxBytes);
    if (again.truncated) throw new PatchTooLargeError(p.maxBytes, p.diffstat, p.filesChanged);
    if (!isUtf8(again.stdout)) throw new Error("computePatch: the patch is not valid UTF-8 even with the non-UTF-8 files diffed as binary");
    patch = again.stdout;
  }
  return { patch: patch.toString("utf8"), diffstat: p.diffstat, filesChanged: p.filesChanged, bytes: patch.length, truncated: false, tree: p.final };
}

const statCacheEnv = (on = fastDefaults().statCache) => (on === false ? ["PB_STAT_CACHE=0"] : []);

/** PATCHBAY_FAST_PATHS=0: no stat cache, the agent's repo hashed on its own, and the 4-exec patch (the bench's baseline). */
const fastDefaults = (): { statCache?: boolean; execs?: 1 | 4; shareRepo?: boolean } => (loadConfig().fastPaths ? {} : { statCache: false, execs: 4, shareRepo: false });

async function git(sb: Sandbox, argv: string[], maxBytes?: number) {
  const r = await sb.exec(argv, { env: DIFF_ENV, timeoutSec: 600, ...ROOT, ...(maxBytes !== undefined ? { maxBytes } : {}) });
  if (r.exitCode !== 0) throw new GitStepError(`computePatch: ${argv.slice(0, 2).join(" ")} failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
  return r;
}

/**
 * A text file that is not UTF-8 (Latin-1, say) would not survive the patch being a JS string:
 * such files are marked to be diffed as binary (`-diff` in the diff repo's info/attributes).
 */
async function markBinary(sb: Sandbox, patch: Buffer, files: string[]): Promise<void> {
  const sections = splitSections(patch);
  // One `diff --git` section per file, in --name-only order (renames are off); otherwise all binary.
  const bad = sections.length === files.length ? files.filter((_, i) => !isUtf8(sections[i]!)) : undefined;
  // After our base line: later lines of the same file win.
  const attributes = ATTRIBUTES + (bad ? bad.map((f) => `${quotePattern(f)} -diff\n`).join("") : "* -diff\n");
  const w = await sb.exec(["bash", "-c", `cat > ${STORE}/info/attributes`], { stdin: attributes, ...ROOT });
  if (w.exitCode !== 0) throw new GitStepError(`computePatch: writing attributes failed: ${w.stderr.trim()}`);
}

/** Splits a diff at each line starting with "diff --git " (hunk lines never do; base85 lines have no spaces). */
function splitSections(patch: Buffer): Buffer[] {
  const starts: number[] = [];
  const marker = Buffer.from("diff --git ");
  for (let i = patch.indexOf(marker); i >= 0; i = patch.indexOf(marker, i + 1)) if (i === 0 || patch[i - 1] === 0x0a) starts.push(i);
  return starts.map((s, k) => patch.subarray(s, starts[k + 1] ?? patch.length));
}

/** An attributes pattern matching exactly one path from the root: glob characters escaped, C-quoted. */
function quotePattern(file: string): string {
  const glob = "/" + file.replace(/[\\*?[\]]/g, (c) => `\\${c}`);
  return `"${glob.replace(/[\\"]/g, (c) => `\\${c}`).replace(/[\x00-\x1f]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`)}"`;
}
