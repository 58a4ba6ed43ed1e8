// Grading one prediction in a fresh sandbox (src/eval/grade.ts) on the project's own task sets
// (test/support/eval-sets.ts): every gold patch grades resolved, in Python (unittest) and in
// JavaScript (TAP and JUnit XML, one with `setup: npm ci` through the setup network); an empty or
// null patch is empty_patch; a fix that also breaks a PASS_TO_PASS test, and the scripted model's
// wrong fix, are unresolved with the failing tests named; a patch that does not apply is
// patch_failed. Each report is in SWE-bench's shape.
//
// Backend: Docker (the grading sandbox, the per-repo Node image, the setup network).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gradePrediction } from "../../src/eval/grade.js";
import type { EvalInstance, Graded, Prediction } from "../../src/eval/types.js";
import { makeTaskSets, patchOf, REPO_SPECS, WRONG_ID, type TaskSets } from "../support/eval-sets.js";
import { buildNodeImage } from "../support/node-image.js";

const tmp = mkdtempSync(join(tmpdir(), "pb-eval-grade-"));
let sets: TaskSets;
beforeAll(async () => {
  await buildNodeImage();
  sets = await makeTaskSets(join(tmp, "set"));
}, 900_000);
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const instance = (id: string): EvalInstance => sets.instances.find((x) => x.instance_id === id)!;
const pred = (id: string, model_patch: string | null): Prediction => ({
  instance_id: id,
  model_patch,
  model_name_or_path: "test",
});
const sorted = (xs: string[]) => [...xs].sort();

/** The report's keys and types as SWE-bench's harness writes them. */
function expectReportShape(g: Graded): void {
  expect(Object.keys(g.report).sort()).toEqual(
    ["patch_exists", "patch_is_None", "patch_successfully_applied", "resolved"].concat(
      g.report.tests_status ? ["tests_status"] : [],
    ),
  );
  if (g.report.tests_status)
    expect(Object.keys(g.report.tests_status).sort()).toEqual([
      "FAIL_TO_FAIL",
      "FAIL_TO_PASS",
      "PASS_TO_FAIL",
      "PASS_TO_PASS",
    ]);
}

describe("the gold patches", () => {
  it.each(REPO_SPECS.map((s) => [s.id, s.test.format]))(
    "%s (%s) grades resolved: every FAIL_TO_PASS and PASS_TO_PASS test passes",
    async (id) => {
      const x = instance(id);
      const g = await gradePrediction(
        x,
        sets.gold.find((p) => p.instance_id === id)!,
      );
      expect(g.outcome, `${g.error ?? ""}\n${g.testOutput}`).toBe("resolved");
      expectReportShape(g);
      expect(g.report).toMatchObject({
        patch_is_None: false,
        patch_exists: true,
        patch_successfully_applied: true,
        resolved: true,
      });
      const ts = g.report.tests_status!;
      expect(sorted(ts.FAIL_TO_PASS.success)).toEqual(sorted(x.FAIL_TO_PASS));
      expect(sorted(ts.PASS_TO_PASS.success)).toEqual(sorted(x.PASS_TO_PASS));
      expect([ts.FAIL_TO_PASS.failure, ts.PASS_TO_PASS.failure]).toEqual([[], []]);
    },
    300_000,
  );
});

describe("predictions that do not resolve", () => {
  it("an empty patch and a null patch are empty_patch, not resolved", async () => {
    const id = REPO_SPECS[0]!.id;
    const empty = await gradePrediction(instance(id), pred(id, ""));
    expect(empty.outcome).toBe("empty_patch");
    // As SWE-bench's report has it: an empty string is a patch that exists (and does nothing).
    expect(empty.report).toMatchObject({ patch_is_None: false, patch_exists: true, resolved: false });
    expectReportShape(empty);
    const none = await gradePrediction(instance(id), pred(id, null));
    expect(none.outcome).toBe("empty_patch");
    expect(none.report).toMatchObject({ patch_is_None: true, patch_exists: false, resolved: false });
  }, 300_000);

  it("a fix that also breaks a PASS_TO_PASS test is unresolved, that test in PASS_TO_PASS.failure", async () => {
    const id = "fixtures__leap-4";
    const spec = REPO_SPECS.find((s) => s.id === id)!;
    // The gold fix, and April made 31 days long.
    const patch = patchOf(sets, id, [
      ...spec.fix.edits,
      { path: "dates.py", old: "[31, 28, 31, 30,", new: "[31, 28, 31, 31," },
    ]);
    const g = await gradePrediction(instance(id), pred(id, patch));
    expect(g.outcome, g.testOutput).toBe("unresolved");
    expect(g.report).toMatchObject({ patch_successfully_applied: true, resolved: false });
    const ts = g.report.tests_status!;
    expect(ts.PASS_TO_PASS.failure).toEqual(["test_april (test_dates.DaysInMonthTest.test_april)"]);
    expect(sorted(ts.FAIL_TO_PASS.success)).toEqual(sorted(instance(id).FAIL_TO_PASS));
  }, 300_000);

  it("the scripted model's wrong fix is unresolved, its FAIL_TO_PASS tests failing", async () => {
    const spec = REPO_SPECS.find((s) => s.id === WRONG_ID)!;
    const g = await gradePrediction(instance(WRONG_ID), pred(WRONG_ID, patchOf(sets, WRONG_ID, spec.wrong!)));
    expect(g.outcome, g.testOutput).toBe("unresolved");
    expect(g.report.tests_status!.FAIL_TO_PASS.failure).toContain("range > counting down > includes the end");
    expect(g.report.tests_status!.PASS_TO_PASS.failure).toEqual([]);
  }, 300_000);

  it("a patch that does not apply to the base commit is patch_failed", async () => {
    const [a, b] = [REPO_SPECS[0]!.id, REPO_SPECS[1]!.id];
    // pager's gold patch offered for slug: its file is not there.
    const g = await gradePrediction(instance(b), pred(b, sets.gold.find((p) => p.instance_id === a)!.model_patch));
    expect(g.outcome).toBe("patch_failed");
    expect(g.error).toBeTruthy();
    expect(g.report).toMatchObject({ patch_exists: true, patch_successfully_applied: false, resolved: false });
    expectReportShape(g);
  }, 300_000);
});
