// Credentials in `{ git }` URLs, on the host: a real smart-HTTP git server on 127.0.0.1 that requires
// basic auth (git http-backend), cloned by cloneRepo as a worker does. The token is used for the
// clone and is then found in no file of the clone (every file, git's objects unpacked), in no git
// argv, in no error (git's own stderr included); the worker's store (PATCHBAY_GIT_CREDENTIALS) is
// used for its host only, and refused when others can read it; a redirect to another host gets nothing.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cloneRepo } from "../../src/job/repo/clone.js";
import { RepoError } from "../../src/job/repo/load.js";
import { startGitHttp, type GitHttpServer } from "../support/git-http.js";

const USER = "alice";
const TOKEN = `tok-${process.pid}-Zq8vN3kLp0wR`;
const BASIC = Buffer.from(`${USER}:${TOKEN}`).toString("base64");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "pb-gitcred-"));
const opts = { timeoutSec: 60, max: 64 * 1024 * 1024, maxEntries: 10_000, credentials: null, env: process.env };
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

let server: GitHttpServer;
const clones: string[] = [];

beforeAll(async () => {
  const src = path.join(tmp, "src");
  fs.mkdirSync(src);
  fs.writeFileSync(path.join(src, "a.txt"), "hello\n");
  git(src, "init", "-q");
  git(src, "add", "-A");
  git(src, "commit", "-qm", "init");
  git(tmp, "clone", "-q", "--bare", src, path.join(tmp, "repos", "r.git"));
  server = await startGitHttp(path.join(tmp, "repos"), { auth: { username: USER, password: TOKEN } });
});
afterAll(async () => {
  await server?.close();
  for (const c of clones) fs.rmSync(c, { recursive: true, force: true });
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** Every file under dir (the work tree and all of .git) and every object git holds, unpacked. */
function everything(dir: string): { files: Map<string, Buffer>; objects: Buffer } {
  const files = new Map<string, Buffer>();
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) files.set(path.relative(dir, p), fs.readFileSync(p));
    }
  };
  walk(dir);
  const objects = execFileSync("git", ["-C", dir, "cat-file", "--batch-all-objects", "--batch"], {
    maxBuffer: 64 * 1024 * 1024,
  });
  return { files, objects };
}

const leaks = (b: Buffer | string) => [TOKEN, BASIC].filter((s) => Buffer.from(b as never).includes(s));

function expectNoToken(dir: string): void {
  const { files, objects } = everything(dir);
  expect(files.has(".git/config")).toBe(true);
  expect(files.has(".git/logs/HEAD")).toBe(true);
  const found = [...files].filter(([, body]) => leaks(body).length).map(([name]) => name);
  expect(found).toEqual([]);
  expect(leaks(objects)).toEqual([]);
}

async function clone(url: string, o: Partial<typeof opts> | { credentials: string } = {}): Promise<string> {
  const { dir } = await cloneRepo(url, undefined, { ...opts, ...o });
  clones.push(dir);
  return dir;
}

const storeFile = (lines: string[], mode = 0o600) => {
  const f = path.join(tmp, `store-${Math.random().toString(36).slice(2)}`);
  fs.writeFileSync(f, lines.join("\n") + "\n", { mode });
  fs.chmodSync(f, mode);
  return f;
};

