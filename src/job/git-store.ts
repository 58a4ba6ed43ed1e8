// The private git store every git step here works in (see the comment on STORE), its shell
// prelude, and the runner of a script that prints a tree id: shared by the baseline
// (baseline.ts) and the patch and checkpoints (patch.ts).
import { PRIVATE_DIR } from "../runtime/types.js";
import type { PutFile, Sandbox } from "../sandbox/sandbox.js";

/** Git ran in the sandbox and failed: the workspace's doing while the sandbox still runs, not the host's. */
export class GitStepError extends Error {}

// Both the baseline and the final tree are hashed from the files as they are on disk into a
// private store at /patchbay (root's tmpfs, mode 0700: the agent can neither read nor plant
// objects there), by root git under a configuration that is ours alone: no system, global or repo
// config, no hooks, no fsmonitor, and an info/attributes that switches off every attribute the
// repo's .gitattributes could use to rewrite content (filters, text/eol conversion, ident,
// working-tree-encoding). So neither a repo-supplied filter nor a planted object can make the
// patch differ from the bytes on disk. The workspace's own .git is the agent's, and untrusted.
export const STORE = `${PRIVATE_DIR}/git`;
export const INDEX = `${PRIVATE_DIR}/baseline.index`;
export const INDEX_TREE = `${PRIVATE_DIR}/baseline.tree`;
/** "<second the baseline's add started> <baseline tree>" while the baseline's index awaits its refresh. */
export const REFRESH = `${PRIVATE_DIR}/baseline.refresh`;
export const ATTRIBUTES = "* -text !eol -filter -ident !diff !merge !working-tree-encoding\n";
/** The prelude of every git script here: the store, our config, `smudge`, `refresh`. */
export const GIT = `set -euo pipefail
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

export const TREE_ID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
export const ROOT = { user: "0:0", cwd: PRIVATE_DIR } as const;

/** Runs a script that prints a tree id last; with the lines before it. */
export async function treeScript(sb: Sandbox, what: string, script: string, args: string[], stdin: string | Buffer = "", env: string[] = [], put: PutFile[] = []): Promise<{ tree: string; before: string[] }> {
  const r = await sb.exec(["bash", "-c", script, "patchbay", ...args], { stdin, env, timeoutSec: 600, put, ...ROOT });
  const before = r.stdout.toString("utf8").trim().split("\n");
  const tree = before.pop() ?? "";
  if (r.exitCode !== 0 || !TREE_ID.test(tree)) throw new GitStepError(`${what} failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
  return { tree, before };
}
