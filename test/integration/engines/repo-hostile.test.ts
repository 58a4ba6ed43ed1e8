// Hostile repos against repoArchive on the host: crafted git indexes, deep or lying archives,
// local git sources that point at other host repos, and highly compressible blobs. Each must fail
// as a RepoError (not retried) or load, without blocking the worker's event loop: lag < 100 ms.
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import * as tar from "tar-stream";
import { afterAll, describe, expect, it } from "vitest";
import {
  loadRepo,
  RepoError,
  repoArchive,
  type RepoArchive,
  type RepoArchiveOptions,
  type RepoSource,
} from "../../../src/job/repo/load.js";
import type { Sandbox } from "../../../src/sandbox/sandbox.js";
import { withLag, type Lag } from "../../support/lag.js";

const MAX_LAG_MS = 100;
const ROOT = path.resolve(import.meta.dirname, "../../..");
const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), "patchbay-hostile-test-"));
afterAll(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

let count = 0;
const fresh = (prefix = "d") => path.join(tmpRoot, `${prefix}${count++}`);

function hostDir(files: Record<string, string | Buffer> = {}): string {
  const dir = fresh();
  fs.mkdirSync(dir, { recursive: true });
  for (const [name, body] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), body);
  }
  return dir;
}

const GIT_ID = [
  "-c",
  "user.name=t",
  "-c",
  "user.email=t@t",
  "-c",
  "init.defaultBranch=main",
  "-c",
  "commit.gpgSign=false",
];
function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", [...GIT_ID, ...args], { cwd, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 }).trim();
}
/** A repo with the given files committed. */
function gitRepo(files: Record<string, string | Buffer>): string {
  const dir = hostDir(files);
  git(dir, "init", "-q");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "init");
  return dir;
}

/** The archive's entry names (and bodies of small files), then cleanup. */
async function drain(a: RepoArchive): Promise<Map<string, { header: tar.Header; body: Buffer }>> {
  const out = new Map<string, { header: tar.Header; body: Buffer }>();
  try {
    const extract = tar.extract();
    a.stream.on("error", (e) => extract.destroy(e));
    a.stream.pipe(extract);
    for await (const entry of extract) {
      const chunks: Buffer[] = [];
      for await (const c of entry) if (entry.header.size < 1024 * 1024) chunks.push(c as Buffer);
      out.set(entry.header.name, { header: entry.header, body: Buffer.concat(chunks) });
    }
  } finally {
    await a.cleanup();
  }
  return out;
}

// PATCHBAY_LAG_REPORT=1 prints the worst lag of each test.
const lags = new Map<string, Lag>();
const noteLag = ({ lagMs, wallMs }: Lag) => {
  const name = expect.getState().currentTestName ?? "?";
  const was = lags.get(name) ?? { lagMs: 0, wallMs: 0 };
  lags.set(name, { lagMs: Math.max(was.lagMs, lagMs), wallMs: Math.max(was.wallMs, wallMs) });
};
afterAll(() => {
  if (process.env.PATCHBAY_LAG_REPORT)
    for (const [name, l] of lags)
      console.log(`lag ${String(l.lagMs).padStart(4)} ms (wall ${String(l.wallMs).padStart(4)} ms)  ${name}`);
});

/** repoArchive and the draining of its stream, under a lag monitor. */
async function load(repo: RepoSource, opts: RepoArchiveOptions = {}) {
  const r = await withLag(async () => drain(await repoArchive(repo, { git: { env: process.env }, ...opts })));
  noteLag(r);
  return { entries: r.value, error: r.error, lagMs: r.lagMs };
}

/** Whether any entry holds `needle` in its name or body. */
const leaks = (entries: Map<string, { body: Buffer }> | undefined, needle: string) =>
  [...(entries ?? new Map<string, { body: Buffer }>()).entries()].some(
    ([n, e]) => n.includes(needle) || e.body.includes(needle),
  );

type ChildResult = {
  code: number | null;
  signal: string | null;
  ms: number;
  out?: { ok: boolean; repoError: boolean; message: string; bytes: number } & Lag;
};
/**
 * repoArchive + drain in a child node (its own heap bound and a wall-clock bound), for inputs that
 * would kill or freeze the test process on unfixed code.
 */
