// The egress proxy's base directory (PATCHBAY_EGRESS_DIR, default $TMPDIR/patchbay-egress) holds
// every job's socket directory. In a shared /tmp another user can make that path first (a
// directory of theirs, or a symlink to one) and then rename, swap or watch what patchbay puts in
// it. So it is used only when it is the worker's own: a real directory (not a symlink), owned by
// the worker's uid, with no group or other permission.
import { closeSync, constants, fchmodSync, fstatSync, lstatSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import { kinded } from "../core/errors.js";

export class EgressDirError extends kinded("config") {}

/** Makes `dir` (mode 0700) or checks the one there; throws EgressDirError saying what is wrong and how to fix it. */
export function ensurePrivateDir(dir: string, uid = process.getuid?.() ?? 0): void {
  mkdirSync(dirname(dir), { recursive: true });
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  const fix = `remove it (rm -r ${dir}) or set PATCHBAY_EGRESS_DIR to a directory of the worker's own with mode 0700`;
  let fd: number;
  try {
    // O_NOFOLLOW: a symlink is refused, not judged by what it points at; checked and fixed through
    // the one descriptor, so nothing can be swapped in between.
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Linux says ENOTDIR for a symlink when O_DIRECTORY is given too.
    if (code === "ELOOP" || (code === "ENOTDIR" && lstatSync(dir).isSymbolicLink()))
      throw new EgressDirError(`the egress directory ${dir} is a symlink; ${fix}`);
    if (code === "ENOTDIR") throw new EgressDirError(`the egress directory ${dir} is not a directory; ${fix}`);
    throw err;
  }
  try {
    const st = fstatSync(fd);
    if (st.uid !== uid)
      throw new EgressDirError(
        `the egress directory ${dir} is owned by uid ${st.uid}, not the worker's (${uid}); ${fix}`,
      );
    const loose = st.mode & 0o077;
    if (loose & 0o022) {
      // Others could write in it: what they left there stays, so tightening it now is not enough.
      throw new EgressDirError(
        `the egress directory ${dir} has mode 0${(st.mode & 0o7777).toString(8)} (writable by group or others); ${fix}`,
      );
    }
    // Readable or searchable by others only (0755 as the engine makes a bind mount's missing source,
    // 0711 as earlier patchbay made it): nobody else could have put anything in it, so it is tightened.
    if (loose) fchmodSync(fd, st.mode & 0o7700);
  } finally {
    closeSync(fd);
  }
}
