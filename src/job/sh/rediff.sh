# rediff.sh: the patch again, for a patch that was not UTF-8 (a text file in Latin-1, say, which
# would not survive the patch being a JS string): the store's info/attributes replaced (the caller
# marks such files `-diff`, so git diffs them as binary), then the binary diff of the two trees
# (after vars.sh and git-store.sh, as root). Run by src/job/patch.ts (computePatch).
#
# Arguments: $1 the baseline tree; $2 the final tree.
# Environment: none read.
# Stdin: the store's new info/attributes.
# Prints: the binary patch.
# Exit status: git diff's.
cat > $STORE/info/attributes
cd $PRIVATE_DIR
exec "${D[@]}" --binary "$1" "$2"
