// The eval's task sets (test/support/eval-sets.ts) are what they claim, by git alone (no test is run
// here; test/integration/eval-sets.test.ts runs them): each repository's upstream history is a clean
// start, the buggy commit (base_commit) and the fix, and the instance's repo holds the first two
// only, with main at the bug and no object of the fix; the
// gold patch is the fix's source diff and the test patch its tests' diff, and together they make
// the fix's tree; the set file names each repo relative to itself; the kinds the brief asks for are
// there; and the scripted model's file replays the gold edits (one instance's deliberately wrong),
// by hand and in a scripted job on each repo as a worker runs it.
//
// Backend: local (the scripted jobs; the rest is git on temporary directories).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseScriptFile, scriptFor as scriptOfTask } from "../../src/agent/script-file.js";
import { backendOf } from "../../src/backend/index.js";
import { loadConfig } from "../../src/core/config/config.js";
import type { EvalInstance } from "../../src/eval/types.js";
import { runJob } from "../../src/job/run.js";
import {
  firstLine,
  fixtureGit,
  makeTaskSets,
  patchOf,
  scriptFor,
  WRONG_ID,
  type TaskSets,
} from "../support/eval-sets.js";

const tmp = mkdtempSync(join(tmpdir(), "pb-eval-sets-"));
let sets: TaskSets;
beforeAll(async () => {
  sets = await makeTaskSets(join(tmp, "a"));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const git = (cwd: string, ...args: string[]) => fixtureGit(cwd, args);
const diffPaths = (patch: string) => [...patch.matchAll(/^diff --git a\/(\S+) b\//gm)].map((m) => m[1]);

/** A fresh clone of the instance's repo at base_commit, in a directory of its own. */
function checkout(x: EvalInstance): string {
  const w = mkdtempSync(join(tmp, "w-"));
  execFileSync("git", ["clone", "-q", x.patchbay.repo, w]);
  git(w, "checkout", "-q", x.base_commit);
  return w;
}
function apply(w: string, patch: string, name: string): void {
  writeFileSync(join(w, "..", `${name}.patch`), patch);
  git(w, "apply", join(w, "..", `${name}.patch`));
}
/** The tree of the work tree's files, as a commit would record it. */
const treeOf = (w: string) => {
  git(w, "add", "-A");
  return git(w, "write-tree");
};

describe("the set", () => {
  it("has at least 10 instances: 5 Python (unittest), 5 JavaScript (TAP, 2 JUnit with a file), one npm ci", () => {
    const fmt = (f: string) => sets.instances.filter((x) => x.patchbay.test.format === f);
    expect(sets.instances.length).toBeGreaterThanOrEqual(10);
    expect(fmt("unittest").length).toBeGreaterThanOrEqual(5);
    expect(fmt("unittest").every((x) => x.patchbay.test.command === "python3 -m unittest -v")).toBe(true);
    expect(fmt("tap").length + fmt("junit").length).toBeGreaterThanOrEqual(5);
    expect(fmt("junit").length).toBeGreaterThanOrEqual(2);
    for (const x of fmt("junit"))
      expect(x.patchbay.test.command).toContain(`--test-reporter-destination=${x.patchbay.test.file}`);
    const npm = sets.instances.filter((x) => x.patchbay.setup === "npm ci");
    expect(npm.length).toBeGreaterThanOrEqual(1);
    for (const x of npm) {
      expect(x.patchbay.network).toEqual({ setup: { allow: ["npm"] } });
      expect(x.test_patch + readFileSync(join(x.patchbay.repo, "package.json"), "utf8")).toMatch(/is-number/);
    }
    expect(new Set(sets.instances.map((x) => x.instance_id)).size).toBe(sets.instances.length);
  });

  it("writes set.jsonl with each repo relative to the file, otherwise the same instances", () => {
    const lines = readFileSync(sets.file, "utf8").trim().split("\n");
    const read = lines.map((l) => JSON.parse(l) as EvalInstance);
    expect(read.map((x) => x.instance_id)).toEqual(sets.instances.map((x) => x.instance_id));
    read.forEach((x, i) => {
      expect(x.patchbay.repo).toMatch(/^\.\/[a-z]+$/);
      expect(resolve(sets.dir, x.patchbay.repo)).toBe(sets.instances[i]!.patchbay.repo);
      expect({ ...x, patchbay: { ...x.patchbay, repo: "" } }).toEqual({
        ...sets.instances[i],
        patchbay: { ...sets.instances[i]!.patchbay, repo: "" },
      });
    });
    expect(sets.gold.map((p) => [p.instance_id, p.model_patch, p.model_name_or_path])).toEqual(
      sets.instances.map((x) => [x.instance_id, x.patch, "gold"]),
    );
  });

  it("writes the same commits every time (fixed identities and dates)", async () => {
    const again = await makeTaskSets(join(tmp, "b"));
    expect(again.instances.map((x) => x.base_commit)).toEqual(sets.instances.map((x) => x.base_commit));
    expect(again.commits.map((c) => c.fix)).toEqual(sets.commits.map((c) => c.fix));
  });
});

describe("each repository's history", () => {
  it("is upstream a clean start, the buggy commit (base_commit) and the fix with its tests", () => {
    sets.instances.forEach((x, i) => {
      const c = sets.commits[i]!;
      const spec = sets.specs[i]!;
      expect(c.base).toBe(x.base_commit);
      expect(git(c.upstream, "rev-parse", "main")).toBe(c.fix);
      expect(git(c.upstream, "rev-list", "--parents", "-n1", c.start)).toBe(c.start);
      expect(git(c.upstream, "rev-list", "--parents", "-n1", c.base)).toBe(`${c.base} ${c.start}`);
      expect(git(c.upstream, "rev-list", "--parents", "-n1", c.fix)).toBe(`${c.fix} ${c.base}`);
      expect(git(c.upstream, "log", "--format=%s", c.fix).split("\n")).toEqual(
        [spec.fix.message, spec.bug.message, spec.start.message].map((m) => m.split("\n")[0]),
      );
      // The buggy commit changes source, not tests; the tests the fix brings are not there yet.
      const bugPaths = git(c.upstream, "diff", "--name-only", c.start, c.base).split("\n");
      expect(bugPaths.filter((p) => !/(^|\/)test/.test(p))).not.toEqual([]);
    });
  });

  it("is in the instance's repo the clean start and the bug only: main at base_commit, no object of the fix", () => {
    sets.instances.forEach((x, i) => {
      const c = sets.commits[i]!;
      const repo = x.patchbay.repo;
      expect(repo).toBe(c.path);
      expect(git(repo, "symbolic-ref", "--short", "HEAD")).toBe("main");
      expect(git(repo, "rev-parse", "HEAD")).toBe(c.base);
      expect(git(repo, "rev-list", "--all").split("\n")).toEqual([c.base, c.start]);
      expect(git(repo, "remote")).toBe("");
      expect(git(repo, "status", "--porcelain")).toBe("");
      expect(() => git(repo, "cat-file", "-e", c.fix)).toThrow();
      for (const test of x.FAIL_TO_PASS.slice(-1)) {
        const leaf = x.patchbay.test.format === "unittest" ? test.split(" ")[0]! : test.split(/ > |::/).at(-1)!;
        expect(execFileSync("git", ["grep", "-c", leaf, c.fix], { cwd: c.upstream, encoding: "utf8" })).not.toBe("");
        expect(() => execFileSync("git", ["grep", "-q", leaf, c.base], { cwd: repo })).toThrow();
      }
    });
  });

  it("the gold patch is the fix without its tests, the test patch only the tests; both make the fix's tree", () => {
    sets.instances.forEach((x, i) => {
      const spec = sets.specs[i]!;
      expect(diffPaths(x.patch!).sort()).toEqual([...new Set(spec.fix.edits.map((e) => e.path))].sort());
      expect(diffPaths(x.test_patch).sort()).toEqual([...new Set(spec.fix.tests.map((e) => e.path))].sort());
      expect(diffPaths(x.test_patch).every((p) => /(^|\/)test/.test(p!))).toBe(true);
      expect(diffPaths(x.patch!).some((p) => /(^|\/)test/.test(p!))).toBe(false);
      const w = checkout(x);
      apply(w, x.test_patch, "test");
      apply(w, x.patch!, "gold");
      expect(treeOf(w)).toBe(git(sets.commits[i]!.upstream, "rev-parse", `${sets.commits[i]!.fix}^{tree}`));
    });
  });

  it("names each FAIL_TO_PASS test in the test patch; the lists are disjoint and the first is never empty", () => {
    for (const x of sets.instances) {
      expect(x.FAIL_TO_PASS.length).toBeGreaterThan(0);
      expect(x.PASS_TO_PASS.length).toBeGreaterThan(0);
      expect(x.FAIL_TO_PASS.filter((t) => x.PASS_TO_PASS.includes(t))).toEqual([]);
      const added = x.test_patch
        .split("\n")
        .filter((l) => l.startsWith("+"))
        .join("\n");
      // A TAP parent (a describe block) is named by its children's results: it fails with them.
      const parents = x.FAIL_TO_PASS.filter((t) => x.FAIL_TO_PASS.some((u) => u.startsWith(`${t} > `)));
      for (const t of x.FAIL_TO_PASS.filter((u) => !parents.includes(u))) {
        const leaf =
          x.patchbay.test.format === "unittest"
            ? `def ${t.split(" ")[0]}(`
            : `"${t
                .split(" > ")
                .at(-1)!
                .replace(/^test::/, "")}"`;
        expect(added, `${x.instance_id}: ${t}`).toContain(leaf);
      }
    }
  });
});

describe("the scripted model's file", () => {
  /** Replays a script's str_replace calls on a checkout at base: the diff they leave. */
  function replay(x: EvalInstance, calls: { tool: string; input: Record<string, unknown> }[]): string {
    const w = checkout(x);
    for (const { tool, input } of calls) {
      expect(tool).toBe("str_replace_based_edit_tool");
      expect(input.command).toBe("str_replace");
      const file = join(w, String(input.path).replace(/^\/workspace\//, ""));
      const text = readFileSync(file, "utf8");
      expect(text.split(String(input.old_str)).length - 1, `${x.instance_id}: ${String(input.path)}`).toBe(1);
      writeFileSync(
        file,
        text.replace(String(input.old_str), () => String(input.new_str)),
      );
    }
    return fixtureGit(w, ["diff"], undefined, true);
  }

  it("answers each problem statement with its own script: the gold edits, then a final text; one wrong", () => {
    const file = scriptFor(sets);
    const script = parseScriptFile(readFileSync(file, "utf8"), file);
    expect(script.scripts).toHaveLength(sets.instances.length);
    for (const x of sets.instances) {
      const s = scriptOfTask(script, `Fix this.\n\n${x.problem_statement}`)!;
      expect(s.name).toBe(x.instance_id);
      expect(s.match).toEqual({ text: firstLine(x.problem_statement).toLowerCase() });
      expect(s.turns).toHaveLength(2);
      expect(s.turns[1]!.calls).toEqual([]);
      const diff = replay(x, s.turns[0]!.calls);
      expect(patchOf(sets, x.instance_id, sets.specs.find((p) => p.id === x.instance_id)!.fix.edits)).toBe(x.patch);
      if (x.instance_id === WRONG_ID) {
        expect(diff).not.toBe("");
        expect(diff).not.toBe(x.patch);
      } else expect(diff).toBe(x.patch);
    }
  });

  it("makes, in a scripted job on each repo at its base commit, the gold patch (WRONG_ID: another)", async () => {
    const file = scriptFor(sets);
    const config = loadConfig({ PATCHBAY_MODEL: `scripted:${file}`, PATCHBAY_BACKEND: "local" });
    for (const x of sets.instances) {
      const result = await runJob(
        { task: x.problem_statement, repo: { git: x.patchbay.repo, ref: x.base_commit } },
        { config, backend: backendOf("local"), labels: { "patchbay.test": "eval-sets" } },
      );
      expect(result, x.instance_id).toMatchObject({ status: "completed", scripted: true, turns: 2 });
      expect(result.summary).toBe(`Fixed: ${firstLine(x.problem_statement)}.`);
      // The job's patch, applied to a checkout at base, leaves the tree the gold patch leaves.
      const [mine, gold] = [result.patch, x.patch!].map((p, i) => {
        const w = checkout(x);
        if (p) apply(w, p, `job-${i}`);
        return treeOf(w);
      });
      if (x.instance_id === WRONG_ID) expect(mine).not.toBe(gold);
      else expect(mine, x.instance_id).toBe(gold);
    }
  }, 300_000);
});
