// What the repo loaders share: the error a hostile or broken repo fails with, the bounds every
// source is held to, a path tree that stays linear however deep the names, and the tar packer.
import { count } from "../../core/count.js";
import { Readable } from "node:stream";
import path from "node:path";
import type { Header as TarHeader } from "tar-stream";
import { BlobPack, type BlobObject } from "./blob-pack.js";
import { TarWriter } from "./tar-writer.js";
import { kinded } from "../../core/errors.js";
import { breathe, mayGoOn } from "./breathe.js";

/** A repo that cannot be loaded as given (missing path, bad ref, unsafe archive): retrying will not help. */
export class RepoError extends kinded("repo") {}

/**
 * Bounds on names, so that no repo can make the host's work or memory grow faster than its size.
 * A relative path leaves room for "/workspace/" within Linux's PATH_MAX (4096); a component is
 * NAME_MAX; a symlink's target is PATH_MAX less its NUL.
 */
export const LIMITS = {
  pathBytes: 4000,
  componentBytes: 255,
  depth: 256,
  linkBytes: 4095,
  /** All names of one repo together (implicit parent directories included). */
  nameBytesTotal: 128 * 1024 ** 2,
  /** A `.git/index` larger than this is not read. */
  indexBytes: 256 * 1024 ** 2,
  /** A `.gitignore` or `info/exclude` larger than this is refused (its rules are compiled and run per path). */
  ignoreFileBytes: 1024 ** 2,
} as const;

export const DEFAULT_REPO_MAX_BYTES = 1024 ** 3;
export const DEFAULT_REPO_MAX_ENTRIES = 1_000_000;
export const OWNER = { uid: 1000, gid: 1000 } as const;

export type Header = Partial<TarHeader> & { name: string; type: TarHeader["type"]; size: number };
export type Body = Buffer | (AsyncIterable<Buffer> & { destroy(err?: Error): unknown });
/** `read`: its body, and (a file's, where a reader thread made it) its pack object. */
export type Item = { header: Header; read?: () => Body; object?: BlobObject };

export interface RepoArchive {
  /** A tar of the repo: entries owned by 1000:1000, relative names, modes and symlinks kept. */
  stream: Readable;
  /** Regular files, known before the stream is read. */
  files: number;
  /** Their total bytes: an archive's known before the stream is read, a directory's complete once it has ended (counted as its files are read). */
  bytes: number;
  /**
   * Symlinks whose target leaves the repo (`../x`): the archive API refuses them, so they are not
   * in the tar and loadRepo makes them in the container. Complete once the stream has ended.
   */
  symlinks: { name: string; target: string }[];
  /** The files' contents as a git pack for the baseline's store. Complete once the stream has ended. */
  blobs: BlobPack;
  /** Stops the stream and removes a host-side clone. */
  cleanup(): Promise<void>;
  /** A `{ git }` repo's commit, as cloned. */
  commit?: string;
}

/** A hostile name for an error message: escaped (no control characters reach a log) and cut. */
export function quote(name: string, max = 200): string {
  return name.length > max ? `${JSON.stringify(name.slice(0, max)).slice(0, -1)}…"` : JSON.stringify(name);
}

export function tooLarge(label: string, bytes: number, max: number, detail = ""): RepoError {
  return new RepoError(
    `${label}: the repo is too large: ${count(bytes, "byte")} of files${detail ? ` (${detail})` : ""}, the limit is ${max}`,
  );
}

/** Counts a repo's entries and name bytes against the bounds; a RepoError past them. */
export class Budget {
  entries = 0;
  nameBytes = 0;
  constructor(
    readonly label: string,
    readonly maxEntries: number,
  ) {}

  add(name: string | (() => string), bytes: number): void {
    if (++this.entries > this.maxEntries)
      throw new RepoError(
        `${this.label}: the repo has more than ${count(this.maxEntries, "entry", "entries")} (at ${quote(typeof name === "string" ? name : name())})`,
      );
    if ((this.nameBytes += bytes) > LIMITS.nameBytesTotal)
      throw new RepoError(
        `${this.label}: the repo's paths together are longer than ${count(LIMITS.nameBytesTotal, "byte")}`,
      );
  }
}

export const DIR = 1;
export const FILE = 2;
export const SYMLINK = 3;
export const LINK = 4;

/**
 * Relative paths as a tree of components, each node keyed by its parent's id: memory and time are
 * linear in the names' length however deep they go (a set of every prefix string is quadratic).
 * Consecutive names usually share a parent; the last directory path found is reused.
 */
export class PathTree {
  private readonly ids = new Map<string, number>();
  private readonly kinds: number[] = [DIR];
  private last: { comps: string[]; ids: number[] } = { comps: [], ids: [0] };
  /** Children of the root, and the first of them. */
  tops = 0;
  firstTop = -1;
  firstTopName = "";

  child(parent: number, comp: string): number | undefined {
    return this.ids.get(`${parent}/${comp}`);
  }
  kind(id: number): number {
    return this.kinds[id]!;
  }
  setKind(id: number, kind: number): void {
    this.kinds[id] = kind;
  }
  add(parent: number, comp: string, kind: number): number {
    const id = this.kinds.push(kind) - 1;
    this.ids.set(`${parent}/${comp}`, id);
    if (parent === 0 && this.tops++ === 0) [this.firstTop, this.firstTopName] = [id, comp];
    return id;
  }
  /** The node at comps, or undefined. */
  find(comps: string[]): number | undefined {
    let id: number | undefined = 0;
    for (let i = 0; i < comps.length && id !== undefined; i++) id = this.child(id, comps[i]!);
    return id;
  }

