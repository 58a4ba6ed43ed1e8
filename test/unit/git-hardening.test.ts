// Every git process patchbay runs on a host gets the one hardening list (src/git/hardening.ts) and
// the one environment, whoever runs it: a job's clone (src/job/repo/clone.ts) and a publish
// (src/campaign/publish-git*.ts). The callers' real git processes are recorded through a `git` shim
// first on the PATH they are given, for a representative run of each (a local and a remote clone; a
// publish that fetches, merges onto a moved target, pushes and deletes): each argv opens with the
// list, exactly and in order, and adds nothing but its caller's documented differences. Beside it,
// the sources: only src/git/ spawns git, and no caller writes a `-c` or a GIT_CONFIG variable of its
// own. Then what the runner does for both: the process group killed on a timeout and an abort, the
// messages scrubbed, and fsck on what arrives (a `.git` entry refused, an old zero-padded mode not).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deleteBranch, prepareChange, PublishError, pushBranch, remoteBranch } from "../../src/campaign/publish-git.js";
import { HARDENING, hardeningArgs, PROTOCOL_VARS, REPO_VARS } from "../../src/git/hardening.js";
import { gitCommand, runGit } from "../../src/git/run.js";
import { cloneRepo } from "../../src/job/repo/clone.js";
import { RepoError } from "../../src/job/repo/load.js";
import { startGitHttp, type GitHttpServer } from "../support/git-http.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "pb-git-hardening-"));
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
const git = (cwd: string, ...args: string[]) => execFileSync("git", [...GIT_ID, ...args], { cwd, encoding: "latin1" });
const TOKEN = `tok-${process.pid}-Hq3rVn8`;
const WRITER = { username: "x-access-token", password: TOKEN };

/**
 * What each caller may add after the list, and nothing else: the transports its step names, the
 * clone's refusal of redirects (a job held to a host list), and src/git/credentials.ts's credential helper.
 */
const DIFFERENCES: Record<"clone" | "publish", RegExp> = {
  clone: /^(protocol\.(https|http|ssh|git|file)\.allow=always|http\.followRedirects=false|credential\.helper=.*)$/s,
  publish: /^(protocol\.(https|http|ssh|git|file)\.allow=always|credential\.helper=.*)$/s,
};

/** The files that run host git through src/git/run.ts, each with its differences above. */
const CALLERS = [
  "src/campaign/publish-git-merge.ts",
  "src/campaign/publish-git-run.ts",
  "src/campaign/publish-git.ts",
  "src/job/repo/clone.ts",
];

/** Planted in the host's environment: each would point git elsewhere or lift a rule; none may reach git. */
const PLANTED = {
  GIT_DIR: "/nonexistent",
  GIT_WORK_TREE: "/",
  GIT_INDEX_FILE: "/tmp/planted-index",
  GIT_ALLOW_PROTOCOL: "ext:fd:file:https:http",
  GIT_TRACE: "1",
  GIT_CURL_VERBOSE: "1",
};
/** Config in the environment: the user's, so a step with the user's config keeps it and the others do not. */
const ENV_CONFIG = { GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "patchbay.test", GIT_CONFIG_VALUE_0: "planted" };
const NETWORK = new Set(["clone", "fetch", "ls-remote", "push"]);

interface Run {
  argv: string[];
  env: Record<string, string>;
}

/** A PATH whose first `git` records its argv and environment into `log` before it runs the real one (its own children are not recorded). */
function shimEnv(name: string): { env: NodeJS.ProcessEnv; runs: () => Run[] } {
  const dir = path.join(tmp, `shim-${name}`);
  const log = path.join(dir, "log");
  fs.mkdirSync(log, { recursive: true });
  const real = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim();
  const script = `#!/bin/sh
if [ -z "$PB_SHIM_SEEN" ]; then
  f="${log}/$$-$(date +%s%N)"
  for a in "$@"; do printf '%s\\0' "$a"; done > "$f.argv"
  env -0 > "$f.env"
fi
PB_SHIM_SEEN=1 exec ${real} "$@"
`;
  fs.writeFileSync(path.join(dir, "git"), script, { mode: 0o755 });
  const env = { ...process.env, ...PLANTED, ...ENV_CONFIG, PATH: `${dir}:${process.env.PATH}` };
  const runs = () =>
    fs
      .readdirSync(log)
      .filter((f) => f.endsWith(".argv"))
      .sort()
      .map((f) => {
        const argv = fs.readFileSync(path.join(log, f), "utf8").split("\0").slice(0, -1);
        const pairs = fs
          .readFileSync(path.join(log, f.replace(/\.argv$/, ".env")), "utf8")
          .split("\0")
          .filter(Boolean);
        return {
          argv,
          env: Object.fromEntries(pairs.map((p) => [p.slice(0, p.indexOf("=")), p.slice(p.indexOf("=") + 1)])),
        };
      });
  return { env, runs };
}