async function inChild(
  repo: RepoSource,
  opts: RepoArchiveOptions,
  limits: { heapMb: number; timeoutMs: number },
): Promise<ChildResult> {
  const script = path.join(tmpRoot, `child${count++}.mts`);
  fs.writeFileSync(
    script,
    `import { repoArchive, RepoError } from ${JSON.stringify(path.join(ROOT, "src/job/repo/load.ts"))};
import { withLag } from ${JSON.stringify(path.join(ROOT, "test/support/lag.ts"))};
const r = await withLag(async () => {
  const a = await repoArchive(${JSON.stringify(repo)}, { git: { env: process.env }, ...${JSON.stringify(opts)} });
  let bytes = 0;
  try { for await (const c of a.stream) bytes += c.length; } finally { await a.cleanup(); }
  return bytes;
});
const e = r.error as Error | undefined;
console.log(JSON.stringify({ ok: !e, repoError: e instanceof RepoError, message: e ? String(e.message) : "", lagMs: r.lagMs, wallMs: r.wallMs, bytes: r.value ?? 0 }));
`,
  );
  const t0 = Date.now();
  const child = spawn(process.execPath, [`--max-old-space-size=${limits.heapMb}`, "--import", "tsx", script], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr.resume();
  const timer = setTimeout(() => child.kill("SIGKILL"), limits.timeoutMs);
  const [code, signal] = await new Promise<[number | null, string | null]>((r) =>
    child.on("close", (c, s) => r([c, s])),
  );
  clearTimeout(timer);
  const line = stdout.trim().split("\n").pop() ?? "";
  const out = line.startsWith("{") ? (JSON.parse(line) as ChildResult["out"]) : undefined;
  if (out) noteLag(out);
  return { code, signal, ms: Date.now() - t0, out };
}

// ---- 1. crafted .git/index ------------------------------------------------------------------

/**
 * An index v4 whose every entry keeps the whole previous name (drop 0) and appends one byte: name
 * lengths grow 1, 2, 3…, so the names together are quadratic in the index's size.
 */
function growingIndexV4(bytes: number): Buffer {
  const per = 40 + 20 + 2 + 1 + 1 + 1; // stat, sha1, flags, varint drop=0, "a", NUL
  const n = Math.floor((bytes - 12 - 20) / per);
  const buf = Buffer.alloc(12 + n * per + 20);
  buf.write("DIRC", 0, "latin1");
  buf.writeUInt32BE(4, 4);
  buf.writeUInt32BE(n, 8);
  for (let i = 0, off = 12; i < n; i++, off += per) {
    buf.writeUInt32BE(0o100644, off + 24);
    buf.writeUInt16BE(Math.min(i + 1, 0xfff), off + 60);
    buf[off + 63] = 0x61; // drop (off+62) and the NUL (off+64) stay 0
  }
  return buf;
}

function repoWithIndex(index: Buffer): string {
  const dir = gitRepo({ ".gitignore": "*.log\n", "a.txt": "a\n", "x.log": "ignored\n" });
  fs.writeFileSync(path.join(dir, ".git/index"), index);
  return dir;
}

describe("1. a crafted .git/index in a { path } repo", () => {
  it("a 4 MB v4 index of 60k entries with ever-growing names neither kills the worker nor blocks it", async () => {
    const index = growingIndexV4(4 * 1024 * 1024);
    expect(index.readUInt32BE(8)).toBeGreaterThan(60_000);
    const r = await inChild({ path: repoWithIndex(index) }, {}, { heapMb: 256, timeoutMs: 45_000 });
    expect({ code: r.code, signal: r.signal }).toEqual({ code: 0, signal: null });
    expect(r.out).toMatchObject({ ok: true });
    expect(r.out!.lagMs).toBeLessThan(MAX_LAG_MS);
  }, 60_000);

  it("a 1.3 MB variant loads with lag < 100 ms; the bad index is ignored and the ignore rules decide", async () => {
    const r = await load({ path: repoWithIndex(growingIndexV4(1.3 * 1024 * 1024)) });
    expect(r.error).toBeUndefined();
    expect(r.entries?.has("a.txt")).toBe(true);
    expect(r.entries?.has("x.log")).toBe(false);
    expect(r.entries?.get(".git/index")?.header.size).toBeGreaterThan(1024 * 1024);
    expect(r.lagMs).toBeLessThan(MAX_LAG_MS);
  });

  it("v4 prefix drops count bytes, not characters: a tracked-but-ignored file after a non-ASCII name is kept", async () => {
    const dir = gitRepo({ ".gitignore": "b\n", aé: "x\n" });
    fs.writeFileSync(path.join(dir, "b"), "tracked though ignored\n");
    git(dir, "add", "-f", "b");
    git(dir, "update-index", "--index-version", "4");
    const r = await load({ path: dir });
    expect(r.error).toBeUndefined();
    expect([...r.entries!.keys()].filter((n) => !n.startsWith(".git/"))).toEqual(
      expect.arrayContaining([".gitignore", "aé", "b"]),
    );
  });

  it("a big legitimate v4 index (150k entries) is parsed without blocking the loop", async () => {
    const dir = gitRepo({ ".gitignore": "*.gen\n", "keep.gen": "tracked though ignored\n", "other.gen": "ignored\n" });
    git(dir, "add", "-f", "keep.gen");
    const blob = git(dir, "hash-object", "-w", "keep.gen");
    const lines = Array.from(
      { length: 150_000 },
      (_, i) => `100644 ${blob}\tsrc/m${i % 500}/deep/er/file-${i}.ts\n`,
    ).join("");
    execFileSync("git", ["update-index", "--index-info"], { cwd: dir, input: lines });
    git(dir, "update-index", "--index-version", "4");
    const r = await load({ path: dir });
    expect(r.error).toBeUndefined();
    expect(r.entries?.has("keep.gen")).toBe(true);
    expect(r.entries?.has("other.gen")).toBe(false);
    expect(r.lagMs).toBeLessThan(MAX_LAG_MS);
  });
});

// ---- 2. deep and lying archives -------------------------------------------------------------

async function tarball(
  entries: (Partial<tar.Header> & { name: string; body?: string | Buffer })[],
  gz = true,
): Promise<string> {
  const pack = tar.pack();
  for (const { body, ...h } of entries) pack.entry({ uid: 0, gid: 0, ...h }, body ?? "");
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack) chunks.push(c as Buffer);
  const file = fresh("archive");
  fs.writeFileSync(file, gz ? await promisify(gzip)(Buffer.concat(chunks)) : Buffer.concat(chunks));
  return file;
}

