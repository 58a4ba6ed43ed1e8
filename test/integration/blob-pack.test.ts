// The worker packs a repo's file contents while it tars them (src/job/repo/blob-pack.ts), so git in the
// sandbox finds every blob and tree stored at baseline instead of writing one loose object each.
// The pack is checked by git itself (verify-pack, fsck), and a load with it gives the same baseline
// as one without it, with no loose object in the store and an agent's repo git accepts.
//
// Backend: Docker (the image's tar, git and tools).
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BlobPack } from "../../src/job/repo/blob-pack.js";
import { computePatch } from "../../src/job/patch.js";
import { loadRepo } from "../../src/job/repo/load.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), "patchbay-blob-pack-"));
afterAll(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));
const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" },
  });

function bareWith(p: NonNullable<Awaited<ReturnType<BlobPack["finish"]>>>): string {
  const dir = fs.mkdtempSync(path.join(tmpRoot, "bare"));
  git(dir, "init", "-q", "--bare");
  fs.writeFileSync(path.join(dir, `objects/pack/pack-${p.name}.pack`), p.pack);
  fs.writeFileSync(path.join(dir, `objects/pack/pack-${p.name}.idx`), p.idx);
  return dir;
}

/**
 * A repo of names and modes that test a tar and a tree: control characters, a pax path, depth,
 * non-ASCII, an executable, two files of the same bytes, an empty file, an ignored file tracked
 * and one not, a read-only and an empty directory, committed. `all`: also what takes the worker's
 * tree out of the baseline (a file over the pack's stored size, a nested repo, symlinks in and out).
 */
function hostileRepo(all: boolean): string {
  const dir = fs.mkdtempSync(path.join(tmpRoot, "hostile"));
  const put = (rel: string, body: string | Buffer, mode = 0o644) => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), body, { mode });
  };
  put("ctl\u001b[31m\nname\ttab.txt", "control characters\n");
  put(`${"long-".repeat(40)}/${"n".repeat(200)}.txt`, "past ustar's 100 bytes: a pax path\n");
  put(`${Array.from({ length: 60 }, (_, i) => `d${i}`).join("/")}/leaf`, "deep\n");
  put("ünï/cödé ☃.txt", "non-ASCII\n");
  put("exec.sh", "#!/bin/sh\n", 0o755);
  put("same-a", "same\n");
  put("same-b", "same\n");
  put("empty", "");
  put(".gitignore", "*.log\n");
  put("tracked.log", "tracked though ignored\n");
  put("untracked.log", "ignored\n");
  if (all) {
    put("big.bin", Buffer.alloc(1536 * 1024, 3)); // streamed, so git writes its blob
    put("vendor/nested/.git/HEAD", "ref: refs/heads/main\n"); // a nested repo: git records it its own way
    put("vendor/nested/x.c", "int x;\n");
    fs.symlinkSync("exec.sh", path.join(dir, "link-in"));
    fs.symlinkSync("../../outside", path.join(dir, "ünï/link-out"));
  }
  put("ro/inside.txt", "in a read-only dir\n", 0o444);
  fs.chmodSync(path.join(dir, "ro"), 0o555);
  fs.mkdirSync(path.join(dir, "empty-dir/inner"), { recursive: true });
  git(dir, "init", "-q");
  git(dir, "add", "-A");
  git(dir, "add", "-f", "tracked.log");
  git(dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "t");
  return dir;
}

