// One rule for every repo source (issue 41, part 4), pure: what src/job/repo/source.ts calls local,
// remote (with its host) or unsupported, held against host git's own reading of the same values
// (the transport `git ls-remote` picks), and the roots check: realpath, so a symlink out of a root
// is refused, with one answer for a path that exists and one that does not.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { checkLocalPath, checkSource, classifyGit, hostAllowed } from "../../src/job/repo/source.js";
import { loadConfig } from "../../src/core/config/config.js";
import { admitSource } from "../../src/job/repo/source-check.js";
import { parseJobSpec } from "../../src/core/spec/spec.js";

const tmp = mkdtempSync(join(tmpdir(), "pb-repo-source-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The transport host git picks for a value (`git ls-remote` with every protocol refused says which), run where nothing exists. */
function gitTransport(url: string): string {
  const empty = mkdtempSync(join(tmp, "cwd-"));
  const r = spawnSync("git", ["-c", "protocol.allow=never", "ls-remote", "--", url], {
    cwd: empty,
    env: { ...process.env, GIT_TERMINAL_PROMPT: "0" },
    encoding: "utf8",
  });
  return /transport '([^']+)' not allowed/.exec(r.stderr)?.[1] ?? `(none: ${r.stderr.trim().split("\n")[0]})`;
}

const VALUES = [
  "/srv/another/repo",
  "/root/.git",
  "../rel",
  "rel",
  "./a:b",
  "sub/dir:x",
  "file:///srv/repo",
  "file://localhost/srv/repo",
  "~/repo",
  "https://github.com/acme/x.git",
  "http://127.0.0.1:8080/x.git",
  "git://internal/x",
  "ssh://git@github.com/acme/x",
  "git+ssh://h/x",
  "ssh://[::1]:22/x",
  "a:b",
  "git@github.com:acme/x.git",
  "internal-alias:repo",
  "localhost:/srv/repo",
  "ext::sh -c id",
  "fd::3",
  "foo://x/y",
  "FILE:///srv/repo",
  "-uxterm",
  "[h]:x",
  "https://github.com\\@evil/x",
  "https://a@b@evil/x",
  "https://git%68ub.com/x",
];

describe("classifyGit", () => {
  it("calls local every value host git reads as a path, and gives a remote one the transport git uses", () => {
    for (const url of VALUES) {
      const c = classifyGit(url);
      const t = gitTransport(url);
      if (t === "file") expect(c.kind, `${url}: git reads it as a path`).toBe("local");
      if (c.kind === "remote") expect(t, url).toBe(c.scheme);
      // file: URLs are local whatever git makes of them (file:/x is scp-like to it, FILE:// unknown): the worker clones the path itself
      if (c.kind === "local" && !/^file:/i.test(url)) expect(t, url).toBe("file");
    }
  });

  it("names each kind as the issue lists it", () => {
    expect(classifyGit("/srv/another/repo")).toEqual({ kind: "local", field: "git", path: "/srv/another/repo" });
    expect(classifyGit("file:///srv/repo")).toEqual({ kind: "local", field: "git", path: "/srv/repo" });
    expect(classifyGit("/root/.git")).toMatchObject({ kind: "local", path: "/root/.git" });
    expect(classifyGit("../rel")).toMatchObject({ kind: "local", path: "../rel" });
    expect(classifyGit("https://github.com/acme/x.git")).toEqual({
      kind: "remote",
      field: "git",
      scheme: "https",
      host: "github.com",
    });
    expect(classifyGit("http://127.0.0.1:8080/x")).toMatchObject({ host: "127.0.0.1", port: "8080" });
    expect(classifyGit("https://github.com:443@evil.internal/x")).toMatchObject({
      kind: "remote",
      host: "evil.internal",
    });
    expect(classifyGit("git@GitHub.com:acme/x.git")).toEqual({
      kind: "remote",
      field: "git",
      scheme: "ssh",
      host: "github.com",
    });
    expect(classifyGit("internal-alias:repo")).toMatchObject({ kind: "remote", host: "internal-alias" });
    for (const url of [
      "ext::sh -c id",
      "fd::3",
      "foo://x",
      "-uxterm",
      "https://github.com\\@evil/x",
      "https://a@b@evil/x",
      "https://git%68ub.com/x",
      "file://otherhost/x",
      "[h]:x",
    ])
      expect(classifyGit(url).kind, url).toBe("unsupported");
  });
});

