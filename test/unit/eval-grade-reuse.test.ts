// Red team (issue 44): what makes a second `eval grade` or `eval run` take a grade as it was
// (grade.json in the run's directory). A grade is of a patch *for an instance*: the same patch graded
// against other tests (the set's test_patch, FAIL_TO_PASS or test command changed, or another set
// run under the same --name) is another grade, and before the fix it was taken as the first one's.
// And grade.json is a file in a directory that may be the repo's own (./patchbay-eval/NAME below
// the working directory): one that is edited, a symbolic link or a FIFO is graded again, never
// believed or waited on. Backend: none (a stub grader), the files on a temporary directory.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { gradeSet } from "../../src/eval/grade-set.js";
import { instanceReport } from "../../src/eval/report.js";
import type { EvalInstance, Graded, Prediction } from "../../src/eval/types.js";

const tmp = mkdtempSync(join(tmpdir(), "pb-eval-reuse-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const instance = (over: Partial<EvalInstance> = {}): EvalInstance => ({
  instance_id: "o__r-1",
  repo: "o/r",
  base_commit: "abcdef1",
  problem_statement: "p",
  test_patch: "diff --git a/t.py b/t.py\n",
  FAIL_TO_PASS: ["t1"],
  PASS_TO_PASS: [],
  patchbay: { repo: "/nowhere", test: { command: "true", format: "unittest" } },
  ...over,
});
const pred: Prediction = { instance_id: "o__r-1", model_patch: "diff --git a/x b/x\n", model_name_or_path: "m" };

/** A grader that resolves when FAIL_TO_PASS is ["t1"] only, and counts its calls. */
function grader() {
  const calls: EvalInstance[] = [];
  const grade = (inst: EvalInstance, p: Prediction): Promise<Graded> => {
    calls.push(inst);
    const statuses = { t1: "PASSED" as const };
    const report = instanceReport(inst, statuses, { patch: p.model_patch, applied: true });
    return Promise.resolve({
      instance_id: inst.instance_id,
      outcome: report.resolved ? "resolved" : "unresolved",
      report,
      statuses,
      testOutput: "",
      ms: 1,
    });
  };
  return { calls, grade };
}

describe("a grade is taken as it was only for the same patch of the same instance", () => {
  it("grades the same patch again when the instance's tests changed", async () => {
    const out = join(tmp, "changed");
    const g = grader();
    const first = await gradeSet({ name: "n", instances: [instance()], preds: [pred], out, grade: g.grade });
    expect(first.resolved_ids).toEqual(["o__r-1"]);
    const again = await gradeSet({ name: "n", instances: [instance()], preds: [pred], out, grade: g.grade });
    expect(g.calls).toHaveLength(1); // the same instance: graded before
    expect(again.resolved_ids).toEqual(["o__r-1"]);
    const harder = instance({ FAIL_TO_PASS: ["t1", "t2"], test_patch: "diff --git a/t.py b/t.py\n+t2\n" });
    const third = await gradeSet({ name: "n", instances: [harder], preds: [pred], out, grade: g.grade });
    expect(g.calls).toHaveLength(2);
    expect(third.resolved_ids).toEqual([]);
    expect(third.unresolved_ids).toEqual(["o__r-1"]);
  });

  it("grades again when grade.json was edited to a shape no grade has", async () => {
    const out = join(tmp, "edited");
    const g = grader();
    await gradeSet({ name: "n", instances: [instance()], preds: [pred], out, grade: g.grade });
    const file = join(out, "o__r-1", "grade.json");
    const rec = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
    writeFileSync(file, JSON.stringify({ ...rec, outcome: "resolved!", report: "yes" }));
    await gradeSet({ name: "n", instances: [instance()], preds: [pred], out, grade: g.grade });
    expect(g.calls).toHaveLength(2);
    writeFileSync(file, JSON.stringify({ ...rec, instance_id: "other" }));
    await gradeSet({ name: "n", instances: [instance()], preds: [pred], out, grade: g.grade });
    expect(g.calls).toHaveLength(3);
  });

  it("never follows a grade.json that is a symbolic link", async () => {
    const out = join(tmp, "linked");
    const g = grader();
    await gradeSet({ name: "n", instances: [instance()], preds: [pred], out, grade: g.grade });
    const file = join(out, "o__r-1", "grade.json");
    const elsewhere = join(tmp, "planted-grade.json");
    writeFileSync(elsewhere, readFileSync(file));
    rmSync(file);
    symlinkSync(elsewhere, file);
    // Planted as a link: not believed; and writing the new grade.json refuses the link (writeOwn).
    await expect(gradeSet({ name: "n", instances: [instance()], preds: [pred], out, grade: g.grade })).rejects.toThrow(
      /symbolic link/,
    );
    expect(g.calls).toHaveLength(2);
  });

  it("does not wait on a grade.json that is a FIFO", () => {
    // In a child process: a blocked read would block this test's event loop, where no timeout runs.
    const dir = join(tmp, "fifo", "o__r-1");
    mkdirSync(dir, { recursive: true });
    execFileSync("mkfifo", [join(dir, "grade.json")]);
    const script = `
      import { gradedBefore } from ${JSON.stringify(join(import.meta.dirname, "../../src/eval/run-files.ts"))};
      const i = ${JSON.stringify(instance())};
      console.log(String(gradedBefore(${JSON.stringify(dir)}, "", "p", i)));`;
    const out = execFileSync(join(import.meta.dirname, "../../node_modules/.bin/tsx"), ["--eval", script], {
      timeout: 20_000,
      encoding: "utf8",
    });
    expect(out.trim()).toBe("undefined");
  });
});
