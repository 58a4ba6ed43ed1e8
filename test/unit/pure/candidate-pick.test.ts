// Which candidate is a job's result (src/job/candidates/pick.ts): verify first, then the spec's
// pick order, then the number; a failed one never, one without a patch only where none has one.
import { describe, expect, it } from "vitest";
import { pickCandidate } from "../../../src/job/candidates/pick.js";
import type { CandidateOutcome } from "../../../src/core/spec/spec.js";

const c = (n: number, o: Partial<CandidateOutcome> = {}): CandidateOutcome => ({
  n,
  jobId: `j-C${n}`,
  status: "verify_failed",
  verified: false,
  costUsd: 1,
  turns: 3,
  patchBytes: 100,
  filesChanged: 1,
  ...o,
});

describe("pickCandidate", () => {
  it("picks the one verify passed, whatever its size or cost", () => {
    const r = pickCandidate([
      c(1, { patchBytes: 10 }),
      c(2, { verified: true, status: "completed", patchBytes: 900, costUsd: 9 }),
      c(3),
    ]);
    expect(r).toEqual({ picked: 2, why: "candidate 2 is the only one verify passed" });
  });

  it("among the verified: the smaller patch, then the lower cost; or the lower cost first", () => {
    const v = { verified: true, status: "completed" as const };
    const all = [
      c(1, { ...v, patchBytes: 300, costUsd: 0.1 }),
      c(2, { ...v, patchBytes: 100, costUsd: 0.5 }),
      c(3, { ...v, patchBytes: 100, costUsd: 0.2 }),
    ];
    expect(pickCandidate(all).picked).toBe(3);
    expect(pickCandidate(all).why).toBe(
      "verify passed 3 candidates; candidate 3 has the smallest patch, then the lowest cost",
    );
    expect(pickCandidate(all, "lower-cost").picked).toBe(1);
  });

  it("never picks a failed candidate; with none verified, one with a patch before one without", () => {
    expect(
      pickCandidate([c(1, { status: "failed", patchBytes: 5 }), c(2, { patchBytes: 0 }), c(3, { patchBytes: 700 })]),
    ).toEqual({
      picked: 3,
      why: "verify passed none; candidate 3 has the smallest patch, then the lowest cost",
    });
    expect(pickCandidate([c(1, { patchBytes: 0 }), c(2, { patchBytes: 0, costUsd: 0.5 })]).picked).toBe(2);
    expect(pickCandidate([c(1, { status: "failed" }), c(2, { status: "failed" })])).toEqual({
      why: "none of the 2 candidates finished without failing",
    });
  });
});
