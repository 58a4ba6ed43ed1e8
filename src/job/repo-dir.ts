// A local directory (a `{ path }` repo or a host-side clone) as tar items: what .gitignore files and
// info/exclude leave, plus every tracked path; `.git` whole. Names, depth and entry count are
// bounded, and the walk yields to the event loop however large a directory is.
import fss, { constants as fsc } from "node:fs";
import path from "node:path";
import ignore from "ignore";
import { breathe, Budget, LIMITS, OWNER, packed, PathTree, quote, RepoError, tooLarge, type Body, type Header, type Item, type RepoArchive } from "./repo-common.js";
import { trackedPaths } from "./repo-index.js";

type Rules = { base: string; ig: ReturnType<typeof ignore> }[];
/** With `filter`, the walk keeps what the ignore rules leave and every path in `tracked`. */
type Walk = { root: string; filter: boolean; tracked: PathTree; budget: Budget; out: Item[] };

const SMALL_FILE = 1024 * 1024;

export async function dirArchive(root: string, filter: boolean, max: number, maxEntries: number, label: string, rm?: () => Promise<void>): Promise<RepoArchive> {
  const w: Walk = { root, filter, tracked: filter ? await trackedPaths(root, maxEntries) : new PathTree(), budget: new Budget(label, maxEntries), out: [] };
  const exclude = filter ? ignoreFile(label, path.join(root, ".git/info/exclude"), ".git/info/exclude") : "";
  await walk(w, "", 0, 0, exclude ? [{ base: "", ig: ignore().add(exclude) }] : []); // info/exclude ranks below every .gitignore
  const files = w.out.filter((i) => i.header.type === "file");
  const bytes = files.reduce((n, i) => n + i.header.size, 0);
  if (bytes > max) throw tooLarge(label, bytes, max);
  let total = 0;
  for (const f of files)
    f.read = () => {
      const body = readNoFollow(path.join(root, f.header.name), f.header);
      if ((total += f.header.size) > max) throw tooLarge(label, total, max, "a file grew while the repo was read");
      return body;
    };
  return packed(w.out, { files: files.length, bytes }, rm);
}

/** A .gitignore's text ("" when missing or not a regular file); one too large to compile is refused. */
function ignoreFile(label: string, p: string, name: string): string {
  const st = fss.lstatSync(p, { throwIfNoEntry: false });
  if (!st?.isFile()) return "";
  if (st.size > LIMITS.ignoreFileBytes) throw new RepoError(`${label}: ${quote(name)} is larger than ${LIMITS.ignoreFileBytes} bytes`);
  try {
    return fss.readFileSync(p, "utf8");
  } catch {
    return "";
  }
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

/** A directory's names, read a few at a time so that a huge directory does not block the loop. */
async function readNames(label: string, dir: string, rel: string): Promise<string[]> {
  const d = fsCall(label, rel || ".", () => fss.opendirSync(dir));
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

/** `node` is rel's id in the tracked tree (0 for the root), or -1 when nothing under rel is tracked. */
async function walk(w: Walk, rel: string, depth: number, node: number, rules: Rules): Promise<void> {
  const dir = path.join(w.root, rel);
  const label = w.budget.label;
  const names = await readNames(label, dir, rel);
  const gitignore = w.filter && names.includes(".gitignore") ? ignoreFile(label, path.join(dir, ".gitignore"), rel ? `${rel}/.gitignore` : ".gitignore") : "";
  if (gitignore) rules = [...rules, { base: rel, ig: ignore().add(gitignore) }];
  for (const n of names) {
    await breathe();
    const name = rel ? `${rel}/${n}` : n;
    const bytes = Buffer.byteLength(name);
    if (bytes > LIMITS.pathBytes) throw new RepoError(`${label}: the path ${quote(name)} is longer than ${LIMITS.pathBytes} bytes`);
    if (depth + 1 > LIMITS.depth) throw new RepoError(`${label}: the path ${quote(name)} is deeper than ${LIMITS.depth} directories`);
    const st = fsCall(label, name, () => fss.lstatSync(path.join(dir, n)));
    const type = st.isSymbolicLink() ? "symlink" : st.isDirectory() ? "directory" : st.isFile() ? "file" : undefined;
    const isGit = name === ".git";
    // Sockets, fifos and devices are skipped; so is a `.git` file, which points outside the repo.
    if (!type || (isGit && type !== "directory")) continue;
    const tracked = node < 0 ? -1 : (w.tracked.child(node, n) ?? -1);
    if (w.filter && !isGit && tracked < 0 && isIgnored(rules, name, type === "directory")) continue;
    w.budget.add(name, bytes);
    // Owner rwx on directories, or uid 1000 could not write where the repo's owner could.
    const mode = type === "symlink" ? 0o777 : type === "directory" ? (st.mode & 0o777) | 0o700 : st.mode & 0o777;
    const linkname = type === "symlink" ? fsCall(label, name, () => fss.readlinkSync(path.join(dir, n))) : undefined;
    w.out.push({ header: { name: type === "directory" ? `${name}/` : name, type, mode, size: type === "file" ? st.size : 0, mtime: st.mtime, linkname, ...OWNER } });
    // `.git` itself is always whole: the history must be there.
    if (type === "directory") await walk(isGit ? { ...w, filter: false } : w, name, depth + 1, tracked, isGit ? [] : rules);
  }
}

/** O_NOFOLLOW: no symlink swapped in since the walk is followed; O_NONBLOCK: a swapped-in FIFO cannot hang us. */
function readNoFollow(p: string, header: Header): Body {
  const fd = fss.openSync(p, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
  let streaming = false;
  try {
    const st = fss.fstatSync(fd);
    if (!st.isFile()) throw new Error(`${p} is no longer a regular file`);
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
