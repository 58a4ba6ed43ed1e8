// What an eval run enqueues (src/eval/task.ts, evalPlan): an instance with a verify command (its own
// patchbay.verify, else the run's --verify) and K > 1 is one job with `candidates: K`, which its
// worker judges by verify; any other instance is K independent jobs; with K = 1 a verify is the
// job's own check and no candidates are asked for. Every spec is a valid JobSpec. Pure.
import { describe, expect, it } from "vitest";
import { assertJobSpec } from "../../../src/core/spec/spec.js";
import { evalPlan } from "../../../src/eval/task.js";
import type { EvalInstance } from "../../../src/eval/types.js";

const instance = (id: string, verify?: string): EvalInstance => ({
  instance_id: id,
  repo: "o/r",
  base_commit: "abcdef1",
  problem_statement: `issue ${id}`,
  test_patch: "diff --git a/t b/t\n",
  FAIL_TO_PASS: ["t1"],
  PASS_TO_PASS: [],
  patchbay: { repo: "https://git.example/r.git", ...(verify ? { verify } : {}), test: { command: "x", format: "tap" } },
});
const set = [instance("a", "npm test"), instance("b")];
const shape = (spec: object) => {
  const s = spec as { verify?: string; candidates?: number };
  return [s.verify, s.candidates];
};

describe("evalPlan", () => {
  it("asks one judged job of K for an instance with a verify, K independent jobs for one without", () => {
    const plan = evalPlan(set, { candidates: 3 });
    expect(plan.specs.map(shape)).toEqual([
      ["npm test", 3],
      [undefined, undefined],
      [undefined, undefined],
      [undefined, undefined],
    ]);
    expect(plan.lines).toEqual([
      { index: 0, judged: true },
      { index: 1, judged: false, candidate: 0 },
      { index: 1, judged: false, candidate: 1 },
      { index: 1, judged: false, candidate: 2 },
    ]);
    for (const spec of plan.specs) expect(() => assertJobSpec(spec)).not.toThrow();
  });

  it("gives --verify to the instances without their own; theirs wins", () => {
    const plan = evalPlan(set, { candidates: 2, verify: "make check" });
    expect(plan.specs.map(shape)).toEqual([
      ["npm test", 2],
      ["make check", 2],
    ]);
    expect(plan.lines.every((l) => l.judged)).toBe(true);
  });

  it("with K = 1 passes verify to the job as its check, and asks for no candidates", () => {
    const plan = evalPlan(set, { candidates: 1, verify: "make check" });
    expect(plan.specs.map(shape)).toEqual([
      ["npm test", undefined],
      ["make check", undefined],
    ]);
    expect(plan.lines).toEqual([
      { index: 0, judged: false, candidate: 0 },
      { index: 1, judged: false, candidate: 0 },
    ]);
  });
});
