// A local directory (a `{ path }` repo or a host-side clone) as tar items: what .gitignore files and
// info/exclude leave, plus every tracked path; `.git` whole. Names, depth and entry count are
// bounded, and the walk yields to the event loop however large a directory is. Every directory is
// opened relative to its parent's open fd without following a symlink, and must be the one the
// walk's lstat saw (repo-at.ts); files are read the same way, after the walk: a component swapped
// for a symlink (to a host directory) at any moment is never followed.
import fss, { constants as fsc } from "node:fs";
import ignore from "ignore";
import { at, openDirAt, openRoot, readSmallAt, self, swapped, type DirId } from "./repo-at.js";
import { breathe, Budget, LIMITS, OWNER, packed, PathTree, quote, RepoError, tooLarge, type Body, type Header, type Item, type RepoArchive } from "./repo-common.js";
import { trackedPaths } from "./repo-index.js";

type Rules = { base: string; ig: ReturnType<typeof ignore> }[];
/** A directory the walk entered: its parent's index, its name there, its depth and identity. */
type Dir = DirId & { parent: number; name: string; depth: number };
/** A regular file of the walk: the directory it is in. */
type FileItem = Item & { dir: number };
/** With `filter`, the walk keeps what the ignore rules leave and every path in `tracked`. */
type Walk = { filter: boolean; tracked: PathTree; budget: Budget; out: (Item & { dir?: number })[]; dirs: Dir[] };

const SMALL_FILE = 1024 * 1024;

/** Test hooks: called with a directory's relative path after its lstat, before it is opened. */
export const walkHooks: { beforeOpenDir?: (rel: string) => void } = {};

export async function dirArchive(root: string, filter: boolean, max: number, maxEntries: number, label: string, rm?: () => Promise<void>): Promise<RepoArchive> {
  const top = openRoot(root);
  const cursor = new DirCursor(top.fd, label);
  let w: Walk;
  try {
    w = { filter, tracked: filter ? await trackedPaths(top.fd, maxEntries) : new PathTree(), budget: new Budget(label, maxEntries), out: [], dirs: [{ ...top.id, parent: -1, name: "", depth: 0 }] };
    const exclude = filter ? ignoreFile(label, top.fd, ".git/info/exclude", ".git/info/exclude") : "";
    await walk(w, top.fd, "", 0, 0, 0, exclude ? [{ base: "", ig: ignore().add(exclude) }] : []); // info/exclude ranks below every .gitignore
  } catch (err) {
    cursor.close();
    throw err;
  }
  cursor.dirs = w.dirs;
  const files = w.out.filter((i): i is FileItem => i.header.type === "file");
  const bytes = files.reduce((n, i) => n + i.header.size, 0);
  if (bytes > max) {
    cursor.close();
    throw tooLarge(label, bytes, max);
  }
  let total = 0;
  for (const f of files)
    f.read = () => {
      const body = readNoFollow(cursor.fd(f.dir), f.header, label);
      if ((total += f.header.size) > max) throw tooLarge(label, total, max, "a file grew while the repo was read");
      return body;
    };
  // The directories stay open along the path being read only; all are closed at the end, or on cleanup.
  const out = w.out;
  function* items(): Iterable<Item> {
    try {
      yield* out;
    } finally {
      cursor.close();
    }
  }
  return packed(items(), { files: files.length, bytes }, async () => (cursor.close(), await rm?.()));
}

/**
 * The directory fds along the path being read, reopened from the root as the reads move on (in
 * the walk's order each directory is opened once), each checked against the walk's (dev, ino).
 */
class DirCursor {
  dirs: Dir[] = [];
  private stack: { dir: number; fd: number }[];
  constructor(
    root: number,
    private readonly label: string,
  ) {
    this.stack = [{ dir: 0, fd: root }];
  }

  /** An open fd of the walk's directory `dir`. */
  fd(dir: number): number {
    if (!this.stack.length) throw new Error("the repo's directory was closed");
    const chain: number[] = [];
    let d = dir;
    while (this.stack[this.dirs[d]!.depth]?.dir !== d) chain.push(d), (d = this.dirs[d]!.parent);
    this.pop(this.dirs[d]!.depth + 1);
    for (let i = chain.length - 1; i >= 0; i--) {
      const id = chain[i]!;
      this.stack.push({ dir: id, fd: openDirAt(this.stack.at(-1)!.fd, this.dirs[id]!.name, this.dirs[id]!, this.label, () => this.rel(id)) });
    }
    return this.stack.at(-1)!.fd;
  }

  private rel(dir: number): string {
    const names: string[] = [];
    for (let d = dir; d > 0; d = this.dirs[d]!.parent) names.push(this.dirs[d]!.name);
    return names.reverse().join("/");
  }

  private pop(depth: number): void {
    while (this.stack.length > depth) fss.closeSync(this.stack.pop()!.fd);
  }

  close(): void {
    this.pop(0);
  }
}

/** A .gitignore's text ("" when missing or not a regular file); one too large to compile is refused. */
function ignoreFile(label: string, dir: number, rel: string, name: string): string {
  const got = readSmallAt(dir, rel, LIMITS.ignoreFileBytes);
  if (got === undefined) return "";
  if (!Buffer.isBuffer(got)) throw new RepoError(`${label}: ${quote(name)} is larger than ${LIMITS.ignoreFileBytes} bytes`);
  return got.toString("utf8");
}

/** Deepest .gitignore first; the first one with a verdict decides (git's precedence). */
function isIgnored(rules: Rules, rel: string, dir: boolean): boolean {
  for (let i = rules.length - 1; i >= 0; i--) {
    const { base, ig } = rules[i]!;
    const r = ig.test((base ? rel.slice(base.length + 1) : rel) + (dir ? "/" : ""));
    if (r.ignored || r.unignored) return r.ignored;
  }
  return false;
}

