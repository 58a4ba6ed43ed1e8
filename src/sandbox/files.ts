// Container files through the archive API (getArchive / putArchive / infoArchive) and tar-stream:
// byte-exact, with mode and owner kept on overwrite and a bound on what a read may bring back.
import type Docker from "dockerode";
import path from "node:path/posix";
import type { Readable } from "node:stream";
import * as tar from "tar-stream";
import { defaults } from "../config.js";
import { statusOf } from "./docker.js";
import type { FileAgent, AgentReply } from "./file-agent.js";

export interface FileStat {
  /** What the path (after following symlinks) is. */
  type: "file" | "directory" | "other";
  size: number;
  mode: number;
  mtime: string;
  /** The path stat'ed after following symlinks. */
  path: string;
  /** Set when the given path is a symlink: where it led (absolute, inside the container). */
  symlinkTarget?: string;
}

export interface FileEntry {
  bytes: Buffer;
  mode: number;
  uid: number;
  gid: number;
  path: string;
}

export class FileError extends Error {
  constructor(
    message: string,
    readonly code: "ENOENT" | "EISDIR" | "EFBIG" | "EINVAL" | "EROFS" | "EIO" | "ENOSPC" | "EACCES" | "ECHANGED",
  ) {
    super(message);
  }
}

const GO_MODE_DIR = 2 ** 31;
const GO_MODE_SYMLINK = 2 ** 27;
const GO_MODE_TYPE = 0xff << 24; // dir, append, exclusive, temporary, symlink, device, pipe, socket

function checkAbsolute(p: string): string {
  if (!path.isAbsolute(p)) throw new FileError(`path must be absolute: ${p}`, "EINVAL");
  if (p.includes("\0")) throw new FileError(`path contains a NUL byte: ${JSON.stringify(p)}`, "EINVAL");
  return path.normalize(p);
}

export class Files {
  /**
   * `agent`: the in-container fast lane for small operations (see file-agent.ts); without it,
   * or when it cannot run, everything goes through the archive API.
   */
  constructor(
    private container: Docker.Container,
    private agent?: FileAgent,
  ) {}

  /** Stat; symlinks are followed within the container. */
  async stat(p: string): Promise<FileStat | undefined> {
    const abs = checkAbsolute(p);
    const r = await this.agent?.request({ op: "stat", path: abs });
    if (!r) return this.archiveStat(abs);
    const h = r.header as { missing?: boolean; type: FileStat["type"]; size: number; mode: number; mtime: number; real: string; link: boolean };
    if (r.header.error) throw agentError(r, abs);
    if (h.missing) return undefined;
    return { type: h.type, size: h.size, mode: h.mode, mtime: String(h.mtime), path: h.real, ...(h.link ? { symlinkTarget: h.real } : {}) };
  }

  /** Stat through infoArchive; symlinks are followed within the container (up to 40 hops). */
  async archiveStat(p: string): Promise<FileStat | undefined> {
    let cur = checkAbsolute(p);
    let symlinkTarget: string | undefined;
    for (let hop = 0; hop < 40; hop++) {
      const raw = await this.rawStat(cur);
      if (!raw) return undefined;
      if (raw.mode & GO_MODE_SYMLINK && raw.linkTarget) {
        cur = path.resolve(path.dirname(cur), raw.linkTarget);
        symlinkTarget = cur;
        continue;
      }
      const type = raw.mode & GO_MODE_DIR ? "directory" : raw.mode & GO_MODE_TYPE ? "other" : "file";
      return { type, size: raw.size, mode: raw.mode & 0o7777, mtime: raw.mtime, path: cur, ...(symlinkTarget ? { symlinkTarget } : {}) };
    }
    throw new FileError(`too many levels of symbolic links: ${p}`, "EINVAL");
  }