/**
 * n empty files named prefix + a 4-digit number, as a tar.gz: one entry packed by tar-stream (slow
 * for long names), copied with its number rewritten in the pax record (data, so no checksum).
 */
async function numberedTarball(prefix: string, n: number): Promise<string> {
  const pack = tar.pack();
  pack.entry({ name: `${prefix}0000`, uid: 0, gid: 0 }, "");
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack) chunks.push(c as Buffer);
  const one = Buffer.concat(chunks).subarray(0, -1024); // without the end-of-archive blocks
  const at = one.indexOf("0000\n");
  const all = Buffer.concat([
    ...Array.from({ length: n }, (_, i) => Buffer.from(one).fill(String(i).padStart(4, "0"), at, at + 4)),
    Buffer.alloc(1024),
  ]);
  const file = fresh("archive");
  fs.writeFileSync(file, await promisify(gzip)(all));
  return file;
}

describe("2. deep paths in an { archive }", () => {
  it("3,000 pax paths 8,000 characters deep in ~60 KB of tar.gz: a RepoError at once, lag < 100 ms", async () => {
    const file = await numberedTarball("a/".repeat(4000), 3000);
    expect(fs.statSync(file).size).toBeLessThan(200 * 1024);
    const r = await inChild({ archive: file }, {}, { heapMb: 512, timeoutMs: 30_000 });
    expect({ code: r.code, signal: r.signal }).toEqual({ code: 0, signal: null });
    expect(r.out).toMatchObject({ ok: false, repoError: true });
    expect(r.out!.message).toMatch(/entry "a\/a\/a.*" .*(longer than|deeper than)/);
    expect(r.out!.message.length).toBeLessThan(600); // the hostile name is cut
    expect(r.out!.lagMs).toBeLessThan(MAX_LAG_MS);
  }, 45_000);

  it("3,000 entries 256 components deep (within the bounds) load with lag < 100 ms", async () => {
    const deep = "aaaaaaaaaaaaaa/".repeat(255);
    const file = await numberedTarball(`${deep}f`, 3000);
    const r = await load({ archive: file });
    expect(r.error).toBeUndefined();
    expect(r.entries?.size).toBe(3000 + 254); // the single top-level directory is stripped
    expect(r.entries?.has(`${deep.slice(15)}f2999`)).toBe(true);
    expect(r.lagMs).toBeLessThan(MAX_LAG_MS);
  });

  it("refuses a component over 255 bytes, a depth over 256, too many entries; hostile names are escaped", async () => {
    const long = await load({ archive: await tarball([{ name: `${"x".repeat(256)}/f`, body: "" }]) });
    expect(long.error).toBeInstanceOf(RepoError);
    expect(String(long.error)).toMatch(/a path component longer than 255 bytes/);
    const deep = await load({ archive: await tarball([{ name: `${"d/".repeat(300)}f`, body: "" }]) });
    expect(String(deep.error)).toMatch(/deeper than 256 directories/);
    const many = await load(
      { archive: await tarball(Array.from({ length: 101 }, (_, i) => ({ name: `f${i}`, body: "" }))) },
      { maxEntries: 100 },
    );
    expect(many.error).toBeInstanceOf(RepoError);
    expect(String(many.error)).toMatch(/more than 100 entries/);
    const esc = await load({ archive: await tarball([{ name: "\u001b[31mred\n/../x", body: "" }]) });
    expect(esc.error).toBeInstanceOf(RepoError);
    expect((esc.error as Error).message).toContain(String.raw`"\u001b[31mred\n/../x"`);
    expect((esc.error as Error).message).not.toMatch(/[\u001b\n]/);
  });
});

