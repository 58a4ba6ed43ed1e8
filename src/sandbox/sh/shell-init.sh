# shell-init.sh: the first thing every agent shell reads (src/sandbox/shell-protocol.ts: written to
# the shell's stdin by src/sandbox/shell.ts, before the line that says it is ready). It frames each
# command the worker sends: __pb_pre waits, when told `gate`, for the supervisor's token on fd 9
# (the box's gate, src/sandbox/py/helper.py: the command's begin is done; a read that fails is no
# token, so a gate the agent broke in its own shell holds its commands until their timeout, and no
# TMOUT cuts these reads short), reads the command (NUL-terminated, on stdin) and prints
# PBSTART<nonce>:, __pb_exec runs it in the shell itself (cwd, variables and functions persist),
# __pb_post prints PBEND<nonce>:<status> (and a line where the kernel's OOM killer took it). A
# command runs inside the shell process, so it can read (and print) any marker: the markers only
# frame the agent's own tool output, nothing patchbay decides.
#
# stderr joins stdout for the whole session so output is interleaved as a terminal shows it.
# The EXIT trap says the shell is ending (Docker closes an exec's stream only ~2 s after its
# process exits, and later while a background process holds it): it carries no nonce, and the
# worker believes it only once the supervisor sees the shell's pid dead.
#
# Arguments: none (read by a `bash --noprofile --norc` from its stdin).
# Environment: none read; sets __pb_* variables and functions in the shell, and unsets HISTFILE.
# Prints: nothing now; later, the markers above, and "\nPBEXIT:<status>\n" when the shell exits.
# Exit status: none (the shell goes on reading commands).

exec 2>&1
exec {__pb_fd}>&1
unset HISTFILE
__pb_mem() { local k v f; __pb_o=0; for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do if [ -r "$f" ]; then while read -r k v; do [ "$k" = oom_kill ] && __pb_o=$v; done < "$f"; return 0; fi; done; }
__pb_mem; __pb_oom=$__pb_o
__pb_pre() { trap 'return 124' USR1; local __pb_t TMOUT=; if [ "$2" = gate ]; then until IFS= read -r -u 9 __pb_t && [ "$__pb_t" = "$1" ]; do :; done; fi; IFS= read -r -d '' __pb_cmd; builtin printf 'PBSTART%s:\n' "$1"; }
__pb_exec() { : __pb; eval "$__pb_cmd"; }
trap 'return 124' USR1
__pb_post() { if [ "$2" -ge 128 ]; then __pb_mem; if [ "$__pb_o" -gt "$__pb_oom" ]; then __pb_oom=$__pb_o; builtin printf '\n[patchbay: the command was killed by the kernel: the sandbox ran out of memory]'; fi; fi; builtin printf '\nPBEND%s:%d\n' "$1" "$2"; }
trap 'builtin printf "\nPBEXIT:%d\n" $?' EXIT
