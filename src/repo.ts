// A job's repo into the sandbox's /workspace: a tar stream built on the host (a local directory,
// a host-side git clone, or a tar/tar.gz), put through the archive API, then a baseline tree id
// that the final patch is diffed against.
import { spawn } from "node:child_process";
import fss, { constants as fsc } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import ignore from "ignore";
import * as tar from "tar-stream";
import { writeBaseline } from "./patch.js";
import type { Sandbox } from "./sandbox/sandbox.js";

/** A repo that cannot be loaded as given (missing path, bad ref, unsafe archive): retrying will not help. */
export class RepoError extends Error {}

export type RepoSource = { path: string } | { git: string; ref?: string } | { archive: string };

export interface RepoArchive {
  /** A tar of the repo: entries owned by 1000:1000, relative names, modes and symlinks kept. */
  stream: Readable;
  /** Regular files and their total bytes, known before the stream is read. */
  files: number;
  bytes: number;
  /**
   * Symlinks whose target leaves the repo (`../x`): the archive API refuses them, so they are not
   * in the tar and loadRepo makes them in the container. Complete once the stream has ended.
   */
  symlinks: { name: string; target: string }[];
  /** Stops the stream and removes a host-side clone. */
  cleanup(): Promise<void>;
}

export interface RepoArchiveOptions {
  /** Bound on the total bytes of regular files, `.git` included (default 1 GiB). */
  maxBytes?: number;
  /** Bound on the host-side `git clone` and `git checkout` (default 600 s each). */
  gitTimeoutSec?: number;
}

export interface LoadedRepo {
  /** Tree id of the starting working tree: uncommitted changes included, ignored files excluded. */
  baseline: string;
  files: number;
  bytes: number;
  ms: number;
}

type Header = Partial<tar.Header> & { name: string; type: tar.Header["type"]; size: number };
type Body = Buffer | (AsyncIterable<Buffer> & { destroy(err?: Error): unknown });
type Item = { header: Header; read?: () => Body };

export const DEFAULT_REPO_MAX_BYTES = 1024 ** 3;
const OWNER = { uid: 1000, gid: 1000 } as const;
const SMALL_FILE = 1024 * 1024;

export async function repoArchive(repo: RepoSource, opts: RepoArchiveOptions = {}): Promise<RepoArchive> {
  const max = opts.maxBytes ?? DEFAULT_REPO_MAX_BYTES;
  if ("path" in repo) {
    const st = await fs.stat(repo.path).catch(() => undefined);
    if (!st) throw new RepoError(`repo.path: ${repo.path} does not exist`);
    if (!st.isDirectory()) throw new RepoError(`repo.path: ${repo.path} is not a directory`);
    return dirArchive(path.resolve(repo.path), true, max, `repo.path ${repo.path}`);
  }
  if ("git" in repo) {
    const dir = await cloneRepo(repo.git, repo.ref, opts.gitTimeoutSec ?? 600);
    const rm = () => fs.rm(dir, { recursive: true, force: true });
    try {
      // A fresh clone has nothing ignored worth filtering: it is tarred whole.
      return await dirArchive(dir, false, max, `repo.git ${redact(repo.git)}`, rm);
    } catch (err) {
      await rm();
      throw err;
    }
  }
  if ("archive" in repo) {
    const scan = await scanArchive(repo.archive, max);
    return packed(archiveItems(repo.archive, scan.strip), scan);
  }
  throw new RepoError("repo: expected exactly one of { path }, { git, ref? }, { archive }");
}

function tooLarge(label: string, bytes: number, max: number): Error {
  return new Error(`${label}: the repo is too large: ${bytes} bytes of files, the limit is ${max}`);
}

/** Whether a symlink's target leaves the repo root (what the archive API refuses). */
function escapes(name: string, target: string): boolean {
  const to = path.posix.normalize(path.posix.join(path.posix.dirname(name), target));
  return !target.startsWith("/") && (to === ".." || to.startsWith("../"));
}

// Sync fs calls are ~20x cheaper than async ones per small file; yielding every 20 ms keeps the
// worker's event loop (lock renewals, other jobs) responsive while a big repo is packed.
let lastYield = Date.now();
async function breathe(): Promise<void> {
  if (Date.now() - lastYield < 20) return;
  await new Promise((r) => setImmediate(r));
  lastYield = Date.now();
}

/** Packs entries in order, with backpressure: a slow consumer stops the reading of files. */
function packed(items: Iterable<Item> | AsyncIterable<Item>, sums: { files: number; bytes: number }, rm = async () => {}): RepoArchive {
  const symlinks: RepoArchive["symlinks"] = [];
  const pack = tar.pack();
  (async () => {
    for await (const { header, read } of items) {
      if (header.type === "symlink" && escapes(header.name, header.linkname ?? "")) symlinks.push({ name: header.name, target: header.linkname! });
      else await writeEntry(pack, header, read?.());
      await breathe();
    }
    pack.finalize();
  })().catch((err: Error) => pack.destroy(err));
  const stream = Readable.from(pack as AsyncIterable<Buffer>, { objectMode: false });
  return { stream, ...sums, symlinks, cleanup: async () => (stream.destroy(), rm()) };
}

