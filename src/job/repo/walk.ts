// A local directory (a `{ path }` repo or a host-side clone) as tar items: what .gitignore files and
// info/exclude leave, plus every tracked path; `.git` whole. Names, depth and entry count are
// bounded, and the walk yields to the event loop however large a directory is. Every directory is
// opened relative to its parent's open fd without following a symlink, its (dev, ino) recorded from
// that fd (repo-at.ts); files are read after the walk (repo-read.ts, mostly on reader threads),
// each directory above them opened again and checked against that record: a component swapped for
// a symlink (to a host directory) at any moment is never followed.
import { count } from "../../core/count.js";
import fss from "node:fs";
import ignore from "ignore";
import { at, enterDir, openError, openRoot, readSmallAt, self, swapped } from "./dir-at.js";
import {
  Budget,
  LIMITS,
  OWNER,
  packed,
  PathTree,
  quote,
  RepoError,
  tooLarge,
  type Item,
  type RepoArchive,
} from "./common.js";
import { breathe } from "./breathe.js";
import { trackedPaths } from "./git-index.js";
import { BlobPack } from "./blob-pack.js";
import { DEFAULT_READER_THREADS, ReadAhead, readerThreads } from "./read-pool.js";
import { mtimeOf, type Dir } from "./read.js";

type Rules = { base: string; ig: ReturnType<typeof ignore> }[];
/** A regular file of the walk: the directory it is in. */
type FileItem = Item & { dir: number };
/** With `filter`, the walk keeps what the ignore rules leave and every path in `tracked`. */
type Walk = { filter: boolean; tracked: PathTree; budget: Budget; out: (Item & { dir?: number })[]; dirs: Dir[] };

/**
 * Test hooks: `beforeOpenDir` with a directory's relative path once readdir named it a directory,
 * before it is opened; `afterWalk` once the walk is done, before any file is read.
 */
export const walkHooks: { beforeOpenDir?: (rel: string) => void; afterWalk?: () => void } = {};

/** `rm`: run at cleanup (a host-side clone's removal); `threads`: reader threads (0: all on the event loop, as a test's reference). */
export async function dirArchive(
  root: string,
  filter: boolean,
  max: number,
  maxEntries: number,
  label: string,
  opts: { rm?: () => Promise<void>; threads?: number } = {},
): Promise<RepoArchive> {
  const { rm, threads = DEFAULT_READER_THREADS } = opts;
  const top = openRoot(root);
  let walked: Walked;
  const blobs = new BlobPack();
  try {
    walked = await walkRoot(top, filter, maxEntries, label, threads, blobs);
  } catch (err) {
    fss.closeSync(top.fd);
    throw err;
  }
  const { out, ahead, files } = walked;
  let closed: Promise<void> | undefined;
  const close = () => (closed ??= ahead.close().finally(() => fss.closeSync(top.fd)));
  const sums = { files: files.length, bytes: 0 };
  // Sizes are known as files are read: the bound on bytes is held then.
  const count = (size: number) => {
    if ((sums.bytes += size) > max) throw tooLarge(label, sums.bytes, max);
  };
  return packed(readItems(out, ahead, count, close), sums, async () => (await close(), await rm?.()), blobs);
}

/** What walkRoot hands dirArchive: the walk's items, its regular files, and their read-ahead. */
type Walked = { out: Walk["out"]; files: FileItem[]; ahead: ReadAhead };

/**
 * dirArchive's walk of the open root `top`, then the read-ahead of its files' bodies on the reader
 * threads, in the walk's order. A throw leaves `top` open: dirArchive closes it.
 */
async function walkRoot(
  top: ReturnType<typeof openRoot>,
  filter: boolean,
  maxEntries: number,
  label: string,
  threads: number,
  blobs: BlobPack,
): Promise<Walked> {
  if (threads) readerThreads(threads); // started (once per process) while the walk runs
  const w: Walk = {
    filter,
    tracked: filter ? await trackedPaths(top.fd, maxEntries) : new PathTree(),
    budget: new Budget(label, maxEntries),
    out: [],
    dirs: [{ ...top.id, parent: -1, name: "", depth: 0 }],
  };
  const exclude = filter ? ignoreFile(label, top.fd, ".git/info/exclude", ".git/info/exclude") : "";
  await walk(w, top.fd, "", 0, 0, 0, exclude ? [{ base: "", ig: ignore().add(exclude) }] : []); // info/exclude ranks below every .gitignore
  const files = w.out.filter((i): i is FileItem => i.header.type === "file");
  // The files' bodies, read ahead on the reader threads in the walk's order; the root stays open
  // until no thread reads from it, and is closed at the end or on cleanup.
  walkHooks.afterWalk?.();
  const ahead = new ReadAhead(
    top,
    w.dirs,
    files.map((f) => ({ dir: f.dir, name: f.header.name })),
    label,
    () => !blobs.full,
    threads,
  );
  return { out: w.out, files, ahead };
}

