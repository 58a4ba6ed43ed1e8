# capture-state.sh: run in the setup shell once setup is over (src/sandbox/shell-state.ts,
# CAPTURE_STATE; sent by src/sandbox/shell.ts, captureState, as a command of that shell): prints its
# working directory and exported variables. Builtins only. The shell is the repo's by then: what it
# prints is only ever parsed, strictly and bounded, never run (parseShellState).
#
# Arguments: none.
# Environment: every exported variable of the shell is read.
# Prints: "PBSTATE\0<$PWD>\0", then "<name>\0<value>\0" for each exported variable that is set,
#   then "PBSTATEEND\0".
# Exit status: 0.
builtin printf 'PBSTATE\0%s\0' "$PWD"
while IFS= builtin read -r __pb_n; do
  [ -n "${!__pb_n+x}" ] && builtin printf '%s\0%s\0' "$__pb_n" "${!__pb_n}"
done < <(builtin compgen -e)
builtin printf 'PBSTATEEND\0'
