// Loading repos into a real sandbox and computing the final patch, against the real engine.
// The patch is checked the way a user would use it: `git apply` on a pristine host copy.
//
// Backend: Docker (the image's tar, git and tools).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import * as tar from "tar-stream";
import { afterAll, describe, expect, it } from "vitest";
import { checkpointPatch, computePatch, PatchTooLargeError } from "../../src/job/patch.js";
import { loadRepo, repoArchive, RepoError, type RepoSource } from "../../src/job/repo/load.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), "patchbay-repo-test-"));
afterAll(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

let dirCount = 0;
/** A fresh host directory with the given files (a Buffer is written as is). */
function hostDir(files: Record<string, string | Buffer> = {}): string {
  const dir = path.join(tmpRoot, `d${dirCount++}`);
  for (const [name, body] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), body);
  }
  fs.mkdirSync(dir, { recursive: true });
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
  return execFileSync("git", [...GIT_ID, ...args], { cwd, encoding: "utf8" }).trim();
}

/** Runs fn with a fresh sandbox and always destroys it. */
async function withSandbox<T>(fn: (sb: Sandbox) => Promise<T>): Promise<T> {
  const sb = await Sandbox.create({ labels: { "patchbay.test": "1" } });
  try {
    return await fn(sb);
  } finally {
    await sb.destroy();
  }
}

async function run(sb: Sandbox, cmd: string): Promise<string> {
  const r = await sb.shell.run(cmd, { timeoutSec: 30 });
  if (r.exitCode !== 0) throw new Error(`${cmd} → exit ${r.exitCode}: ${r.output}`);
  return r.output;
}

// Same script on the host and in the sandbox: every file and symlink outside .git, with exec bit and hash.
const MANIFEST = String.raw`cd "$1" && export LC_ALL=C && find . -path ./.git -prune -o \( -type f -o -type l \) -print0 | sort -z |
while IFS= read -r -d '' f; do
  if [ -L "$f" ]; then printf 'l %s -> %s\n' "$f" "$(readlink "$f")";
  else printf 'f %s %s %s\n' "$f" "$([ -x "$f" ] && echo x || echo -)" "$(sha256sum < "$f" | cut -c1-64)"; fi
done`;
const hostManifest = (dir: string) => execFileSync("bash", ["-c", MANIFEST, "m", dir], { encoding: "utf8" });
async function sandboxManifest(sb: Sandbox): Promise<string> {
  const r = await sb.exec(["bash", "-c", MANIFEST, "m", "/workspace"]);
  expect(r.exitCode).toBe(0);
  return r.stdout.toString("utf8");
}

/** What a host-side clone runs with (the worker's: the Config's host environment; no credentials). */
const HOST = { git: { env: process.env } };

/** The entries of repoArchive's tar, read on the host. */
async function archiveEntries(repo: RepoSource): Promise<Map<string, { header: tar.Header; body: Buffer }>> {
  const a = await repoArchive(repo, HOST);
  const out = new Map<string, { header: tar.Header; body: Buffer }>();
  try {
    const extract = tar.extract();
    a.stream.pipe(extract);
    for await (const entry of extract) {
      const chunks: Buffer[] = [];
      for await (const c of entry) chunks.push(c as Buffer);
      out.set(entry.header.name, { header: entry.header, body: Buffer.concat(chunks) });
    }
  } finally {
    await a.cleanup();
  }
  return out;
}

async function tarball(
  entries: (Partial<tar.Header> & { name: string; body?: string })[],
  gz: boolean,
): Promise<string> {
  const pack = tar.pack();
  for (const { body, ...h } of entries) pack.entry({ uid: 0, gid: 0, ...h }, body ?? "");
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks);
  // A misleading name: gzip must be recognised by its magic bytes.
  const file = path.join(tmpRoot, `archive${dirCount++}.bin`);
  fs.writeFileSync(file, gz ? await promisify(gzip)(raw) : raw);
  return file;
}

