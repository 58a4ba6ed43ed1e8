# tar-extract.sh: a repo's tar stream into a directory (src/sandbox/stream.ts, in an attached exec
# as the agent's uid): says PBTAR once tar can run, so the worker sends nothing to an image
# without tar (its archive then goes through the archive API, untouched), then tar reads stdin.
# -p keeps modes exactly, as the archive API does; directories' modes are set at the end so a
# read-only directory does not stop its own files; names are the worker's own (checked) ones.
# The tar command is TAR_EXTRACT in stream.ts (the file agent runs the same): test/unit/assets.test.ts
# holds the two to the same words.
#
# Arguments: $1 the directory to extract into (it exists).
# Environment: none read.
# Stdin: the tar stream.
# Prints: "PBTAR\n" once tar can run; tar's errors on stderr.
# Exit status: tar's; 127 where the image has no tar (nothing read).
command -v tar >/dev/null || exit 127; printf 'PBTAR\n'; exec tar -x -p -f - --delay-directory-restore --no-same-owner -C "$1"