describe("BlobPack (host git reads it)", () => {
  it("packs each distinct content once, under git's own object ids, with every size header length", async () => {
    const contents = [
      Buffer.alloc(0),
      Buffer.from("hello\n"),
      Buffer.from("hello\n"),
      Buffer.alloc(15, 1),
      Buffer.alloc(16, 2),
      Buffer.alloc(2047, 3),
      Buffer.alloc(2048, 4),
      Buffer.alloc(300_000, 5),
    ];
    for (let i = 0; i < 500; i++) contents.push(Buffer.from(`file ${i}\n`));
    const p = new BlobPack();
    for (const c of contents) p.add(c);
    const built = (await p.finish())!;
    expect(built.objects).toBe(contents.length - 1); // "hello\n" twice
    const dir = bareWith(built);
    const verify = git(dir, "verify-pack", "-v", `objects/pack/pack-${built.name}.idx`);
    expect(verify).toMatch(/^non delta: 507 objects$/m);
    expect(git(dir, "fsck", "--strict", "--no-dangling")).toBe("");
    for (const c of [contents[0]!, contents[5]!, contents[7]!, contents.at(-1)!]) {
      const id = execFileSync("git", ["hash-object", "--stdin"], { input: c, encoding: "utf8" }).trim();
      expect(execFileSync("git", ["cat-file", "blob", id], { cwd: dir }).equals(c)).toBe(true);
    }
  });

  it("stops adding at its bound and stays a valid pack; nothing added is no pack", async () => {
    expect(await new BlobPack().finish()).toBeUndefined();
    const p = new BlobPack(4096);
    for (let i = 0; i < 200; i++) p.add(randomBytes(100)); // incompressible: ~110 bytes each
    expect(p.full).toBe(true);
    const built = (await p.finish())!;
    expect(built.pack.length).toBeLessThanOrEqual(4096);
    expect(built.objects).toBeGreaterThan(5);
    expect(built.objects).toBeLessThan(200);
    expect(git(bareWith(built), "fsck", "--strict", "--no-dangling")).toBe("");
  });

  it("names git's own root tree where every entry is known; none above an unknown one (streamed, a nested repo, a hard link)", async () => {
    const dir = fs.mkdtempSync(path.join(tmpRoot, "tree"));
    const files: [string, string, number][] = [
      ["a-b", "1\n", 0o644],
      ["a/x", "2\n", 0o644],
      ["a.b", "3\n", 0o755],
      ["é/sp ace", "4\n", 0o644],
      ["empty", "", 0o644],
    ];
    const build = (extra?: (p: BlobPack) => void) => {
      const p = new BlobPack();
      for (const [n, text, mode] of files) p.entry(n, mode & 0o100 ? "exec" : "file", p.add(Buffer.from(text)));
      p.entry("link", "symlink", p.add(Buffer.from("a/x")));
      p.entry("a/", "dir");
      p.entry("hollow/inner/", "dir"); // git records no empty directory
      extra?.(p);
      return p.finish();
    };
    for (const [n, text, mode] of files) {
      fs.mkdirSync(path.dirname(path.join(dir, n)), { recursive: true });
      fs.writeFileSync(path.join(dir, n), text, { mode });
    }
    fs.symlinkSync("a/x", path.join(dir, "link"));
    git(dir, "init", "-q");
    git(dir, "add", "-A");
    expect((await build())?.tree).toBe(git(dir, "write-tree").trim());
    expect((await build((p) => p.entry("big.bin", "file")))?.tree).toBeUndefined();
    expect(
      (await build((p) => p.entry("sub/.git/HEAD", "file", p.add(Buffer.from("ref: x\n")))))?.tree,
    ).toBeUndefined();
    // Names git refuses: no tree, so git's own baseline fails at the load, as without a pack.
    const refused = [
      ".GIT/x",
      "a/.Git/x",
      ".git./x",
      "GIT~1/x",
      ".git:x/y",
      "a/.git::$INDEX_ALLOCATION/x",
      "git~1\\y",
      ".GIT. :z/x",
    ];
    for (const name of refused) {
      expect((await build((p) => p.entry(name, "file", p.add(Buffer.from("x")))))?.tree, name).toBeUndefined();
      // ... and git does refuse each (protectNTFS is on by default).
      const other = fs.mkdtempSync(path.join(tmpRoot, "refused"));
      fs.mkdirSync(path.dirname(path.join(other, name)), { recursive: true });
      fs.writeFileSync(path.join(other, name), "x");
      git(other, "init", "-q");
      expect(() => git(other, "add", "-A"), name).toThrow();
    }
    expect((await build((p) => p.entry(".gitmodules", "symlink", p.add(Buffer.from("a-b")))))?.tree).toBeUndefined();
    // The tree is made once, of all the entries: one given after it is a mistake, said so.
    const done = new BlobPack();
    done.entry("a", "file", done.add(Buffer.from("a")));
    expect(done.tree()).toMatch(/^[0-9a-f]{40}$/);
    expect(() => done.entry("b", "file", done.add(Buffer.from("b")))).toThrow(/after its tree/);
    // A directory whose tree cannot fit the pack: no tree, and the blobs are still packed.
    const small = new BlobPack(4096);
    for (let i = 0; i < 40; i++) small.entry(`${"n".repeat(200)}${i}`, "file", small.add(Buffer.from("same")));
    expect(small.tree()).toBeUndefined();
    expect((await small.finish())?.objects).toBe(1);
  });
});