/** The leading `-c key=value` pairs of an argv, and the rest (the subcommand first, after a --git-dir). */
function split(argv: string[]): { config: string[]; rest: string[]; command: string } {
  let i = 0;
  const config: string[] = [];
  while (argv[i] === "-c") [config[config.length], i] = [argv[i + 1]!, i + 2];
  const rest = argv.slice(i);
  const command = rest.find((a) => !a.startsWith("--git-dir=") && a !== "-C" && !path.isAbsolute(a)) ?? "";
  return { config, rest, command };
}

const LIST = HARDENING.map((h) => `${h.key}=${h.value}`);

/** Every recorded run of a caller opens with the list and adds only its differences; the environment is the one environment. */
function expectHardened(caller: keyof typeof DIFFERENCES, runs: Run[]): Set<string> {
  const commands = new Set<string>();
  for (const run of runs) {
    const { config, rest, command } = split(run.argv);
    commands.add(command);
    expect(config.slice(0, LIST.length), `${caller}: ${command}`).toEqual(LIST);
    expect(
      config.slice(LIST.length).filter((c) => !DIFFERENCES[caller].test(c)),
      `${caller}: ${command} adds a -c of its own`,
    ).toEqual([]);
    expect(
      rest.filter((a) => a === "-c" || a.startsWith("--config")),
      `${caller}: ${command}`,
    ).toEqual([]);
    expect(run.env).toMatchObject({ GIT_TERMINAL_PROMPT: "0", SSH_ASKPASS_REQUIRE: "never" });
    for (const v of new Set([...Object.keys(PLANTED), ...REPO_VARS, ...PROTOCOL_VARS])) {
      // A temporary index of publish's own (under its cache) is the one variable a step sets itself.
      if (v === "GIT_INDEX_FILE" && run.env[v]?.includes("patchbay-index-")) continue;
      expect(run.env[v], `${caller}: ${command}: ${v}`).toBeUndefined();
    }
    const network = NETWORK.has(command);
    expect(run.env.GIT_CONFIG_GLOBAL, `${caller}: ${command}`).toBe(network ? undefined : "/dev/null");
    expect(run.env.GIT_CONFIG_NOSYSTEM, `${caller}: ${command}`).toBe(network ? undefined : "1");
    expect(run.env.GIT_CONFIG_COUNT, `${caller}: ${command}`).toBe(network ? "1" : undefined);
  }
  return commands;
}

/** A bare repo under `root` whose main holds one tree made of raw entries (mode, name, content). */
function rawRepo(root: string, name: string, entries: [mode: string, name: string, content: string][]): string {
  const bare = path.join(root, `${name}.git`);
  git(tmp, "init", "-q", "--bare", bare);
  const body = Buffer.concat(
    entries.map(([mode, file, content]) => {
      const blob = execFileSync("git", ["--git-dir", bare, "hash-object", "-w", "--stdin"], {
        input: content,
        encoding: "utf8",
      }).trim();
      return Buffer.concat([Buffer.from(`${mode} ${file}\0`), Buffer.from(blob, "hex")]);
    }),
  );
  const tree = execFileSync("git", ["--git-dir", bare, "hash-object", "-t", "tree", "-w", "--literally", "--stdin"], {
    input: body,
    encoding: "utf8",
  }).trim();
  const commit = execFileSync("git", [...GIT_ID, "--git-dir", bare, "commit-tree", tree, "-m", "raw"], {
    encoding: "utf8",
  }).trim();
  git(tmp, "--git-dir", bare, "update-ref", "refs/heads/main", commit);
  return commit;
}

let server: GitHttpServer;
let base = "";
const repos = path.join(tmp, "repos");
const work = path.join(tmp, "work");

