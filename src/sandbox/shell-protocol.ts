// The shell's in-band protocol: the init script every agent shell runs first, and the markers that
// frame a command's output. A command runs inside the shell process, so it can read (and print)
// any marker: the markers only frame the agent's own tool output, nothing patchbay decides.
import { asset } from "../core/assets.js";

// The init script (src/sandbox/sh/shell-init.sh: its header says what each part does): stderr
// joined to stdout, the commands' framing (PBSTART, PBEND) and the shell's EXIT trap (PBEXIT).
export const SHELL_INIT = asset("sandbox/sh/shell-init.sh");

export const EXIT_MARKER = Buffer.from("\nPBEXIT:");

/**
 * The first marker in `buf` at or after `from`: complete with its exit status (1-3 digits and a
 * newline), or `partial` when it may yet complete with the next chunk. Anything else after the
 * marker text means it is not one: it stays output, and no more than a few bytes are ever held.
 */
export function findMarker(
  buf: Buffer,
  marker: Buffer,
  from = 0,
): { at: number; code?: number; end?: number } | undefined {
  for (let i = buf.indexOf(marker, from); i >= 0; i = buf.indexOf(marker, i + 1)) {
    const s = i + marker.length;
    const after = buf.subarray(s, s + 4).toString("latin1");
    const m = /^(\d{1,3})\n/.exec(after);
    if (m) return { at: i, code: Number(m[1]), end: s + m[0].length };
    if (/^\d{0,3}$/.test(after) && buf.length - s < 4) return { at: i };
  }
  return undefined;
}
