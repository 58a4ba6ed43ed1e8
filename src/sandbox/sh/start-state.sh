# start-state.sh: the end of a fresh agent shell's init where it starts from a captured state
# (src/sandbox/shell-state.ts, startScript; written to the shell's stdin by src/sandbox/shell.ts
# after shell-init.sh): the exported variables the state has not unset (the image's that setup
# unset), then into the state's directory. The variables themselves are set just before this, by
# lines of plain assignments the worker quoted; nothing of the state is run.
#
# Arguments: none.
# Environment: __pb_keep, an array of the names to leave (the state's, and those never carried);
#   __pb_prefix, an array of prefixes never carried; __pb_cwd, the state's directory.
# Prints: nothing.
# Exit status: none (the shell goes on to its ready line).
declare -A __pb_k=()
for __pb_n in "${__pb_keep[@]}"; do __pb_k[$__pb_n]=1; done
while IFS= builtin read -r __pb_n; do
  [ -n "${__pb_k[$__pb_n]-}" ] && continue
  for __pb_p in "${__pb_prefix[@]}"; do [[ $__pb_n == "$__pb_p"* ]] && continue 2; done
  builtin unset -v "$__pb_n"
done < <(builtin compgen -e)
builtin cd -P -- "$__pb_cwd" 2>/dev/null || builtin cd /workspace
builtin unset -v __pb_k __pb_n __pb_p __pb_keep __pb_prefix __pb_cwd