describe("checkLocalPath", () => {
  const root = join(tmp, "root");
  const outside = join(tmp, "outside");
  mkdirSync(join(root, "repo"), { recursive: true });
  mkdirSync(join(outside, "there"), { recursive: true });
  writeFileSync(join(outside, "secret"), "s");
  symlinkSync(outside, join(root, "escape"));
  symlinkSync(join(root, "repo"), join(root, "inner"));
  // Dangling: a link inside the root to a missing path outside it (made later, it would lead out),
  // and one to a missing path inside it (which stays inside).
  symlinkSync(join(outside, "made-later"), join(root, "dangling"));
  symlinkSync("repo/not-yet", join(root, "dangling-in"));

  it("takes a path under a root at its real path, and refuses every other alike, there or not", () => {
    expect(checkLocalPath(join(root, "repo"), [root])).toBe(join(root, "repo"));
    expect(checkLocalPath(join(root, "inner"), [root])).toBe(join(root, "repo"));
    expect(checkLocalPath(join(root, "missing"), [root])).toBe(join(root, "missing")); // inside: the reader says it is not there
    expect(checkLocalPath(join(root, "dangling-in"), [root])).toBe(join(root, "repo", "not-yet"));
    for (const p of [
      join(root, "dangling"),
      join(root, "dangling", "sub"),
      outside,
      join(outside, "secret"),
      join(outside, "nope"),
      join(root, "escape"),
      join(root, "escape", "secret"),
      join(root, "escape", "nope"),
      join(root, "escape", "there", "deeper", "nope"),
      `${root}/../outside`,
      `${root}-x`,
      "repo",
      "../root/repo",
      "/proc/self",
      "/root/.git",
    ])
      expect(checkLocalPath(p, [root]), p).toBeUndefined();
    expect(checkLocalPath(join(root, "repo"), [])).toBeUndefined();
  });

  it("checkSource: one verdict per kind, a local { git } at its real path, and the host list", () => {
    expect(checkSource({ git: `file://${join(root, "inner")}`, ref: "main" }, { roots: [root] })).toEqual({
      ok: true,
      repo: { git: join(root, "repo"), ref: "main" },
    });
    expect(checkSource({ git: join(root, "escape") }, { roots: [root] })).toEqual({
      ok: false,
      field: "git",
      why: "local",
    });
    expect(checkSource({ archive: "/etc/passwd" }, { roots: [root] })).toEqual({
      ok: false,
      field: "archive",
      why: "local",
    });
    expect(checkSource({ git: "http://127.0.0.1/x" }, { gitHosts: ["github.com"] })).toEqual({
      ok: false,
      field: "git",
      why: "host",
      detail: "127.0.0.1",
    });
    expect(checkSource({ git: "https://github.com/x" }, { gitHosts: ["github.com"] })).toMatchObject({ ok: true });
    expect(checkSource({ path: "/anything" }, {})).toEqual({ ok: true, repo: { path: "/anything" } }); // no roots: the operator's own job
    expect(hostAllowed({ host: "127.0.0.1", port: "8080" }, ["127.0.0.1:8080"])).toBe(true);
    expect(hostAllowed({ host: "127.0.0.1", port: "9" }, ["127.0.0.1:8080"])).toBe(false);
    expect(hostAllowed({ host: "github.com", port: "443" }, ["github.com"])).toBe(true);
  });
});

describe("the worker's rules by origin", () => {
  const spec = (repo: unknown) => {
    const r = parseJobSpec({ task: "t", repo });
    if (!r.ok) throw new Error(r.error);
    return r.spec;
  };

  it("without PATCHBAY_LOCAL_REPO_ROOTS: the operator's job reads any path, any other job none and only the forges' hosts", () => {
    const config = loadConfig({});
    expect(admitSource(spec({ path: "/srv/x" }), "operator", config)).toEqual({ spec: spec({ path: "/srv/x" }) });
    expect(admitSource(spec({ git: "http://10.0.0.1/x" }), "operator", config)).toMatchObject({ spec: {} });
    for (const origin of ["api", undefined, "OPERATOR"]) {
      expect(admitSource(spec({ path: "/srv/x" }), origin, config)).toEqual({
        refused:
          'repo.path: this worker reads the local repo of a job from the HTTP API (or of one that does not say who enqueued it) only under PATCHBAY_LOCAL_REPO_ROOTS, which it does not set; send { "git": URL }',
      });
      expect(admitSource(spec({ git: "http://10.0.0.1/x" }), origin, config)).toEqual({
        refused:
          'repo.git: this worker clones a job from the HTTP API only from the hosts of PATCHBAY_API_GIT_HOSTS (github.com, gitlab.com); "10.0.0.1" is not one of them',
      });
    }
  });

  it("with roots, every job is held to them; none refuses every local repo; the forges set the default hosts", () => {
    const root = join(tmp, "root");
    const withRoots = loadConfig({
      PATCHBAY_LOCAL_REPO_ROOTS: root,
      PATCHBAY_FORGES: "git.internal:3000=gitlab@http://git.internal:3000",
    });
    expect(admitSource(spec({ path: "/srv/x" }), "operator", withRoots)).toEqual({
      refused: `repo.path: this worker reads a local repo only under PATCHBAY_LOCAL_REPO_ROOTS (${root}); send { "git": URL } for another`,
    });
    expect(admitSource(spec({ path: join(root, "inner") }), "api", withRoots)).toEqual({
      spec: spec({ path: join(root, "repo") }),
    });
    expect(admitSource(spec({ git: "http://git.internal:3000/a/b.git" }), "api", withRoots)).toMatchObject({
      spec: {},
    });
    const none = loadConfig({ PATCHBAY_LOCAL_REPO_ROOTS: "none" });
    expect(admitSource(spec({ git: "/srv/x" }), "operator", none)).toEqual({
      refused: 'repo.git: this worker reads no local repo (PATCHBAY_LOCAL_REPO_ROOTS=none); send { "git": URL }',
    });
    expect(() => loadConfig({ PATCHBAY_LOCAL_REPO_ROOTS: "rel/dir" })).toThrow(
      /PATCHBAY_LOCAL_REPO_ROOTS: each must be an absolute directory/,
    );
    expect(() => loadConfig({ PATCHBAY_API_GIT_HOSTS: "https://x" })).toThrow(
      /PATCHBAY_API_GIT_HOSTS: each must be a host or host:port/,
    );
    expect(loadConfig({ PATCHBAY_API_GIT_HOSTS: "GitHub.com, 127.0.0.1:8080" }).apiGitHosts).toEqual([
      "github.com",
      "127.0.0.1:8080",
    ]);
  });
});
