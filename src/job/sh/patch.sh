# patch.sh: the final patch in one exec (after vars.sh and git-store.sh, as root): the tree of
# /workspace staged (stage, in git-store.sh), then the file list, the stat and the binary diff
# from the baseline, each into the private store (the diff cut at PB_MAX + 1 bytes, so an
# oversized patch is known without sending it), then a header with their sizes and the three
# files. Run by src/job/patch.ts (computePatch).
#
# Arguments: $1 the baseline tree.
# Environment: PB_MAX the bound on the patch, in bytes.
# Prints: "<tree> <names bytes> <stat bytes> <patch bytes>\n", then the NUL-separated names of
#   the files changed (at most LIST_MAX bytes), the diffstat (as much), the binary patch (at most
#   PB_MAX + 1 bytes).
# Exit status: 0; non-zero where git failed.
stage $PRIVATE_DIR/final.index "$1"
tree=$("${G[@]}" write-tree)
printf '%s' "$ATTRIBUTES" > $STORE/info/attributes
unset GIT_WORK_TREE GIT_INDEX_FILE
cd $PRIVATE_DIR
set +o pipefail
part() { local out=$1 max=$2; shift 2; "${D[@]}" "$@" "$BASE" "$tree" | head -c "$max" > "$out"; local s=${PIPESTATUS[0]}; [ "$s" = 0 ] || [ "$s" = 141 ]; }
BASE=$1
part $PRIVATE_DIR/out.names $LIST_MAX --name-only -z
part $PRIVATE_DIR/out.stat $LIST_MAX --stat=120
part $PRIVATE_DIR/out.patch "$((PB_MAX + 1))" --binary
# (find, not stat: coreutils' stat calls statx with AT_NO_AUTOMOUNT, which gVisor 20221219 refuses)
printf '%s %s %s %s\n' "$tree" $(find $PRIVATE_DIR/out.names $PRIVATE_DIR/out.stat $PRIVATE_DIR/out.patch -printf '%s ')
cat $PRIVATE_DIR/out.names $PRIVATE_DIR/out.stat $PRIVATE_DIR/out.patch
