// The paths `.git/index` tracks, read by hand (versions 2-4) rather than by running host git under
// the repo's own config. The index is hostile input: every offset and length is checked, names are
// bounded, and the work is linear in its size. An index that breaks any rule is not used at all:
// the ignore rules alone then decide what is loaded, which is safe (a tracked path can only add a
// file of the repo itself) and what happens for a repo without an index.
import fss from "node:fs";
import { promisify } from "node:util";
import { openFileAt, readSmallAt } from "./dir-at.js";
import { DEFAULT_REPO_MAX_ENTRIES, LIMITS, PathTree } from "./common.js";
import { breathe } from "./breathe.js";
import { kinded } from "../../core/errors.js";

class BadIndex extends kinded("repo") {}
const bad = (why: string): never => {
  throw new BadIndex(why);
};

const read = promisify(fss.read);

/** The first `size` bytes of an open file, read off the event loop (a file that shrank: fewer). */
async function readFd(fd: number, size: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(size);
  let n = 0;
  for (let r = 1; n < size && r > 0; n += r) r = (await read(fd, buf, n, Math.min(size - n, 1 << 20), n)).bytesRead;
  return buf.subarray(0, n);
}

/**
 * Tracked paths and all their parent directories, or an empty tree when there is no usable index.
 * `root` is the repo's directory, held open: `.git` and its files are opened below it without
 * following a symlink (see repo-at.ts).
 */
export async function trackedPaths(root: number, maxEntries = DEFAULT_REPO_MAX_ENTRIES): Promise<PathTree> {
  const f = openFileAt(root, ".git/index");
  if (!f) return new PathTree();
  let buf: Buffer | undefined;
  try {
    if (f.size <= LIMITS.indexBytes) buf = await readFd(f.fd, f.size).catch(() => undefined);
  } finally {
    fss.closeSync(f.fd);
  }
  if (!buf) return new PathTree();
  const config = readSmallAt(root, ".git/config", 1024 * 1024);
  const sha256 = Buffer.isBuffer(config) && /objectformat\s*=\s*sha256/i.test(config.toString("utf8"));
  try {
    return await parseIndex(buf, sha256 ? 32 : 20, maxEntries);
  } catch (err) {
    if (err instanceof BadIndex) return new PathTree();
    throw err;
  }
}

async function parseIndex(buf: Buffer, hashLen: number, maxEntries: number): Promise<PathTree> {
  if (buf.length < 12 + hashLen || buf.toString("latin1", 0, 4) !== "DIRC") bad("no index header");
  const version = buf.readUInt32BE(4);
  const count = buf.readUInt32BE(8);
  if (version < 2 || version > 4) bad(`version ${version}`);
  const fixed = 40 + hashLen + 2; // stat data, object id, flags
  const end = buf.length - hashLen; // the trailing checksum
  if (count > maxEntries || count * (fixed + 2) > end - 12) bad("more entries than the index can hold");
  const tree = new PathTree();
  const name = Buffer.alloc(LIMITS.pathBytes); // v4 names are the previous name's prefix + a suffix
  let [off, len, total] = [12, 0, 0];
  for (let n = 0; n < count; n++) {
    if (off + fixed > end) bad("entry past the end");
    const flags = buf.readUInt16BE(off + fixed - 2);
    const extended = flags & 0x4000 ? 2 : 0;
    if (extended && version < 3) bad("extended flags before version 3");
    let p = off + fixed + extended;
    if (version === 4) {
      const [drop, q] = varint(buf, p, end);
      if (drop > len) bad("prefix drop longer than the previous name");
      [len, p] = [len - drop, q];
    } else len = 0;
    const nul = buf.subarray(p, Math.min(end, p + LIMITS.pathBytes - len + 1)).indexOf(0);
    if (nul < 0) bad("name too long or unterminated");
    if (version < 4 && (flags & 0xfff) < 0xfff && (flags & 0xfff) !== nul) bad("name length does not match its flags");
    buf.copy(name, len, p, p + nul);
    len += nul;
    // v2/v3 entries are NUL-padded to a multiple of 8 bytes.
    off = version === 4 ? p + nul + 1 : off + ((fixed + extended + nul + 8) & ~7);
    if (off > end) bad("entry past the end");
    if ((total += len) > LIMITS.nameBytesTotal) bad("names too long together");
    addPath(tree, name.toString("utf8", 0, len));
    await breathe();
  }
  return tree;
}

/** Git's offset varint (each continuation adds one before shifting); at most 5 bytes here. */
function varint(buf: Buffer, p: number, end: number): [number, number] {
  let value = 0;
  for (let i = 0; i < 5 && p < end; i++) {
    const c = buf[p++]!;
    value = i === 0 ? c & 127 : (value + 1) * 128 + (c & 127); // no 32-bit shifts: no overflow
    if (!(c & 128)) return [value, p];
  }
  return bad("bad varint");
}

function addPath(tree: PathTree, name: string): void {
  const comps = name.endsWith("/") ? name.slice(0, -1).split("/") : name.split("/"); // a sparse index's directory entries end in "/"
  if (comps.length > LIMITS.depth || comps.some((c) => c === "" || c === "." || c === ".."))
    bad("not a clean relative path");
  tree.dirs(comps, comps.length);
}