describe("loadRepo (real engine)", () => {
  it("loads a local dir: nested .gitignore and info/exclude honoured, .git whole, +x and symlinks kept", async () => {
    const dir = hostDir({
      ".gitignore": "*.log\nbuild/\n",
      "app.log": "ignored\n",
      "build/out.js": "ignored\n",
      "build/dist.js": "tracked though its dir is ignored\n",
      "sub/.gitignore": "secret.txt\n!keep.log\n",
      "sub/secret.txt": "ignored\n",
      "sub/keep.log": "kept by negation\n",
      "sub/code.py": "print('hi')\n",
      "excluded.txt": "ignored by info/exclude\n",
      "run.sh": "#!/bin/sh\necho ran\n",
    });
    fs.chmodSync(path.join(dir, "run.sh"), 0o755);
    fs.symlinkSync("run.sh", path.join(dir, "link"));
    fs.symlinkSync("../outside-the-repo", path.join(dir, "escaping"));
    git(dir, "init", "-q");
    fs.writeFileSync(path.join(dir, ".git/info/exclude"), "excluded.txt\n");
    git(dir, "add", "-A");
    git(dir, "add", "-f", "build/dist.js");
    git(dir, "commit", "-qm", "first");
    git(dir, "update-index", "--index-version", "4"); // prefix-compressed names
    await withSandbox(async (sb) => {
      const r = await loadRepo(sb, { path: dir });
      expect(r.baseline).toMatch(/^[0-9a-f]{40}$/);
      const ls = await run(sb, "cd /workspace && find . -path ./.git -prune -o -print | LC_ALL=C sort");
      expect(ls.split("\n").filter(Boolean)).toEqual([
        ".",
        "./.gitignore",
        "./build",
        "./build/dist.js",
        "./escaping",
        "./link",
        "./run.sh",
        "./sub",
        "./sub/.gitignore",
        "./sub/code.py",
        "./sub/keep.log",
      ]);
      expect(
        await run(
          sb,
          "cd /workspace && ./run.sh && test -L link && readlink link escaping && stat -c '%U %a' run.sh sub",
        ),
      ).toBe("ran\nrun.sh\n../outside-the-repo\nagent 755\nagent 755\n");
      expect(
        await run(
          sb,
          "cd /workspace && git log --format=%s && find . -not -user agent | wc -l && git status --porcelain",
        ),
      ).toBe("first\n0\n");
      // The repo is clean, so the baseline is HEAD's tree.
      expect(await run(sb, "cd /workspace && git rev-parse 'HEAD^{tree}'")).toBe(`${r.baseline}\n`);
    });
  });

  it("makes a non-git dir a git repo with one baseline commit", async () => {
    const big = Buffer.from(Array.from({ length: 3 * 1024 * 1024 + 7 }, (_, i) => (i * 7919) % 251)); // streamed, not read whole
    const dir = hostDir({ "a.txt": "a\n", "d/b.txt": "b\n", "big.bin": big });
    await withSandbox(async (sb) => {
      const r = await loadRepo(sb, { path: dir });
      expect(r).toMatchObject({ files: 3, bytes: 4 + big.length });
      expect(await sandboxManifest(sb)).toBe(hostManifest(dir));
      const out = await run(
        sb,
        "cd /workspace && git rev-list --count HEAD && git log --format='%an <%ae> %cn' && git branch --show-current && git status --porcelain && git rev-parse 'HEAD^{tree}'",
      );
      expect(out).toBe(`1\npatchbay <patchbay@localhost> patchbay\nmain\n${r.baseline}\n`);
      // Made from the baseline's store (not hashed again): whole, the agent's own, and usable.
      const more = await run(
        sb,
        "cd /workspace && git fsck --strict --no-progress 2>&1; find .git ! -user 1000 | wc -l; echo c > c.txt && git add -A && git -c user.name=a -c user.email=a@b commit -qm two && git status --porcelain | wc -l",
      );
      expect(more).toBe("0\n0\n");
    });
  });

  it("clones a git URL (a local path) at a tag, a commit sha, a remote branch, and the default branch", async () => {
    const origin = hostDir({ "v.txt": "one\n" });
    git(origin, "init", "-q");
    git(origin, "add", "-A");
    git(origin, "commit", "-qm", "one");
    git(origin, "tag", "v1");
    const first = git(origin, "rev-parse", "HEAD");
    git(origin, "checkout", "-qb", "feature");
    fs.writeFileSync(path.join(origin, "v.txt"), "feature\n");
    git(origin, "commit", "-qam", "feature");
    git(origin, "checkout", "-q", "main");
    fs.writeFileSync(path.join(origin, "v.txt"), "two\n");
    git(origin, "commit", "-qam", "two");
    await withSandbox(async (sb) => {
      await loadRepo(sb, { git: origin, ref: "v1" }, HOST);
      expect(await run(sb, "cd /workspace && cat v.txt && git rev-parse HEAD && git status --porcelain")).toBe(
        `one\n${first}\n`,
      );
    });
    await withSandbox(async (sb) => {
      await loadRepo(sb, { git: origin, ref: first }, HOST);
      expect(await run(sb, "cat /workspace/v.txt")).toBe("one\n");
    });
    expect((await archiveEntries({ git: origin, ref: "feature" })).get("v.txt")?.body.toString()).toBe("feature\n");
    const head = await archiveEntries({ git: origin });
    expect(head.get("v.txt")?.body.toString()).toBe("two\n");
    expect(head.has(".git/HEAD")).toBe(true);
    expect([...head.values()].every((e) => e.header.uid === 1000 && e.header.gid === 1000)).toBe(true);
  });

  it("fails clearly on a bad ref, a bad URL, a missing path, a file as path, and a repo over maxBytes", async () => {
    const origin = hostDir({ "a.txt": "a\n" });
    git(origin, "init", "-q");
    git(origin, "add", "-A");
    git(origin, "commit", "-qm", "a");
    // A private TMPDIR (vitest runs each file in its own process) to see that failed clones are removed.
    const clones = path.join(tmpRoot, "clones");
    fs.mkdirSync(clones);
    const savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = clones;
    try {
      await expect(repoArchive({ git: origin, ref: "no-such-ref" }, HOST)).rejects.toThrow(
        new RegExp(`repo.git ${origin}: ref "no-such-ref" not found`),
      );
      // A path is a local source whether or not it exists (src/job/repo/source.ts), checked before git runs.
      await expect(repoArchive({ git: path.join(tmpRoot, "nope") }, HOST)).rejects.toThrow(
        /^repo\.git \S+nope: the local path does not exist or is not a directory$/,
      );
      const ok = await repoArchive({ git: origin }, HOST);
      expect(fs.readdirSync(clones)).toHaveLength(1);
      await ok.cleanup();
      expect(fs.readdirSync(clones)).toEqual([]);
    } finally {
      process.env.TMPDIR = savedTmp;
    }
    await expect(repoArchive({ path: path.join(tmpRoot, "missing") })).rejects.toThrow(
      /^repo.path: .*missing does not exist$/,
    );
    await expect(repoArchive({ path: path.join(origin, "a.txt") })).rejects.toThrow(/a\.txt is not a directory$/);
    // A directory's sizes are known as its files are read: the bound breaks the stream, as a RepoError.
    const big = await repoArchive({ path: origin }, { maxBytes: 10 });
    const drained = (async () => {
      for await (const _ of big.stream);
    })();
    await expect(drained).rejects.toThrow(/too large: \d+ bytes of files, the limit is 10/);
    await expect(drained).rejects.toBeInstanceOf(RepoError);
    await big.cleanup();
  });

  it("loads a .tar.gz, stripping its single top-level directory, owned by the agent", async () => {
    const file = await tarball(
      [
        { name: "proj-main/", type: "directory", mode: 0o755 },
        { name: "proj-main/a.txt", body: "a\n", mode: 0o644 },
        { name: "proj-main/bin/run.sh", body: "#!/bin/sh\necho ok\n", mode: 0o755 }, // its parent dir is not in the tar
        { name: "proj-main/up", type: "symlink", linkname: "../../etc" },
      ],
      true,
    );
    await withSandbox(async (sb) => {
      const r = await loadRepo(sb, { archive: file });
      expect(r).toMatchObject({ files: 2, bytes: 20 });
      expect(
        await run(
          sb,
          "cd /workspace && cat a.txt && bin/run.sh && readlink up && find . -not -user agent | wc -l && git rev-list --count HEAD",
        ),
      ).toBe("a\nok\n../../etc\n0\n1\n");
    });
    // Two top-level entries: nothing is stripped.
    const plain = await archiveEntries({
      archive: await tarball(
        [
          { name: "x/a.txt", body: "a" },
          { name: "b.txt", body: "b" },
        ],
        false,
      ),
    });
    expect([...plain.keys()]).toEqual(["x/", "x/a.txt", "b.txt"]);
  });

  it("refuses archives with .. or absolute paths, or entries under a symlink", async () => {
    const evil = await tarball(
      [
        { name: "ok.txt", body: "x" },
        { name: "../evil", body: "x" },
      ],
      true,
    );
    await expect(repoArchive({ archive: evil })).rejects.toThrow(/entry "\.\.\/evil" contains "\.\."/);
    const abs = await tarball([{ name: "/etc/evil", body: "x" }], false);
    await expect(repoArchive({ archive: abs })).rejects.toThrow(/entry "\/etc\/evil" has an absolute path/);
    const through = await tarball(
      [
        { name: "l", type: "symlink", linkname: "/tmp" },
        { name: "l/x", body: "x" },
      ],
      false,
    );
    await expect(repoArchive({ archive: through })).rejects.toThrow(/"l\/x" lies under the symlink "l"/);
  });
});