// ---- 3. repo-caused failures are RepoErrors -------------------------------------------------

async function repoErrorOf(repo: RepoSource, opts: RepoArchiveOptions = {}): Promise<unknown> {
  const r = await load(repo, opts);
  expect(r.lagMs).toBeLessThan(MAX_LAG_MS);
  return r.error;
}

describe("3. failures that are the repo's fault are RepoErrors (not retried)", () => {
  it("clone failures and too-large repos of every kind", async () => {
    await expect(repoErrorOf({ git: path.join(tmpRoot, "no-such-repo") })).resolves.toBeInstanceOf(RepoError);
    await expect(repoErrorOf({ git: "http://127.0.0.1:9/nothing-listens-here.git" })).resolves.toBeInstanceOf(
      RepoError,
    );
    const dir = gitRepo({ "a.txt": "a".repeat(100) });
    for (const repo of [
      { path: dir },
      { git: dir },
      { archive: await tarball([{ name: "a.txt", body: "a".repeat(100) }]) },
    ]) {
      const err = await repoErrorOf(repo, { maxBytes: 50 });
      expect(err).toBeInstanceOf(RepoError);
      expect(String(err)).toMatch(/too large: \d+ bytes of files.*the limit is 50/);
    }
  });

  it("an archive that is not a tar, or a truncated tar.gz", async () => {
    const junk = fresh("junk");
    fs.writeFileSync(junk, Buffer.concat([Buffer.from([0x1f, 0x8b, 8, 0]), Buffer.alloc(600, 7)]));
    expect(await repoErrorOf({ archive: junk })).toBeInstanceOf(RepoError);
    const ok = fs.readFileSync(await tarball([{ name: "a.txt", body: "a".repeat(5000) }]));
    const cut = fresh("cut");
    fs.writeFileSync(cut, ok.subarray(0, ok.length - 12));
    expect(await repoErrorOf({ archive: cut })).toBeInstanceOf(RepoError);
  });

  it("hard links to a missing entry, a later one, a directory, a symlink, outside; a .git that is not a directory", async () => {
    const cases: [string, (Partial<tar.Header> & { name: string; body?: string })[]][] = [
      [
        "missing",
        [
          { name: "a", body: "a" },
          { name: "l", type: "link", linkname: "nope" },
        ],
      ],
      [
        "later",
        [
          { name: "l", type: "link", linkname: "a" },
          { name: "a", body: "a" },
        ],
      ],
      [
        "directory",
        [
          { name: "d/", type: "directory" },
          { name: "l", type: "link", linkname: "d" },
        ],
      ],
      [
        "symlink",
        [
          { name: "s", type: "symlink", linkname: "/etc/passwd" },
          { name: "l", type: "link", linkname: "s" },
        ],
      ],
      ["outside", [{ name: "l", type: "link", linkname: "../../etc/passwd" }]],
      ["itself", [{ name: "l", type: "link", linkname: "l" }]],
      [
        ".git file",
        [
          { name: ".git", body: "gitdir: /etc\n" },
          { name: "a", body: "a" },
        ],
      ],
      [
        ".git symlink",
        [
          { name: ".git", type: "symlink", linkname: "/tmp" },
          { name: "a", body: "a" },
        ],
      ],
      // A NUL ends a name for every tar reader (Docker's archive API too): "s\0ü" would be written as
      // "s", a symlink out of the workspace that the entry after it would be written through.
      [
        "NUL in a name",
        [
          { name: "s/", type: "directory" },
          { name: "s\u0000ü", type: "symlink", linkname: "/usr/bin" },
          { name: "s/git", body: "x" },
        ],
      ],
      ["NUL in a target", [{ name: "t", type: "symlink", linkname: `${"x".repeat(120)}\u0000ü` }]], // long: a pax linkpath, NUL and all
    ];
    for (const [what, entries] of cases) {
      const err = await repoErrorOf({ archive: await tarball(entries) });
      expect([what, err]).toEqual([what, expect.any(RepoError)]);
    }
    // A hard link to an earlier regular file is fine, also under a stripped top directory.
    const ok = await load({
      archive: await tarball([
        { name: "p/a", body: "a" },
        { name: "p/l", type: "link", linkname: "p/a" },
      ]),
    });
    expect(ok.error).toBeUndefined();
    expect(ok.entries?.get("l")?.header).toMatchObject({ type: "link", linkname: "a" });
    // pax gives any entry a link target; a file's is not passed on (unchecked, and here with a NUL).
    const odd = await load({
      archive: await tarball([{ name: "f", body: "body", linkname: `${"x".repeat(120)}\u0000` }]),
    });
    expect(odd.error).toBeUndefined();
    expect(odd.entries?.get("f")?.header.linkname ?? null).toBeNull();
    expect(odd.entries?.get("f")?.body.toString()).toBe("body");
  });

  it("an archive swapped after the scan fails the load as a RepoError (not as the engine's error)", async () => {
    const [file, evil] = [
      await tarball([{ name: "a.txt", body: "a" }]),
      await tarball([
        { name: "l", type: "symlink", linkname: "/etc" },
        { name: "l/x", body: "x" },
      ]),
    ];
    const archive = await repoArchive({ archive: file });
    fs.copyFileSync(evil, file); // rewritten in place, before the stream is read
    // Like the engine: the upload fails with its own error when the stream breaks (both load paths).
    const upload = (_dir: string, s: NodeJS.ReadableStream) =>
      new Promise<void>(
        (resolve, reject) => (
          s.on("error", () => reject(new Error("engine: unexpected EOF"))),
          s.on("end", resolve),
          s.resume()
        ),
      );
    const sb = {
      files: { putArchive: upload },
      putTarStream: (dir: string, s: NodeJS.ReadableStream) => upload(dir, s).then(() => true),
    } as unknown as Sandbox;
    const err = await loadRepo(sb, { archive: file }, { prepared: Promise.resolve(archive) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RepoError);
    // Which of its faults is met first depends on how the streams interleave under load: its
    // symlink escape, or its tar read as cut short (seen once in CI). Either is the repo's, said so.
    expect(String(err)).toMatch(/under the symlink "l"|not a valid tar or tar\.gz: Unexpected end of data/);
  });
});

// ---- 4. local git sources that reach other host repos ---------------------------------------

const SECRET = "TOPSECRET-host-repo-content";

describe("4. a local { git } source cannot read other host repos", () => {
  const secret = gitRepo({ "secret.txt": `${SECRET}\n` });
  const secretHead = git(secret, "rev-parse", "HEAD");

  /** A repo whose main branch is the secret repo's commit, its objects borrowed from the secret repo. */
  function borrowing(file: "alternates" | "http-alternates", bare = false): string {
    const dir = fresh();
    git(tmpRoot, "init", "-q", ...(bare ? ["--bare"] : []), dir);
    const gitDir = bare ? dir : path.join(dir, ".git");
    fs.writeFileSync(path.join(gitDir, "objects/info", file), `${path.join(secret, ".git/objects")}\n`);
    fs.writeFileSync(path.join(gitDir, "refs/heads/main"), `${secretHead}\n`);
    return dir;
  }

  const attacks: Record<string, () => string> = {
    "a .git file (gitdir: another repo)": () =>
      hostDir({ ".git": `gitdir: ${path.join(secret, ".git")}\n`, "x.txt": "x\n" }),
    "a .git symlink to another repo": () => {
      const dir = hostDir({ "x.txt": "x\n" });
      fs.symlinkSync(path.join(secret, ".git"), path.join(dir, ".git"));
      return dir;
    },
    "objects/info/alternates": () => borrowing("alternates"),
    "objects/info/http-alternates": () => borrowing("http-alternates"),
    "a bare repo with alternates": () => borrowing("alternates", true),
    "a symlinked objects directory": () => {
      const dir = fresh();
      git(tmpRoot, "init", "-q", dir);
      fs.rmSync(path.join(dir, ".git/objects"), { recursive: true });
      fs.symlinkSync(path.join(secret, ".git/objects"), path.join(dir, ".git/objects"));
      fs.writeFileSync(path.join(dir, ".git/refs/heads/main"), `${secretHead}\n`);
      return dir;
    },
    "a symlinked pack file": () => {
      git(secret, "gc", "-q");
      const dir = fresh();
      git(tmpRoot, "init", "-q", dir);
      const packs = path.join(secret, ".git/objects/pack");
      for (const f of fs.readdirSync(packs))
        fs.symlinkSync(path.join(packs, f), path.join(dir, ".git/objects/pack", f));
      fs.writeFileSync(path.join(dir, ".git/refs/heads/main"), `${secretHead}\n`);
      return dir;
    },
    "a commondir file": () => {
      const dir = fresh();
      git(tmpRoot, "init", "-q", dir);
      fs.writeFileSync(path.join(dir, ".git/commondir"), `${path.join(secret, ".git")}\n`);
      return dir;
    },
    "a bare repo holding a .git file (git would try it first)": () => {
      const dir = fresh();
      git(tmpRoot, "init", "-q", "--bare", dir);
      fs.writeFileSync(path.join(dir, ".git"), `gitdir: ${path.join(secret, ".git")}\n`);
      return dir;
    },
  };

  for (const [name, make] of Object.entries(attacks)) {
    it(`refuses ${name}, as a path and as a file:// URL`, async () => {
      const dir = make();
      for (const url of [dir, `file://${dir}`]) {
        const r = await load({ git: url });
        expect(leaks(r.entries, SECRET) || leaks(r.entries, "secret.txt")).toBe(false);
        expect([url, r.error]).toEqual([url, expect.any(RepoError)]);
        expect(String(r.error)).toMatch(/repo\.git .*: (a local repo|the local repo)/);
        expect(r.lagMs).toBeLessThan(MAX_LAG_MS);
      }
    });
  }

  it("still clones a plain local repo, a bare one, and a file:// URL", async () => {
    const bare = fresh();
    git(tmpRoot, "clone", "-q", "--bare", secret, bare);
    for (const url of [secret, bare, `file://${secret}`]) {
      const r = await load({ git: url });
      expect(r.error).toBeUndefined();
      expect(r.entries?.get("secret.txt")?.body.toString()).toBe(`${SECRET}\n`);
    }
  });
});

// ---- 5. the size bound holds before anything is checked out ---------------------------------

/** Total bytes of regular files under dir now (git creates and removes directories meanwhile). */
function duBytes(dir: string): number {
  let n = 0;
  const dirs = [dir];
  while (dirs.length) {
    const d = dirs.pop()!;
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      continue; // removed meanwhile
    }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) dirs.push(p);
      else if (e.isFile()) {
        try {
          n += fs.lstatSync(p).size;
        } catch {
          // removed meanwhile
        }
      }
    }
  }
  return n;
}

