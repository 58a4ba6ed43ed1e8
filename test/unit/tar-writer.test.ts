// The repo's tar is written by patchbay's own writer (src/job/repo/tar-writer.ts): read back here by
// tar-stream and by GNU tar (what the sandbox runs), with hostile names, long and non-ASCII names
// and link targets, out-of-range mtimes, every size around a block and a chunk. No Docker.
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import * as tar from "tar-stream";
import { TarWriter, type TarEntry } from "../../src/job/repo/tar-writer.js";

/** Writes entries (a file's body whole, or in pieces) and returns the archive. */
function write(entries: (TarEntry & { body?: Buffer; pieces?: number })[]): Buffer {
  const out: Buffer[] = [];
  const w = new TarWriter((c) => (out.push(Buffer.from(c)), true));
  for (const e of entries) {
    w.header(e);
    const body = e.body ?? Buffer.alloc(0);
    const step = Math.ceil(body.length / (e.pieces ?? 1)) || 1;
    for (let i = 0; i < body.length; i += step) w.data(body.subarray(i, i + step));
    w.pad(body.length);
  }
  w.end();
  return Buffer.concat(out);
}

async function readBack(archive: Buffer): Promise<{ header: tar.Header; body: Buffer }[]> {
  const ex = tar.extract();
  const got: { header: tar.Header; body: Buffer }[] = [];
  const done = (async () => {
    for await (const entry of ex) {
      const parts: Buffer[] = [];
      for await (const c of entry) parts.push(c as Buffer);
      got.push({ header: entry.header, body: Buffer.concat(parts) });
    }
  })();
  ex.end(archive);
  await done;
  return got;
}

const gnuList = (archive: Buffer) =>
  spawnSync("tar", ["-t", "-v", "--numeric-owner", "--full-time", "-f", "-"], {
    input: archive,
    encoding: "utf8",
    env: { ...process.env, TZ: "UTC", LC_ALL: "C.UTF-8" },
  });
const file = (name: string, body: Buffer | string, extra: Partial<TarEntry> = {}) => {
  const b = Buffer.from(body);
  return {
    name,
    type: "file",
    size: b.length,
    mode: 0o644,
    uid: 1000,
    gid: 1000,
    mtime: new Date(1_700_000_000_000),
    body: b,
    ...extra,
  };
};

