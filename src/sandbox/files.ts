// Container files, byte-exact, with mode and owner kept on overwrite and a bound on what a read may
// bring back. Every read, stat and write acts with the agent's permissions (uid 1000): through the
// file agent, or where it cannot run through a process of its own as uid 1000 (files-exec.ts), never
// through the engine's archive API, which acts as root. The archive API only takes the worker's
// own bulk loads (putArchive: the repo's checked tar, in an image without tar).
import { count } from "../core/count.js";
import path from "node:path/posix";
import { Readable } from "node:stream";
import { defaults } from "../core/config/config.js";
import type { Box } from "../backend/types.js";
import type { FileAgent } from "./file-agent.js";
import { ExecFileError, ExecFiles } from "./files-exec.js";
import { PatchbayError } from "../core/errors.js";

/** What Files.stat says of a path. */
export interface FileStat {
  /** What the path (after following symlinks) is. */
  type: "file" | "directory" | "other";
  /** Its size in bytes. */
  size: number;
  /** Its mode bits (permissions and type), as stat(2) gives them. */
  mode: number;
  /** When it was last modified, as the box's stat printed it. */
  mtime: string;
  /** The path stat'ed after following symlinks. */
  path: string;
  /** Set when the given path is a symlink: where it led (absolute, inside the container). */
  symlinkTarget?: string;
  /**
   * A regular file's content, read with the stat (Files.statRead) when the file was within the
   * bound asked for (the stat's fields are then those of the file read). Absent otherwise: read it.
   */
  bytes?: Buffer;
}

/** Content a caller holds of a file (Files.statRead): its bytes and their sha256. */
export interface HeldContent {
  /** The sha256 of `bytes`, in hex. */
  sha256: string;
  /** The content. */
  bytes: Buffer;
}

/** A regular file read by Files.readEntry, with what an overwrite keeps. */
export interface FileEntry {
  /** Its content. */
  bytes: Buffer;
  /** Its mode bits. */
  mode: number;
  /** Its owner's uid. */
  uid: number;
  /** Its group's gid. */
  gid: number;
  /** The path read, after following symlinks. */
  path: string;
}

/** How Files.read and Files.readEntry read a file. */
export interface ReadOptions {
  /**
   * The most bytes read; a larger file is refused (FileError EFBIG).
   * @default 16777216 (16 MiB)
   */
  maxBytes?: number;
  /**
   * A larger file gives its first `maxBytes` bytes instead of being refused, where the file agent
   * reads it (without the agent, each read is a process of its own, which still refuses it).
   * @default false
   */
  head?: boolean;
  /**
   * No symlink on the path is followed, even one swapped in during the read (an EINVAL error),
   * where the file agent reads it (without the agent, the path's realpath is compared after the read).
   * @default false
   */
  noFollow?: boolean;
}

/** How Files.write and Files.execWrite write a file. */
export interface WriteOptions {
  /**
   * The mode of the file written.
   * @default an existing file's own mode; 0644 for a new one
   */
  mode?: number;
}

/** A file operation the box refused; `code` says why, as errno would. */
export class FileError extends PatchbayError {
  constructor(
    message: string,
    readonly code:
      "ENOENT" | "ENOTDIR" | "EISDIR" | "EFBIG" | "EINVAL" | "EROFS" | "EIO" | "ENOSPC" | "EACCES" | "ECHANGED",
  ) {
    super("tool", message);
  }
}

function checkAbsolute(p: string): string {
  if (!path.isAbsolute(p)) throw new FileError(`path must be absolute: ${p}`, "EINVAL");
  if (p.includes("\0")) throw new FileError(`path contains a NUL byte: ${JSON.stringify(p)}`, "EINVAL");
  return path.normalize(p);
}

/** A sandbox's files, read and written with the agent's permissions (uid 1000), byte-exact. */
export class Files {
  private readonly slow: ExecFiles;