  private async rawStat(p: string): Promise<{ mode: number; size: number; mtime: string; linkTarget: string } | undefined> {
    try {
      const res = (await this.container.infoArchive({ path: p })) as unknown as Readable & { headers: Record<string, string> };
      res.resume();
      const header = res.headers["x-docker-container-path-stat"];
      if (!header) throw new FileError(`no stat header for ${p}`, "EIO");
      return JSON.parse(Buffer.from(header, "base64").toString("utf8"));
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  async read(p: string, opts: { maxBytes?: number } = {}): Promise<Buffer> {
    return (await this.readEntry(p, opts)).bytes;
  }

  /** Reads a regular file with its mode and owner. Symlinks are followed. */
  async readEntry(p: string, opts: { maxBytes?: number } = {}): Promise<FileEntry> {
    const max = opts.maxBytes ?? defaults.files.maxReadBytes;
    const abs = checkAbsolute(p);
    const r = await this.agent?.request({ op: "read", path: abs, max });
    if (!r) return this.archiveReadEntry(abs, max);
    if (r.header.error === "EFBIG") throw new FileError(`file too large: ${p} is ${r.header.size ?? `over ${max}`} bytes, the limit is ${max}`, "EFBIG");
    if (r.header.error === "ENOENT") throw new FileError(`no such file: ${p}`, "ENOENT");
    if (r.header.error) throw agentError(r, p);
    const h = r.header as { mode: number; uid: number; gid: number; real: string };
    return { bytes: r.body, mode: h.mode, uid: h.uid, gid: h.gid, path: h.real };
  }

  async archiveReadEntry(p: string, max: number): Promise<FileEntry> {
    let cur = checkAbsolute(p);
    for (let hop = 0; hop < 40; hop++) {
      const got = await this.readOnce(cur, max);
      if (got.kind === "file") return got.entry;
      if (got.kind === "missing") throw new FileError(`no such file: ${p}`, "ENOENT");
      if (got.kind === "directory") throw new FileError(`is a directory: ${p}`, "EISDIR");
      if (got.kind === "symlink") cur = path.resolve(path.dirname(cur), got.target);
    }
    throw new FileError(`too many levels of symbolic links: ${p}`, "EINVAL");
  }

  private async readOnce(
    p: string,
    max: number,
  ): Promise<{ kind: "file"; entry: FileEntry } | { kind: "symlink"; target: string } | { kind: "missing" | "directory" }> {
    let res: Readable;
    try {
      res = (await this.container.getArchive({ path: p })) as unknown as Readable;
    } catch (err) {
      if (statusOf(err) === 404) return { kind: "missing" };
      throw err;
    }
    const extract = tar.extract();
    return new Promise((resolve, reject) => {
      let settled = false;
      const settle = (v: Awaited<ReturnType<Files["readOnce"]>> | Error) => {
        if (settled) return;
        settled = true;
        res.destroy();
        extract.destroy();
        v instanceof Error ? reject(v) : resolve(v);
      };
      extract.on("entry", (header, stream, next) => {
        if (header.type === "symlink") return settle({ kind: "symlink", target: header.linkname ?? "" });
        if (header.type === "directory") return settle({ kind: "directory" });
        if (header.type !== "file" && header.type !== "contiguous-file")
          return settle(new FileError(`not a regular file (${header.type}): ${p}`, "EINVAL"));
        const size = header.size ?? 0;
        // Refuse before reading a byte: the worker never buffers more than the bound.
        if (size > max) return settle(new FileError(`file too large: ${p} is ${size} bytes, the limit is ${max}`, "EFBIG"));
        const chunks: Buffer[] = [];
        stream.on("data", (c) => chunks.push(c as Buffer));
        stream.on("end", () => {
          settle({ kind: "file", entry: { bytes: Buffer.concat(chunks, size), mode: (header.mode ?? 0o644) & 0o7777, uid: header.uid ?? 1000, gid: header.gid ?? 1000, path: p } });
          next();
        });
        stream.on("error", settle);
      });
      extract.on("finish", () => settle(new FileError(`empty archive for ${p}`, "EIO")));
      extract.on("error", settle);
      res.on("error", settle);
      res.pipe(extract);
    });
  }

  /**
   * Writes a file byte-exact. Overwriting keeps the existing mode and owner (unless `mode` is
   * given); a new file is owned by uid 1000 with mode 0644. A symlink is written through.
   */
  async write(p: string, bytes: Uint8Array, opts: { mode?: number } = {}): Promise<void> {
    const abs = checkAbsolute(p);
    const r = await this.agent?.request({ op: "write", path: abs, ...(opts.mode !== undefined ? { mode: opts.mode } : {}) }, Buffer.from(bytes));
    if (!r) return this.archiveWrite(abs, bytes, opts);
    if (r.header.error === "ENOENT") throw new FileError(`parent directory does not exist: ${path.dirname(abs)} (create it first, e.g. mkdir -p)`, "ENOENT");
    if (r.header.error) throw agentError(r, abs);
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
    if (r.header.error === "ECHANGED") return false;
    if (r.header.error) throw agentError(r, abs);
    return true;
  }

  async archiveWrite(p: string, bytes: Uint8Array, opts: { mode?: number; uid?: number; gid?: number } = {}): Promise<void> {
    let target = checkAbsolute(p);
    let mode = opts.mode;
    const parent = await this.stat(path.dirname(target));
    if (!parent) throw new FileError(`parent directory does not exist: ${path.dirname(target)} (create it first, e.g. mkdir -p)`, "ENOENT");
    if (parent.type !== "directory") throw new FileError(`parent is not a directory: ${path.dirname(target)}`, "EINVAL");
    const existing = await this.stat(target);
    if (existing) {
      if (existing.type === "directory") throw new FileError(`is a directory: ${p}`, "EISDIR");
      target = existing.path;
      mode ??= existing.mode;
    }
    await this.putTar(path.dirname(target), [
      { name: path.basename(target), mode: mode ?? 0o644, uid: opts.uid ?? 1000, gid: opts.gid ?? 1000, type: "file", body: Buffer.from(bytes) },
    ]);
  }

  /** Creates a directory and its missing parents, owned by uid 1000. */
  async mkdirp(dir: string): Promise<void> {
    const abs = checkAbsolute(dir);
    const r = await this.agent?.request({ op: "mkdirp", path: abs });
    if (!r) return this.archiveMkdirp(abs);
    if (r.header.error) throw agentError(r, abs);
  }

  /** Removes a file (not a directory). */
  async remove(p: string): Promise<void> {
    const abs = checkAbsolute(p);
    const r = await this.agent?.request({ op: "remove", path: abs });
    if (r?.header.error) throw agentError(r, abs);
    if (!r) {
      const exec = await this.container.exec({ Cmd: ["rm", "-f", "--", abs], User: "1000:1000" });
      await exec.start({ Detach: true });
    }
  }

  /** Entries up to two levels below `dir`, hidden names (and what is under them) left out. */
  async list(dir: string): Promise<string[] | undefined> {
    const r = await this.agent?.request({ op: "list", path: checkAbsolute(dir) });
    if (!r) return undefined;
    if (r.header.error) throw agentError(r, dir);
    return r.header.entries as string[];
  }

  /**
   * A fingerprint of the tree under `dir` (paths, inodes, modes, sizes, mtimes and ctimes; no
   * content), as the agent's uid sees it: equal fingerprints mean nothing in it was written,
   * made, removed or renamed in between. Undefined without the agent, over `maxEntries`, or when
   * part of the tree cannot be read.
   */
  async digest(dir: string, maxEntries = 20_000): Promise<string | undefined> {
    const r = await this.agent?.request({ op: "digest", path: checkAbsolute(dir), max: maxEntries });
    const d = r?.header.digest;
    return typeof d === "string" && /^[0-9a-f]{40}$/.test(d) ? d : undefined;
  }

  async archiveMkdirp(dir: string): Promise<void> {
    let base = checkAbsolute(dir);
    const missing: string[] = [];
    for (;;) {
      const st = await this.stat(base);
      if (st) {
        if (st.type !== "directory") throw new FileError(`not a directory: ${base}`, "EINVAL");
        base = st.path;
        break;
      }
      missing.unshift(path.basename(base));
      base = path.dirname(base);
    }
    if (!missing.length) return;
    await this.putTar(
      base,
      missing.map((_, i) => ({ name: missing.slice(0, i + 1).join("/"), mode: 0o755, uid: 1000, gid: 1000, type: "directory" as const })),
    );
  }

  /** Extracts entries into `dir` through putArchive. */
  async putTar(dir: string, entries: (Partial<tar.Header> & { name: string; body?: Buffer })[]): Promise<void> {
    const pack = tar.pack();
    for (const { body, ...h } of entries) pack.entry({ mtime: new Date(), ...h }, body ?? "");
    pack.finalize();
    const chunks: Buffer[] = [];
    for await (const c of pack) chunks.push(c as Buffer);
    await this.putArchive(dir, Buffer.concat(chunks));
  }

  /** Extracts a tar archive (a Buffer or a stream) into `dir`. */
  async putArchive(dir: string, archive: Buffer | Readable): Promise<void> {
    try {
      await this.container.putArchive(archive as never, { path: dir });
    } catch (err) {
      const msg = String((err as { json?: { message?: string } }).json?.message ?? (err as Error).message);
      if (statusOf(err) === 404) throw new FileError(`directory does not exist in the sandbox: ${dir}`, "ENOENT");
      if (/read-only/i.test(msg)) throw new FileError(`read-only location: ${dir} (only /workspace is writable through the file API)`, "EROFS");
      throw new FileError(`writing into ${dir} failed: ${msg}`, "EIO");
    }
  }
}

function agentError(r: AgentReply, p: string): FileError {
  const code = String(r.header.error);
  const text: Record<string, string> = {
    ENOENT: `no such file or directory: ${p}`,
    ENOTDIR: `a parent of ${p} is not a directory`,
    EISDIR: `is a directory: ${p}`,
    EROFS: `read-only location: ${p} (only /workspace and /tmp are writable)`,
    ENOSPC: `no space left on device writing ${p} (the workspace is full)`,
    EACCES: `permission denied: ${p}`,
  };
  const known = ["ENOENT", "EISDIR", "EROFS", "ENOSPC", "EACCES"].includes(code) ? (code as FileError["code"]) : "EIO";
  return new FileError(text[code] ?? `${p}: ${r.header.message ?? code}`, known);
}