/**
 * dirArchive's items, in the walk's order, each file's body from the read-ahead; `count` holds the
 * bound on bytes as each body is taken, and `close` runs once the packer stops, however it stops.
 */
async function* readItems(
  out: Walk["out"],
  ahead: ReadAhead,
  count: (size: number) => void,
  close: () => Promise<void>,
): AsyncIterable<Item> {
  try {
    for (let k = 0, i = 0; k < out.length; k++) {
      const { header } = out[k]!;
      out[k] = undefined!; // what was handed on is not kept: memory stays a few batches, not the repo
      if (header.type !== "file") {
        yield { header };
        continue;
      }
      const n = i++;
      const got = await ahead.body(n, header);
      if (got === "here") {
        // Read when the packer takes it (a stream is never opened for an entry nobody writes).
        const read = () => {
          const body = ahead.readHere(n, header);
          try {
            count(header.size);
          } catch (err) {
            if (!Buffer.isBuffer(body)) body.destroy();
            throw err;
          }
          return body;
        };
        yield { header, read };
        continue;
      }
      count(header.size);
      yield { header, read: () => got.body, object: got.object };
    }
  } finally {
    await close();
  }
}

/** A .gitignore's text ("" when missing or not a regular file); one too large to compile is refused. */
function ignoreFile(label: string, dir: number, rel: string, name: string): string {
  const got = readSmallAt(dir, rel, LIMITS.ignoreFileBytes);
  if (got === undefined) return "";
  if (!Buffer.isBuffer(got))
    throw new RepoError(`${label}: ${quote(name)} is larger than ${count(LIMITS.ignoreFileBytes, "byte")}`);
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
    throw openError(label, name, err); // quoted: a raw name never reaches a log
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

type Kind = "file" | "directory" | "symlink" | "other";
/** What a directory entry is, as readdir says (no lstat); undefined where the file system does not say. */
function kindOf(e: fss.Dirent): Kind | undefined {
  if (e.isFile()) return "file";
  if (e.isDirectory()) return "directory";
  if (e.isSymbolicLink()) return "symlink";
  return e.isFIFO() || e.isSocket() || e.isCharacterDevice() || e.isBlockDevice() ? "other" : undefined;
}

/** A directory's entries, read a few at a time so that a huge directory does not block the loop. */
async function readNames(label: string, dir: number, rel: string): Promise<{ name: string; kind?: Kind }[]> {
  const d = fsCall(label, rel || ".", () => fss.opendirSync(self(dir)));
  const names: { name: string; kind?: Kind }[] = [];
  try {
    for (let e = d.readSync(); e; e = d.readSync()) {
      names.push({ name: e.name, kind: kindOf(e) });
      await breathe();
    }
  } finally {
    d.closeSync();
  }
  // A stable order; a huge directory is left as listed rather than sorted in one go.
  return names.length <= 100_000 ? names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) : names;
}

/**
 * `fd`: rel, open (and checked); `id`: its index in w.dirs. `node` is rel's id in the tracked tree
 * (0 for the root), or -1 when nothing under rel is tracked. A file is not stat'ed here: its
 * size, mode and mtime are what its read finds (repo-read.ts).
 */