  /**
   * `agent`: the in-container fast lane for small operations (see file-agent.ts); without it,
   * or when it cannot run, each operation is a process of its own as uid 1000.
   */
  constructor(
    private box: Box,
    private agent?: FileAgent,
  ) {
    this.slow = new ExecFiles(box);
  }

  /** Stat; symlinks are followed within the container. */
  async stat(p: string): Promise<FileStat | undefined> {
    return this.statRead(p);
  }

  /**
   * Stat, and with `max` a regular file of at most that many bytes read in the same request
   * (FileStat.bytes; symlinks followed as `read` follows them) where the file agent runs. `held`:
   * content the caller holds; when the file's is the same (its sha256, computed in the box from the
   * bytes read), it is not sent again and FileStat.bytes is `held.bytes`.
   */
  async statRead(p: string, max?: number, held?: HeldContent): Promise<FileStat | undefined> {
    const abs = checkAbsolute(p);
    const known = max !== undefined ? held : undefined;
    const r = await this.agent?.request({
      op: "stat",
      path: abs,
      ...(max !== undefined ? { read: max } : {}),
      ...(known ? { have: known.sha256 } : {}),
    });
    if (!r) return this.execStat(abs);
    if (r.error) throw fileError(r.error.error, r.error.message, abs);
    const h = r.reply;
    if ("missing" in h) return undefined;
    return {
      type: h.type,
      size: h.size,
      mode: h.mode,
      mtime: String(h.mtime),
      path: h.real,
      ...(h.link ? { symlinkTarget: h.real } : {}),
      ...readBytes(h, r.body, max, known),
    };
  }

  /** Stat through a process as uid 1000; symlinks are followed within the container. */
  async execStat(p: string): Promise<FileStat | undefined> {
    const abs = checkAbsolute(p);
    const st = await this.slow.stat(abs).catch(execError(abs));
    if (!st) return undefined;
    const link = st.link || st.real !== abs;
    return {
      type: st.type,
      size: st.size,
      mode: st.mode,
      mtime: st.mtime,
      path: st.real,
      ...(link ? { symlinkTarget: st.real } : {}),
    };
  }

  /** Reads a regular file's bytes. Symlinks are followed. */
  async read(p: string, opts: ReadOptions = {}): Promise<Buffer> {
    return (await this.readEntry(p, opts)).bytes;
  }

  /** Reads a regular file with its mode and owner. Symlinks are followed. */
  async readEntry(p: string, opts: ReadOptions = {}): Promise<FileEntry> {
    const max = opts.maxBytes ?? defaults.files.maxReadBytes;
    const abs = checkAbsolute(p);
    const r = await this.agent?.request({
      op: "read",
      path: abs,
      max,
      ...(opts.head ? { head: true } : {}),
      ...(opts.noFollow ? { nofollow: true } : {}),
    });
    if (!r) return this.execReadEntry(abs, max);
    if (r.error) throw readError(r.error.error, r.error.message, p, max, r.error.size);
    const h = r.reply;
    return { bytes: r.body, mode: h.mode, uid: h.uid, gid: h.gid, path: h.real };
  }

  /** Reads a regular file through a process as uid 1000: bytes, mode and owner from one open. */
  async execReadEntry(p: string, max: number): Promise<FileEntry> {
    const abs = checkAbsolute(p);
    try {
      const f = await this.slow.read(abs, max);
      return { bytes: f.bytes, mode: f.mode, uid: f.uid, gid: f.gid, path: f.real };
    } catch (err) {
      if (err instanceof ExecFileError) throw readError(err.code, err.message, p, max, err.size);
      throw err;
    }
  }

  /**
   * Writes a file byte-exact. Overwriting keeps the existing mode and owner (unless `mode` is
   * given); a new file is owned by uid 1000 with mode 0644. A symlink is written through.
   */
  async write(p: string, bytes: Uint8Array, opts: WriteOptions = {}): Promise<void> {
    const abs = checkAbsolute(p);
    const r = await this.agent?.request(
      { op: "write", path: abs, ...(opts.mode !== undefined ? { mode: opts.mode } : {}) },
      Buffer.from(bytes),
    );
    if (!r) return this.execWrite(abs, bytes, opts);
    if (r.error) throw writeError(r.error.error, r.error.message, abs);
  }

