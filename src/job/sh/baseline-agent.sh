# baseline-agent.sh: the baseline's part as the agent (after agent-git.sh; run by baseline.sh
# through as_agent, in /workspace): the symlinks the archive API refused, made as the agent's uid,
# then the names the repo tracks, as plain data: git never ignores a tracked file, so those enter
# the baseline even when .gitignore matches them. (Where there is no repo, the agent's is made
# after the baseline, from it: see deferred.sh.)
#
# Arguments: none.
# Environment: none read (a clean one: see as_agent).
# Stdin: NUL-separated pairs, each a symlink's name then its target.
# Prints: the tracked names, NUL-separated (none without a repo, or one git cannot read).
# Exit status: 0 (a symlink that cannot be made is left out: ln says why on stderr).
while IFS= read -r -d "" n && IFS= read -r -d "" t; do ln -s -- "$t" "$n"; done
"${A[@]}" ls-files -z 2>/dev/null || true
