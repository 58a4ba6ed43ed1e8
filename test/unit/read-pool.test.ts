// A local repo's files are read on reader threads (src/job/repo/read-pool.ts, read-thread.ts) while the
// event loop tars them. The threads must give the very archive and pack the event loop alone gives,
// catch what changes under them as it would, and leave no fd open. No Docker.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readerThreads } from "../../src/job/repo/read-pool.js";
import { RepoError, type RepoArchive } from "../../src/job/repo/common.js";
import { dirArchive } from "../../src/job/repo/walk.js";

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), "patchbay-read-pool-"));
afterAll(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));
// The threads live as long as the process (their own fds too): started and used first, so that
// fds are counted after they are up.
beforeAll(async () => {
  readerThreads(2);
  const dir = fs.mkdtempSync(path.join(tmpRoot, "warm"));
  for (let i = 0; i < 600; i++) fs.writeFileSync(path.join(dir, `f${i}`), "x");
  const a = await dirArchive(dir, true, 1e9, 1e6, "t", { threads: 2 });
  for await (const _ of a.stream);
  await a.cleanup();
});
const CANARY = "HOST-SECRET-READ-POOL";

function put(dir: string, rel: string, body: string | Buffer, mode = 0o644): void {
  fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  fs.writeFileSync(path.join(dir, rel), body, { mode });
}

/** Small files in nested directories, files that fill more than one batch's bytes, large (streamed) ones, links, a .git and a nested repo. */
function fixture(): string {
  const dir = fs.mkdtempSync(path.join(tmpRoot, "repo"));
  for (let i = 0; i < 700; i++) put(dir, `src/p${i % 13}/q${i % 3}/m${i}.py`, `x = ${i % 40}\n`); // duplicate contents too
  for (let i = 0; i < 30; i++) put(dir, `data/blob${i}.bin`, Buffer.alloc(200 * 1024, i)); // 6 MB: batches stop at their bytes
  put(dir, "data/large.bin", Buffer.alloc(1536 * 1024, 7)); // over 1 MiB: the event loop streams it
  put(dir, "bin/run.sh", "#!/bin/sh\necho hi\n", 0o755);
  put(dir, "empty", "");
  put(dir, "é/ünï ☃.txt", "unicode\n");
  put(dir, ".gitignore", "*.log\nbuild/\n");
  put(dir, "x.log", "ignored\n");
  put(dir, "build/out.o", "ignored\n");
  put(dir, ".git/HEAD", "ref: refs/heads/main\n");
  put(dir, ".git/objects/ab/cdef", Buffer.alloc(5000, 1));
  put(dir, "vendor/sub/.git/HEAD", "ref: refs/heads/main\n");
  put(dir, "vendor/sub/file.c", "int x;\n");
  fs.symlinkSync("src/p0", path.join(dir, "link-in"));
  fs.symlinkSync("../../elsewhere", path.join(dir, "src/link-out"));
  return dir;
}

async function drain(a: RepoArchive): Promise<{ tar: Buffer; error?: unknown }> {
  const parts: Buffer[] = [];
  try {
    for await (const c of a.stream) parts.push(c as Buffer);
    return { tar: Buffer.concat(parts) };
  } catch (error) {
    return { tar: Buffer.concat(parts), error };
  } finally {
    await a.cleanup();
  }
}

const openFds = () => fs.readdirSync("/proc/self/fd").length;

