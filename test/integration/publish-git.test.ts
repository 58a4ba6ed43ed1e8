// The git of publishing (src/campaign/publish-git.ts) against real git servers on 127.0.0.1: smart
// HTTP (git http-backend behind basic auth, a writer and a read-only user) and SSH (Debian's sshd,
// the key in an ssh-agent), bare repositories in a temp dir read back with git. The same change
// makes the same sha and a re-publish pushes nothing; a moved target is rebased onto, or is a
// conflict naming the file; a branch with foreign commits is left alone unless forced; a read-only
// token is a PublishError naming the host; hostile patches are refused and write nothing on the
// host; the token is in no file of the cache and no message.
import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  deleteBranch,
  prepareChange,
  PublishError,
  pushBranch,
  remoteBranch,
  type PrepareOptions,
} from "../../src/campaign/publish-git.js";
import { DEFAULT_PATCH_MAX_BYTES } from "../../src/job/patch.js";
import { startGitHttp, type GitHttpServer } from "../support/git-http.js";
import { startGitSsh, type GitSsh } from "../support/git-ssh.js";

const TOKEN = `ghp_${process.pid}Xq7TzR2mLw9sVb`;
const READ_TOKEN = `ghp_${process.pid}Rd0nLyK3yPq8`;
const WRITER = { username: "x-access-token", password: TOKEN };
const READER = { username: "oauth2", password: READ_TOKEN };
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "pb-publish-"));
const repos = path.join(tmp, "repos");
const cache = path.join(tmp, "cache");
const outside = path.join(tmp, "outside"); // the symlink in the repo points here: nothing may land in it
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
const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", [...GIT_ID, ...args], { cwd, encoding: "latin1", maxBuffer: 64 * 1024 * 1024 });
const LINES = "a\nb\nc\nd\ne\nf\ng\n";
const DATE = new Date("2025-03-04T05:06:07Z");
const author = { name: "Patchbay Bot", email: "bot@patchbay.test" };

let http: GitHttpServer;
let ssh: GitSsh;
let base = "";
/** Every message a call gave back (results and errors): the token must be in none. */
const said: string[] = [];

/** A bare repo `name` under repos/ holding the base commit: f.txt, g.txt and `link` -> outside. */
function makeRepo(name: string): string {
  const work = path.join(tmp, "work", name);
  fs.mkdirSync(work, { recursive: true });
  git(work, "init", "-q");
  fs.writeFileSync(path.join(work, "f.txt"), LINES);
  fs.writeFileSync(path.join(work, "g.txt"), "keep\n");
  fs.symlinkSync(outside, path.join(work, "link"));
  git(work, "add", "-A");
  // One base commit in every repo: the same tree, author, committer and dates.
  const date = "2020-01-01T00:00:00Z";
  execFileSync("git", [...GIT_ID, "commit", "-qm", "base"], {
    cwd: work,
    env: { ...process.env, GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date },
  });
  const bare = path.join(repos, `${name}.git`);
  git(tmp, "clone", "-q", "--bare", work, bare);
  git(work, "remote", "add", "up", bare);
  return bare;
}

/** The patch that changes f.txt's "b" to "B", made by git against the base. */
function patchB(): string {
  const work = path.join(tmp, "work", "r");
  fs.writeFileSync(path.join(work, "f.txt"), LINES.replace("b\n", "B\n"));
  const p = git(work, "diff", "--binary", "HEAD");
  git(work, "checkout", "-q", "--", "f.txt");
  return p;
}

/** A commit pushed to `branch` of a repo's bare copy, changing f.txt's `from` line to `to`. */
function moveTarget(name: string, from: string, to: string, branch = "main"): string {
  const work = path.join(tmp, "work", name);
  git(work, "checkout", "-q", "-B", branch, "main");
  fs.writeFileSync(
    path.join(work, "f.txt"),
    fs.readFileSync(path.join(work, "f.txt"), "utf8").replace(`${from}\n`, `${to}\n`),
  );
  git(work, "commit", "-qam", `move ${from}`);
  git(work, "push", "-q", "-f", "up", `${branch}:${branch}`);
  const sha = git(work, "rev-parse", "HEAD").trim();
  git(work, "checkout", "-q", "main");
  return sha;
}

