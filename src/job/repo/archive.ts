// A tar or tar.gz as the repo. Two passes over one open file: the first reads headers only and
// checks every entry (names, depth, counts, sizes, links) and finds a single top-level directory
// to strip; the second checks the same again while streaming (the file may have changed) and
// re-owns the entries. The checks are incremental, along a path tree: linear in the names.
import { count } from "../../core/count.js";
import { constants as fsc } from "node:fs";
import fs, { type FileHandle } from "node:fs/promises";
import { pipeline, Transform } from "node:stream";
import { createGunzip } from "node:zlib";
import * as tar from "tar-stream";
import {
  Budget,
  DIR,
  FILE,
  LIMITS,
  LINK,
  OWNER,
  packed,
  PathTree,
  quote,
  RepoError,
  SYMLINK,
  tooLarge,
  type Body,
  type Item,
  type RepoArchive,
} from "./common.js";
import { breathe } from "./breathe.js";

type Entry = tar.ExtractEvents["entry"][1];
const KINDS: Record<string, number> = {
  file: FILE,
  "contiguous-file": FILE,
  directory: DIR,
  symlink: SYMLINK,
  link: LINK,
};

export async function tarArchive(file: string, max: number, maxEntries: number): Promise<RepoArchive> {
  const label = `repo.archive ${file}`;
  const fh = await fs
    .open(file, fsc.O_RDONLY | fsc.O_NONBLOCK)
    .catch(() => Promise.reject(new RepoError(`repo.archive: ${file} does not exist or cannot be read`)));
  try {
    if (!(await fh.stat()).isFile()) throw new RepoError(`repo.archive: ${file} is not a regular file`);
    const scan = await scanArchive(fh, label, max, maxEntries);
    return packed(archiveItems(fh, label, max, maxEntries, scan.strip), scan, () => fh.close().catch(() => {}));
  } catch (err) {
    await fh.close();
    throw err;
  }
}

/** One entry as checked: its components and, for each parent directory it implied, the depth. */
type Checked = { comps: string[]; kind: number; made: number[]; link?: string[] };

/** The rules every entry is held to, in archive order; one instance per pass. */
class Checker {
  readonly tree = new PathTree();
  readonly budget: Budget;
  files = 0;
  bytes = 0;
  nested = false;

  constructor(
    readonly label: string,
    readonly max: number,
    maxEntries: number,
  ) {
    this.budget = new Budget(label, maxEntries);
  }

  /** The entry checked and recorded, or undefined for one that is not loaded (devices, the root itself). */
  entry(h: tar.Header): Checked | undefined {
    const kind = KINDS[h.type ?? ""];
    if (!kind) return void this.budget.add(() => h.name, 0); // counted: every header is work
    const comps = this.clean(h.name, "entry");
    this.budget.add(() => h.name, Buffer.byteLength(h.name));
    if (!comps.length) return undefined;
    const made: number[] = [];
    let acc = 0;
    const ends = comps.map((c) => (acc += c.length + 1) - 1); // the length of each parent's name, about its bytes
    const parent = this.tree.dirs(comps, comps.length - 1, (i) => {
      made.push(i);
      this.budget.add(() => comps.slice(0, i + 1).join("/"), ends[i]!);
    });
    if (parent < 0) this.underNonDir(comps, -parent);
    const leaf = comps[comps.length - 1]!;
    const existing = this.tree.child(parent, leaf);
    if (existing !== undefined && !(kind === DIR && this.tree.kind(existing) === DIR))
      throw this.error(comps.join("/"), "appears twice in the archive");
    const link = kind === LINK ? this.hardLink(comps, h.linkname ?? "") : undefined;
    if (kind === SYMLINK && !(h.linkname && Buffer.byteLength(h.linkname) <= LIMITS.linkBytes))
      throw this.error(
        h.name,
        `is a symlink with an empty target or one longer than ${count(LIMITS.linkBytes, "byte")}`,
      );
    if (kind === SYMLINK && h.linkname.includes("\0"))
      throw this.error(h.name, "is a symlink whose target contains a NUL byte");
    if (existing === undefined) this.tree.add(parent, leaf, kind);
    if (kind === FILE && (this.files++, (this.bytes += h.size ?? 0)) > this.max)
      throw tooLarge(this.label, this.bytes, this.max);
    this.nested ||= comps.length > 1;
    return { comps, kind, made, link };
  }

  /** A relative, normalized name's components; absolute, `..`, too long or too deep are refused. */
  clean(raw: string, what: string): string[] {
    if (Buffer.byteLength(raw) > LIMITS.pathBytes)
      throw this.error(raw, `is longer than ${count(LIMITS.pathBytes, "byte")}`, what);
    if (raw.startsWith("/")) throw this.error(raw, "has an absolute path", what);
    // A NUL ends a name for every tar reader: "s\0x" would be read as "s" (past the checks below).
    if (raw.includes("\0")) throw this.error(raw, "contains a NUL byte", what);
    const comps = raw.split("/").filter((p) => p !== "" && p !== ".");
    if (comps.includes("..")) throw this.error(raw, `contains "..", which would escape the workspace`, what);
    if (comps.length > LIMITS.depth)
      throw this.error(raw, `is deeper than ${count(LIMITS.depth, "directory", "directories")}`, what);
    if (comps.some((c) => Buffer.byteLength(c) > LIMITS.componentBytes))
      throw this.error(raw, `has a path component longer than ${count(LIMITS.componentBytes, "byte")}`, what);
    return comps;
  }