describe("a token in a { git } URL (runJob's path)", () => {
  it("clones with it, and leaves it in no file of the clone (remote.origin.url is the URL without it)", async () => {
    const dir = await clone(`http://${USER}:${TOKEN}@${server.host}/r.git`);
    expect(fs.readFileSync(path.join(dir, "a.txt"), "utf8")).toBe("hello\n");
    expect(git(dir, "config", "remote.origin.url").trim()).toBe(`http://${server.host}/r.git`);
    expectNoToken(dir);
    expect(server.requests.some((r) => r.authorization === `Basic ${BASIC}`)).toBe(true);
  });

  it("a token alone as the user name (https://TOKEN@host) is a credential too", async () => {
    const only = await startGitHttp(path.join(tmp, "repos"), { auth: { username: TOKEN, password: "" } });
    try {
      const dir = await clone(`http://${TOKEN}@${only.host}/r.git`);
      expectNoToken(dir);
      expect(only.authorized()).toBeGreaterThan(0);
    } finally {
      await only.close();
    }
  });

  it("is in no git argv: git gets the URL without it and the token through its environment", async () => {
    const shim = path.join(tmp, "shim");
    const log = path.join(tmp, "argv.log");
    fs.mkdirSync(shim, { recursive: true });
    const real = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim();
    fs.writeFileSync(path.join(shim, "git"), `#!/bin/sh\nprintf '%s\\n' "$*" >> ${log}\nexec ${real} "$@"\n`, {
      mode: 0o755,
    });
    const saved = process.env.PATH;
    process.env.PATH = `${shim}:${saved}`;
    try {
      await clone(`http://${USER}:${TOKEN}@${server.host}/r.git`);
    } finally {
      process.env.PATH = saved;
    }
    const argv = fs.readFileSync(log, "utf8");
    expect(argv).toMatch(new RegExp(`clone .* http://${server.host}/r.git`));
    expect(leaks(argv)).toEqual([]);
  });

  it("a wrong token fails as a RepoError whose message (git's stderr included) shows neither token nor userinfo", async () => {
    const wrong = `${TOKEN}-wrong`;
    const err = await clone(`http://${USER}:${wrong}@${server.host}/r.git`).catch((e: Error) => e);
    expect(err).toBeInstanceOf(RepoError);
    expect((err as Error).message).toMatch(
      /repo\.git http:\/\/\*\*\*@127\.0\.0\.1:\d+\/r\.git: git clone failed: .*Authentication failed/s,
    );
    expect((err as Error).message).not.toContain(wrong);
    expect((err as Error).message).not.toContain(USER);
  });

  it("a redirect to another host gets no credentials (the helper answers for the URL's own host only)", async () => {
    const other = await startGitHttp(path.join(tmp, "repos"), { auth: { username: USER, password: TOKEN } });
    const front = await startGitHttp(path.join(tmp, "repos"), { redirectTo: other.url });
    try {
      const err = await clone(`http://${USER}:${TOKEN}@${front.host}/r.git`).catch((e: Error) => e);
      expect(err).toBeInstanceOf(RepoError);
      expect(other.requests.length).toBeGreaterThan(0); // git followed the redirect
      expect(other.requests.filter((r) => r.authorization !== "")).toEqual([]);
      expect((err as Error).message).not.toContain(TOKEN);
    } finally {
      await Promise.all([other.close(), front.close()]);
    }
  });
});

describe("the worker's store (PATCHBAY_GIT_CREDENTIALS)", () => {
  it("a line for the host is used for a URL without credentials, and left in no file of the clone", async () => {
    const f = storeFile([
      `https://bob:other-host-token@example.org`,
      `http://${USER}:${encodeURIComponent(TOKEN)}@${server.host}`,
    ]);
    const dir = await clone(`http://${server.host}/r.git`, { credentials: f });
    expect(fs.readFileSync(path.join(dir, "a.txt"), "utf8")).toBe("hello\n");
    expectNoToken(dir);
  });

  it("a line for another host or another repo path is not used", async () => {
    const f = storeFile([`http://${USER}:${TOKEN}@127.0.0.1:1`, `http://${USER}:${TOKEN}@${server.host}/other.git`]);
    const err = await clone(`http://${server.host}/r.git`, { credentials: f }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(RepoError);
    expect((err as Error).message).toMatch(/could not read Username|Authentication failed|terminal prompts disabled/);
    const ok = storeFile([`http://${USER}:${TOKEN}@${server.host}/r.git`]);
    expectNoToken(await clone(`http://${server.host}/r.git`, { credentials: ok }));
  });

  it("a store other users can read is refused, saying how to fix it; a missing one is named", async () => {
    const f = storeFile([`http://${USER}:${TOKEN}@${server.host}`], 0o644);
    const err = await clone(`http://${server.host}/r.git`, { credentials: f }).catch((e: Error) => e);
    expect(err).not.toBeInstanceOf(RepoError); // the worker's configuration, not the job's: another worker may do
    expect((err as Error).message).toBe(
      `PATCHBAY_GIT_CREDENTIALS=${f}: mode 0644 lets other users read the credentials; chmod 600 ${f}`,
    );
    const missing = path.join(tmp, "no-such-store");
    await expect(clone(`http://${server.host}/r.git`, { credentials: missing })).rejects.toThrow(
      `PATCHBAY_GIT_CREDENTIALS=${missing}: ENOENT`,
    );
  });

  it("the URL's own credentials win over the store's", async () => {
    const f = storeFile([`http://${USER}:wrong-stored-token@${server.host}`]);
    expectNoToken(await clone(`http://${USER}:${TOKEN}@${server.host}/r.git`, { credentials: f }));
  });
});