function writeEntry(pack: tar.Pack, header: Header, body?: Body): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (err?: Error | null) => (err ? reject(err) : resolve());
    if (body === undefined || Buffer.isBuffer(body)) return void pack.entry(header, body ?? Buffer.alloc(0), done);
    const sink = pack.entry(header, done);
    (async () => {
      for await (const chunk of body) if (!sink.write(chunk)) await new Promise<void>((r) => sink.once("drain", () => r()));
      sink.end(undefined);
    })().catch((err: Error) => (body.destroy(), sink.destroy(err), reject(err)));
  });
}

// ---- local directories -------------------------------------------------------------------

type Rules = { base: string; ig: ReturnType<typeof ignore> }[];
/** With `filter`, the walk keeps what .gitignore files and info/exclude leave, and every tracked path. */
type Walk = { root: string; filter: boolean; tracked: Set<string>; out: Item[] };

async function dirArchive(root: string, filter: boolean, max: number, label: string, rm?: () => Promise<void>): Promise<RepoArchive> {
  const w: Walk = { root, filter, tracked: filter ? trackedPaths(root) : new Set(), out: [] };
  const exclude = filter ? readText(path.join(root, ".git/info/exclude")) : "";
  await walk(w, "", exclude ? [{ base: "", ig: ignore().add(exclude) }] : []); // info/exclude ranks below every .gitignore
  const files = w.out.filter((i) => i.header.type === "file");
  const bytes = files.reduce((n, i) => n + i.header.size, 0);
  if (bytes > max) throw tooLarge(label, bytes, max);
  let total = 0;
  for (const f of files)
    f.read = () => {
      const body = readNoFollow(path.join(root, f.header.name), f.header);
      if ((total += f.header.size) > max) throw tooLarge(label, total, max); // a file grew meanwhile
      return body;
    };
  return packed(w.out, { files: files.length, bytes }, rm);
}

/** A regular file's bytes, or undefined when missing or not a regular file (a symlink is not followed out of the repo). */
function readRegular(p: string): Buffer | undefined {
  try {
    return fss.lstatSync(p).isFile() ? fss.readFileSync(p) : undefined;
  } catch {
    return undefined; // ENOENT, or ENOTDIR when `.git` is a file
  }
}
const readText = (p: string) => readRegular(p)?.toString("utf8") ?? "";

/** Deepest .gitignore first; the first one with a verdict decides (git's precedence). */
function isIgnored(rules: Rules, rel: string, dir: boolean): boolean {
  for (let i = rules.length - 1; i >= 0; i--) {
    const { base, ig } = rules[i]!;
    const r = ig.test((base ? rel.slice(base.length + 1) : rel) + (dir ? "/" : ""));
    if (r.ignored || r.unignored) return r.ignored;
  }
  return false;
}

async function walk(w: Walk, rel: string, rules: Rules): Promise<void> {
  await breathe();
  const dir = path.join(w.root, rel);
  const names = fss.readdirSync(dir).sort();
  const gitignore = w.filter && names.includes(".gitignore") ? readText(path.join(dir, ".gitignore")) : "";
  if (gitignore) rules = [...rules, { base: rel, ig: ignore().add(gitignore) }];
  for (const n of names) {
    const name = rel ? `${rel}/${n}` : n;
    const st = fss.lstatSync(path.join(dir, n));
    const type = st.isSymbolicLink() ? "symlink" : st.isDirectory() ? "directory" : st.isFile() ? "file" : undefined;
    const isGit = name === ".git";
    // Sockets, fifos and devices are skipped; so is a `.git` file, which points outside the repo.
    if (!type || (isGit && type !== "directory")) continue;
    if (w.filter && !isGit && !w.tracked.has(name) && isIgnored(rules, name, type === "directory")) continue;
    // Owner rwx on directories, or uid 1000 could not write where the repo's owner could.
    const mode = type === "symlink" ? 0o777 : type === "directory" ? (st.mode & 0o777) | 0o700 : st.mode & 0o777;
    const linkname = type === "symlink" ? fss.readlinkSync(path.join(dir, n)) : undefined;
    w.out.push({ header: { name: type === "directory" ? `${name}/` : name, type, mode, size: type === "file" ? st.size : 0, mtime: st.mtime, linkname, ...OWNER } });
    // `.git` itself is always whole: the history must be there.
    if (type === "directory") await walk(isGit ? { ...w, filter: false } : w, name, isGit ? [] : rules);
  }
}