describe("a load with the pack (real engine)", () => {
  it("gives the baseline git computes on the host, writes no loose blob, and the agent's repo is sound", async () => {
    const dir = fs.mkdtempSync(path.join(tmpRoot, "repo"));
    for (let i = 0; i < 300; i++) {
      fs.mkdirSync(path.join(dir, `d${i % 7}`), { recursive: true });
      fs.writeFileSync(path.join(dir, `d${i % 7}`, `f${i}.txt`), `line ${i % 50}\n`); // duplicate contents too
    }
    fs.writeFileSync(path.join(dir, "big.bin"), Buffer.alloc(2 * 1024 * 1024, 9)); // streamed, not packed: git writes it
    const copy = fs.mkdtempSync(path.join(tmpRoot, "copy"));
    fs.cpSync(dir, copy, { recursive: true });
    git(copy, "init", "-q");
    git(copy, "add", "-A");
    const hostTree = git(copy, "write-tree").trim();

    const sb = await Sandbox.create({ labels: { "patchbay.test": "blob-pack" } });
    try {
      const { baseline } = await loadRepo(sb, { path: dir });
      expect(baseline).toBe(hostTree);
      const count = `cd /patchbay/git/objects && find . -path './??/*' -type f | sed 's|^\\./||; s|/||' | GIT_DIR=/patchbay/git git cat-file --batch-check='%(objecttype)' | sort | uniq -c`;
      const loose = (await sb.exec(["bash", "-c", count], { user: "0:0" })).stdout.toString();
      expect(Number(/(\d+) blob/.exec(loose)?.[1]), loose).toBe(1); // big.bin only (streamed, so not packed)
      // The 7 directories' trees came in the pack; the root's holds big.bin, whose blob the worker
      // does not know, so git wrote that one.
      expect(Number(/(\d+) tree/.exec(loose)?.[1]), loose).toBe(1);
      const fsck = await sb.exec(["bash", "-c", "git fsck --strict --no-dangling && git status --porcelain | wc -l"], {
        cwd: "/workspace",
      });
      expect(fsck.exitCode, fsck.stderr).toBe(0);
      expect(fsck.stdout.toString().trim()).toBe("0");
      await sb.exec(["bash", "-c", "echo changed > d1/f1.txt && rm d2/f2.txt"], { cwd: "/workspace" });
      const p = await computePatch(sb, baseline);
      expect(p.filesChanged).toEqual(["d1/f1.txt", "d2/f2.txt"]);
    } finally {
      await sb.destroy();
    }
  });

  it("has git's own trees for what git records: modes, symlinks in and out of the repo, ignored and empty directories, git's name order", async () => {
    const dir = fs.mkdtempSync(path.join(tmpRoot, "trees"));
    const put = (rel: string, text: string, mode = 0o644) => {
      fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      fs.writeFileSync(path.join(dir, rel), text, { mode });
    };
    // Names around "/" in byte order: git sorts a directory as if its name ended in "/".
    for (const n of ["a-b", "a.b", "a0", "a/x", "a/b/c", "ab", "é/ü.txt", "sp ace/t\tab"]) put(n, `${n}\n`);
    put("run.sh", "#!/bin/sh\n", 0o755);
    put("deep/er/still/bin", "x\n", 0o750);
    put(".gitignore", "build/\n*.log\n");
    put("build/out.o", "ignored\n");
    put("keep.log", "tracked though ignored\n");
    fs.mkdirSync(path.join(dir, "empty/inner"), { recursive: true });
    fs.symlinkSync("a/x", path.join(dir, "link-in"));
    fs.symlinkSync("../../outside", path.join(dir, "a/link-out")); // leaves the repo: made in the container
    git(dir, "init", "-q");
    git(dir, "add", "-A");
    git(dir, "add", "-f", "keep.log");
    git(dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "t");
    const hostTree = git(dir, "write-tree").trim();

    const sb = await Sandbox.create({ labels: { "patchbay.test": "blob-pack" } });
    try {
      const { baseline } = await loadRepo(sb, { path: dir });
      expect(baseline).toBe(hostTree);
      const loose = (
        await sb.exec(["bash", "-c", "cd /patchbay/git/objects && find . -path './??/*' -type f | wc -l"], {
          user: "0:0",
        })
      ).stdout
        .toString()
        .trim();
      expect(loose).toBe("0"); // every blob and tree git needed was in the worker's pack
      const fsck = await sb.exec(["bash", "-c", "git fsck --strict --no-dangling && git status --porcelain"], {
        cwd: "/workspace",
      });
      expect(fsck.exitCode, fsck.stderr).toBe(0);
      expect(fsck.stdout.toString()).toBe("");
    } finally {
      await sb.destroy();
    }
  });

  it("on hostile fixtures the pack changes nothing: the same baseline and patch as a load without it, and as git on the host", async () => {
    const dir = hostileRepo(true);
    const hostTree = git(dir, "write-tree").trim();
    const edit =
      "echo changed >> 'ünï/cödé ☃.txt' && rm same-b && printf 'new\\n' > \"$(printf 'ctl\\033[31m\\nname\\ttab.txt')\" && chmod -x exec.sh";
    const results: { baseline: string; files: string[]; patch: string; tree: string; loose: string }[] = [];
    try {
      for (const pack of [undefined, false] as const) {
        const sb = await Sandbox.create({ labels: { "patchbay.test": "blob-pack" } });
        try {
          const { baseline } = await loadRepo(sb, { path: dir }, pack === false ? { pack } : {});
          const loose = (
            await sb.exec(["bash", "-c", "cd /patchbay/git/objects && find . -path './??/*' -type f | wc -l"], {
              user: "0:0",
            })
          ).stdout
            .toString()
            .trim();
          const e = await sb.exec(["bash", "-c", edit], { cwd: "/workspace" });
          expect(e.exitCode, e.stderr.toString()).toBe(0);
          const p = await computePatch(sb, baseline);
          results.push({ baseline, files: p.filesChanged, patch: p.patch, tree: p.tree, loose });
        } finally {
          await sb.destroy();
        }
      }
    } finally {
      fs.chmodSync(path.join(dir, "ro"), 0o755);
    }
    const [withPack, without] = results;
    expect(withPack!.baseline).toBe(hostTree);
    expect(without!.baseline).toBe(hostTree);
    expect(withPack!.patch).toMatch(
      /^diff --git "a\/\\303\\274n\\303\\257\/c\\303\\266d\\303\\251 \\342\\230\\203\.txt"/m,
    ); // git quotes the non-ASCII name
    expect(withPack!.patch).toBe(without!.patch);
    expect(withPack!.tree).toBe(without!.tree);
    expect(withPack!.files).toEqual(without!.files);
    expect(withPack!.files).toHaveLength(4);
    expect(Number(withPack!.loose)).toBeLessThan(Number(without!.loose)); // the pack did its work
  });

  it("on the same fixtures without what takes no worker's tree: the worker's tree is the baseline at ready, and it is git's", async () => {
    const dir = hostileRepo(false);
    const hostTree = git(dir, "write-tree").trim();
    const sb = await Sandbox.create({ labels: { "patchbay.test": "blob-pack" } });
    try {
      const r = await loadRepo(sb, { path: dir }, { deferAgentRepo: true });
      expect(r.baseline).toBe(hostTree); // taken before git's hash ran
      expect(await r.checked).toBe(hostTree);
      await r.agentRepo;
      expect((await computePatch(sb, r.baseline)).filesChanged).toEqual([]);
    } finally {
      await sb.destroy();
      fs.chmodSync(path.join(dir, "ro"), 0o755);
    }
  });
});
