// Reading the files of a local repo after its walk (repo-dir.ts), the same way on the worker's main
// thread and on its reader threads (read-thread.ts): each directory above a file opened from the
// root without following a symlink and checked against the walk's (dev, ino), each file opened
// O_NOFOLLOW. Also the reader threads' protocol: a batch of files asked for, their bytes in one
// transferred buffer sent back.
import fss, { constants as fsc } from "node:fs";
import { at, openDirAt, openError, swapped, type DirId } from "./dir-at.js";
import { blobObject, type BlobObject } from "./blob-pack.js";
import { RepoError } from "./common.js";
import type { Body, Header } from "./common.js";

/** A directory the walk entered: its parent's index, its name there, its depth and identity. */
export type Dir = DirId & { parent: number; name: string; depth: number };

/** Files up to this size are read whole; larger ones are streamed (by the main thread). */
export const SMALL_FILE = 1024 * 1024;

/**
 * The directory fds along the path being read, reopened from the root as the reads move on (in
 * the walk's order each directory is opened once), each checked against the walk's (dev, ino).
 */
export class DirCursor {
  private stack: { dir: number; fd: number }[];
  constructor(
    root: number,
    private readonly dirs: Dir[],
    private readonly label: string,
  ) {
    this.stack = [{ dir: 0, fd: root }];
  }