/**
 * Paths in `.git/index` and their parent directories, since git never ignores a tracked file. The
 * index (versions 2-4) is parsed here rather than by running host git under the repo's config.
 */
function trackedPaths(root: string): Set<string> {
  const out = new Set<string>();
  const buf = readRegular(path.join(root, ".git/index"));
  if (buf?.toString("latin1", 0, 4) !== "DIRC") return out;
  const fixed = 40 + (/objectformat\s*=\s*sha256/i.test(readText(path.join(root, ".git/config"))) ? 32 : 20) + 2; // stat, hash, flags
  const version = buf.readUInt32BE(4);
  let [off, prev] = [12, ""];
  try {
    for (let n = buf.readUInt32BE(8); n > 0; n--) {
      let p = off + fixed + (version >= 3 && buf.readUInt16BE(off + fixed - 2) & 0x4000 ? 2 : 0);
      let drop = 0; // v4: how much of the previous name to drop, as git's offset varint
      if (version === 4) for (let c = buf[p++]!, first = true; ; c = buf[p++]!, first = false) {
        drop = first ? c & 127 : ((drop + 1) << 7) | (c & 127);
        if (!(c & 128)) break;
      }
      const end = buf.indexOf(0, p);
      const name = (version === 4 ? prev.slice(0, prev.length - drop) : "") + buf.toString("utf8", p, end);
      off = version === 4 ? end + 1 : off + ((end - off + 8) & ~7); // v2/v3 entries are NUL-padded to 8 bytes
      for (let d = name; d && !out.has(d); d = d.slice(0, Math.max(0, d.lastIndexOf("/")))) out.add(d);
      prev = name;
    }
  } catch {
    // A torn or unknown index: the ignore rules alone decide.
  }
  return out;
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

// ---- tar / tar.gz archives ---------------------------------------------------------------

const KEPT = new Set(["file", "contiguous-file", "directory", "symlink", "link"]);

/** The archive as tar entries; gzip is recognised by its magic bytes, not by the file name. */
async function openArchive(file: string): Promise<tar.Extract> {
  const fh = await fs.open(file).catch(() => Promise.reject(new RepoError(`repo.archive: ${file} does not exist or cannot be read`)));
  const { buffer, bytesRead } = await fh.read(Buffer.alloc(2), 0, 2, 0).finally(() => fh.close());
  const raw = fss.createReadStream(file);
  const src = bytesRead === 2 && buffer[0] === 0x1f && buffer[1] === 0x8b ? raw.pipe(createGunzip()) : raw;
  const extract = tar.extract();
  raw.on("error", (e) => extract.destroy(e));
  src.on("error", (e: Error) => extract.destroy(new Error(`repo.archive: ${file} is not a valid tar or tar.gz: ${e.message}`)));
  src.pipe(extract);
  return extract;
}

/** A relative, normalized entry name ("" for the root); absolute paths and `..` are refused. */
function cleanName(file: string, raw: string): string {
  if (raw.startsWith("/")) throw new RepoError(`repo.archive: ${file}: entry "${raw}" has an absolute path`);
  const parts = raw.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) throw new RepoError(`repo.archive: ${file}: entry "${raw}" contains "..", which would escape the workspace`);
  return parts.join("/");
}

/** First pass, headers only: checks every name and the size, finds a single top-level directory to strip. */
async function scanArchive(file: string, max: number): Promise<{ files: number; bytes: number; strip: string }> {
  const names: string[] = [];
  const [symlinks, tops] = [new Set<string>(), new Set<string>()];
  let [files, bytes, nested] = [0, 0, false];
  for await (const entry of await openArchive(file)) {
    const h = entry.header;
    entry.resume();
    const name = KEPT.has(h.type) ? cleanName(file, h.name) : "";
    if (h.type === "link") cleanName(file, h.linkname ?? "");
    if (!name) continue;
    if (h.type === "file" || h.type === "contiguous-file") (files++, (bytes += h.size ?? 0));
    if (bytes > max) throw tooLarge(`repo.archive ${file}`, bytes, max);
    if (h.type === "symlink") symlinks.add(name);
    names.push(name);
    tops.add(name.includes("/") || h.type === "directory" ? name.split("/")[0]! : "\0a top-level file");
    nested ||= name.includes("/");
  }
  // An entry under a symlink would be written through it, wherever it points.
  for (const n of names)
    for (let i = n.indexOf("/"); i > 0; i = n.indexOf("/", i + 1))
      if (symlinks.has(n.slice(0, i))) throw new RepoError(`repo.archive: ${file}: entry "${n}" lies under the symlink "${n.slice(0, i)}"`);
  const [top] = tops;
  return { files, bytes, strip: tops.size === 1 && nested && top !== ".git" ? `${top}/` : "" };
}

