# agent-git.sh: the first part of the scripts the worker runs as the agent in /workspace
# (baseline-agent.sh, agent-repo.sh): git as they run it, on the agent's own repo, with no hooks,
# fsmonitor or line-ending conversion of the repo's, and an identity for its one commit.
#
# Arguments: none of its own.
# Environment: none read.
# Prints: nothing.
# Exit status: 0 (an assignment).
A=(git -c safe.directory='*' -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.autocrlf=false -c commit.gpgSign=false -c user.name=patchbay -c user.email=patchbay@localhost)
