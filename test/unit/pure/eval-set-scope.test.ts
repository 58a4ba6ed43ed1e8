// A task set's reach (red team, issue 44): a set is often someone else's file, but `eval` submits
// its instances as the operator's jobs, and a worker reads any local repo an operator's job names.
// So `eval` keeps a set's local repos under the set file's directory (src/eval/instance.ts
// localRepoOutside; the CLI resolves links first and refuses the rest unless --repos-anywhere).
import { describe, expect, it } from "vitest";
import { localRepoOutside, parseTaskSet, resolveRepo } from "../../../src/eval/instance.js";

const set = (repo: string) =>
  JSON.stringify({
    instance_id: "x__y-1",
    repo: "x/y",
    base_commit: "abcdef1",
    problem_statement: "p",
    test_patch: "diff --git a/t b/t\n",
    FAIL_TO_PASS: ["t"],
    PASS_TO_PASS: [],
    patchbay: { repo, test: { command: "true", format: "unittest" } },
  });

const outside = (repo: string) => {
  const [i] = parseTaskSet(set(repo), "/srv/sets/a/set.jsonl");
  return localRepoOutside(resolveRepo(i!.patchbay.repo, "/srv/sets/a"), "/srv/sets/a");
};

describe("a task set's local repos", () => {
  it("under the set's directory are in; a path or file: URL out of it is outside", () => {
    expect(outside("./repo")).toBe(false);
    expect(outside("repos/deep/r")).toBe(false);
    expect(outside("/srv/sets/a/r")).toBe(false);
    expect(outside("file:///srv/sets/a/r")).toBe(false);
    expect(outside("../../home/alice/work/private-repo")).toBe(true);
    expect(outside("/home/alice/private")).toBe(true);
    expect(outside("/srv/sets/ab")).toBe(true); // a sibling whose name starts like the directory
    expect(outside("file:///etc")).toBe(true);
    expect(outside("..")).toBe(true);
  });

  it("a git URL or scp-like address is not a local repo", () => {
    expect(outside("https://git.example/x/y.git")).toBe(false);
    expect(outside("ssh://git@git.example/x/y.git")).toBe(false);
    expect(outside("git@git.example:x/y.git")).toBe(false);
  });
});
