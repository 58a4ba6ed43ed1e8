# checkpoint.sh: a checkpoint's patch (after vars.sh and git-store.sh, as root), after every turn
# that may have changed files: the tree of /workspace staged (stage, in git-store.sh), its id,
# then only the binary diff from the baseline, straight out (the exec's bound cuts it); no diff at
# all when the tree is the last checkpoint's. Few processes: on these machines each one costs more
# than git's hashing of a 1,000-file tree. Run by src/job/patch.ts (checkpointDiff).
#
# Arguments: $1 the baseline tree; $2 the last checkpoint's tree (optional).
# Environment: none read.
# Prints: the tree id and a newline, then (unless the tree is $2) the binary patch.
# Exit status: 0; non-zero where git failed.
stage $PRIVATE_DIR/checkpoint.index "$1"
tree=$("${G[@]}" write-tree)
echo "$tree"
[ "$tree" != "${2:-}" ] || exit 0
unset GIT_WORK_TREE GIT_INDEX_FILE
cd $PRIVATE_DIR
printf '%s' "$ATTRIBUTES" > $STORE/info/attributes
exec "${D[@]}" --binary "$1" "$tree"
