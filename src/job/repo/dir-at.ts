// A host directory read without following a symlink anywhere below its root. Node has no openat(),
// but `/proc/self/fd/N/name` resolves `name` inside the directory that fd N holds open (the kernel
// jumps to the open directory itself, not to its path again), so each call here is an *at() call
// relative to a directory already checked: a component swapped for a symlink mid-walk is never
// followed, and a directory swapped for another is caught by its (dev, ino). Linux only (/proc).
import fss, { constants as fsc } from "node:fs";
import { quote, RepoError } from "./common.js";

/** A directory's identity, as the walk found it open. */
export interface DirId {
  dev: number;
  ino: number;
}

let procChecked = false;
function needProc(): void {
  if (procChecked) return;
  if (!fss.existsSync("/proc/self/fd"))
    throw new Error(
      "reading a local repo needs /proc/self/fd (Linux): it opens every directory relative to its parent",
    );
  procChecked = true;
}

/** `name` (one component) inside the directory fd `dir` holds open. */
export function at(dir: number, name: string): string {
  return `/proc/self/fd/${dir}/${name}`;
}

/** The directory fd `dir` holds open, for opendir. */
export function self(dir: number): string {
  return `/proc/self/fd/${dir}`;
}

/** Opens the root (a path the worker was given: followed as it is) and says what it is. */
export function openRoot(root: string): { fd: number; id: DirId } {
  needProc();
  const fd = fss.openSync(root, fsc.O_RDONLY | fsc.O_DIRECTORY);
  const st = fss.fstatSync(fd);
  return { fd, id: { dev: st.dev, ino: st.ino } };
}

/**
 * An fs error opening `rel` in the repo: the repo's fault (unreadable, a loop, a name too long) as
 * a RepoError, else (gone since the walk: the load may be tried again) an Error with its code. The
 * name is quoted either way: it never reaches a log raw.
 */
export function openError(label: string, rel: string, err: unknown): Error {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "EACCES" || code === "EPERM" || code === "ENAMETOOLONG" || code === "ELOOP" || code === "ENXIO")
    return new RepoError(`${label}: cannot read ${quote(rel)}: ${code}`);
  if (!code) return err as Error;
  const why =
    code === "ENOENT" || code === "ENOTDIR"
      ? " (it changed while the repo was read; load it again once nothing changes it)"
      : "";
  return Object.assign(new Error(`${label}: cannot open ${quote(rel)}: ${code}${why}`), { code });
}

/** A repo that changed under the walk: which path, and how. */
export function swapped(
  label: string,
  rel: string,
  how = "was replaced (by a symlink or another directory)",
): RepoError {
  return new RepoError(`${label}: ${quote(rel)} ${how} while the repo was read; load it again once nothing changes it`);
}

/**
 * Opens the directory `name` in `parent` refusing a symlink (O_NOFOLLOW), and checks it is the
 * directory `expect` (dev, ino) the walk saw: anything else is a RepoError naming `rel`.
 */
export function openDirAt(
  parent: number,
  name: string,
  expect: DirId,
  label: string,
  rel: string | (() => string),
): number {
  const { fd, st } = enterDir(parent, name, label, rel);
  if (st.dev !== expect.dev || st.ino !== expect.ino) {
    fss.closeSync(fd);
    throw swapped(label, typeof rel === "string" ? rel : rel());
  }
  return fd;
}

/**
 * Opens the directory `name` in `parent` refusing a symlink (O_NOFOLLOW): its fd and what it is.
 * Anything but a directory there now is a RepoError naming `rel`.
 */
export function enterDir(
  parent: number,
  name: string,
  label: string,
  rel: string | (() => string),
): { fd: number; st: fss.Stats } {
  const named = () => (typeof rel === "string" ? rel : rel());
  let fd: number;
  try {
    fd = fss.openSync(at(parent, name), fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ELOOP" || code === "ENOTDIR") throw swapped(label, named());
    throw openError(label, named(), err);
  }
  return { fd, st: fss.fstatSync(fd) };
}

/**
 * A regular file below `dir` by a relative path whose every component is opened without following
 * a symlink: its open fd and size (the caller closes it), or undefined when any part is missing or
 * not what it should be.
 */
export function openFileAt(dir: number, rel: string): { fd: number; size: number } | undefined {
  const comps = rel.split("/");
  const parents: number[] = [];
  let fd: number | undefined;
  try {
    let cur = dir;
    for (const c of comps.slice(0, -1))
      parents.push((cur = fss.openSync(at(cur, c), fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW)));
    fd = fss.openSync(at(cur, comps.at(-1)!), fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
    const st = fss.fstatSync(fd);
    if (st.isFile()) return { fd, size: st.size };
    fss.closeSync(fd);
    return undefined;
  } catch {
    if (fd !== undefined) fss.closeSync(fd);
    return undefined;
  } finally {
    for (const p of parents) fss.closeSync(p);
  }
}

/** A small file as openFileAt finds it: its bytes, undefined, or `{ large }` over `max` (not read). */
export function readSmallAt(dir: number, rel: string, max: number): Buffer | undefined | { large: number } {
  const f = openFileAt(dir, rel);
  if (!f) return undefined;
  try {
    if (f.size > max) return { large: f.size };
    const buf = Buffer.allocUnsafe(f.size);
    let n = 0;
    for (let r = 1; n < buf.length && r > 0; n += r) r = fss.readSync(f.fd, buf, n, buf.length - n, n);
    return buf.subarray(0, n);
  } finally {
    fss.closeSync(f.fd);
  }
}
