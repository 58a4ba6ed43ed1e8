// The files patchbay writes for a user (a job's patch, result and transcript; a batch's): never
// through a symbolic link. The working directory is often the repo being fixed, and the default
// ./patchbay-out/… could be its own, planted as links to the user's files or directories. Every
// file a command writes for --out goes through writeOwn, which makes the directories it needs: no
// command can forget (a `campaign status --out DIR` failed with ENOENT where `run` made DIR).
import { closeSync, constants, lstatSync, mkdirSync, openSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { kinded } from "./errors.js";

/** A path that is a symbolic link where patchbay writes its own files. */
export class OutputLinkError extends kinded("usage") {}

const throughLink = (path: string) =>
  new OutputLinkError(
    `${path} is a symbolic link: patchbay does not write through one here (the repo being fixed may have planted it); remove it or pass --out DIR`,
  );

/**
 * The directories between the working directory and `dir` that are symbolic links: the working
 * directory is often the repo being fixed, and ./patchbay-out/… could be its own, pointing anywhere.
 */
export function checkNoLinkBelowCwd(dir: string): void {
  const cwd = process.cwd();
  const rel = relative(cwd, dir);
  if (!rel || rel.startsWith("..") || rel.startsWith(sep)) return; // not below it: the caller's own choice
  let at = cwd;
  for (const part of rel.split(sep)) {
    at = join(at, part);
    let link: boolean;
    try {
      link = lstatSync(at).isSymbolicLink();
    } catch {
      return; // not there yet: made below, as a directory
    }
    if (link) throw throughLink(at);
  }
}

/**
 * A directory for patchbay's own files, made with its parents where missing, after the check that
 * none of it below the working directory is a symbolic link.
 */
export function makeOutDir(dir: string): void {
  const abs = resolve(dir);
  checkNoLinkBelowCwd(abs);
  mkdirSync(abs, { recursive: true });
}

/** A file written whole, never through a symbolic link in its place; its directory made where missing (makeOutDir). */
export function writeOwn(path: string, data: string): void {
  makeOutDir(dirname(path));
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ELOOP") throw throughLink(path);
    throw err;
  }
  try {
    writeFileSync(fd, data);
  } finally {
    closeSync(fd);
  }
}