  /** Writes through a process as uid 1000, with the same rules as the agent's write. */
  async execWrite(p: string, bytes: Uint8Array, opts: WriteOptions = {}): Promise<void> {
    const abs = checkAbsolute(p);
    await this.slow.write(abs, Buffer.from(bytes), opts.mode).catch((err: unknown) => {
      throw err instanceof ExecFileError ? writeError(err.code, err.message, abs) : err;
    });
  }

  /**
   * Writes only if the file still holds content whose sha256 is `expectSha256` (checked and
   * written in one step inside the container). Resolves false when it changed. Needs the agent;
   * without it, undefined (the caller checks by reading back).
   */
  async writeIfUnchanged(p: string, expectSha256: string, bytes: Uint8Array): Promise<boolean | undefined> {
    const abs = checkAbsolute(p);
    const r = await this.agent?.request({ op: "write", path: abs, expect: expectSha256 }, Buffer.from(bytes));
    if (!r) return undefined;
    if (r.error?.error === "ECHANGED") return false;
    if (r.error) throw fileError(r.error.error, r.error.message, abs);
    return true;
  }

  /**
   * Replaces the `cut` bytes at offset `at` with `insert`, only if the file still holds content
   * whose sha256 is `expectSha256` (checked and written in one step inside the container, as
   * writeIfUnchanged): an edit of a large file sends only what it changes. Resolves false when the
   * file changed (or is gone); undefined when the agent cannot splice (write the whole file then).
   */
  async spliceIfUnchanged(
    p: string,
    expectSha256: string,
    at: number,
    cut: number,
    insert: Uint8Array,
  ): Promise<boolean | undefined> {
    const abs = checkAbsolute(p);
    if (!this.agent?.has("splice")) return undefined;
    const r = await this.agent.request(
      { op: "write", path: abs, expect: expectSha256, splice: [at, cut] },
      Buffer.from(insert.buffer, insert.byteOffset, insert.byteLength),
    );
    if (!r) return undefined;
    if (r.error?.error === "ECHANGED") return false;
    if (r.error) throw fileError(r.error.error, r.error.message, abs);
    return true;
  }

  /** Creates a directory and its missing parents, owned by uid 1000. */
  async mkdirp(dir: string): Promise<void> {
    const abs = checkAbsolute(dir);
    const r = await this.agent?.request({ op: "mkdirp", path: abs });
    if (!r) return this.slow.mkdirp(abs).catch(execError(abs, true));
    if (r.error) throw fileError(r.error.error, r.error.message, abs);
  }

  /** Removes a file (not a directory). */
  async remove(p: string): Promise<void> {
    const abs = checkAbsolute(p);
    const r = await this.agent?.request({ op: "remove", path: abs });
    if (!r) return this.slow.remove(abs).catch(execError(abs));
    if (r.error) throw fileError(r.error.error, r.error.message, abs);
  }

  /** Entries up to two levels below `dir`, hidden names (and what is under them) left out. */
  async list(dir: string): Promise<string[] | undefined> {
    const r = await this.agent?.request({ op: "list", path: checkAbsolute(dir) });
    if (!r) return undefined;
    if (r.error) throw fileError(r.error.error, r.error.message, dir);
    return r.reply.entries;
  }

  /**
   * A fingerprint of the tree under `dir` (paths, inodes, modes, sizes, mtimes and ctimes; no
   * content), as the agent's uid sees it: equal fingerprints mean nothing in it was written,
   * made, removed or renamed in between. Undefined without the agent, over `maxEntries`, or when
   * part of the tree cannot be read.
   */
  async digest(dir: string, maxEntries = 20_000): Promise<string | undefined> {
    const r = await this.agent?.request({ op: "digest", path: checkAbsolute(dir), max: maxEntries });
    return r?.reply && "digest" in r.reply ? r.reply.digest : undefined;
  }