/** fs errors that the repo's own files cause (unreadable, too long, looping) are the repo's fault. */
function fsCall<T>(label: string, name: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EACCES" || code === "EPERM" || code === "ENAMETOOLONG" || code === "ELOOP") throw new RepoError(`${label}: cannot read ${quote(name)}: ${code}`);
    // A name that is not UTF-8 comes back from readdir with U+FFFD in it, and is then not found.
    if (code === "ENOENT" && name.includes("\uFFFD")) throw new RepoError(`${label}: the file name ${quote(name)} is not valid UTF-8`);
    throw err;
  }
}

/** A symlink's target; EINVAL: it is no longer a symlink since its lstat. */
function readLink(label: string, p: string, name: string): string {
  try {
    return fsCall(label, name, () => fss.readlinkSync(p));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EINVAL") throw swapped(label, name);
    throw err;
  }
}

/** A directory's names, read a few at a time so that a huge directory does not block the loop. */
async function readNames(label: string, dir: number, rel: string): Promise<string[]> {
  const d = fsCall(label, rel || ".", () => fss.opendirSync(self(dir)));
  const names: string[] = [];
  try {
    for (let e = d.readSync(); e; e = d.readSync()) {
      names.push(e.name);
      await breathe();
    }
  } finally {
    d.closeSync();
  }
  return names.length <= 100_000 ? names.sort() : names; // a stable order; a huge directory is left as listed rather than sorted in one go
}

/**
 * `fd`: rel, open (and checked); `id`: its index in w.dirs. `node` is rel's id in the tracked tree
 * (0 for the root), or -1 when nothing under rel is tracked.
 */
async function walk(w: Walk, fd: number, rel: string, id: number, depth: number, node: number, rules: Rules): Promise<void> {
  const label = w.budget.label;
  const names = await readNames(label, fd, rel);
  const gitignore = w.filter && names.includes(".gitignore") ? ignoreFile(label, fd, ".gitignore", rel ? `${rel}/.gitignore` : ".gitignore") : "";
  if (gitignore) rules = [...rules, { base: rel, ig: ignore().add(gitignore) }];
  for (const n of names) {
    await breathe();
    const name = rel ? `${rel}/${n}` : n;
    const bytes = Buffer.byteLength(name);
    if (bytes > LIMITS.pathBytes) throw new RepoError(`${label}: the path ${quote(name)} is longer than ${LIMITS.pathBytes} bytes`);
    if (depth + 1 > LIMITS.depth) throw new RepoError(`${label}: the path ${quote(name)} is deeper than ${LIMITS.depth} directories`);
    const st = fsCall(label, name, () => fss.lstatSync(at(fd, n)));
    const type = st.isSymbolicLink() ? "symlink" : st.isDirectory() ? "directory" : st.isFile() ? "file" : undefined;
    const isGit = name === ".git";
    // Sockets, fifos and devices are skipped; so is a `.git` file, which points outside the repo.
    if (!type || (isGit && type !== "directory")) continue;
    const tracked = node < 0 ? -1 : (w.tracked.child(node, n) ?? -1);
    if (w.filter && !isGit && tracked < 0 && isIgnored(rules, name, type === "directory")) continue;
    w.budget.add(name, bytes);
    // Owner rwx on directories, or uid 1000 could not write where the repo's owner could.
    const mode = type === "symlink" ? 0o777 : type === "directory" ? (st.mode & 0o777) | 0o700 : st.mode & 0o777;
    const linkname = type === "symlink" ? readLink(label, at(fd, n), name) : undefined;
    const header: Header = { name: type === "directory" ? `${name}/` : name, type, mode, size: type === "file" ? st.size : 0, mtime: st.mtime, linkname, ...OWNER };
    w.out.push(type === "file" ? { header, dir: id } : { header });
    if (type !== "directory") continue;
    // Entered through an fd of its own, and only if it is still the directory lstat saw.
    walkHooks.beforeOpenDir?.(name);
    const child = openDirAt(fd, n, st, label, name);
    const childId = w.dirs.push({ dev: st.dev, ino: st.ino, parent: id, name: n, depth: depth + 1 }) - 1;
    try {
      // `.git` itself is always whole: the history must be there.
      await walk(isGit ? { ...w, filter: false } : w, child, name, childId, depth + 1, tracked, isGit ? [] : rules);
    } finally {
      fss.closeSync(child);
    }
  }
}

/**
 * A file in the open directory `dir`: O_NOFOLLOW, so a symlink swapped in since the walk is not
 * followed (and the directories above were opened the same way); O_NONBLOCK: a swapped-in FIFO
 * cannot hang us.
 */
function readNoFollow(dir: number, header: Header, label: string): Body {
  const base = header.name.slice(header.name.lastIndexOf("/") + 1);
  let fd: number;
  try {
    fd = fss.openSync(at(dir, base), fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ELOOP") throw swapped(label, header.name, "was swapped for a symlink");
    throw err;
  }
  let streaming = false;
  try {
    const st = fss.fstatSync(fd);
    if (!st.isFile()) throw swapped(label, header.name, "is no longer a regular file");
    header.size = st.size;
    if ((streaming = st.size > SMALL_FILE)) return fss.createReadStream("", { fd, start: 0, end: st.size - 1 }); // closes fd
    const buf = Buffer.allocUnsafe(st.size);
    let n = 0;
    for (let r = 1; n < st.size && r > 0; n += r) r = fss.readSync(fd, buf, n, st.size - n, n);
    return buf.subarray(0, (header.size = n));
  } finally {
    if (!streaming) fss.closeSync(fd);
  }
}