describe("5. the host disk is not filled before the size check", () => {
  it("a small repo with a 50 MB zero blob and maxBytes 10 MB: RepoError before checkout, nothing left behind", async () => {
    const origin = gitRepo({ "a.txt": "a\n" });
    fs.writeFileSync(path.join(origin, "zeros.bin"), Buffer.alloc(50 * 1024 * 1024));
    git(origin, "add", "zeros.bin");
    git(origin, "commit", "-qm", "zeros");
    fs.rmSync(path.join(origin, "zeros.bin"));
    git(origin, "gc", "-q");
    const clones = fresh("clones");
    fs.mkdirSync(clones);
    const savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = clones;
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, duBytes(clones))), 20);
    try {
      for (const url of [origin, `file://${origin}`]) {
        const r = await load({ git: url }, { maxBytes: 10 * 1024 * 1024 });
        expect(r.error).toBeInstanceOf(RepoError);
        expect(String(r.error)).toMatch(/too large: \d+ bytes of files .*the limit is 10485760/);
        expect(fs.readdirSync(clones)).toEqual([]);
        expect(r.lagMs).toBeLessThan(MAX_LAG_MS);
      }
      // The same repo at the commit before the blob loads.
      const r = await load({ git: origin, ref: "HEAD~1" }, { maxBytes: 10 * 1024 * 1024 });
      expect(r.error).toBeUndefined();
      expect(r.entries?.get("a.txt")?.body.toString()).toBe("a\n");
    } finally {
      clearInterval(sampler);
      process.env.TMPDIR = savedTmp;
    }
    expect(peak).toBeLessThan(5 * 1024 * 1024);
  });

  it("a remote clone that grows past maxBytes is killed while it runs", async () => {
    const origin = gitRepo({ "random.bin": randomBytes(24 * 1024 * 1024) });
    const bare = fresh("bare");
    git(tmpRoot, "clone", "-q", "--bare", origin, bare);
    git(bare, "update-server-info"); // served by plain HTTP, git's "dumb" protocol
    const server = slowFileServer(bare, 4 * 1024 * 1024);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const clones = fresh("clones");
    fs.mkdirSync(clones);
    const savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = clones;
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, duBytes(clones))), 50);
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const t0 = Date.now();
      const r = await load({ git: url }, { maxBytes: 4 * 1024 * 1024 });
      expect(r.error).toBeInstanceOf(RepoError);
      expect(String(r.error)).toMatch(
        /too large: \d+ bytes of files \(the clone directory while git was writing it\), the limit is 4194304/,
      );
      expect(Date.now() - t0).toBeLessThan(5000); // the whole pack takes 6 s at this speed
      expect(fs.readdirSync(clones)).toEqual([]);
      expect(r.lagMs).toBeLessThan(MAX_LAG_MS);
    } finally {
      clearInterval(sampler);
      process.env.TMPDIR = savedTmp;
      server.close();
    }
    expect(peak).toBeLessThan(12 * 1024 * 1024);
  });
});

