// The shell's in-band protocol: the init script every agent shell runs first, and the markers that
// frame a command's output. A command runs inside the shell process, so it can read (and print)
// any marker: the markers only frame the agent's own tool output, nothing patchbay decides.

// stderr joins stdout for the whole session so output is interleaved as a terminal shows it.
// The EXIT trap says the shell is ending (Docker closes an exec's stream only ~2 s after its
// process exits, and later while a background process holds it): it carries no nonce, and the
// worker believes it only once the supervisor sees the shell's pid dead.
export const SHELL_INIT = String.raw`
exec 2>&1
exec {__pb_fd}>&1
unset HISTFILE
__pb_mem() { local k v f; __pb_o=0; for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do if [ -r "$f" ]; then while read -r k v; do [ "$k" = oom_kill ] && __pb_o=$v; done < "$f"; return 0; fi; done; }
__pb_mem; __pb_oom=$__pb_o
__pb_pre() { trap 'return 124' USR1; IFS= read -r -d '' __pb_cmd; builtin printf 'PBSTART%s:\n' "$1"; }
__pb_exec() { : __pb; eval "$__pb_cmd"; }
trap 'return 124' USR1
__pb_post() { if [ "$2" -ge 128 ]; then __pb_mem; if [ "$__pb_o" -gt "$__pb_oom" ]; then __pb_oom=$__pb_o; builtin printf '\n[patchbay: the command was killed by the kernel: the sandbox ran out of memory]'; fi; fi; builtin printf '\nPBEND%s:%d\n' "$1" "$2"; }
trap 'builtin printf "\nPBEXIT:%d\n" $?' EXIT
`;

export const EXIT_MARKER = Buffer.from("\nPBEXIT:");

/**
 * The first marker in `buf` at or after `from`: complete with its exit status (1-3 digits and a
 * newline), or `partial` when it may yet complete with the next chunk. Anything else after the
 * marker text means it is not one: it stays output, and no more than a few bytes are ever held.
 */
export function findMarker(buf: Buffer, marker: Buffer, from = 0): { at: number; code?: number; end?: number } | undefined {
  for (let i = buf.indexOf(marker, from); i >= 0; i = buf.indexOf(marker, i + 1)) {
    const s = i + marker.length;
    const after = buf.subarray(s, s + 4).toString("latin1");
    const m = /^(\d{1,3})\n/.exec(after);
    if (m) return { at: i, code: Number(m[1]), end: s + m[0].length };
    if (/^\d{0,3}$/.test(after) && buf.length - s < 4) return { at: i };
  }
  return undefined;
}