async function walk(
  w: Walk,
  fd: number,
  rel: string,
  id: number,
  depth: number,
  node: number,
  rules: Rules,
): Promise<void> {
  const label = w.budget.label;
  const entries = await readNames(label, fd, rel);
  const gitignore =
    w.filter && entries.some((e) => e.name === ".gitignore")
      ? ignoreFile(label, fd, ".gitignore", rel ? `${rel}/.gitignore` : ".gitignore")
      : "";
  if (gitignore) rules = [...rules, { base: rel, ig: ignore().add(gitignore) }];
  for (const { name: n, kind } of entries) {
    await breathe();
    const name = rel ? `${rel}/${n}` : n;
    const bytes = checkName(label, name, n, depth);
    const { type, st } = entryType(label, fd, n, name, kind);
    const isGit = name === ".git";
    // Sockets, fifos and devices are skipped; so is a `.git` file, which points outside the repo.
    if (!type || (isGit && type !== "directory")) continue;
    const tracked = node < 0 ? -1 : (w.tracked.child(node, n) ?? -1);
    if (w.filter && !isGit && tracked < 0 && isIgnored(rules, name, type === "directory")) continue;
    w.budget.add(name, bytes);
    if (type === "file") {
      w.out.push({ header: { name, type, mode: 0o644, size: 0, mtime: new Date(0), ...OWNER }, dir: id });
      continue;
    }
    if (type === "symlink") {
      w.out.push(symlinkItem(label, fd, n, name, st!));
      continue;
    }
    await walkChild(w, { fd, id, depth }, n, name, tracked, rules);
  }
}

/** walk's bounds on an entry's path, before anything is opened or stat'ed: its length, depth and UTF-8; its length in bytes. */
function checkName(label: string, name: string, n: string, depth: number): number {
  const bytes = Buffer.byteLength(name);
  if (bytes > LIMITS.pathBytes)
    throw new RepoError(`${label}: the path ${quote(name)} is longer than ${count(LIMITS.pathBytes, "byte")}`);
  if (depth + 1 > LIMITS.depth)
    throw new RepoError(
      `${label}: the path ${quote(name)} is deeper than ${count(LIMITS.depth, "directory", "directories")}`,
    );
  // A name that is not UTF-8 comes back from readdir with U+FFFD in it: it could not be opened,
  // or would open a valid name spelt so (and that entry be written twice). Such names are refused.
  if (n.includes("\uFFFD"))
    throw new RepoError(`${label}: the file name ${quote(name)} is not valid UTF-8 (or holds U+FFFD)`);
  return bytes;
}

/**
 * walk's verdict on what the entry `n` of `fd` is (undefined: skipped), and its lstat where one was
 * taken: a symlink's mtime, and what an entry is where readdir did not say, come from its lstat.
 */
function entryType(
  label: string,
  fd: number,
  n: string,
  name: string,
  kind: Kind | undefined,
): { type: "file" | "directory" | "symlink" | undefined; st: fss.Stats | undefined } {
  const st = kind === undefined || kind === "symlink" ? fsCall(label, name, () => fss.lstatSync(at(fd, n))) : undefined;
  const type = st
    ? st.isSymbolicLink()
      ? "symlink"
      : st.isDirectory()
        ? "directory"
        : st.isFile()
          ? "file"
          : undefined
    : kind === "other"
      ? undefined
      : kind;
  return { type, st };
}

/** walk's item for a symlink: its mtime from the lstat `st`, its target read now (never followed). */
function symlinkItem(label: string, fd: number, n: string, name: string, st: fss.Stats): Item {
  return {
    header: {
      name,
      type: "symlink",
      mode: 0o777,
      size: 0,
      mtime: mtimeOf(st),
      linkname: readLink(label, at(fd, n), name),
      ...OWNER,
    },
  };
}

/**
 * walk's descent into the directory `n` of `parent.fd`: entered through an fd of its own, opened
 * without following a symlink, so what it is now is what is recorded; that fd is closed after.
 */
async function walkChild(
  w: Walk,
  parent: { fd: number; id: number; depth: number },
  n: string,
  name: string,
  tracked: number,
  rules: Rules,
): Promise<void> {
  const { fd, id, depth } = parent;
  const isGit = name === ".git";
  walkHooks.beforeOpenDir?.(name);
  const child = enterDir(fd, n, w.budget.label, name);
  // Owner rwx on directories, or uid 1000 could not write where the repo's owner could.
  w.out.push({
    header: {
      name: `${name}/`,
      type: "directory",
      mode: (child.st.mode & 0o777) | 0o700,
      size: 0,
      mtime: mtimeOf(child.st),
      ...OWNER,
    },
  });
  const childId = w.dirs.push({ dev: child.st.dev, ino: child.st.ino, parent: id, name: n, depth: depth + 1 }) - 1;
  try {
    // `.git` itself is always whole: the history must be there.
    await walk(isGit ? { ...w, filter: false } : w, child.fd, name, childId, depth + 1, tracked, isGit ? [] : rules);
  } finally {
    fss.closeSync(child.fd);
  }
}