  /** Extracts a tar archive (a Buffer or a stream) into `dir` through the backend, where it can (Docker's archive API). */
  async putArchive(dir: string, archive: Buffer | Readable): Promise<void> {
    if (!this.box.putArchive) throw new FileError("this sandbox backend cannot extract an archive without tar", "EIO");
    try {
      await this.box.putArchive(Buffer.isBuffer(archive) ? Readable.from([archive]) : archive, dir);
    } catch (err) {
      const msg = String((err as { json?: { message?: string } }).json?.message ?? (err as Error).message);
      if ((err as { statusCode?: number } | null)?.statusCode === 404)
        throw new FileError(`directory does not exist in the sandbox: ${dir}`, "ENOENT");
      if (/read-only/i.test(msg))
        throw new FileError(`read-only location: ${dir} (only /workspace is writable through the file API)`, "EROFS");
      throw new FileError(`writing into ${dir} failed: ${msg}`, "EIO");
    }
  }
}

/**
 * The content a stat brought back: the body only where the agent says it read the file, never past
 * the bound asked for; `same` says it is the content the caller holds.
 */
function readBytes(
  h: { read?: true; same?: true; size: number },
  body: Buffer,
  max: number | undefined,
  known: HeldContent | undefined,
): { bytes?: Buffer } {
  if (h.read !== true || max === undefined) return {};
  if (h.same === true) return known && known.bytes.length === h.size ? { bytes: known.bytes } : {};
  return body.length <= max ? { bytes: body } : {};
}

const MESSAGES: Record<string, (p: string) => string> = {
  ENOENT: (p) => `no such file or directory: ${p}`,
  ENOTDIR: (p) => `a parent of ${p} is not a directory`,
  EISDIR: (p) => `is a directory: ${p}`,
  EROFS: (p) => `read-only location: ${p} (only /workspace and /tmp are writable)`,
  ENOSPC: (p) => `no space left on device writing ${p} (the workspace is full)`,
  EACCES: (p) => `permission denied: ${p}`,
};

/** An error code of the agent's (or the exec's) as a FileError with a message for the model. */
function fileError(code: string, message: string | undefined, p: string): FileError {
  const known = ["ENOENT", "ENOTDIR", "EISDIR", "EROFS", "ENOSPC", "EACCES", "EINVAL"].includes(code)
    ? (code as FileError["code"])
    : "EIO";
  return new FileError(MESSAGES[code]?.(p) ?? `${p}: ${message ?? code}`, known);
}

function readError(
  code: string,
  message: string | undefined,
  p: string,
  max: number,
  size: number | undefined,
): FileError {
  if (code === "EFBIG")
    return new FileError(
      `file too large: ${p} is ${size === undefined ? `over ${count(max, "byte")}` : count(size, "byte")}, the limit is ${max}`,
      "EFBIG",
    );
  if (code === "ENOENT") return new FileError(`no such file: ${p}`, "ENOENT");
  return fileError(code, message, p);
}

function writeError(code: string, message: string | undefined, p: string): FileError {
  if (code === "ENOENT")
    return new FileError(
      `parent directory does not exist: ${path.dirname(p)} (create it first, e.g. mkdir -p)`,
      "ENOENT",
    );
  return fileError(code, message, p);
}

/** An exec lane's failure as a FileError (`mkdirp`: a path in the way is not a directory). */
function execError(p: string, mkdirp = false): (err: unknown) => never {
  return (err) => {
    if (!(err instanceof ExecFileError)) throw err;
    if (mkdirp && (err.code === "ENOTDIR" || err.code === "EINVAL"))
      throw new FileError(`not a directory: ${p}`, "EINVAL");
    throw fileError(err.code, err.message, p);
  };
}
