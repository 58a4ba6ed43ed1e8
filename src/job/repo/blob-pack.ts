// A git pack (version 2) of a repo's file contents and trees, and its .idx, made on the host while
// the repo is tarred. Git in the sandbox then finds every blob it hashes and every tree it writes at
// baseline already in its store and writes nothing: on these machines a loose object costs ~0.35 ms
// of syscalls, most of a small repo's baseline (1,000 directories: 0.5 s of write-tree). The pack
// only saves writes; it decides nothing: the baseline's tree is still git's own hash of the bytes
// on disk, and an object left out (over the bound, a streamed file's, a tree that differs from
// git's) is simply written by git as before. No I/O here.
import { createHash } from "node:crypto";
import { crc32, deflateSync } from "node:zlib";
import { breathe, mayGoOn } from "./breathe.js";

const OBJ_TREE = 2;
const OBJ_BLOB = 3;

export interface BuiltPack {
  /** The pack's own checksum, hex: its file names are pack-<name>.pack and .idx. */
  name: string;
  pack: Buffer;
  idx: Buffer;
  objects: number;
  /**
   * The root tree git will write for the entries given, where every one is known here (the store
   * turns every content-rewriting attribute off: git hashes a file's bytes as they are). The
   * baseline may start from it, checked by git's own hash before any tool runs (baseline.ts).
   */
  tree?: string;
}

/** A blob's pack object, made where its bytes are (a reader thread, or the pack itself). */
export interface BlobObject {
  sha: Buffer;
  /** The object as the pack holds it: type and size, then the zlib stream. */
  body: Buffer;
  crc: number;
}

/** The pack object of `content` as a blob (or, for the pack's trees, as `type`). No I/O. */
export function blobObject(content: Buffer, type = OBJ_BLOB): BlobObject {
  const sha = createHash("sha1")
    .update(`${type === OBJ_TREE ? "tree" : "blob"} ${content.length}\0`)
    .update(content)
    .digest();
  const body = Buffer.concat([
    objectHeader(type, content.length),
    content.length <= STORE_MAX ? stored(content) : deflateSync(content, { level: 1 }),
  ]);
  return { sha, body, crc: crc32(body) };
}

export class BlobPack {
  private readonly parts: Buffer[] = [];
  private readonly entries = new Map<string, { sha: Buffer; offset: number; crc: number }>();
  private offset = 12;
  full = false;

  /** `maxBytes` bounds the pack (the worker holds it until the baseline is made). */
  constructor(private readonly maxBytes = 64 * 1024 * 1024) {}

  /** Adds a blob; its object id, or undefined once the pack is full. */
  add(content: Buffer): Buffer | undefined {
    return this.full ? undefined : this.put(blobObject(content));
  }

  /** Adds an object made elsewhere (blobObject on a reader thread); its id, or undefined once the pack is full. */
  put(o: BlobObject): Buffer | undefined {
    if (this.full) return undefined;
    const key = o.sha.toString("hex");
    if (this.entries.has(key)) return o.sha;
    if (this.offset + o.body.length + 20 > this.maxBytes) {
      this.full = true; // the rest is hashed and written by git in the sandbox, as without a pack
      return undefined;
    }
    this.entries.set(key, { sha: o.sha, offset: this.offset, crc: o.crc });
    // A view into a reader thread's batch is copied: kept, it would keep the whole batch.
    this.parts.push(o.body.byteLength === o.body.buffer.byteLength ? o.body : Buffer.from(o.body));
    this.offset += o.body.length;
    return o.sha;
  }

