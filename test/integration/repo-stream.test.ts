// Loading a repo through tar in the sandbox (the stream) and through the archive API gives the
// same tree byte for byte: contents, modes, owners, mtimes, symlinks, hard links, odd names; and
// an image without tar falls back to the archive API with the stream untouched.
//
// Backend: Docker (the image's tar, git and tools).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import * as tar from "tar-stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRepo, type RepoSource } from "../../src/job/repo/load.js";
import { docker } from "../../src/backend/docker.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";
import { loadConfig } from "../../src/core/config/config.js";

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), "patchbay-repo-stream-"));
afterAll(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

// Every entry under /workspace (.git included): type, mode, owner, size, mtime (s; not under .git, which a
// tar without one gets at load time), content hash or link target.
const MANIFEST = String.raw`cd /workspace && export LC_ALL=C && find . -mindepth 1 -print0 | sort -z | while IFS= read -r -d '' f; do
  if [ -L "$f" ]; then t="-> $(readlink "$f")"; elif [ -f "$f" ]; then t=$(sha256sum < "$f" | cut -c1-64); else t=; fi
  if [ -L "$f" ]; then printf 'symlink %s\n' "$f $t"; continue; fi
  case "$f" in ./.git/*) m=-;; *) if [ -d "$f" ]; then m=-; else m=$(stat -c %Y "$f"); fi;; esac
  printf '%s %s %s\n' "$(stat -c '%F %a %U:%G %s' "$f")" "$m" "$f $t"
done; find . -type f -links +1 | wc -l`;

async function manifest(sb: Sandbox): Promise<string> {
  const r = await sb.exec(["bash", "-c", MANIFEST], { user: "0:0" });
  expect(r.exitCode, r.stderr).toBe(0);
  return r.stdout.toString("utf8");
}

async function loadedBoth(
  repo: RepoSource,
  image?: string,
): Promise<{ stream: string; archive: string; baselines: string[] }> {
  const out: string[] = [];
  const baselines: string[] = [];
  for (const via of ["stream", "archive"] as const) {
    const sb = await Sandbox.create({ labels: { "patchbay.test": "repo-stream" }, ...(image ? { image } : {}) });
    try {
      baselines.push((await loadRepo(sb, repo, { via })).baseline);
      out.push(await manifest(sb));
    } finally {
      await sb.destroy();
    }
  }
  return { stream: out[0]!, archive: out[1]!, baselines };
}

/** A host dir with binary, empty, executable, read-only, deep, odd-named files, a .git and symlinks. */
function oddDir(): string {
  const dir = fs.mkdtempSync(path.join(tmpRoot, "d"));
  const put = (name: string, body: string | Buffer, mode = 0o644) => {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), body, { mode });
  };
  put("bin.dat", Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 31) % 256)));
  put("empty", "");
  put("run.sh", "#!/bin/sh\necho hi\n", 0o755);
  put("crlf.txt", "a\r\nb\r\n");
  put("deep/" + Array.from({ length: 30 }, (_, i) => `d${i}`).join("/") + "/leaf.txt", "leaf\n");
  put("sp ace/ünï cödé\ttab.txt", "odd\n");
  put("ro/inside.txt", "in a read-only dir\n", 0o444);
  fs.chmodSync(path.join(dir, "ro"), 0o555);
  fs.symlinkSync("run.sh", path.join(dir, "link"));
  fs.symlinkSync("../escapes", path.join(dir, "out-link"));
  fs.symlinkSync("deep/d0", path.join(dir, "dirlink"));
  execFileSync("git", ["-c", "init.defaultBranch=main", "init", "-q"], { cwd: dir });
  execFileSync(
    "git",
    [
      "-c",
      "user.name=t",
      "-c",
      "user.email=t@t",
      "-c",
      "commit.gpgSign=false",
      "commit",
      "-q",
      "--allow-empty",
      "-m",
      "x",
    ],
    { cwd: dir },
  );
  for (const f of ["bin.dat", "run.sh"]) fs.utimesSync(path.join(dir, f), 1_000_000_000, 1_000_000_000);
  return dir;
}

describe("repo load: stream vs archive API (real engine)", () => {
  it("a directory with odd files loads the same byte for byte both ways", async () => {
    const dir = oddDir();
    const { stream, archive, baselines } = await loadedBoth({ path: dir });
    expect(stream).toBe(archive);
    expect(baselines[0]).toBe(baselines[1]);
    expect(stream).toMatch(/^regular file 755 agent:agent 18 1000000000 \.\/run\.sh [0-9a-f]{64}$/m);
    expect(stream).toMatch(/^regular file 444 agent:agent 19 \d+ \.\/ro\/inside\.txt /m);
    expect(stream).toMatch(/^symlink \.\/out-link -> \.\.\/escapes$/m);
    expect(stream).toMatch(/ünï cödé\ttab\.txt/);
  }, 240_000);

  it("a tar archive with hard links loads the same byte for byte both ways", async () => {
    const pack = tar.pack();
    pack.entry({ name: "top/a.txt", mode: 0o600, mtime: new Date(1_500_000_000_000) }, "shared body\n");
    pack.entry({ name: "top/b.txt", type: "link", linkname: "top/a.txt" });
    pack.entry({ name: "top/sub/", type: "directory", mode: 0o700 });
    pack.entry({ name: "top/sub/x", mode: 0o640 }, Buffer.alloc(1 << 20, 7));
    pack.finalize();
    const chunks: Buffer[] = [];
    for await (const c of pack) chunks.push(c as Buffer);
    const file = path.join(tmpRoot, "hard.tar");
    fs.writeFileSync(file, Buffer.concat(chunks));
    const { stream, archive } = await loadedBoth({ archive: file });
    // Its .git is made at load time (commit dates, index stat data): compared apart from that.
    const noGit = (m: string) =>
      m
        .split("\n")
        .filter((l) => !/ \.\/\.git( |\/)/.test(l))
        .join("\n");
    expect(noGit(stream)).toBe(noGit(archive));
    expect(noGit(stream)).toMatch(/\.\/sub\/x /);
    expect(stream).toMatch(/^regular file 600 agent:agent 12 1500000000 \.\/a\.txt /m);
    expect(stream.trim().split("\n").at(-1)).toBe("2"); // a.txt and b.txt are one inode
  }, 240_000);

  describe("an image without tar", () => {
    const image = `patchbay-test-notar:${process.pid}`;
    beforeAll(async () => {
      const base = loadConfig().image;
      const ctx = fs.mkdtempSync(path.join(tmpRoot, "img"));
      fs.writeFileSync(
        path.join(ctx, "Dockerfile"),
        `FROM ${base}\nUSER root\nRUN rm -f /usr/bin/tar /bin/tar\nUSER agent\n`,
      );
      execFileSync("docker", ["build", "-q", "-t", image, ctx], { stdio: "pipe" });
    }, 300_000);
    afterAll(async () => {
      await docker()
        .getImage(image)
        .remove({ force: true })
        .catch(() => {});
    });

    it("falls back to the archive API with the stream untouched", async () => {
      const dir = oddDir();
      const sb = await Sandbox.create({ image, labels: { "patchbay.test": "repo-stream" } });
      try {
        const r = await sb.exec(["bash", "-c", "command -v tar || echo none"]);
        expect(r.stdout.toString().trim()).toBe("none");
        await loadRepo(sb, { path: dir });
        const got = await manifest(sb);
        const { archive } = await loadedBoth({ path: dir });
        expect(got).toBe(archive);
      } finally {
        await sb.destroy();
      }
    }, 300_000);
  });
});