describe("computePatch (real engine)", () => {
  it("reproduces the agent's tree with git apply on a pristine copy", async () => {
    const start = hostDir({
      "edit.txt": "one\ntwo\nthree\n",
      "crlf.txt": "a\r\nb\r\n",
      "nofinal.txt": "no newline",
      "bin.dat": Buffer.from([0, 1, 2, 3, 255, 0, 10, 13]),
      "gone.txt": "delete me\n",
      "tool.sh": "#!/bin/sh\necho tool\n",
      "héllo wörld.txt": "unicode\n",
      "latin1.txt": Buffer.from("caf\xe9\n", "latin1"),
      "keep/same.txt": "unchanged\n",
    });
    fs.symlinkSync("edit.txt", path.join(start, "alias"));
    const pristine = path.join(tmpRoot, `pristine${dirCount++}`);
    fs.cpSync(start, pristine, { recursive: true, verbatimSymlinks: true });
    await withSandbox(async (sb) => {
      const { baseline } = await loadRepo(sb, { path: start });
      await run(
        sb,
        [
          "cd /workspace",
          "sed -i 's/two/TWO/' edit.txt",
          "printf 'a\\r\\nB\\r\\nc\\r\\n' > crlf.txt",
          "printf 'still no newline' > nofinal.txt",
          "printf '\\x00\\x01changed\\xff' > bin.dat",
          "rm gone.txt",
          "chmod +x tool.sh",
          // Part of the work is committed on a new branch, the rest is left in the working tree.
          "git checkout -q -b agent-work && git add -A && git -c user.name=a -c user.email=a@a commit -qm wip",
          "mkdir -p 'new dir' && printf 'new\\n' > 'new dir/fïle with space.txt'",
          "printf '\\x89PNG\\x00\\x00' > new.bin && : > empty.txt",
          "printf 'unicode edited\\n' > 'héllo wörld.txt'",
          "printf 'caf\\xe9 cr\\xe8me\\n' > latin1.txt",
          "ln -sfn nofinal.txt alias",
        ].join(" && "),
      );
      const p = await computePatch(sb, baseline);
      expect(p.truncated).toBe(false);
      expect(p.bytes).toBe(Buffer.byteLength(p.patch));
      expect(p.filesChanged).toEqual([
        "alias",
        "bin.dat",
        "crlf.txt",
        "edit.txt",
        "empty.txt",
        "gone.txt",
        "héllo wörld.txt",
        "latin1.txt",
        "new dir/fïle with space.txt",
        "new.bin",
        "nofinal.txt",
        "tool.sh",
      ]);
      expect(p.diffstat).toMatch(/12 files changed/);
      expect(p.patch).toContain("old mode 100644\nnew mode 100755");
      expect(p.patch).toMatch(
        /diff --git a\/latin1.txt b\/latin1.txt\nindex [0-9a-f]{40}\.\.[0-9a-f]{40} 100644\nGIT binary patch/,
      );
      // A checkpoint's patch is the same (a non-UTF-8 file changed: through computePatch's own path).
      expect(await checkpointPatch(sb, baseline)).toBe(p.patch);
      fs.writeFileSync(path.join(tmpRoot, "agent.patch"), p.patch);
      execFileSync("git", ["apply", "--binary", path.join(tmpRoot, "agent.patch")], { cwd: pristine });
      expect(hostManifest(pristine)).toBe(await sandboxManifest(sb));
      // Nothing changed since: an empty patch.
      await run(
        sb,
        "cd /workspace && git add -A && git -c user.name=a -c user.email=a@a commit -qm more && git stash list",
      );
      expect(
        (
          await computePatch(
            sb,
            (await sb.exec(["git", "-C", "/workspace", "rev-parse", "HEAD^{tree}"])).stdout.toString().trim(),
          )
        ).patch,
      ).toBe("");
    });
  });

  it("leaves out what was there at load time and ignored files; keeps commits and tracked-but-ignored files", async () => {
    const dir = hostDir({
      ".gitignore": "*.tmp\n",
      "a.txt": "a\n",
      "b.txt": "b\n",
      "forced.tmp": "tracked though ignored\n",
    });
    git(dir, "init", "-q");
    git(dir, "add", "-A");
    git(dir, "add", "-f", "forced.tmp");
    git(dir, "commit", "-qm", "start");
    fs.writeFileSync(path.join(dir, "c-ita.txt"), "intent to add\n");
    git(dir, "add", "-N", "c-ita.txt"); // an extended-flags entry (index v3) before forced.tmp
    fs.writeFileSync(path.join(dir, "a.txt"), "uncommitted at load time\n");
    fs.writeFileSync(path.join(dir, "untracked.txt"), "untracked at load time\n");
    await withSandbox(async (sb) => {
      const { baseline } = await loadRepo(sb, { path: dir });
      await run(
        sb,
        [
          "cd /workspace",
          "echo committed > b.txt && git -c user.name=a -c user.email=a@a commit -qam 'agent commit'",
          "echo ignored > new.tmp",
          "echo edited > forced.tmp",
        ].join(" && "),
      );
      const p = await computePatch(sb, baseline);
      expect(p.filesChanged).toEqual(["b.txt", "forced.tmp"]);
      expect(p.patch).toContain("+committed");
      expect(p.patch).not.toMatch(/a\.txt|untracked|new\.tmp/);
      const file = path.join(tmpRoot, "b.patch");
      fs.writeFileSync(file, p.patch);
      execFileSync("git", ["apply", "--check", file], { cwd: dir });
      // A patch over the bound is refused, not cut.
      const err = await computePatch(sb, baseline, { maxBytes: 50 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PatchTooLargeError);
      expect(err).toMatchObject({
        truncated: true,
        filesChanged: ["b.txt", "forced.tmp"],
        message: expect.stringMatching(/larger than 50 bytes/),
      });
      // A checkpoint's patch (its own few-process script): the same patch, and the same refusal.
      expect(await checkpointPatch(sb, baseline)).toBe(p.patch);
      await expect(checkpointPatch(sb, baseline, { maxBytes: 50 })).rejects.toBeInstanceOf(PatchTooLargeError);
    });
  });
});
