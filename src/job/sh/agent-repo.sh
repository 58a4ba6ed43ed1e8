# agent-repo.sh: the agent's own git repo where /workspace had none (after agent-git.sh; run by
# deferred.sh as the agent, in /workspace): one commit, the baseline, made from the private
# store's objects instead of hashing every file a second time. Everything under /workspace/.git
# is written by the agent's uid; root only reads its own store and pipes it.
#
# Arguments: $1 the baseline commit (in the objects on stdin); $2 "index" where the baseline's
#   index comes on fd 3 (root's file, opened by root: the agent's git status is then fast),
#   "tree" where the agent's git reads the tree instead.
# Environment: none read (a clean one: see as_agent in git-store.sh).
# Stdin: a tar of the store's objects/ directory. Fd 3: the baseline's index, with "index".
# Prints: nothing of its own (git's errors on stderr).
# Exit status: 0 once the repo is made; non-zero otherwise (the job goes on without it).
"${A[@]}" init -q -b main && tar -C .git -x && "${A[@]}" update-ref refs/heads/main "$1" &&
if [ "$2" = index ]; then cat <&3 > .git/index; else "${A[@]}" read-tree HEAD; fi