  /**
   * The directory comps[0..n), each missing one added as a directory (`made(i)` is told of
   * comps[0..i]). When comps[0..i] is not a directory, `-(i + 1)` instead.
   */
  dirs(comps: string[], n: number, made?: (i: number) => void): number {
    const { comps: prev, ids: prevIds } = this.last;
    let i = 0;
    while (i < n && i < prev.length && prev[i] === comps[i]) i++;
    const ids = prevIds.slice(0, i + 1);
    let id = ids[i]!;
    for (; i < n; i++) {
      const next = this.child(id, comps[i]!);
      if (next !== undefined && this.kinds[next] !== DIR) return -(i + 1);
      id = next ?? this.add(id, comps[i]!, DIR);
      if (next === undefined) made?.(i);
      ids.push(id);
    }
    this.last = { comps: comps.slice(0, n), ids };
    return id;
  }
}

/** Whether a symlink's target leaves the repo root (what the archive API refuses). */
function escapes(name: string, target: string): boolean {
  const to = path.posix.normalize(path.posix.join(path.posix.dirname(name), target));
  return !target.startsWith("/") && (to === ".." || to.startsWith("../"));
}

/**
 * Packs entries in order, with backpressure: a slow consumer stops the reading of files.
 * `sums.bytes` may grow while the stream runs (a local directory's are known as its files are read).
 */
export function packed(
  items: Iterable<Item> | AsyncIterable<Item>,
  sums: { files: number; bytes: number },
  rm = async () => {},
  blobs = new BlobPack(),
): RepoArchive {
  const symlinks: RepoArchive["symlinks"] = [];
  let wake: (() => void) | undefined;
  let stopped = false;
  const stream = new Readable({
    read() {
      const w = wake;
      wake = undefined;
      w?.();
    },
  });
  stream.once("close", () => ((stopped = true), wake?.()));
  const tar = new TarWriter((chunk) => !stopped && stream.push(chunk));
  /** Waits until the consumer wants more (or has gone). */
  const room = async () => {
    if (tar.wantsMore || stopped) return;
    await new Promise<void>((r) => (wake = r));
    tar.wantsMore = true;
  };
  (async () => {
    for await (const { header, read, object } of items) {
      if (stopped) break;
      // A symlink out of the repo is not in the tar: the archive API refuses it (made in the container instead).
      const outside = header.type === "symlink" && escapes(header.name, header.linkname ?? "");
      if (outside) symlinks.push({ name: header.name, target: header.linkname! });
      const body = outside ? undefined : read?.();
      // Files read whole (all but the largest) go into the pack as well, and the trees above them;
      // streamed ones git writes itself. The repo's own .git is not part of the baseline.
      if (!header.name.startsWith(".git/")) {
        if (header.type === "file")
          blobs.entry(
            header.name,
            (header.mode ?? 0) & 0o100 ? "exec" : "file",
            object ? blobs.put(object) : Buffer.isBuffer(body) ? blobs.add(body) : undefined,
          );
        else if (header.type === "symlink")
          blobs.entry(header.name, "symlink", blobs.add(Buffer.from(header.linkname ?? "")));
        else if (header.type === "directory") blobs.entry(header.name, "dir");
        else blobs.entry(header.name, "file"); // another kind (a hard link): no tree is made above it
      }
      if (!outside) {
        // A body read whole needs no waiting but for the consumer's room (most files: no promise).
        if (body === undefined || Buffer.isBuffer(body)) writeWhole(tar, header, body);
        else await writeStreamed(tar, header, body, room, () => stopped);
        if (!tar.wantsMore) await room();
      }
      if (!mayGoOn()) await breathe();
    }
    if (stopped) return;
    tar.end();
    stream.push(null);
  })().catch((err: Error) => stream.destroy(err));
  return {
    stream,
    symlinks,
    blobs,
    get files() {
      return sums.files;
    },
    get bytes() {
      return sums.bytes;
    },
    cleanup: async () => (stream.destroy(), rm()),
  };
}

/** An entry whose body (if any) is read whole: its header, then exactly as many bytes as it says. */
function writeWhole(tar: TarWriter, header: Header, body: Buffer | undefined): void {
  const size = header.type === "file" ? header.size : 0;
  if ((body?.length ?? 0) !== size) throw changedSize(header.name, body?.length ?? 0, size);
  tar.header(header);
  if (body) tar.data(body);
  tar.pad(size);
}

/** A streamed file's entry; it fails if the file does not give exactly the bytes its header says. */
async function writeStreamed(
  tar: TarWriter,
  header: Header,
  body: Exclude<Body, Buffer>,
  room: () => Promise<void>,
  gone: () => boolean,
): Promise<void> {
  const size = header.type === "file" ? header.size : 0;
  let n = 0;
  try {
    tar.header(header);
    for await (const chunk of body) {
      if ((n += chunk.length) > size) break;
      tar.data(chunk);
      await room();
      if (gone()) return; // the consumer left: the rest is not read
    }
  } finally {
    body.destroy();
  }
  if (n !== size) throw changedSize(header.name, n, size);
  tar.pad(size);
}

const changedSize = (name: string, n: number, size: number) =>
  new Error(
    `${quote(name)} changed size while it was read (${count(n, "byte")}, not ${size}): load the repo again once nothing changes it`,
  );
