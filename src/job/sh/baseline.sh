# baseline.sh: the baseline (after vars.sh and git-store.sh, as root): the tree of /workspace as
# it is now, hashed into the private store, its index kept with its stat data (the stat cache).
# Run by src/job/baseline.ts (takeBaseline), once the repo is in and again after setup.
#
# The baseline's index is kept (root's, in the private store) with its stat data, so that the
# patch re-hashes only the files whose stat data changed. The agent (uid 1000) can give a file
# back its old mtime and size, but not its ctime, and git compares ctime (trustctime, checkStat
# default). Debian's git compares seconds only, though: an entry whose ctime falls in the second
# the baseline ends (or the one before) could be rewritten by the agent within that same second
# and look unchanged, so such entries lose their stat data ("smudged": index-info records none)
# and are always hashed again.
#
# Arguments: $1 the agent's part (agent-git.sh + baseline-agent.sh), run as the agent;
#   $2 "keep" to start from the last baseline's index (after setup: only what setup changed is hashed).
# Environment: PB_LINKS "0" where there are no symlinks to make (default 1);
#   PB_LOADED_SINCE the second the load began writing a fresh workspace (default 0);
#   PB_DEFER_SMUDGE "1" to leave the smudge to deferred.sh (prints "smudge <second>");
# Stdin: the symlinks to make, for the agent's part (see baseline-agent.sh).
# Prints: "smudge <second>" where the smudge is deferred,
#   "agent-repo" where /workspace has no repo (the caller makes the agent's from this baseline:
#   deferred.sh); then the tree id, last.
# Exit status: 0; non-zero where git failed (the tree id is then missing).
#
# A second baseline (after setup) starts from the first one's index, where its stat data is
# trusted (baseline.tree names it): only what setup changed is hashed. An index without
# baseline.tree is never used. What an earlier run left goes in one process (each costs ~8 ms),
# and none where nothing is left (a first baseline).
keep=; [ "${2:-}" = keep ] && [ -f $INDEX ] && [ -f $INDEX_TREE ] && keep=1
old=($INDEX_TREE $REFRESH $INDEX.lock $PRIVATE_DIR/tracked $PRIVATE_DIR/have); [ -n "$keep" ] || old+=($INDEX)
for f in "${old[@]}"; do if [ -e "$f" ] || [ -L "$f" ]; then rm -f "${old[@]}"; break; fi; done
# The agent's part has nothing to do with no symlinks to make and no .git to read: three
# processes saved.
if [ "${PB_LINKS:-1}" = 1 ] || [ -e .git ] || [ -L .git ]; then
  as_agent "$1" > $PRIVATE_DIR/tracked
fi
export GIT_WORK_TREE=/workspace GIT_INDEX_FILE=$INDEX
# The smudge window starts before the add: a file written while git hashed it is smudged too.
printf -v started '%(%s)T' -1
"${G[@]}" add -A
# Tracked names not in the index yet that are files or symlinks now, without ".." or ".git" parts
# (git would refuse the lot): git never ignores a tracked file. (None without a repo: no processes.)
if [ -s $PRIVATE_DIR/tracked ]; then
  "${G[@]}" ls-files -z | sort -z > $PRIVATE_DIR/have
  sort -z $PRIVATE_DIR/tracked | comm -z -13 $PRIVATE_DIR/have - | while IFS= read -r -d "" n; do
    case "/$n/" in */../*|*/./*|*/.git/*|//*) continue;; esac
    if [ -f "$n" ] || [ -L "$n" ]; then printf '%s\0' "$n"; fi
  done | "${G[@]}" update-index --add -z --stdin || true
fi
tree=$("${G[@]}" write-tree)
# Without a smudge that surely worked, no stat cache (no baseline.tree): the patch then hashes
# every file. What was hashed within the window has no stat data yet: the first patch or
# checkpoint two seconds on gives it some, once (refresh). The store needs no ref: nothing in it
# is ever pruned, and it goes with the sandbox.
# PB_LOADED_SINCE: the second the load began writing a fresh workspace. Where that is within the
# window, every file is in it and smudge would fail: its scan is skipped. (A clock off by a second
# can only skip a smudge that would have worked: no stat cache until the refresh, as on failure.)
# PB_DEFER_SMUDGE: the smudge is left to the script run after the baseline (deferred.sh), off
# the path to the first model request; until it ran, no baseline.tree: the index is not trusted.
if [ "${PB_LOADED_SINCE:-0}" -lt $(( started - 1 )) ]; then
  if [ "${PB_DEFER_SMUDGE:-0}" = 1 ]; then echo "smudge $started"; elif smudge "$started"; then echo "$tree" > $INDEX_TREE; fi
fi
echo "$started $tree" > $REFRESH
# No repo in the workspace: the caller makes the agent's from this baseline (deferred.sh).
if [ ! -e .git ] && [ ! -L .git ]; then echo agent-repo; fi
echo "$tree"