describe("TarWriter", () => {
  it("writes what tar-stream and GNU tar read back: names, types, modes, owners, sizes, mtimes, bodies", async () => {
    const long = `${"d".repeat(90)}/${"e".repeat(90)}/${"f".repeat(95)}.txt`; // ustar's prefix + name
    const deeper = `${"g/".repeat(150)}h.txt`; // 302 bytes: past ustar, a pax path
    const entries = [
      {
        name: "dir/",
        type: "directory",
        size: 0,
        mode: 0o755,
        uid: 1000,
        gid: 1000,
        mtime: new Date(1_600_000_000_000),
      },
      file("dir/a.txt", "hello\n"),
      file("run.sh", "#!/bin/sh\n", { mode: 0o755 }),
      file("empty", ""),
      file("block", Buffer.alloc(512, 1)),
      file("block+1", Buffer.alloc(513, 2)),
      file("chunky", Buffer.alloc(256 * 1024 * 3 + 7, 3), { pieces: 5 } as Partial<TarEntry>),
      file("whole-chunk", Buffer.alloc(256 * 1024, 4)),
      file(long, "long\n"),
      file(deeper, "deep\n"),
      file("é/ünïcode ☃.txt", "utf8\n"),
      file("ctl\u001b[31m\nname\ttab", "hostile\n"),
      {
        name: "link-in",
        type: "symlink",
        size: 0,
        mode: 0o777,
        uid: 1000,
        gid: 1000,
        linkname: "dir/a.txt",
        mtime: new Date(1_700_000_000_000),
      },
      {
        name: "link-long",
        type: "symlink",
        size: 0,
        mode: 0o777,
        uid: 1000,
        gid: 1000,
        linkname: `../${"x".repeat(200)}`,
        mtime: new Date(1_700_000_000_000),
      },
      {
        name: "link-ü",
        type: "symlink",
        size: 0,
        mode: 0o777,
        uid: 1000,
        gid: 1000,
        linkname: "ziel-ü",
        mtime: new Date(1_700_000_000_000),
      },
      {
        name: "hard",
        type: "link",
        size: 0,
        mode: 0o644,
        uid: 1000,
        gid: 1000,
        linkname: "dir/a.txt",
        mtime: new Date(1_700_000_000_000),
      },
    ];
    const archive = write(entries);
    expect(archive.length % 512).toBe(0);
    expect(archive.subarray(-1024).equals(Buffer.alloc(1024))).toBe(true);
    const got = await readBack(archive);
    expect(got.map((g) => g.header.name)).toEqual(entries.map((e) => e.name));
    for (const [i, e] of entries.entries()) {
      const h = got[i]!.header;
      expect(
        {
          type: h.type,
          mode: h.mode,
          uid: h.uid,
          gid: h.gid,
          size: h.size,
          mtime: h.mtime?.getTime(),
          linkname: h.linkname ?? undefined,
        },
        e.name,
      ).toEqual({
        type: e.type,
        mode: e.mode,
        uid: 1000,
        gid: 1000,
        size: e.size,
        mtime: e.mtime.getTime(),
        linkname: (e as { linkname?: string }).linkname,
      });
      expect(got[i]!.body.equals((e as { body?: Buffer }).body ?? Buffer.alloc(0)), e.name).toBe(true);
    }
    // GNU tar (the sandbox's) reads the same: every entry, no warning.
    const gnu = gnuList(archive);
    expect(gnu.status, gnu.stderr).toBe(0);
    expect(gnu.stderr).toBe("");
    const lines = gnu.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe("drwxr-xr-x 1000/1000         0 2020-09-13 12:26:40 dir/");
    expect(lines[2]).toBe("-rwxr-xr-x 1000/1000        10 2023-11-14 22:13:20 run.sh");
    expect(gnu.stdout).toContain(` ${deeper}\n`);
    expect(gnu.stdout).toContain(" é/ünïcode ☃.txt\n");
    expect(gnu.stdout).toContain(` link-long -> ../${"x".repeat(200)}\n`);
    expect(gnu.stdout).toContain(" hard link to dir/a.txt\n");
  });

  it("clamps an mtime ustar cannot hold (before 1970, after 2242, none, invalid) instead of writing a wrong one", async () => {
    const archive = write([
      file("old", "o", { mtime: new Date(-86_400_000) }),
      file("future", "f", { mtime: new Date(8e15) }),
      file("none", "n", { mtime: undefined }),
      file("invalid", "i", { mtime: new Date(NaN) }),
    ]);
    const got = await readBack(archive);
    expect(got.map((g) => g.header.mtime?.getTime())).toEqual([0, (8 ** 11 - 1) * 1000, 0, 0]);
    expect(gnuList(archive).status).toBe(0);
  });

  it("says when the consumer is full, and refuses a type it does not write and a NUL in a name", () => {
    let room = true;
    const w = new TarWriter(() => room);
    w.header({ name: "a", type: "file", size: 300 * 1024 });
    expect(w.wantsMore).toBe(true);
    room = false;
    w.data(Buffer.alloc(300 * 1024)); // a chunk's worth goes out
    expect(w.wantsMore).toBe(false);
    expect(() => w.header({ name: "dev", type: "character-device", size: 0 })).toThrow(
      /no entry of type "character-device"/,
    );
    // A NUL would end the name (or target) for every reader: never written.
    expect(() => w.header({ name: "s\u0000x", type: "symlink", size: 0, linkname: "/usr/bin" })).toThrow(/NUL byte/);
    expect(() => w.header({ name: "t", type: "symlink", size: 0, linkname: "a\u0000b" })).toThrow(/NUL byte/);
  });
});