  /**
   * A file, symlink or directory of the baseline, as git will record it (`.git` and what is inside
   * left out). `sha` undefined: its blob is not known here (streamed, or the pack was full), so no
   * tree above it is made.
   */
  entry(name: string, kind: "file" | "exec" | "symlink" | "dir", sha?: Buffer): void {
    if (this.root) throw new Error("BlobPack: an entry after its tree was made");
    const comps = name.replace(/\/+$/, "").split("/");
    const git = comps.indexOf(".git");
    if (git === 0) return; // the repo's own: not part of the baseline
    if (git > 0) return void this.dir(comps.slice(0, git - 1)).unknown++; // a nested repo: git decides what it is
    // A name git refuses (`.GIT`, `git~1`, ...): no tree, so git's baseline fails at once, as without a pack.
    // So is a symlink git may refuse by its name (`.gitmodules`, `.gitattributes`, ...).
    if (comps.some(refused) || (kind === "symlink" && /^\.git/i.test(comps.at(-1)!))) return void this.top.unknown++;
    const parent = this.dir(comps.slice(0, -1));
    const leaf = comps.at(-1)!;
    if (kind === "dir") this.dir(comps);
    else if (sha)
      parent.files.set(leaf, { mode: kind === "exec" ? "100755" : kind === "symlink" ? "120000" : "100644", sha });
    else parent.unknown++;
  }

  private readonly top: Dir = newDir();
  private dir(comps: string[]): Dir {
    let d = this.top;
    for (const c of comps) {
      let next = d.dirs.get(c);
      if (!next) d.dirs.set(c, (next = newDir()));
      d = next;
    }
    return d;
  }

  /** The tree objects git will write for the entries given (bottom-up; none above an unknown entry). */
  private trees(d: Dir = this.top): Buffer | undefined {
    if (this.full) return undefined; // no room for a tree: nothing above it is known
    const list: { key: Buffer; line: Buffer }[] = [];
    let known = d.unknown === 0;
    for (const [name, sub] of d.dirs) {
      const sha = this.trees(sub);
      if (sha === EMPTY) continue; // git records no empty directory
      if (!sha) known = false;
      else list.push({ key: Buffer.from(`${name}/`), line: Buffer.concat([Buffer.from(`40000 ${name}\0`), sha]) });
    }
    if (!known) return undefined;
    for (const [name, f] of d.files)
      list.push({ key: Buffer.from(name), line: Buffer.concat([Buffer.from(`${f.mode} ${name}\0`), f.sha]) });
    if (!list.length) return EMPTY;
    // Git's order: by name bytes, a directory's name compared as if it ended in "/".
    list.sort((a, b) => Buffer.compare(a.key, b.key));
    const content = Buffer.concat(list.map((e) => e.line));
    // One that cannot fit is not hashed and compressed first (a directory of many long names).
    if (this.offset + content.length + 64 > this.maxBytes) return undefined;
    return this.put(blobObject(content, OBJ_TREE));
  }

  get objects(): number {
    return this.entries.size;
  }

  private root?: { tree: Buffer | undefined };

  /**
   * The root tree git will write for all the entries given (BuiltPack.tree), once all are: its
   * objects join the pack, so finish() after it has them too. Made once. No tree where an entry is
   * not known here, or none is.
   */
  tree(): string | undefined {
    this.root ??= { tree: this.entries.size ? this.trees() : undefined };
    const t = this.root.tree;
    return t && t !== EMPTY ? t.toString("hex") : undefined;
  }

  private built?: Promise<BuiltPack | undefined>;

  /**
   * The pack and its index, once all is added; undefined when nothing was. Made once (later calls
   * get the same), yielding while it hashes (up to the bound's 64 MiB).
   */
  finish(): Promise<BuiltPack | undefined> {
    return (this.built ??= this.build());
  }

