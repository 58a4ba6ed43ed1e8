# put-files.sh: the files Sandbox.exec writes before a command (`put`: as root, 0600 under 0700
# parents, only under the private dir), where the file agent cannot run them: split off the exec's
# stdin with GNU head, whose `head -c` reads no more than asked, then the command with the rest of
# stdin. Run by src/sandbox/sandbox.ts (execNow), in the `docker exec` of the command.
#
# Arguments: $1 N, the number of files; then N pairs SIZE PATH (the worker's checked paths);
#   then the command and its arguments.
# Environment: none read.
# Stdin: each file's SIZE bytes in turn, then the command's stdin.
# Prints: what the command prints.
# Exit status: the command's; non-zero where a file could not be written.
set -e; umask 077
n=$1; shift
for (( i = 0; i < n; i++ )); do
  mkdir -p -- "$(dirname -- "$2")" && head -c "$1" > "$2"
  shift 2
done
exec "$@"
