// The verify tree (src/job/verify.ts): the workspace as setup left it plus the patch, exactly, for
// the shapes a patch and a setup can take. Each case found by attacking the first version of it:
// paths changing type, setup's ignored leftovers where the patch creates a path, directory modes
// setup took away, a post-setup tree tar cannot keep. runJob with the scripted model, on the local
// backend (test/support/backend.ts): the tree is made by the same git and tar steps on any backend.
//
// Backend: local (runJob's logic).
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { reply, text, toolUse, type Reply } from "../support/fake-anthropic.js";
import { localBackend } from "../support/backend.js";
import { closeScripted, runScripted } from "../support/scripted-job.js";

const bash = (command: string) => reply(toolUse("bash", { command }));
let repo: string;

beforeAll(() => {
  // A git repo with a file, a directory and a symlink, each of which a patch may turn into another kind.
  repo = mkdtempSync(join(tmpdir(), "pb-verify-tree-"));
  writeFileSync(join(repo, "x"), "a file\n");
  mkdirSync(join(repo, "d"));
  writeFileSync(join(repo, "d", "a"), "in d\n");
  writeFileSync(join(repo, "target"), "target\n");
  symlinkSync("target", join(repo, "lnk"));
  mkdirSync(join(repo, "sub"));
  writeFileSync(join(repo, "sub", "f"), "before\n");
  writeFileSync(join(repo, ".gitignore"), "/gen.txt\n/cache/\n");
  const git = (...a: string[]) =>
    execFileSync("git", ["-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", ...a], { stdio: "ignore" });
  git("init", "-q");
  git("add", "-A");
  git("commit", "-q", "-m", "base");
});
afterAll(() => rmSync(repo, { recursive: true, force: true }));
afterEach(closeScripted);

const run = (script: Reply[], spec: Record<string, unknown>) =>
  runScripted(script, { repo: { path: repo }, verifyRounds: 0, ...spec }, "verify-tree", localBackend());

describe("the verify tree: post-setup workspace + patch (local backend)", () => {
  it.each([
    ["a file becomes a directory", "rm x && mkdir x && echo hi > x/a", 'test -f x/a && test "$(cat x/a)" = hi'],
    ["a directory becomes a file", "rm -r d && echo file > d", 'test -f d && test "$(cat d)" = file'],
    [
      "a symlink becomes a directory",
      "rm lnk && mkdir lnk && echo hi > lnk/a",
      "test -d lnk && ! test -L lnk && test -f lnk/a",
    ],
    ["a file becomes a symlink", "rm x && ln -s target x", 'test -L x && test "$(readlink x)" = target'],
  ])("%s: an honest patch passes", async (_, change, verify) => {
    const { result } = await run([bash(`cd /workspace && ${change}`), reply(text("Done."))], { verify });
    expect(result.error).toBeUndefined();
    expect(result).toMatchObject({ status: "completed", verified: true });
  });

  it("setup's ignored leftovers where the patch creates a path give way to the patch's", async () => {
    // Setup leaves an ignored gen.txt and cache/ (a directory); the agent unignores both and makes
    // gen.txt its own and cache a file: verify must see the agent's, not setup's.
    const setup = "echo from-setup > gen.txt && mkdir -p cache/deep && echo x > cache/deep/y";
    const change = "printf '' > .gitignore && echo from-agent > gen.txt && rm -r cache && echo file > cache";
    const verify = "grep -qx from-agent gen.txt && test -f cache && grep -qx file cache";
    const { result } = await run([bash(`cd /workspace && ${change}`), reply(text("Done."))], { setup, verify });
    expect(result.error).toBeUndefined();
    expect(result).toMatchObject({ status: "completed", verified: true });
    expect([...result.filesChanged].sort()).toEqual([".gitignore", "cache", "gen.txt"]);
  });

  it("a directory setup made read-only still takes the patch (directory modes are not in a patch)", async () => {
    const { result } = await run([bash("cd /workspace && chmod u+w sub && echo after > sub/f"), reply(text("Done."))], {
      setup: "chmod 555 sub",
      verify: "grep -qx after sub/f && test ! -w sub",
    });
    expect(result.error).toBeUndefined();
    expect(result).toMatchObject({ status: "completed", verified: true });
  });

  it("a post-setup tree that cannot be kept or rebuilt for verify fails the job once, with the reason, not as the host's fault", async () => {
    // Nested directories with long names: a tar's size grows with the square of the depth.
    const deep = "python3 -c \"import os\nfor i in range(1200): os.mkdir('n' * 200); os.chdir('n' * 200)\"";
    const { result } = await run([reply(text("Done."))], {
      setup: `mkdir cache && cd cache && ${deep}`,
      verify: "true",
      limits: { diskMb: 64 },
    });
    expect(result.status).toBe("failed");
    expect(result.error).toMatch(
      /the workspace (after setup (is too large|could not be kept)|as setup left it could not be rebuilt) for verify/,
    );
  });
});