  /** An open fd of the walk's directory `dir`. */
  fd(dir: number): number {
    if (!this.stack.length) throw new Error("the repo's directory was closed");
    const chain: number[] = [];
    let d = dir;
    while (this.stack[this.dirs[d]!.depth]?.dir !== d) {
      chain.push(d);
      d = this.dirs[d]!.parent;
    }
    this.pop(this.dirs[d]!.depth + 1);
    for (let i = chain.length - 1; i >= 0; i--) {
      const id = chain[i]!;
      this.stack.push({
        dir: id,
        fd: openDirAt(this.stack.at(-1)!.fd, this.dirs[id]!.name, this.dirs[id]!, this.label, () => this.rel(id)),
      });
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

  /** Closes what it opened, and the root (the cursor's owner's, unless `keepRoot`). */
  close(keepRoot = false): void {
    this.pop(keepRoot ? 1 : 0);
    if (keepRoot) this.stack = [];
  }
}

/**
 * A file in the open directory `dir`: O_NOFOLLOW, so a symlink swapped in since the walk is not
 * followed (and the directories above were opened the same way); O_NONBLOCK: a swapped-in FIFO
 * cannot hang us. Its fd and stat; a RepoError if it is no longer a regular file.
 */
function openNoFollow(dir: number, name: string, label: string): { fd: number; st: fss.Stats } {
  const base = name.slice(name.lastIndexOf("/") + 1);
  let fd: number;
  try {
    fd = fss.openSync(at(dir, base), fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ELOOP") throw swapped(label, name, "was swapped for a symlink");
    throw openError(label, name, err);
  }
  const st = fss.fstatSync(fd);
  if (!st.isFile()) {
    fss.closeSync(fd);
    throw swapped(label, name, "is no longer a regular file");
  }
  return { fd, st };
}

/** Reads `size` bytes (fewer if the file shrank) into `buf` at `off`; how many. */
function readAll(fd: number, buf: Uint8Array, off: number, size: number): number {
  let n = 0;
  for (let r = 1; n < size && r > 0; n += r) r = fss.readSync(fd, buf, off + n, size - n, n);
  return n;
}

/**
 * An mtime to the ms, cut rather than rounded (Node's `st.mtime` rounds: 57.9996 s would be
 * tarred as 58), the same on every thread.
 */
export const mtimeOf = (st: fss.Stats): Date => new Date(Math.floor(st.mtimeMs));

/** The tar header's fields a file's open fd says: its permission bits and mtime. */
function fromStat(header: Header, st: fss.Stats): void {
  header.mode = st.mode & 0o777;
  header.mtime = mtimeOf(st);
}

/**
 * A file of the walk, read on the main thread: whole when small, else a stream (which closes its
 * fd). The header's size, mode and mtime set from the open file.
 */
export function readNoFollow(dir: number, header: Header, label: string): Body {
  const { fd, st } = openNoFollow(dir, header.name, label);
  fromStat(header, st);
  if (st.size > SMALL_FILE) {
    header.size = st.size;
    return fss.createReadStream("", { fd, start: 0, end: st.size - 1 });
  }
  try {
    const buf = Buffer.allocUnsafe(st.size);
    return buf.subarray(0, (header.size = readAll(fd, buf, 0, st.size)));
  } finally {
    fss.closeSync(fd);
  }
}

/** A batch for a reader thread: files of one repo by their walk directory and name. */
export interface ReadRequest {
  id: number;
  root: number;
  rootId: DirId;
  /** The walk's directories (by index) this batch needs that the thread was not sent yet; `dirsOf` names the repo. */
  dirs: [number, Dir][];
  dirsOf: number;
  label: string;
  /** `blob`: its pack object is made too (a file of the baseline, while the pack has room). */
  files: { dir: number; name: string; blob: boolean }[];
  /** The batch stops once its files' bytes pass this (its rest is asked for again); a large file is left to the main thread. */
  maxBytes: number;
}

/**
 * Per file: where its bytes are in the buffer, its mode and mtime (ms), and where its pack object
 * is in `objects`; or `defer` (the main thread reads it).
 */
export type ReadResult =
  | {
      off: number;
      len: number;
      mode: number;
      mtime: number;
      obj?: { off: number; len: number; crc: number; sha: string };
    }
  | { defer: true };

export interface ReadReply {
  id: number;
  buffer: ArrayBuffer;
  objects: ArrayBuffer;
  files: ReadResult[];
  /**
   * The failure at files[files.length]: a RepoError's message, or an fs error's code and message.
   * Without one, a reply shorter than its request stopped at maxBytes.
   */
  error?: { repo: boolean; message: string; code?: string };
}

/** Where a thread reads a batch's bytes: grown as needed, kept for the next batch. */
let scratch = Buffer.allocUnsafeSlow(64 * 1024);

/**
 * A reader thread's work: the files of `req` read, in order, until the first failure or maxBytes,
 * with their pack objects. The root must still be the directory the walk saw (its owner keeps it
 * open meanwhile).
 */
export function readBatch(req: ReadRequest, dirs: Dir[]): ReadReply {
  const files: ReadResult[] = [];
  const objects: BlobObject[] = [];
  let objBytes = 0;
  const cursor = new DirCursor(req.root, dirs, req.label);
  let used = 0;
  let error: ReadReply["error"];
  try {
    const st = fss.fstatSync(req.root);
    if (st.dev !== req.rootId.dev || st.ino !== req.rootId.ino)
      throw new Error("the repo's root directory is not the one the walk read");
    for (const f of req.files) {
      const { fd, st } = openNoFollow(cursor.fd(f.dir), f.name, req.label);
      try {
        if (st.size > SMALL_FILE) {
          files.push({ defer: true });
          continue;
        }
        if (files.length && used + st.size > req.maxBytes) break;
        if (used + st.size > scratch.length) {
          const next = Buffer.allocUnsafeSlow(Math.max(2 * scratch.length, used + st.size));
          scratch.copy(next, 0, 0, used);
          scratch = next;
        }
        const len = readAll(fd, scratch, used, st.size);
        const r: ReadResult = { off: used, len, mode: st.mode & 0o777, mtime: mtimeOf(st).getTime() };
        if (f.blob) {
          const o = blobObject(scratch.subarray(used, used + len));
          r.obj = { off: objBytes, len: o.body.length, crc: o.crc, sha: o.sha.toString("hex") };
          objects.push(o);
          objBytes += o.body.length;
        }
        files.push(r);
        used += len;
      } finally {
        fss.closeSync(fd);
      }
    }
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    error = { repo: err instanceof RepoError, message: e.message, ...(e.code ? { code: e.code } : {}) };
  } finally {
    cursor.close(true);
  }
  // Buffers of their own, never pooled ones: they are transferred.
  const buffer = new ArrayBuffer(used);
  new Uint8Array(buffer).set(scratch.subarray(0, used));
  const packed = new ArrayBuffer(objBytes);
  const out = new Uint8Array(packed);
  for (let i = 0, at = 0; i < objects.length; at += objects[i]!.body.length, i++) out.set(objects[i]!.body, at);
  return { id: req.id, buffer, objects: packed, files, ...(error ? { error } : {}) };
}