/** Serves the files under root at about `rate` bytes a second. */
function slowFileServer(root: string, rate: number): http.Server {
  // A request the server fails on resets its connection, so the clone under test fails (not hangs) on it.
  return http.createServer(
    (req, res) =>
      void serveSlowly(root, rate, req, res).catch((err: unknown) =>
        res.destroy(err instanceof Error ? err : new Error(String(err))),
      ),
  );
}

/** slowFileServer's handler: the file under root that the request names, a 64 KiB chunk at a time. */
async function serveSlowly(root: string, rate: number, req: http.IncomingMessage, res: http.ServerResponse) {
  const file = path.join(root, decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname));
  if (!file.startsWith(root) || !fs.statSync(file, { throwIfNoEntry: false })?.isFile())
    return void res.writeHead(404).end();
  res.writeHead(200, { "content-type": "application/octet-stream" });
  try {
    for await (const chunk of fs.createReadStream(file, { highWaterMark: 64 * 1024 })) {
      if (!res.write(chunk)) await new Promise((r) => res.once("drain", r));
      await new Promise((r) => setTimeout(r, (64 * 1024 * 1000) / rate));
    }
  } catch {
    // the client went away
  }
  res.end();
}

// ---- 6. a { path } repo changed under the walk -----------------------------------------------

