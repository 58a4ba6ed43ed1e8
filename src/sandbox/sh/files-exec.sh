# files-exec.sh: one file operation as the agent, the file operations' fallback where the file
# agent cannot run (an image without python3, or an agent that cannot be restarted): run by
# src/sandbox/files-exec.ts in a `docker exec` of its own as uid 1000, with bash and coreutils
# only (what every sandbox image has). The kernel checks every open as the agent's uid. A read
# opens the file once and takes its type, size, mode and owner from that open file
# (/proc/self/fd/3), so no swap in between can pair one file's bytes with another's check.
#
# stat -L (coreutils) first; gVisor 20221219 refuses its statx (EINVAL), find -printf then.
# meta prints "TYPE|SIZE|MODE|MTIME" for the path followed to its end (TYPE: file, directory, other).
#
# Arguments: $1 the operation, $2 the path, then the operation's own:
#   stat PATH            prints "TYPE|SIZE|MODE|MTIME|ISLINK\n" and the real path (exact bytes)
#   read PATH MAX        prints "TYPE|SIZE|MODE|MTIME|UID|GID|LEN\n", the real path of the open
#                        file and "\n", then the file's first MAX + 1 bytes
#   write PATH N MODE    writes stdin's first N bytes over PATH (made exclusively if new; its
#                        mode and owner kept if not; MODE, octal, set where given)
#   mkdirp PATH          makes PATH and its parents
#   remove PATH          removes a file or symlink (never a directory)
# Environment: LC_ALL=C (the error texts are matched in English); BASH_ENV and ENV empty.
# Prints: as above; errors on stderr.
# Exit status: 0 on success; else the errno the caller reports: 3 (the command's own: its stderr
#   says which), 5 EIO (a short write), 20 ENOTDIR, 21 EISDIR, 22 EINVAL (not a regular file),
#   27 EFBIG (over MAX: the size is printed), 28 ENOSPC, 99 an unknown operation.

meta() {
  local o t
  o=$(stat -L -c '%F|%s|%a|%Y' -- "$1" 2>&1) || {
    [[ $o == *"Invalid argument"* ]] && o=$(find -L "$1" -maxdepth 0 -printf '%y|%s|%m|%T@' 2>&1) || { printf '%s\n' "$o" >&2; return 1; }
  }
  case ${o%%|*} in "regular file"|"regular empty file"|f) t=file;; directory|d) t=directory;; *) t=other;; esac
  printf '%s|%s' "$t" "${o#*|}"
}
# A command's path output exactly (a name may end in a newline).
exact() { local r; r=$("$@" && echo .) || return 1; printf '%s' "${r%$'\n.'}"; }
op=$1 p=$2
case $op in
stat)
  m=$(meta "$p") || exit 3
  r=$(exact realpath -e -- "$p") || exit 3
  [[ -L $p ]] && l=1 || l=0
  printf '%s|%s\n%s' "$m" "$l" "$r" ;;
read)
  [[ -d $p ]] && exit 21
  [[ -p $p ]] && exit 22  # a FIFO would hold the open (one swapped in later only until the timeout)
  exec 3<"$p" || exit 3
  m=$(meta /proc/self/fd/3) || exit 3
  case $m in file\|*) ;; directory\|*) exit 21;; *) exit 22;; esac
  s=${m#*|}; s=${s%%|*}
  (( s > $3 )) && { printf '%s\n' "$s"; exit 27; }
  o=$(stat -L -c '%u|%g' /proc/self/fd/3 2>/dev/null || find -L /proc/self/fd/3 -maxdepth 0 -printf '%U|%G') || exit 3
  r=$(exact readlink /proc/self/fd/3) || exit 3
  printf '%s|%s|%s\n%s\n' "$m" "$o" "${#r}" "$r"
  exec head -c $(( $3 + 1 )) <&3 ;;
write)
  n=$3 mode=$4
  # A refusal still reads the bytes sent: an exec that exits with its stdin unread has its attach
  # reset under Podman, and what it printed (the reason) is lost to the engine's error.
  fail() { head -c "$n" >/dev/null; exit "$1"; }
  [[ -d $p ]] && fail 21
  umask 022
  # Opened without O_CREAT's truncation when it exists, so its mode and owner stay; a dangling
  # symlink is written through; a new file is made exclusively.
  if [[ -e $p || -L $p ]]; then
    [[ ! -e $p || -f $p ]] || fail 22
    exec 3<>"$p" || fail 3
  else
    set -C; exec 3>"$p" || fail 3; set +C
  fi
  [[ -f /proc/self/fd/3 ]] || fail 22
  # Reserve the space first: on a full disk the write fails before the old content is gone.
  if command -v fallocate >/dev/null; then
    o=$(fallocate -l $(( n > 0 ? n : 1 )) /proc/self/fd/3 2>&1) || [[ $o != *"No space"* ]] || fail 28
  fi
  head -c "$n" >&3 || exit 3
  pos=; while read -r k v; do [[ $k == pos: ]] && pos=$v; done < /proc/$BASHPID/fdinfo/3
  [[ -n $pos && $pos != "$n" ]] && { echo "short write: $pos of $n bytes" >&2; exit 5; }
  truncate -s "$n" /proc/self/fd/3 || exit 3
  [[ -z $mode ]] || chmod "$mode" /proc/self/fd/3 || exit 3 ;;
mkdirp)
  [[ -e $p && ! -d $p ]] && exit 20
  umask 022; mkdir -p -- "$p" || exit 3 ;;
remove)
  [[ -d $p && ! -L $p ]] && exit 21
  rm -- "$p" || exit 3 ;;
*) exit 99 ;;
esac