  private async build(): Promise<BuiltPack | undefined> {
    const tree = this.tree();
    const n = this.entries.size;
    if (n === 0) return undefined;
    const head = Buffer.alloc(12);
    head.write("PACK", 0, "latin1");
    head.writeUInt32BE(2, 4);
    head.writeUInt32BE(n, 8);
    const hash = createHash("sha1").update(head);
    for (const part of this.parts) {
      hash.update(part);
      if (!mayGoOn()) await breathe();
    }
    const packSum = hash.digest();
    const pack = Buffer.concat([head, ...this.parts, packSum]);
    // Hex keys sort as their bytes do, and much faster than Buffer.compare.
    const sorted = [...this.entries.keys()].sort().map((k) => this.entries.get(k)!);
    // idx v2: magic, version, 256-entry fan-out, names, CRC32s, 4-byte offsets (the pack is < 2 GiB), both checksums.
    const idx = Buffer.alloc(8 + 256 * 4 + n * 28 + 40);
    idx.writeUInt32BE(0xff744f63, 0);
    idx.writeUInt32BE(2, 4);
    const fan = new Array<number>(256).fill(0);
    for (const e of sorted) fan[e.sha[0]!]!++;
    for (let i = 0, sum = 0; i < 256; i++) idx.writeUInt32BE((sum += fan[i]!), 8 + i * 4);
    let at = 8 + 1024;
    for (const e of sorted) at += e.sha.copy(idx, at);
    for (const e of sorted) at = idx.writeUInt32BE(e.crc >>> 0, at);
    for (const e of sorted) at = idx.writeUInt32BE(e.offset, at);
    at += packSum.copy(idx, at);
    createHash("sha1").update(idx.subarray(0, at)).digest().copy(idx, at);
    return { name: packSum.toString("hex"), pack, idx, objects: n, ...(tree ? { tree } : {}) };
  }
}

// A small file is stored uncompressed in a zlib stream written here: zlib's own call costs more
// than the bytes it saves (50,000 small files: 630 ms of deflate against 30 ms).
const STORE_MAX = 16 * 1024;

/** A zlib stream (RFC 1950) holding `data` in one stored deflate block (RFC 1951, BTYPE 00). */
function stored(data: Buffer): Buffer {
  const out = Buffer.alloc(2 + 5 + data.length + 4);
  out[0] = 0x78; // deflate, 32 KiB window
  out[1] = 0x01; // no dictionary, fastest; (0x78 << 8 | 0x01) % 31 === 0
  out[2] = 0x01; // BFINAL, stored
  out.writeUInt16LE(data.length, 3);
  out.writeUInt16LE(~data.length & 0xffff, 5);
  data.copy(out, 7);
  out.writeUInt32BE(adler32(data), 7 + data.length);
  return out;
}

function adler32(data: Buffer): number {
  let a = 1;
  let b = 0;
  // 5552 bytes is the most that can be summed before b could pass 2^32 (zlib's NMAX).
  for (let i = 0; i < data.length;) {
    const end = Math.min(i + 5552, data.length);
    for (; i < end; i++) b += a += data[i]!;
    a %= 65521;
    b %= 65521;
  }
  return ((b << 16) | a) >>> 0;
}

/** An object's type and inflated size: 3 type bits and 4 size bits, then 7 size bits per byte. */
function objectHeader(type: number, size: number): Buffer {
  const out = [((type & 7) << 4) | (size & 15)];
  for (size = Math.floor(size / 16); size > 0; size = Math.floor(size / 128)) {
    out[out.length - 1]! |= 0x80;
    out.push(size & 127);
  }
  return Buffer.from(out);
}

/**
 * A path component git's verify_path may refuse: `.git` in any case or with what NTFS drops after
 * it (dots and spaces, then the end, a `:` stream name or a `\\`), its 8.3 short name. Wider than
 * git on purpose: a false match only costs the shortcut.
 */
function refused(c: string): boolean {
  const l = c
    .toLowerCase()
    .replace(/[:\\][^]*$/, "")
    .replace(/(?<![. ])[. ]+$/, ""); // a run's first character only: linear
  return l === ".git" || /^git~\d+$/.test(l);
}

interface Dir {
  dirs: Map<string, Dir>;
  files: Map<string, { mode: string; sha: Buffer }>;
  /** Entries whose object is not known here. */
  unknown: number;
}
const newDir = (): Dir => ({ dirs: new Map(), files: new Map(), unknown: 0 });
/** A directory with nothing git records in it. */
const EMPTY = Buffer.alloc(0);