  /** A hard link must name a regular file (or a link to one) earlier in the archive: anything else fails in the engine. */
  private hardLink(comps: string[], linkname: string): string[] {
    const target = this.clean(linkname, "hard link target");
    const id = this.tree.find(target);
    const kind = id === undefined ? 0 : this.tree.kind(id);
    if (kind !== FILE && kind !== LINK)
      throw this.error(
        comps.join("/"),
        `is a hard link to ${quote(linkname)}, which is not a regular file earlier in the archive`,
      );
    return target;
  }

  /** An entry under a symlink would be written through it, wherever it points. */
  private underNonDir(comps: string[], n: number): never {
    const at = comps.slice(0, n).join("/");
    const id = this.tree.find(comps.slice(0, n))!;
    const what = this.tree.kind(id) === SYMLINK ? `the symlink ${quote(at)}` : `${quote(at)}, which is not a directory`;
    throw this.error(comps.join("/"), `lies under ${what}`);
  }

  error(name: string, problem: string, what = "entry"): RepoError {
    return new RepoError(`${this.label}: ${what} ${quote(name)} ${problem}`);
  }

  /** After the last entry: the top-level directory to strip ("" for none), and no `.git` that is not a directory. */
  finish(): string {
    const t = this.tree;
    const top = t.tops === 1 && t.kind(t.firstTop) === DIR && this.nested ? t.firstTop : 0;
    const strip = top && t.firstTopName !== ".git" ? `${t.firstTopName}/` : "";
    const git = t.child(strip ? top : 0, ".git");
    if (git !== undefined && t.kind(git) !== DIR)
      throw this.error(`${strip}.git`, "is not a directory (a .git file or link points outside the repo)");
    return strip;
  }
}

/** First pass, headers only. */
async function scanArchive(
  fh: FileHandle,
  label: string,
  max: number,
  maxEntries: number,
): Promise<{ files: number; bytes: number; strip: string }> {
  const check = new Checker(label, max, maxEntries);
  for await (const entry of entries(fh, label, max)) {
    entry.resume();
    check.entry(entry.header);
    await breathe();
  }
  return { files: check.files, bytes: check.bytes, strip: check.finish() };
}

/** Second pass: entries re-owned by 1000:1000 under stripped names, missing parent directories added. */
async function* archiveItems(
  fh: FileHandle,
  label: string,
  max: number,
  maxEntries: number,
  strip: string,
): AsyncGenerator<Item> {
  const check = new Checker(label, max, maxEntries);
  const skip = strip ? 1 : 0;
  for await (const entry of entries(fh, label, max)) {
    const h = entry.header;
    const c = check.entry(h);
    if (c?.kind !== FILE) entry.resume();
    if (!c || c.comps.length <= skip || (skip && c.comps[0] !== strip.slice(0, -1))) continue;
    const name = c.comps.slice(skip).join("/");
    if (name === ".git" && c.kind !== DIR)
      throw check.error(name, "is not a directory (a .git file or link points outside the repo)");
    // Docker would create a missing parent owned by root: add it, owned by the agent.
    for (const i of c.made)
      if (i >= skip)
        yield {
          header: {
            name: `${c.comps.slice(skip, i + 1).join("/")}/`,
            type: "directory",
            mode: 0o755,
            size: 0,
            ...OWNER,
          },
        };
    const type = c.kind === FILE ? "file" : h.type;
    const mode = c.kind === DIR ? ((h.mode ?? 0o755) & 0o777) | 0o700 : (h.mode ?? 0o644) & 0o777;
    // A link target only where the entry is a link (pax gives any entry one: never passed on unchecked).
    const linkname = c.link ? c.link.slice(skip).join("/") : c.kind === SYMLINK ? h.linkname : undefined;
    const header = {
      name: c.kind === DIR ? `${name}/` : name,
      type,
      mode,
      mtime: h.mtime,
      size: c.kind === FILE ? (h.size ?? 0) : 0,
      linkname,
      ...OWNER,
    };
    yield c.kind === FILE ? { header, read: () => entry as unknown as Body } : { header };
  }
  if (check.finish() !== strip) throw new RepoError(`${label}: the archive changed while it was read`);
}

/**
 * The archive's entries; gzip is recognised by its magic bytes, not by the file name. What it
 * decompresses to is bounded too (a few GB of zeros after the last entry are still work).
 */
function openArchive(fh: FileHandle, label: string, max: number): tar.Extract {
  const extract = tar.extract();
  const limit = 2 * max + 64 * 1024 ** 2; // the files, and headers and padding for each
  let seen = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      if ((seen += chunk.length) > limit)
        return done(new RepoError(`${label}: the archive unpacks to more than ${count(limit, "byte")}`));
      done(null, chunk);
    },
  });
  (async () => {
    const head = Buffer.alloc(2);
    const { bytesRead } = await fh.read(head, 0, 2, 0);
    const raw = fh.createReadStream({ start: 0, autoClose: false });
    const gz = bytesRead === 2 && head[0] === 0x1f && head[1] === 0x8b;
    pipeline(gz ? [raw, createGunzip(), counter] : [raw, counter], (err) => err && extract.destroy(bad(label, err)));
    counter.pipe(extract); // extract is a streamx stream: piped to, not in the pipeline
    extract.on("close", () => counter.destroy()); // stopped early: so is the reading
  })().catch((err: Error) => extract.destroy(bad(label, err)));
  return extract;
}

/** tar-stream's own errors (a bad header, a truncated archive) are the archive's fault; a read error of the host's disk is not. */
function bad(label: string, err: Error): Error {
  if (err instanceof RepoError || "syscall" in err) return err;
  return new RepoError(`${label}: not a valid tar or tar.gz: ${err.message}`);
}

/** The entries, with errors as `bad` says. */
async function* entries(fh: FileHandle, label: string, max: number): AsyncGenerator<Entry> {
  try {
    yield* openArchive(fh, label, max);
  } catch (err) {
    throw bad(label, err as Error);
  }
}