/** Second pass: entries re-owned by 1000:1000 under stripped names, missing parent directories added. */
async function* archiveItems(file: string, strip: string): AsyncGenerator<Item> {
  const dirs = new Set<string>();
  const unstrip = (n: string) => (n.startsWith(strip) ? n.slice(strip.length) : "");
  for await (const entry of await openArchive(file)) {
    const h = entry.header;
    const name = KEPT.has(h.type) ? unstrip(cleanName(file, h.name)) : "";
    const type = h.type === "contiguous-file" ? "file" : h.type;
    if (type !== "file" || !name) entry.resume();
    if (!name) continue;
    // Docker would create a missing parent owned by root: add it, owned by the agent.
    for (let i = name.indexOf("/"); i > 0; i = name.indexOf("/", i + 1))
      if (!dirs.has(name.slice(0, i))) (dirs.add(name.slice(0, i)), yield { header: { name: `${name.slice(0, i)}/`, type: "directory", mode: 0o755, size: 0, ...OWNER } });
    if (type === "directory") dirs.add(name);
    const mode = type === "directory" ? (h.mode & 0o777) | 0o700 : h.mode & 0o777;
    const linkname = type === "link" ? unstrip(cleanName(file, h.linkname ?? "")) : h.linkname;
    const header = { name: type === "directory" ? `${name}/` : name, type, mode, mtime: h.mtime, size: type === "file" ? h.size : 0, linkname, ...OWNER };
    yield type === "file" ? { header, read: () => entry as unknown as Body } : { header };
  }
}

// ---- git (host side) ---------------------------------------------------------------------

/** Hides credentials in URLs before they reach an error message. */
const redact = (url: string) => url.replace(/\/\/[^/@]*@/, "//***@");

async function cloneRepo(url: string, ref: string | undefined, timeoutSec: number): Promise<string> {
  const label = `repo.git ${redact(url)}`;
  if (url.startsWith("-")) throw new RepoError(`${label}: not a repository URL`);
  if (ref !== undefined && (ref === "" || ref.startsWith("-"))) throw new RepoError(`${label}: bad ref "${ref}"`);
  const local = url.startsWith("file://") || fss.existsSync(url);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "patchbay-clone-"));
  try {
    const clone = await git(["clone", "--quiet", ...(local ? ["--no-hardlinks"] : []), "--", url, dir], timeoutSec);
    if (clone.code !== 0) throw new Error(`${label}: git clone failed: ${clone.stderr}`);
    const co = ref === undefined ? undefined : await git(["-C", dir, "checkout", "--quiet", ref], timeoutSec);
    if (co && co.code !== 0) throw new RepoError(`${label}: ref "${ref}" not found (no such branch, tag or commit): ${co.stderr}`);
    return dir;
  } catch (err) {
    await fs.rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Host git with no terminal prompt and a hard timeout; resolves to the exit code and stderr's tail. */
function git(args: string[], timeoutSec: number): Promise<{ code: number; stderr: string }> {
  const env = { ...process.env, GIT_TERMINAL_PROMPT: "0", GIT_SSH_COMMAND: process.env.GIT_SSH_COMMAND ?? "ssh -o BatchMode=yes" };
  return new Promise((resolve, reject) => {
    const child = spawn("git", ["-c", "protocol.ext.allow=never", ...args], { env, stdio: ["ignore", "ignore", "pipe"], timeout: timeoutSec * 1000, killSignal: "SIGKILL" });
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => (stderr = (stderr + c.toString("utf8")).slice(-2000)));
    child.on("error", reject);
    child.on("close", (code, signal) => {
      const tail = stderr.trim().split("\n").slice(-5).join("\n").slice(-600) || "(no output)";
      resolve({ code: code ?? -1, stderr: signal ? `killed by ${signal} after ${timeoutSec}s: ${tail}` : tail });
    });
  });
}

// ---- into the sandbox --------------------------------------------------------------------

/**
 * Puts the repo into /workspace and records the baseline. `prepared` is an archive already being
 * made (e.g. cloned while the sandbox was starting); its cleanup is done here either way.
 */
export async function loadRepo(sb: Sandbox, repo: RepoSource, opts: RepoArchiveOptions & { prepared?: Promise<RepoArchive> } = {}): Promise<LoadedRepo> {
  const t0 = Date.now();
  const archive = await (opts.prepared ?? repoArchive(repo, opts));
  try {
    await sb.files.putArchive("/workspace", archive.stream);
  } finally {
    await archive.cleanup();
  }
  const baseline = await writeBaseline(sb, archive.symlinks);
  return { baseline, files: archive.files, bytes: archive.bytes, ms: Date.now() - t0 };
}

/** A new baseline: the tree of /workspace as it is now (e.g. after setup commands, whose output is not the agent's change). */
export function snapshotBaseline(sb: Sandbox): Promise<string> {
  return writeBaseline(sb);
}