beforeAll(async () => {
  fs.mkdirSync(repos);
  fs.mkdirSync(work);
  fs.writeFileSync(path.join(work, "f.txt"), "a\nb\nc\nd\ne\n");
  git(work, "init", "-q");
  git(work, "add", "-A");
  git(work, "commit", "-qm", "base");
  base = git(work, "rev-parse", "HEAD").trim();
  git(tmp, "clone", "-q", "--bare", work, path.join(repos, "r.git"));
  git(work, "remote", "add", "up", path.join(repos, "r.git"));
  rawRepo(repos, "padded", [["0100644", "a.txt", "old git wrote this mode\n"]]);
  rawRepo(repos, "dotgit", [["100644", ".git", "[core]\n\thooksPath = /tmp\n"]]);
  server = await startGitHttp(repos, { users: [{ ...WRITER, rights: "write" }] });
});
afterAll(async () => {
  await server?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe("the one list, in the sources", () => {
  it("each option has its reason and is set once; gitCommand opens every argv with it and ends with the caller's arguments", () => {
    expect(HARDENING.every((h) => h.why.length > 20)).toBe(true);
    expect(new Set(HARDENING.map((h) => h.key)).size).toBe(HARDENING.length);
    const { argv, env } = gitCommand(["status"], {
      env: { ...PLANTED, PATH: "/bin" },
      timeoutMs: 1000,
      userConfig: false,
      transports: ["local"],
    });
    expect(argv.slice(0, hardeningArgs().length)).toEqual(hardeningArgs());
    expect(argv.slice(hardeningArgs().length)).toEqual(["-c", "protocol.file.allow=always", "status"]);
    expect(Object.keys(env).filter((k) => k in PLANTED)).toEqual([]);
  });

  it("only src/git/ spawns git on the host, and the callers of src/git/run.ts add no -c or GIT_CONFIG of their own", () => {
    const files = (dir: string): string[] =>
      fs
        .readdirSync(dir, { withFileTypes: true })
        .flatMap((e) =>
          e.isDirectory() ? files(path.join(dir, e.name)) : e.name.endsWith(".ts") ? [path.join(dir, e.name)] : [],
        );
    const spawners: string[] = [];
    const callers: string[] = [];
    for (const file of files(path.join(ROOT, "src"))) {
      const rel = path.relative(ROOT, file);
      const text = fs.readFileSync(file, "utf8");
      const visit = (n: ts.Node): void => {
        if (
          ts.isCallExpression(n) &&
          /(^|\.)(spawn|spawnSync|execFile|execFileSync|exec|execSync|fork)$/.test(n.expression.getText())
        ) {
          const first = n.arguments[0];
          if (first && ts.isStringLiteralLike(first) && /^git(\s|$)/.test(first.text)) spawners.push(rel);
        }
        ts.forEachChild(n, visit);
      };
      visit(ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true));
      if (!rel.startsWith("src/git/") && /from "[./]*\/git\/run\.js"/.test(text)) callers.push(rel);
    }
    expect(spawners).toEqual(["src/git/run.ts"]);
    expect(callers.sort()).toEqual(CALLERS);
    for (const rel of CALLERS) {
      const text = fs.readFileSync(path.join(ROOT, rel), "utf8");
      expect(
        text.match(/["'`]-c["'`]|--config-env|GIT_CONFIG|GIT_ALLOW_PROTOCOL|core\.hooksPath|protocol\.[a-z]+\.allow/g),
        rel,
      ).toBeNull();
    }
  });
});

describe("every host git a caller runs gets the one list", () => {
  it("the clone: a local repo, then a remote one with credentials held to its host (clone, rev-parse, ls-tree, checkout)", async () => {
    const { env, runs } = shimEnv("clone");
    const opts = { timeoutSec: 60, max: 64 * 1024 * 1024, maxEntries: 10_000, credentials: null, env };
    const local = await cloneRepo(work, undefined, opts);
    const remote = await cloneRepo(`http://${WRITER.username}:${TOKEN}@${server.host}/r.git`, "main", {
      ...opts,
      followRedirects: false,
    });
    for (const c of [local, remote]) {
      expect(fs.readFileSync(path.join(c.dir, "f.txt"), "utf8")).toContain("a\nb");
      fs.rmSync(c.dir, { recursive: true, force: true });
    }
    const seen = runs();
    expect([...expectHardened("clone", seen)].sort()).toEqual(["checkout", "clone", "ls-tree", "rev-parse"]);
    const clones = seen
      .filter((r) => split(r.argv).command === "clone")
      .map((r) => split(r.argv).config.slice(LIST.length));
    expect(clones).toEqual([
      ["protocol.file.allow=always"],
      [
        ...["https", "http", "ssh", "git"].map((p) => `protocol.${p}.allow=always`),
        "http.followRedirects=false",
        "credential.helper=",
        expect.stringMatching(/^credential\.helper=!f\(\)/),
      ],
    ]);
    expect(seen.some((r) => r.argv.join(" ").includes(TOKEN))).toBe(false);
  });

  it("a publish: prepare onto a moved target (merge), push, read back and delete the branch", async () => {
    const { env, runs } = shimEnv("publish");
    fs.writeFileSync(path.join(work, "f.txt"), "a\nB\nc\nd\ne\n");
    const patch = git(work, "diff", "--binary", "HEAD");
    git(work, "checkout", "-q", "--", "f.txt");
    fs.writeFileSync(path.join(work, "f.txt"), "a\nb\nc\nd\nE\n");
    git(work, "commit", "-qam", "moved");
    git(work, "push", "-q", "up", "main:main");
    const url = `${server.url}/r.git`;
    const net = { url, env, credential: WRITER, cacheDir: path.join(tmp, "cache") };
    const r = await prepareChange({
      ...net,
      target: "main",
      baseCommit: base,
      patch,
      author: { name: "Bot", email: "bot@t" },
      message: "B\n",
      date: new Date(0),
    });
    expect(r).toMatchObject({ kind: "commit", rebased: true });
    const sha = (r as { sha: string }).sha;
    expect(await pushBranch({ ...net, sha, branch: "patchbay/h", expect: null })).toEqual({ kind: "pushed" });
    expect(await remoteBranch({ ...net, branch: "patchbay/h" })).toBe(sha);
    expect(await deleteBranch({ ...net, branch: "patchbay/h", expect: sha })).toEqual({ kind: "deleted" });
    const seen = runs();
    const commands = expectHardened("publish", seen);
    for (const c of [
      "check-ref-format",
      "init",
      "fetch",
      "rev-parse",
      "read-tree",
      "apply",
      "write-tree",
      "commit-tree",
      "merge-tree",
      "diff-tree",
      "ls-remote",
      "push",
    ])
      expect([...commands]).toContain(c);
    // The list a publish gets is the clone's: the same options in the same order.
    expect(new Set(seen.map((run) => JSON.stringify(split(run.argv).config.slice(0, LIST.length))))).toEqual(
      new Set([JSON.stringify(LIST)]),
    );
    expect(seen.some((run) => run.argv.join(" ").includes(TOKEN))).toBe(false);
  });
});

describe("what the runner does for both", () => {
  /** Whether a pid is gone (or a zombie nobody has reaped yet: it runs nothing). */
  const gone = (pid: number) => {
    try {
      return fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z") ?? true;
    } catch {
      return true;
    }
  };
  const until = async (ok: () => boolean, ms = 3000) => {
    for (const end = Date.now() + ms; !ok() && Date.now() < end;) await new Promise((r) => setTimeout(r, 50));
    return ok();
  };

  /** git ls-remote over an "ssh" that writes its pid and sleeps: a transport git waits on. */
  const stalled = (name: string) => {
    const pidFile = path.join(tmp, `${name}.pid`);
    const env = { ...process.env, GIT_SSH_COMMAND: `echo $$ > ${pidFile}; exec sleep 60 #` };
    const pid = async () => (
      await until(() => fs.existsSync(pidFile) && fs.readFileSync(pidFile, "utf8").trim() !== ""),
      Number(fs.readFileSync(pidFile, "utf8"))
    );
    return { env, pid };
  };

  it("reads no repository's config from the caller's directory when a step names none", async () => {
    // A publish's ls-remote has no directory of its own; the CLI may be run inside a hostile repo.
    const repo = path.join(tmp, "hostile-cwd");
    git(tmp, "init", "-q", repo);
    const marker = path.join(tmp, "hostile-cwd-ran");
    git(repo, "config", "core.sshCommand", `touch ${marker} #`);
    git(repo, "config", "x.planted", "yes");
    const before = process.cwd();
    process.chdir(repo);
    try {
      const cfg = await runGit(["config", "--get", "x.planted"], {
        env: process.env,
        timeoutMs: 10_000,
        userConfig: true,
      });
      expect(cfg).toMatchObject({ code: 1, stdout: "" });
      await runGit(["ls-remote", "ssh://git.invalid/r.git"], {
        env: process.env,
        timeoutMs: 10_000,
        userConfig: true,
        transports: ["remote"],
      });
      expect(fs.existsSync(marker)).toBe(false);
    } finally {
      process.chdir(before);
    }
  });

  it("kills git's whole process group at the timeout: the transport it started is gone too", async () => {
    const s = stalled("timeout");
    const out = await runGit(["ls-remote", "ssh://git.invalid/r.git"], {
      env: s.env,
      timeoutMs: 1500,
      userConfig: true,
      transports: ["remote"],
    });
    expect(out).toMatchObject({ timedOut: true, aborted: false });
    expect(out.stderr).toMatch(/^killed after 1500 ms/);
    const pid = await s.pid();
    expect(pid).toBeGreaterThan(1);
    expect(await until(() => gone(pid))).toBe(true);
  });

  it("kills git's whole process group when the caller aborts", async () => {
    const s = stalled("abort");
    const ac = new AbortController();
    const running = runGit(["ls-remote", "ssh://git.invalid/r.git"], {
      env: s.env,
      timeoutMs: 60_000,
      userConfig: true,
      transports: ["remote"],
      signal: ac.signal,
    });
    const pid = await s.pid();
    expect(gone(pid)).toBe(false);
    ac.abort();
    expect(await running).toMatchObject({ aborted: true, timedOut: false });
    expect(await until(() => gone(pid))).toBe(true);
  });

  it("shows git's words without URL userinfo, the step's secrets or control characters", async () => {
    const env = {
      ...process.env,
      GIT_SSH_COMMAND: `printf 'token sekret-42 at https://u:pw@h.test/x \\033[31mred\\n' >&2; exit 1 #`,
    };
    const out = await runGit(["ls-remote", "ssh://git.invalid/r.git"], {
      env,
      timeoutMs: 30_000,
      userConfig: true,
      transports: ["remote"],
      secrets: ["sekret-42"],
    });
    expect(out.code).not.toBe(0);
    expect(out.stderr).toContain("token *** at https://***@h.test/x \\u001b[31mred");
    expect(out.stderr).not.toMatch(/sekret-42|u:pw|\u001b/);
  });

  it("refuses no transport but those the step names, whatever the host's environment allows", async () => {
    const env = { ...process.env, GIT_ALLOW_PROTOCOL: "ext:fd:file" };
    for (const url of [
      `ext::sh -c touch% ${path.join(tmp, "ext-ran")}`,
      "fd::0",
      `file://${path.join(repos, "r.git")}`,
    ]) {
      const out = await runGit(["ls-remote", url], {
        env,
        timeoutMs: 30_000,
        userConfig: true,
        transports: ["remote"],
      });
      expect(out.stderr, url).toMatch(/transport '(ext|fd|file)' not allowed/);
    }
    expect(fs.existsSync(path.join(tmp, "ext-ran"))).toBe(false);
  });
});

describe("fsck on what arrives, for the clone and the publish", () => {
  const opts = { timeoutSec: 60, max: 64 * 1024 * 1024, maxEntries: 10_000, credentials: null, env: process.env };
  const authed = (name: string) => `http://${WRITER.username}:${TOKEN}@${server.host}/${name}.git`;

  it("a remote whose tree has a .git entry is refused by the clone and by a publish", async () => {
    const err = await cloneRepo(authed("dotgit"), undefined, opts).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RepoError);
    expect((err as Error).message).toMatch(/git clone failed: .*hasDotgit/s);
    const commit = git(path.join(repos, "dotgit.git"), "rev-parse", "main").trim();
    const publish = {
      url: `${server.url}/dotgit.git`,
      env: process.env,
      credential: WRITER,
      cacheDir: path.join(tmp, "cache-dotgit"),
      target: "main",
      baseCommit: commit,
    };
    const perr = await prepareChange({
      ...publish,
      patch: "",
      author: { name: "Bot", email: "bot@t" },
      message: "m\n",
      date: new Date(0),
    }).catch((e: unknown) => e);
    expect(perr).toBeInstanceOf(PublishError);
    expect((perr as Error).message).toMatch(/hasDotgit/);
  });

  it("a remote whose history has a zero-padded mode (as old git wrote) still clones", async () => {
    const c = await cloneRepo(authed("padded"), undefined, opts);
    expect(fs.readFileSync(path.join(c.dir, "a.txt"), "utf8")).toBe("old git wrote this mode\n");
    fs.rmSync(c.dir, { recursive: true, force: true });
  });
});