describe("reader threads", () => {
  it("give the same tar, sums and pack as the event loop alone, with one thread or two", async () => {
    const dir = fixture();
    const load = async (threads: number) => {
      const a = await dirArchive(dir, true, 1e9, 1e6, "t", { threads });
      const { tar, error } = await drain(a);
      expect(error).toBeUndefined();
      return { tar, files: a.files, bytes: a.bytes, pack: await a.blobs.finish(), symlinks: a.symlinks };
    };
    const before = openFds();
    const ref = await load(0);
    expect(ref.files).toBe(700 + 30 + 1 + 1 + 1 + 1 + 1 + 2 + 2); // .gitignore, .git's two and the nested repo's two files
    const sizes = fs
      .readdirSync(dir, { recursive: true })
      .filter((n) => !String(n).startsWith("link-in/"))
      .map((n) => fs.lstatSync(path.join(dir, String(n))));
    expect(ref.bytes).toBe(sizes.filter((s) => s.isFile()).reduce((n, s) => n + s.size, 0) - "ignored\n".length * 2);
    expect(ref.symlinks).toEqual([{ name: "src/link-out", target: "../../elsewhere" }]);
    for (const threads of [1, 2]) {
      const got = await load(threads);
      expect(got.tar.equals(ref.tar), `threads ${threads}: the tar`).toBe(true);
      expect([got.files, got.bytes, got.pack?.name, got.pack?.objects], `threads ${threads}`).toEqual([
        ref.files,
        ref.bytes,
        ref.pack?.name,
        ref.pack?.objects,
      ]);
      expect(got.pack!.pack.equals(ref.pack!.pack)).toBe(true);
    }
    // GNU tar reads it, modes and all.
    const list = execFileSync("tar", ["-tv", "--numeric-owner", "-f", "-"], {
      input: ref.tar,
      encoding: "utf8",
      maxBuffer: 64 << 20,
    });
    expect(list).toMatch(/^-rwxr-xr-x 1000\/1000 +18 .* bin\/run\.sh$/m);
    expect(list).toMatch(/^-rw-r--r-- 1000\/1000 +1572864 .* data\/large\.bin$/m);
    expect(list).not.toMatch(/x\.log|build\//);
    expect(openFds()).toBe(before);
  });

  it("a file swapped for a symlink to a host file after the walk: a RepoError from the thread, no host byte in the tar", async () => {
    const host = fs.mkdtempSync(path.join(tmpRoot, "host"));
    fs.writeFileSync(path.join(host, "secret"), `${CANARY}\n`);
    const dir = fs.mkdtempSync(path.join(tmpRoot, "swap"));
    // The threads read ahead of the consumer (a few batches, and what fills the first chunk): the
    // file swapped is far past that.
    for (let i = 0; i < 3000; i++) put(dir, `a/f${String(i).padStart(4, "0")}`, `${i}\n`);
    const before = openFds();
    const a = await dirArchive(dir, true, 1e9, 1e6, "t", { threads: 1 });
    fs.rmSync(path.join(dir, "a/f2500"));
    fs.symlinkSync(path.join(host, "secret"), path.join(dir, "a/f2500"));
    const { tar, error } = await drain(a);
    expect(error).toBeInstanceOf(RepoError);
    expect(String(error)).toMatch(/"a\/f2500" was swapped for a symlink while the repo was read/);
    expect(tar.includes(CANARY)).toBe(false);
    expect(openFds()).toBe(before);
  });

  it("a file made a FIFO, one grown past 1 MiB and one grown past the bound after the walk: each as it is now, or a RepoError", async () => {
    const dir = fs.mkdtempSync(path.join(tmpRoot, "grow"));
    for (let i = 0; i < 3000; i++) put(dir, `f${String(i).padStart(4, "0")}`, "x\n"); // changed far past what is read ahead
    const before = openFds();
    let a = await dirArchive(dir, true, 1e9, 1e6, "t", { threads: 1 });
    fs.writeFileSync(path.join(dir, "f2400"), Buffer.alloc(2 * 1024 * 1024, 1)); // now streamed
    let r = await drain(a);
    expect(r.error).toBeUndefined();
    const list = execFileSync("tar", ["-tv", "-f", "-"], { input: r.tar, encoding: "utf8" });
    expect(list).toMatch(/ 2097152 .* f2400$/m);

    a = await dirArchive(dir, true, 1024 * 1024, 1e6, "t", { threads: 1 });
    r = await drain(a);
    expect(r.error).toBeInstanceOf(RepoError);
    expect(String(r.error)).toMatch(/the repo is too large: \d+ bytes of files, the limit is 1048576/);

    fs.rmSync(path.join(dir, "f2400"));
    a = await dirArchive(dir, true, 1e9, 1e6, "t", { threads: 1 });
    fs.rmSync(path.join(dir, "f2500"));
    execFileSync("mkfifo", [path.join(dir, "f2500")]);
    r = await drain(a);
    expect(String(r.error)).toMatch(/"f2500" is no longer a regular file/);
    expect(r.error).toBeInstanceOf(RepoError);
    expect(openFds()).toBe(before);
  });

  it("a consumer that stops after the first chunk: the threads stop, every fd is closed", async () => {
    const dir = fixture();
    const before = openFds();
    const a = await dirArchive(dir, true, 1e9, 1e6, "t", { threads: 2 });
    for await (const _ of a.stream) break;
    await a.cleanup();
    expect(openFds()).toBe(before);
  });

  it("a consumer that stops right before a large file: no stream is opened for it, no fd left (either way)", async () => {
    const dir = fs.mkdtempSync(path.join(tmpRoot, "stop"));
    put(dir, "a.txt", Buffer.alloc(300 * 1024, 1)); // a chunk and more: the consumer has one to stop after
    put(dir, "b.bin", Buffer.alloc(2 * 1024 * 1024, 2)); // read on the event loop, as a stream
    for (const threads of [0, 2]) {
      const before = openFds();
      const a = await dirArchive(dir, true, 1e9, 1e6, "t", { threads });
      for await (const _ of a.stream) break;
      await a.cleanup();
      expect(openFds(), `threads ${threads}`).toBe(before);
    }
  });

  it("a name that is not UTF-8 is a RepoError naming it, a file's or a directory's", async () => {
    for (const kind of ["file", "dir", "beside a valid name spelt with U+FFFD"]) {
      const dir = fs.mkdtempSync(path.join(tmpRoot, "utf8"));
      const bad = Buffer.concat([Buffer.from(`${dir}/bad`), Buffer.from([0xff]), Buffer.from(".txt")]);
      if (kind === "dir") fs.mkdirSync(bad);
      else fs.writeFileSync(bad, "x");
      if (kind !== "file" && kind !== "dir")
        fs.writeFileSync(path.join(dir, "bad\uFFFD.txt"), "a valid name that reads back the same"); // would be opened instead
      // The walk meets it (no lstat of files otherwise): dirArchive itself fails.
      const error = await dirArchive(dir, true, 1e9, 1e6, "t", { threads: 1 })
        .then(drain)
        .then(
          (r) => r.error,
          (e: unknown) => e,
        );
      expect(error, kind).toBeInstanceOf(RepoError);
      expect(String(error)).toContain(`the file name "bad\uFFFD.txt" is not valid UTF-8`);
    }
  });
});
