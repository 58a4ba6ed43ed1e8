# hide-future-history.sh: the first setup command of an eval job (src/eval/task.ts), run by the
# setup shell as the agent in /workspace: the repo's history past base_commit taken out of the
# agent's view. A set's repo is usually the project's own, whose later commits are the fix and the
# very tests that grade it: every ref not in HEAD's history is deleted, the reflogs expired and the
# objects no ref reaches pruned; the base's own history (its tags included) stays. In a subshell,
# so the instance's own setup runs on in the shell as it would alone.
#
# Arguments: none.
# Environment: none read.
# Prints: nothing but git's errors.
# Exit status: 0, or 1 when a ref could not be deleted or git gc failed.
( cd /workspace && git rev-parse --git-dir >/dev/null 2>&1 || exit 0
  git for-each-ref --format="%(refname)" | while read -r ref; do
    git merge-base --is-ancestor "$ref" HEAD 2>/dev/null || git update-ref --no-deref -d "$ref" || exit 1
  done || exit 1
  rm -f .git/ORIG_HEAD .git/FETCH_HEAD
  git reflog expire --expire=now --all && git gc --prune=now --quiet )
