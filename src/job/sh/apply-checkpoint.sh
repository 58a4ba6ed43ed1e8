# apply-checkpoint.sh: a checkpoint's patch applied to a fresh workspace at the same baseline (after
# vars.sh; run by src/job/checkpoint.ts as the agent, with a clean environment): git apply in a git
# dir of ours (fresh, in a directory only this run knows), under no system, global or repo config
# and with every content-rewriting attribute switched off: the workspace's own .git and
# .gitattributes play no part. git apply checks every hunk before it writes anything, and refuses
# paths with ".." or beyond a symlink.
#
# Arguments: none.
# Environment: PATH and LANG only (env -i).
# Stdin: the patch (git diff --binary from the baseline).
# Prints: nothing on stdout; git apply's complaints on stderr.
# Exit status: git apply's (0: applied whole; otherwise nothing was written).
set -euo pipefail
d=$(mktemp -d /tmp/.patchbay-apply.XXXXXXXX)
trap 'rm -rf "$d"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 HOME="$d" XDG_CONFIG_HOME="$d"
git init -q --bare "$d/g"
printf '%s' "$ATTRIBUTES" > "$d/g/info/attributes"
cd /workspace
GIT_DIR="$d/g" GIT_WORK_TREE=/workspace git -c core.bare=false -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.autocrlf=false -c core.symlinks=true -c core.filemode=true \
  apply --binary --whitespace=nowarn -
