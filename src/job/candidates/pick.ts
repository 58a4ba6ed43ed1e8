// Which of a job's candidates is its result (docs/jobspec.md#candidates). Verify is the judge: a
// verified candidate comes before every other; then, by the spec's `pick`, the smaller patch first
// (then the lower cost) or the lower cost first (then the smaller patch); then the lower number. A
// candidate with no patch is picked only where none has one; one that failed, never. Pure.
import { count } from "../../core/count.js";
import type { CandidateOutcome, JobSpec } from "../../core/spec/spec.js";

export type Pick = NonNullable<JobSpec["pick"]>;

/** The number of the candidate picked and why (a sentence), or why none could be. */
export function pickCandidate(
  outcomes: readonly CandidateOutcome[],
  pick: Pick = "smaller-patch",
): { picked?: number; why: string } {
  const usable = outcomes.filter((c) => c.status !== "failed");
  if (!usable.length) return { why: `none of the ${count(outcomes.length, "candidate")} finished without failing` };
  const patchFirst = pick === "smaller-patch";
  const key = (c: CandidateOutcome): number[] => [
    c.verified ? 0 : 1,
    c.patchBytes > 0 ? 0 : 1,
    patchFirst ? c.patchBytes : c.costUsd,
    patchFirst ? c.costUsd : c.patchBytes,
    c.n,
  ];
  const best = [...usable].sort((a, b) => compare(key(a), key(b)))[0]!;
  const verified = usable.filter((c) => c.verified).length;
  const order = patchFirst ? "the smallest patch, then the lowest cost" : "the lowest cost, then the smallest patch";
  const why = best.verified
    ? verified === 1
      ? `candidate ${best.n} is the only one verify passed`
      : `verify passed ${count(verified, "candidate")}; candidate ${best.n} has ${order}`
    : `verify passed none; candidate ${best.n} has ${best.patchBytes ? order : "no patch, as none has one"}`;
  return { picked: best.n, why };
}

function compare(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}
