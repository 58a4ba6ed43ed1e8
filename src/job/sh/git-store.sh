# git-store.sh: the prelude of every git step the worker runs in the sandbox as root (after
# vars.sh): strict mode, the private store and git's configuration, and the functions the steps
# share. Loaded by src/job/git-store.ts (GIT = vars.sh + this) through src/core/assets.ts.
#
# Both the baseline and the final tree are hashed from the files as they are on disk into the
# private store ($STORE, on root's tmpfs: the agent can neither read nor plant objects there), by
# root git under a configuration that is ours alone: no system, global or repo config, no hooks,
# no fsmonitor, and an info/attributes that switches off every attribute the repo's
# .gitattributes could use to rewrite content. The workspace's own .git is the agent's, and
# untrusted.
#
#   G        git as every step here runs it (our -c options)
#   D        the diff of two trees in the store, as the patch and checkpoints take it
#   smudge STARTED     the recent entries of $GIT_INDEX_FILE lose their stat data
#   entries_of FILE    the index entries of the NUL-separated paths in FILE
#   refresh TREE       once, the baseline's index gets stat data for what the load left without
#   stage INDEXFILE BASE   INDEXFILE made the index of /workspace as it is now
#   as_agent SCRIPT ARGS...   SCRIPT run by bash as the agent, with a clean environment
#
# Arguments: none of its own (the step after it reads them).
# Environment: none read; exports GIT_DIR, GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL,
#   GIT_ATTR_NOSYSTEM, HOME and XDG_CONFIG_HOME for every git after it.
# Prints: nothing.
# Exit status: the step's; the prelude exits non-zero (set -e) where the store cannot be made.
set -euo pipefail
export GIT_DIR=$STORE GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 HOME=$PRIVATE_DIR XDG_CONFIG_HOME=$PRIVATE_DIR
G=(git -c safe.directory='*' -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.autocrlf=false -c core.safecrlf=false \
-c core.symlinks=true -c core.filemode=true -c core.ignorecase=false -c core.precomposeunicode=false -c core.bigFileThreshold=512m \
-c core.trustctime=true -c core.checkStat=default -c core.untrackedCache=false -c core.splitIndex=false -c index.skipHash=false \
-c commit.gpgSign=false -c user.name=patchbay -c user.email=patchbay@localhost)
# The diff runs in the bare store with no work tree (cd $PRIVATE_DIR, GIT_WORK_TREE unset), so
# only our info/attributes apply.
D=(git -c safe.directory='*' diff --no-color --no-ext-diff --no-textconv --no-renames --full-index --src-prefix=a/ --dst-prefix=b/)
umask 077
if [ ! -f $STORE/HEAD ]; then # (the worker's pack may be in place already: see writeBaseline)
  "${G[@]}" init -q --bare $STORE
  printf '%s' "$ATTRIBUTES" > $STORE/info/attributes
fi
cd /workspace
# smudge STARTED: the entries of $GIT_INDEX_FILE whose file's ctime is in the second before
# STARTED or later lose their stat data (hashed again by every later add). Fails when every file
# is that recent (a small repo loads within a second): no stat data would be left to use.
smudge() {
  local recent=$(( $1 - 1 ))
  [ -n "$(find . -path ./.git -prune -o \( -type f -o -type l \) ! -newerct "@$recent" -print -quit)" ] || return 1
  find . -path ./.git -prune -o \( -type f -o -type l \) -newerct "@$recent" -print0 | sed -z 's|^\./||' > $PRIVATE_DIR/recent
  entries_of $PRIVATE_DIR/recent | "${G[@]}" update-index -z --index-info
}
# entries_of FILE: the index entries (ls-files -s -z) of the NUL-separated paths in FILE. One pass
# with gawk (a path is everything after an entry's first tab, so any name is whole); without gawk,
# git's pathspecs, whose matching costs entries x paths (seconds at 50,000 files).
entries_of() {
  if command -v gawk > /dev/null; then
    "${G[@]}" ls-files -s -z | LC_ALL=C gawk 'BEGIN { RS = ORS = "\0" } FILENAME == ARGV[1] { want[$0]; next } substr($0, index($0, "\t") + 1) in want' "$1" -
  else
    xargs -0 -r "${G[@]}" --literal-pathspecs ls-files -s -z -- < "$1"
  fi
}
# refresh TREE: once, two seconds or more after baseline TREE was taken, the entries it left
# without stat data (all of them when the load took under a second) are hashed again, and those
# still as in the baseline get stat data, under the same smudge rule. The index still holds
# exactly the baseline's blobs: a file the agent changed is compared, not taken.
refresh() {
  local since tree now tmp=$PRIVATE_DIR/refresh.index
  read -r since tree < $REFRESH || return 0
  printf -v now '%(%s)T' -1
  [ "$tree" = "$1" ] && [ "$now" -ge $(( since + 2 )) ] || return 0
  rm -f $REFRESH "$tmp" "$tmp.lock"
  local -x GIT_WORK_TREE=/workspace GIT_INDEX_FILE=$tmp # this function's own index: the caller's is untouched
  if [ -f $INDEX ] && [ -f $INDEX_TREE ] && [ "$(< $INDEX_TREE)" = "$1" ]; then cp $INDEX "$tmp"; else "${G[@]}" read-tree "$1"; fi
  "${G[@]}" update-index -q --ignore-missing --refresh > /dev/null || true
  if smudge "$now"; then mv "$tmp" $INDEX; echo "$1" > $INDEX_TREE; else rm -f "$tmp"; fi
}
# stage INDEXFILE BASE: INDEXFILE (in the private store) made the index of /workspace as it is
# now, for a tree to be written from it: seeded from the baseline's kept index where it is BASE's
# (the stat cache: only what changed is hashed), else from BASE's tree; then everything on disk
# added. Seeding with the baseline keeps files that were tracked though ignored; `add -A` then
# records edits, new (non-ignored) files and deletions exactly as they are on disk. Exports
# GIT_WORK_TREE and GIT_INDEX_FILE.
stage() {
  if [ -f $REFRESH ]; then refresh "$2"; fi
  export GIT_WORK_TREE=/workspace GIT_INDEX_FILE=$1
  [ -e "$GIT_INDEX_FILE.lock" ] && rm -f "$GIT_INDEX_FILE.lock" # left by a run killed at its timeout
  local t=; [ -f $INDEX_TREE ] && t=$(< $INDEX_TREE)
  if [ -f $INDEX ] && [ "$t" = "$2" ]; then cp $INDEX "$GIT_INDEX_FILE"; else "${G[@]}" read-tree "$2"; fi
  "${G[@]}" add -A
}
# as_agent SCRIPT [NAME ARGS...]: SCRIPT run by a bash of the agent's (uid AGENT_UID, no
# capability, nothing of root's environment: root's is the trusted one of src/sandbox/py/trusted.py
# anyway), in the current directory, with this stdin and stdout.
as_agent() { env -i HOME=/home/agent PATH="$PATH" LANG=C.UTF-8 GIT_CONFIG_NOSYSTEM=1 "${AS_AGENT[@]}" bash --noprofile --norc -c "$@"; }