describe("6. a { path } repo whose directory is swapped for a symlink while it loads", () => {
  const CANARY = `HOST-CANARY-${randomBytes(6).toString("hex")}`;
  /** A host directory the repo's owner may not read through the worker, and a repo shaped like it. */
  const setup = () => {
    const host = hostDir({ "secret.txt": `${CANARY}\n`, "sub/deep.txt": `${CANARY}\n`, [`${CANARY}.name`]: "x" });
    const repo = hostDir({
      "a/secret.txt": "decoy\n",
      "a/sub/deep.txt": "decoy\n",
      "b.txt": "b\n",
      "z/after.txt": "z\n",
    });
    const stash = fresh("stash");
    fs.mkdirSync(stash);
    fs.symlinkSync(host, path.join(stash, "a"));
    return { host, repo, stash };
  };
  /** Swaps repo/a (a directory) with stash/a (a symlink to the host directory), or back. */
  const swap = (repo: string, stash: string, dir = "a") => {
    fs.renameSync(path.join(repo, dir), path.join(stash, `${dir}.real`));
    fs.renameSync(path.join(stash, dir), path.join(repo, dir));
  };
  /** Every name and body the archive gave before it ended or failed. */
  async function collect(a: RepoArchive): Promise<{ seen: string; error?: unknown }> {
    let seen = "";
    try {
      const extract = tar.extract();
      a.stream.on("error", (e) => extract.destroy(e));
      a.stream.pipe(extract);
      for await (const entry of extract) {
        seen += `${entry.header.name}\n`;
        for await (const c of entry) seen += (c as Buffer).toString("latin1");
      }
      return { seen };
    } catch (error) {
      return { seen, error };
    } finally {
      await a.cleanup();
    }
  }

  it("swapped after the walk, before its files are read: a RepoError naming it, and no host byte in the tar", async () => {
    const { repo, stash } = setup();
    // The files are read (on reader threads) as soon as the walk is done: the swap is made then.
    const { walkHooks } = await import("../../../src/job/repo/walk.js");
    walkHooks.afterWalk = () => swap(repo, stash);
    const r = await withLag(async () => collect(await repoArchive({ path: repo }))).finally(
      () => (walkHooks.afterWalk = undefined),
    );
    const { seen, error } = r.value!;
    expect(seen).not.toContain(CANARY);
    expect(error).toBeInstanceOf(RepoError);
    expect(String(error)).toMatch(
      /repo\.path .*: "a" was replaced \(by a symlink or another directory\) while the repo was read/,
    );
    expect(r.lagMs).toBeLessThan(MAX_LAG_MS);
  });

  it("swapped mid-walk, after its lstat and before it is entered (a nested one too): a RepoError, no host name listed", async () => {
    const { walkHooks } = await import("../../../src/job/repo/walk.js");
    for (const dir of ["a", "a/sub"]) {
      const { host, repo, stash } = setup();
      if (dir === "a/sub") {
        fs.rmSync(path.join(stash, "a"));
        fs.mkdirSync(path.join(stash, "a"));
        fs.symlinkSync(path.join(host, "sub"), path.join(stash, "a/sub"));
      }
      walkHooks.beforeOpenDir = (rel) => rel === dir && swap(repo, stash, dir);
      try {
        const r = await load({ path: repo });
        expect(r.error, dir).toBeInstanceOf(RepoError);
        expect(String(r.error)).toContain(`${JSON.stringify(dir)} was replaced`);
        expect(leaks(r.entries, CANARY)).toBe(false);
      } finally {
        walkHooks.beforeOpenDir = undefined;
      }
    }
  });

  it("swapped back and forth all the time by another process: the host's files never load, and the swap is caught", async () => {
    const { repo, stash } = setup();
    // renameat2(RENAME_EXCHANGE): repo/a and stash/a trade places atomically, over and over.
    const swapper = spawn(
      "python3",
      [
        "-c",
        `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
print("ready", flush=True)
while True:
    if libc.renameat2(-100, a, -100, b, 2) != 0: sys.exit("renameat2: %d" % ctypes.get_errno())
`,
        path.join(repo, "a"),
        path.join(stash, "a"),
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      await new Promise<void>((resolve, reject) => {
        swapper.stdout.once("data", () => resolve());
        swapper.once("exit", (code) => reject(new Error(`the swapper exited with ${code}`)));
      });
      let caught = 0;
      let loaded = 0;
      for (let i = 0; i < 2000 && (caught < 5 || loaded < 5); i++) {
        const r = await withLag(async () => collect(await repoArchive({ path: repo })));
        noteLag(r);
        const out = r.value ?? { seen: "", error: r.error };
        expect(out.seen).not.toContain(CANARY);
        if (out.error) {
          expect(out.error).toBeInstanceOf(RepoError);
          expect(String(out.error as RepoError)).toMatch(
            /"a(\/[^"]*)?" (was replaced|was swapped for a symlink|is no longer a regular file)/,
          );
          caught++;
        } else loaded++;
        expect(r.lagMs).toBeLessThan(MAX_LAG_MS);
      }
      expect(caught).toBeGreaterThan(0);
    } finally {
      swapper.kill("SIGKILL");
    }
  }, 300_000);
});
