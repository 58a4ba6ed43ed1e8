// Red team (issue 44): "the instance's tests are never visible to the agent". A task set's repo is
// usually the project's own (SWE-bench's are GitHub URLs), whose history goes on past base_commit:
// the fix and the very tests that grade it are commits on its main branch. patchbay clones the repo
// whole and hands the agent its .git, so `git log --all` showed the agent the fix and its tests
// (the set's own fixtures hid this: their repos hold no commit past the bug). An eval job's
// workspace, as setup leaves it for the agent, must hold no commit that is not base_commit's
// history. Checked from the job's verify, which runs on that very post-setup workspace.
//
// Needs: Docker with the sandbox image.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { evalSpecs } from "../../src/eval/task.js";
import type { EvalInstance } from "../../src/eval/types.js";
import { closeScripted, runScripted } from "../support/scripted-job.js";

const tmp = mkdtempSync(join(tmpdir(), "pb-eval-history-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
afterEach(closeScripted);

const env = { ...process.env, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };
const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.name=A", "-c", "user.email=a@x.invalid", ...args], {
    cwd,
    env,
    encoding: "utf8",
  }).trim();

describe("an eval job's workspace", { timeout: 300_000 }, () => {
  it("holds no commit past base_commit: not the fix, not its tests", async () => {
    const repo = join(tmp, "upstream");
    execFileSync("mkdir", ["-p", repo]);
    git(repo, "init", "-q", "-b", "main");
    writeFileSync(join(repo, "calc.py"), "def add(a, b):\n    return a - b\n");
    git(repo, "add", "-A");
    git(repo, "commit", "-q", "-m", "the bug");
    const base = git(repo, "rev-parse", "HEAD");
    git(repo, "tag", "v1.0");
    writeFileSync(join(repo, "calc.py"), "def add(a, b):\n    return a + b\n");
    writeFileSync(join(repo, "test_calc.py"), "SECRET_TEST_LINE = 1\n");
    git(repo, "add", "-A");
    git(repo, "commit", "-q", "-m", "the fix and its tests");
    const fix = git(repo, "rev-parse", "HEAD");
    git(repo, "tag", "v1.1");

    const instance: EvalInstance = {
      instance_id: "o__calc-1",
      repo: "o/calc",
      base_commit: base,
      problem_statement: "add subtracts",
      test_patch: "",
      FAIL_TO_PASS: ["t"],
      PASS_TO_PASS: [],
      patchbay: { repo, test: { command: "true", format: "unittest" } },
    };
    const [spec] = evalSpecs([instance], { candidates: 1 }) as Record<string, unknown>[];
    const verify = [
      `test "$(git rev-parse HEAD)" = ${base}`,
      `! git cat-file -e ${fix}`,
      "! git log --all --format=%s | grep -q 'the fix'",
      "! git grep -q SECRET_TEST_LINE $(git rev-list --all)",
      "git cat-file -e v1.0", // the base's own history stays
    ].join(" && ");
    const { result } = await runScripted(
      [
        {
          kind: "message",
          stop_reason: "tool_use",
          content: [
            {
              type: "tool_use",
              id: "t1",
              name: "str_replace_based_edit_tool",
              input: { command: "create", path: "/workspace/notes.txt", file_text: "x\n" },
            },
          ],
        },
        { kind: "message", content: [{ type: "text", text: "done" }] },
      ],
      { ...spec, verify, verifyRounds: 0 },
      "eval-history",
    );
    expect(result.verify?.outputTail ?? "", JSON.stringify(result.error ?? "")).toBe("");
    expect(result.verified).toBe(true);
  });
});
