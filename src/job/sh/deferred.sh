# deferred.sh: what follows a baseline, in one exec, while the first model request is out (after
# vars.sh and git-store.sh, as root): the smudge where baseline.sh deferred it, then the agent's
# own repo where /workspace had none, made from the baseline just taken (agent-repo.sh) instead of
# hashing every file a second time (git's object writes are what a load costs here): the store's
# objects copied as they are, and the baseline's index with its stat data. (A pack through
# index-pack measured slower than a second git add.) Run by src/job/baseline.ts (takeBaseline).
#
# Arguments: $1 the baseline tree; $2 the agent's repo script (agent-git.sh + agent-repo.sh).
# Environment: PB_SMUDGE the second baseline.sh's smudge is taken as of (unset: no smudge);
#   PB_SHARE "1" to make the agent's repo (where /workspace still has none).
# Prints: nothing on stdout; on stderr, a line where the agent's repo could not be made.
# Exit status: 0 (the repo is a convenience: a job goes on without it); non-zero where git failed.
if [ -n "${PB_SMUDGE:-}" ] && [ ! -f $INDEX_TREE ] && [ -f $INDEX ]; then
  if (export GIT_WORK_TREE=/workspace GIT_INDEX_FILE=$INDEX; smudge "$PB_SMUDGE"); then echo "$1" > $INDEX_TREE; fi
fi
[ "${PB_SHARE:-0}" = 1 ] && [ ! -e .git ] && [ ! -L .git ] || exit 0
commit=$("${G[@]}" commit-tree -m "patchbay: baseline" "$1")
t=; [ -f $INDEX_TREE ] && t=$(< $INDEX_TREE)
# The index comes on fd 3 (root's file, opened by root); without one, the agent's git reads the tree.
# A convenience: if it cannot be made, the job goes on without it, as with a repo git cannot read.
if [ -f $INDEX ] && [ "$t" = "$1" ]; then idx=$INDEX how=index; else idx=/dev/null how=tree; fi
tar -C $STORE -c objects | as_agent "$2" _ "$commit" "$how" 3< "$idx" >&2 || echo "patchbay: the agent's git repo could not be made" >&2