const httpUrl = (name: string) => `${http.url}/${name}.git`;
const opts = (name: string, over: Partial<PrepareOptions> = {}): PrepareOptions => ({
  url: httpUrl(name),
  target: "main",
  baseCommit: base,
  patch: patchB(),
  author,
  message: "Bump b\n\nMade by patchbay.\n",
  date: DATE,
  cacheDir: cache,
  env: process.env,
  credential: WRITER,
  ...over,
});

async function prepare(o: PrepareOptions) {
  const r = await prepareChange(o);
  said.push(JSON.stringify(r));
  return r;
}

/** The PublishError a call throws (its message kept for the token check). */
async function refusal(p: Promise<unknown>): Promise<PublishError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PublishError);
  said.push(String(err));
  return err as PublishError;
}

const show = (bare: string, rev: string) =>
  git(bare, "show", "-s", "--format=%P|%an <%ae>|%ad|%cn|%cd|%B", "--date=iso-strict", rev);

beforeAll(async () => {
  fs.mkdirSync(outside);
  fs.mkdirSync(repos);
  for (const name of ["r", "moved", "clash", "hostile", "ssh", "hooked", "guarded"]) makeRepo(name);
  // Server-side hooks (http-backend runs them): one records the push options, one refuses every push.
  const hook = (name: string, body: string) => {
    const bare = path.join(repos, `${name}.git`);
    fs.mkdirSync(path.join(bare, "hooks"), { recursive: true });
    fs.writeFileSync(path.join(bare, "hooks", "pre-receive"), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  };
  git(path.join(repos, "hooked.git"), "config", "receive.advertisePushOptions", "true");
  hook(
    "hooked",
    `i=0; while [ $i -lt "\${GIT_PUSH_OPTION_COUNT:-0}" ]; do eval "echo \\$GIT_PUSH_OPTION_$i"; i=$((i+1)); done > "${path.join(tmp, "work", "push-options")}"`,
  );
  hook("guarded", 'echo "GL-HOOK-ERR: You are not allowed to push code to this project." >&2; exit 1');
  base = git(path.join(tmp, "work", "r"), "rev-parse", "HEAD").trim();
  http = await startGitHttp(repos, {
    users: [
      { ...WRITER, rights: "write" },
      { ...READER, rights: "read" },
    ],
  });
  ssh = await startGitSsh();
});
afterAll(async () => {
  await http?.close();
  await ssh?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe("the publish cache is bounded", () => {
  it("a remote whose fetch makes its clone larger than the bound is refused with an error saying so, and its clone removed", async () => {
    makeRepo("huge");
    const work = path.join(tmp, "work", "huge");
    fs.writeFileSync(path.join(work, "blob.bin"), crypto.randomBytes(3 * 1024 * 1024)); // incompressible: 3 MB in the pack
    git(work, "add", "blob.bin");
    git(work, "commit", "-qm", "a large file");
    git(work, "push", "-q", "up", "main:main");
    const dir = path.join(tmp, "cache-huge");
    const err = await refusal(prepare(opts("huge", { cacheDir: dir, maxCacheBytes: 1_000_000 })));
    expect(err.message).toMatch(
      /^git fetch http:\/\/127\.0\.0\.1:\d+\/huge\.git \(main\) stopped: its clone in the publish cache grew past 1,000,000 bytes, the most a repository's clone may take there; the clone was removed$/,
    );
    expect(fs.readdirSync(dir).filter((n) => n.endsWith(".git"))).toEqual([]);
    // Under a bound it fits, the same remote publishes.
    expect((await prepare(opts("huge", { cacheDir: dir, maxCacheBytes: 64 * 1024 * 1024 }))).kind).toBe("commit");
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe("prepareChange and pushBranch over smart HTTP", () => {
  it("commits the patch on the base with the given author and dates, pushes it leased, and reads back with git", async () => {
    const r = await prepare(opts("r"));
    if (r.kind !== "commit") throw new Error(JSON.stringify(r));
    expect(r).toMatchObject({ target: "main", onto: base, rebased: false });
    expect(r.diffstat).toMatch(/f\.txt \| 2 \+-/);
    expect(
      await pushBranch({
        url: httpUrl("r"),
        cacheDir: cache,
        sha: r.sha,
        branch: "patchbay/bump",
        expect: null,
        env: process.env,
        credential: WRITER,
      }),
    ).toEqual({ kind: "pushed" });
    const bare = path.join(repos, "r.git");
    expect(git(bare, "rev-parse", "refs/heads/patchbay/bump").trim()).toBe(r.sha);
    expect(git(bare, "show", `${r.sha}:f.txt`)).toBe(LINES.replace("b\n", "B\n"));
    expect(show(bare, r.sha)).toBe(
      `${base}|Patchbay Bot <bot@patchbay.test>|2025-03-04T05:06:07+00:00|Patchbay Bot|2025-03-04T05:06:07+00:00|Bump b\n\nMade by patchbay.\n\n`,
    );
    expect(git(tmp, "ls-remote", bare, "refs/heads/patchbay/bump")).toBe(`${r.sha}\trefs/heads/patchbay/bump\n`);
    expect(
      await remoteBranch({ url: httpUrl("r"), branch: "patchbay/bump", env: process.env, credential: READER }),
    ).toBe(r.sha);
    // Both users were asked for, and the writer pushed.
    expect(http.requests.some((q) => q.user === "x-access-token" && q.path.endsWith("/git-receive-pack"))).toBe(true);
  });

  it("a re-run makes the same sha (a fresh cache too) and pushes nothing", async () => {
    const first = await prepare(opts("r"));
    const again = await prepare(opts("r"));
    const fresh = await prepare(opts("r", { cacheDir: path.join(tmp, "cache2") }));
    expect(first.kind === "commit" && again.kind === "commit" && fresh.kind === "commit").toBe(true);
    const sha = (first as { sha: string }).sha;
    expect([(again as { sha: string }).sha, (fresh as { sha: string }).sha]).toEqual([sha, sha]);
    const before = http.requests.filter((q) => q.path.endsWith("/git-receive-pack")).length;
    expect(
      await pushBranch({
        url: httpUrl("r"),
        cacheDir: cache,
        sha,
        branch: "patchbay/bump",
        expect: sha,
        env: process.env,
        credential: WRITER,
      }),
    ).toEqual({ kind: "unchanged" });
    expect(http.requests.filter((q) => q.path.endsWith("/git-receive-pack")).length).toBe(before);
    fs.rmSync(path.join(tmp, "cache2"), { recursive: true, force: true });
  });

  it("takes the remote's HEAD branch when no target is named, and an empty patch is `empty`", async () => {
    const r = await prepare(opts("r", { target: undefined }));
    expect(r).toMatchObject({ kind: "commit", target: "main" });
    expect(await prepare(opts("r", { patch: "" }))).toEqual({ kind: "empty" });
  });

  it("rebases onto a target that moved without conflict: the tip is the parent, both changes are in", async () => {
    const tip = moveTarget("moved", "f", "F");
    const r = await prepare(opts("moved"));
    if (r.kind !== "commit") throw new Error(JSON.stringify(r));
    expect(r).toMatchObject({ target: "main", onto: tip, rebased: true });
    expect(
      await pushBranch({
        url: httpUrl("moved"),
        cacheDir: cache,
        sha: r.sha,
        branch: "patchbay/bump",
        expect: null,
        env: process.env,
        credential: WRITER,
      }),
    ).toEqual({ kind: "pushed" });
    const bare = path.join(repos, "moved.git");
    expect(git(bare, "rev-parse", "patchbay/bump^").trim()).toBe(tip);
    expect(git(bare, "show", "patchbay/bump:f.txt")).toBe(LINES.replace("b\n", "B\n").replace("f\n", "F\n"));
    expect(git(bare, "log", "-1", "--format=%an|%B", "patchbay/bump")).toBe(
      "Patchbay Bot|Bump b\n\nMade by patchbay.\n\n",
    );
  });

  it("a target moved with a conflicting commit is a conflict naming the file, and nothing is pushed", async () => {
    const tip = moveTarget("clash", "b", "X");
    const r = await prepare(opts("clash"));
    expect(r).toMatchObject({ kind: "conflict", target: "main", onto: tip, files: ["f.txt"] });
    expect((r as { detail: string }).detail).toContain("CONFLICT (content): Merge conflict in f.txt");
    expect(git(path.join(repos, "clash.git"), "for-each-ref", "--format=%(refname)")).toBe("refs/heads/main\n");
  });

  it("a branch holding foreign commits is `foreign` and left alone; with force it is pushed (leased against what was seen)", async () => {
    const foreign = moveTarget("r", "g", "G", "patchbay/taken");
    const r = await prepare(opts("r"));
    const sha = (r as { sha: string }).sha;
    const push = (force: boolean) =>
      pushBranch({
        url: httpUrl("r"),
        cacheDir: cache,
        sha,
        branch: "patchbay/taken",
        expect: null,
        force,
        env: process.env,
        credential: WRITER,
      });
    expect(await push(false)).toEqual({ kind: "foreign", remoteSha: foreign });
    expect(git(path.join(repos, "r.git"), "rev-parse", "patchbay/taken").trim()).toBe(foreign);
    expect(await push(true)).toEqual({ kind: "pushed" });
    expect(git(path.join(repos, "r.git"), "rev-parse", "patchbay/taken").trim()).toBe(sha);
  });

  it("a read-only token is refused for rights: a PublishError naming the host, without the token", async () => {
    const r = await prepare(opts("r", { credential: READER }));
    const err = await refusal(
      pushBranch({
        url: httpUrl("r"),
        cacheDir: cache,
        sha: (r as { sha: string }).sha,
        branch: "patchbay/ro",
        expect: null,
        env: process.env,
        credential: READER,
      }),
    );
    expect(err.reason).toBe("rights");
    expect(err.kind).toBe("config");
    expect(err.message).toContain(`the credentials for ${http.host} cannot push to ${httpUrl("r")}: `);
    expect(err.message).toMatch(/403/);
    expect(err.message).not.toContain(READ_TOKEN);
    expect(git(path.join(repos, "r.git"), "for-each-ref", "--format=%(refname)", "refs/heads/patchbay/ro")).toBe("");
  });

  it("sends push options (GitLab's merge_request.create) to the server", async () => {
    const r = await prepare(opts("hooked"));
    const push = {
      url: httpUrl("hooked"),
      cacheDir: cache,
      sha: (r as { sha: string }).sha,
      branch: "patchbay/mr",
      expect: null,
      env: process.env,
      credential: WRITER,
    };
    expect(await pushBranch({ ...push, pushOptions: ["merge_request.create", "merge_request.target=main"] })).toEqual({
      kind: "pushed",
    });
    expect(fs.readFileSync(path.join(tmp, "work", "push-options"), "utf8")).toBe(
      "merge_request.create\nmerge_request.target=main\n",
    );
  });

  it("a push the server's pre-receive hook refuses is a PublishError for rights, with the server's words", async () => {
    const r = await prepare(opts("guarded"));
    const err = await refusal(
      pushBranch({
        url: httpUrl("guarded"),
        cacheDir: cache,
        sha: (r as { sha: string }).sha,
        branch: "patchbay/x",
        expect: null,
        env: process.env,
        credential: WRITER,
      }),
    );
    expect(err.reason).toBe("rights");
    expect(err.message).toContain(
      `the credentials for ${http.host} cannot push to ${httpUrl("guarded")}: [remote rejected] (pre-receive hook declined)`,
    );
    expect(err.message).toContain("You are not allowed to push code to this project.");
  });

  it("a missing target branch or base commit is a clear error; a base off the target is fetched by id", async () => {
    const noBranch = await refusal(prepare(opts("r", { target: "nope" })));
    expect([noBranch.reason, noBranch.message]).toEqual(["missing", `the branch "nope" is not in ${httpUrl("r")}`]);
    const noBase = await refusal(prepare(opts("r", { baseCommit: "1".repeat(40) })));
    expect(noBase.reason).toBe("missing");
    expect(noBase.message).toContain(`the base commit ${"1".repeat(40)} is not in ${httpUrl("r")}`);
    // A base on another branch only: fetched by its id into a fresh cache.
    const side = moveTarget("r", "a", "A", "side");
    const work = path.join(tmp, "work", "r");
    fs.writeFileSync(path.join(work, "g.txt"), "changed\n");
    const p = git(work, "diff", "HEAD");
    git(work, "checkout", "-q", "--", "g.txt");
    const r = await prepare(
      opts("r", { baseCommit: side, patch: p, target: "main", cacheDir: path.join(tmp, "cache3") }),
    );
    expect(r).toMatchObject({ kind: "commit", onto: base, rebased: true });
    expect((r as { diffstat: string }).diffstat).toMatch(/^ g\.txt \| 2 \+-\n 1 file changed/);
    fs.rmSync(path.join(tmp, "cache3"), { recursive: true, force: true });
  });

  it("deleteBranch removes the branch only at the commit it expects", async () => {
    const r = await prepare(opts("r"));
    const sha = (r as { sha: string }).sha;
    await pushBranch({
      url: httpUrl("r"),
      cacheDir: cache,
      sha,
      branch: "patchbay/gone",
      expect: null,
      env: process.env,
      credential: WRITER,
    });
    const del = (expect: string) =>
      deleteBranch({ url: httpUrl("r"), branch: "patchbay/gone", expect, env: process.env, credential: WRITER });
    expect(await del(base)).toEqual({ kind: "foreign", remoteSha: sha });
    expect(git(path.join(repos, "r.git"), "rev-parse", "patchbay/gone").trim()).toBe(sha);
    expect(await del(sha)).toEqual({ kind: "deleted" });
    expect(git(path.join(repos, "r.git"), "for-each-ref", "refs/heads/patchbay/gone")).toBe("");
    expect(await del(sha)).toEqual({ kind: "absent" });
  });
});

describe("a server that never answers", () => {
  it("is a PublishError of kind timeout once the run's timeout passes", async () => {
    const held: net.Socket[] = [];
    const mute = net.createServer((s) => held.push(s));
    await new Promise<void>((resolve) => mute.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(mute.address() as net.AddressInfo).port}/r.git`;
    try {
      const err = await refusal(
        remoteBranch({ url, branch: "main", env: process.env, credential: WRITER, timeoutMs: 300 }),
      );
      expect([err.reason, err.kind]).toEqual(["timeout", "timeout"]);
      expect(err.message).toMatch(/^git cannot read http:\/\/127\.0\.0\.1:\d+\/r\.git: killed after 300 ms/);
    } finally {
      for (const s of held) s.destroy();
      await new Promise((resolve) => mute.close(resolve));
    }
  });
});

describe("over SSH through the agent", () => {
  it("prepares and pushes with git's own credentials (SSH_AUTH_SOCK, GIT_SSH_COMMAND), read back with git", async () => {
    const bare = path.join(repos, "ssh.git");
    const url = `${ssh.login}:${bare}`;
    const env = { ...process.env, ...ssh.env };
    const r = await prepare(opts("ssh", { url, env, credential: undefined }));
    if (r.kind !== "commit") throw new Error(JSON.stringify(r));
    expect(await pushBranch({ url, cacheDir: cache, sha: r.sha, branch: "patchbay/ssh", expect: null, env })).toEqual({
      kind: "pushed",
    });
    expect(git(tmp, "ls-remote", bare, "refs/heads/patchbay/ssh")).toBe(`${r.sha}\trefs/heads/patchbay/ssh\n`);
    expect(execFileSync("git", ["ls-remote", url, "refs/heads/patchbay/ssh"], { env, encoding: "utf8" })).toBe(
      `${r.sha}\trefs/heads/patchbay/ssh\n`,
    );
    expect(git(bare, "show", `${r.sha}:f.txt`)).toBe(LINES.replace("b\n", "B\n"));
    expect(ssh.log()).toMatch(/Accepted publickey for \S+ from 127\.0\.0\.1/);
    expect(await pushBranch({ url, cacheDir: cache, sha: r.sha, branch: "patchbay/ssh", expect: r.sha, env })).toEqual({
      kind: "unchanged",
    });
  });

  it("without the agent's key the server refuses: a PublishError for rights naming the host", async () => {
    const url = `${ssh.login}:${path.join(repos, "ssh.git")}`;
    const env = {
      ...process.env,
      ...ssh.env,
      SSH_AUTH_SOCK: path.join(tmp, "no-agent.sock"),
      HOME: path.join(tmp, "work"),
    };
    const err = await refusal(remoteBranch({ url, branch: "patchbay/ssh", env }));
    expect(err.reason).toBe("rights");
    expect(err.message).toMatch(/^the credentials for 127\.0\.0\.1 cannot read .*: .*Permission denied \(publickey\)/s);
  });
});

/** A patch creating `file` with one line. */
const create = (file: string, text = "pwned") =>
  `diff --git a/${file} b/${file}\nnew file mode 100644\n--- /dev/null\n+++ b/${file}\n@@ -0,0 +1 @@\n+${text}\n`;

describe("hostile patches", () => {
  const hostile = (patch: string) => refusal(prepare(opts("hostile", { patch })));

  it("refuses a path with .., a path into .git/, a write through the tree's symlink, and one through a symlink it makes", async () => {
    const dots = await hostile(create("../escape.txt"));
    expect([dots.reason, dots.message]).toEqual([
      "patch",
      expect.stringMatching(/^the patch does not apply to [0-9a-f]{40}: error: invalid path '\.\.\/escape\.txt'/),
    ]);
    const dotGit = await hostile(create(".git/hooks/post-checkout"));
    expect(dotGit.message).toMatch(/invalid path '\.git\/hooks\/post-checkout'/);
    const through = await hostile(create("link/planted.txt"));
    expect(through.message).toMatch(/affected file 'link\/planted\.txt' is beyond a symbolic link/);
    const made = `diff --git a/ln b/ln\nnew file mode 120000\n--- /dev/null\n+++ b/ln\n@@ -0,0 +1 @@\n+${outside}\n\\ No newline at end of file\n${create("ln/planted2.txt")}`;
    expect((await hostile(made)).message).toMatch(/beyond a symbolic link/);
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(fs.existsSync(path.join(tmp, "escape.txt"))).toBe(false);
  });

  it("refuses a patch over the bound, and a small binary patch that claims to inflate past it, before git sees them", async () => {
    const huge = await hostile(create("big.txt", "x".repeat(DEFAULT_PATCH_MAX_BYTES)));
    expect(huge.message).toMatch(
      new RegExp(`^the patch is \\d+ bytes, over the ${DEFAULT_PATCH_MAX_BYTES} bytes a publish takes$`),
    );
    const bomb = `diff --git a/z.bin b/z.bin\nnew file mode 100644\nindex 0000000..1111111\nGIT binary patch\nliteral ${DEFAULT_PATCH_MAX_BYTES + 1}\nzcmeAS@N?(olHy`;
    expect((await hostile(bomb)).message).toMatch(/inflate to \d+ bytes, over the/);
  });

  it("writes nothing under the cache but the bare repos' git files, and nowhere else", async () => {
    const files: string[] = [];
    const walk = (d: string) => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        const p = path.join(d, e.name);
        if (e.isDirectory()) walk(p);
        else files.push(path.relative(cache, p));
      }
    };
    walk(cache);
    const allowed =
      /^[0-9a-f]{24}\.git\/(?:HEAD|config|description|packed-refs|shallow|objects\/.+|refs\/.+|info\/.+|logs\/.+)$/;
    expect(files.filter((f) => !allowed.test(f))).toEqual([]);
    for (const f of files.filter((f) => /\/objects\//.test(f) === false))
      expect(fs.readFileSync(path.join(cache, f), "latin1")).not.toMatch(/pwned|planted/);
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(fs.readdirSync(tmp).sort()).toEqual(["cache", "outside", "repos", "work"]);
  });
});

describe("the token", () => {
  it("is in no file under the cache dir (git's objects unpacked) and in no message", () => {
    const secrets = [
      TOKEN,
      READ_TOKEN,
      Buffer.from(`${WRITER.username}:${TOKEN}`).toString("base64"),
      Buffer.from(`${READER.username}:${READ_TOKEN}`).toString("base64"),
    ];
    const found: string[] = [];
    const walk = (d: string) => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        const p = path.join(d, e.name);
        if (e.isDirectory()) walk(p);
        else if (secrets.some((s) => fs.readFileSync(p).includes(s))) found.push(p);
      }
    };
    walk(cache);
    for (const repo of fs.readdirSync(cache)) {
      const objects = execFileSync(
        "git",
        ["-C", path.join(cache, repo), "cat-file", "--batch-all-objects", "--batch"],
        { maxBuffer: 256 * 1024 * 1024 },
      );
      if (secrets.some((s) => objects.includes(s))) found.push(`${repo} objects`);
    }
    expect(found).toEqual([]);
    expect(said.length).toBeGreaterThan(10);
    expect(said.filter((m) => secrets.some((s) => m.includes(s)))).toEqual([]);
  });
});
