// What a job with candidates asks of each one, and what the job's result is once they ended
// (docs/jobspec.md#candidates). The executor is the queue's (src/queue/candidates.ts); this is the
// plan it follows, with no I/O.
//
// A candidate's spec is its job's, less what the job did once for all of them (setup and its
// network: the candidate starts from the seed) and less the candidates' own knobs, with its share
// of the job's budget, so that the candidates together spend at most what the job may. The job's
// result is the picked candidate's (its patch, verify and status), with the cost, usage and turns
// of all of them, and each one's outcome.
import { candidateJobId } from "../../core/candidate-id.js";
import { addUsage, type CandidateOutcome, type JobResult, type JobSpec } from "../../core/spec/spec.js";
import { pickCandidate } from "./pick.js";

/** The spec each of a job's candidates runs with. */
export function candidateSpec(spec: JobSpec): JobSpec {
  const { setup: _setup, candidates, stopAfterVerified: _k, pick: _pick, jobId: _id, network, budget, ...rest } = spec;
  const n = candidates ?? 1;
  const share = (v: number | undefined, whole: boolean) =>
    v === undefined ? undefined : whole ? Math.max(1, Math.floor(v / n)) : v / n;
  const b = budget && {
    ...(budget.usd !== undefined ? { usd: share(budget.usd, false) } : {}),
    ...(budget.inputTokens !== undefined ? { inputTokens: share(budget.inputTokens, true) } : {}),
    ...(budget.outputTokens !== undefined ? { outputTokens: share(budget.outputTokens, true) } : {}),
  };
  const { setup: _net, ...net } = network ?? {};
  return { ...rest, ...(b ? { budget: b } : {}), ...(Object.keys(net).length ? { network: net } : {}) };
}

/** A candidate's outcome from its result (or, where it failed for good, its failure). */
export function candidateOutcome(jobId: string, n: number, r: JobResult | { failed: string }): CandidateOutcome {
  const id = candidateJobId(jobId, n);
  if ("failed" in r)
    return { n, jobId: id, status: "failed", costUsd: 0, turns: 0, patchBytes: 0, filesChanged: 0, error: r.failed };
  return {
    n,
    jobId: id,
    status: r.status,
    ...(r.verified !== undefined ? { verified: r.verified } : {}),
    costUsd: r.costUsd,
    turns: r.turns,
    patchBytes: r.patchStored?.bytes ?? Buffer.byteLength(r.patch),
    filesChanged: r.filesChangedTotal ?? r.filesChanged.length,
    ...(r.error !== undefined ? { error: r.error.slice(0, 2000) } : {}),
  };
}

/**
 * The job's result once every candidate ended: `results[i]` is candidate i+1's (undefined where it
 * failed for good). `base` is the job's own (its id, attempt, timings so far).
 */
export function candidatesResult(
  spec: JobSpec,
  outcomes: CandidateOutcome[],
  results: (JobResult | undefined)[],
  base: Pick<JobResult, "jobId" | "attempt" | "timings">,
): { result: JobResult; why: string } {
  const { picked, why } = pickCandidate(outcomes, spec.pick);
  const ran = results.filter((r): r is JobResult => r !== undefined);
  const usage = ran.reduce((u, r) => addUsage(u, r.usage), {
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
  });
  const spent = {
    costUsd: ran.reduce((s, r) => s + r.costUsd, 0),
    usage,
    turns: ran.reduce((s, r) => s + r.turns, 0),
    candidates: outcomes,
  };
  const chosen = picked === undefined ? undefined : results[picked - 1];
  if (!chosen)
    return {
      why,
      result: {
        status: "failed",
        patch: "",
        diffstat: "",
        filesChanged: [],
        stopReason: null,
        ...spent,
        ...base,
        error: `no candidate could be picked: ${why}`,
      },
    };
  const { attempt: _a, jobId: _j, timings, ...rest } = chosen;
  return {
    why,
    result: {
      ...rest,
      ...spent,
      ...base,
      timings: { ...base.timings, agentMs: timings.agentMs },
      picked,
    },
  };
}
