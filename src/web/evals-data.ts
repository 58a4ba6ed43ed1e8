// What the dashboard's eval pages read (/api/evals, /api/evals/<name>) and the API's eval routes
// return: a run's row and its whole view, from its record in Redis (src/eval/store.ts). A run's name
// is checked when saved, but an instance id, a job id, the model's and the set's names come from a
// task set or a run's files and are hostile: each is made inert (safeText, one line) and bounded here.
import type { EvalRecord, EvalRow } from "../eval/store.js";
import type { GradeOutcome } from "../eval/types.js";
import { safeText } from "../core/term.js";

/** One run in the list: its numbers, newest first. */
export interface EvalRowView {
  name: string;
  model: string;
  /** The task set's file. */
  set: string;
  batchId: string;
  /** Candidates per instance (K). */
  candidates: number;
  total: number;
  resolved: number;
  costUsd: number;
  /** null when none resolved. */
  costPerResolvedUsd: number | null;
  /** pass@1, and pass@K for K candidates (null where the run did not say). */
  passAt1: number | null;
  passAtK: number | null;
  /** best-of-K: the fraction of judged instances whose picked candidate resolved (null where no verify judged). */
  bestOfK: number | null;
  startedAt: number;
  savedAt: number;
}

/** One instance of a run as its page shows it. */
export interface EvalInstanceView {
  id: string;
  outcome: GradeOutcome | "pending";
  candidates: number;
  resolvedCandidates: number;
  costUsd: number;
  inputTokens: number;
  outputTokens: number;
  harnessMs: number;
  jobIds: string[];
  /** The candidate (from 1) the job's verify picked; null when it picked none or no verify judged. */
  picked: number | null;
}

/** A run's page: its row, SWE-bench's counts, totals, and each instance (those the record kept). */
export interface EvalView extends EvalRowView {
  counts: {
    submitted: number;
    completed: number;
    resolved: number;
    unresolved: number;
    emptyPatch: number;
    error: number;
  };
  inputTokens: number;
  outputTokens: number;
  wallMs: number;
  harnessMs: { median: number; total: number };
  instances: EvalInstanceView[];
  /** Instances the record left out to stay under its bound (the run's files have them). */
  instancesCut: number;
}

const inert = (s: string, max: number) => safeText(s.length > max ? `${s.slice(0, max)}…` : s, { oneLine: true });
const rate = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : null);

/** A run's row for the list. */
export function evalRowView(r: EvalRow): EvalRowView {
  return {
    name: inert(r.name, 200),
    model: inert(r.model, 200),
    set: inert(r.set, 1000),
    batchId: inert(r.batchId, 200),
    candidates: r.candidates,
    total: r.total,
    resolved: r.resolved,
    costUsd: r.costUsd,
    costPerResolvedUsd: r.costPerResolvedUsd,
    passAt1: rate(r.passAtK["1"]),
    // The summary keys pass@K by K itself (src/eval/report.ts): "3" for three candidates.
    passAtK: rate(r.passAtK[String(r.candidates)]),
    bestOfK: rate(r.bestOfK),
    startedAt: r.startedAt,
    savedAt: r.savedAt,
  };
}

/** A run's page from its record. */
export function evalView(rec: EvalRecord): EvalView {
  const s = rec.summary;
  const p = s.patchbay;
  const row = evalRowView({
    name: rec.name,
    set: rec.set,
    batchId: rec.batchId,
    startedAt: rec.startedAt,
    savedAt: rec.savedAt,
    model: p.model,
    candidates: p.candidates,
    total: s.total_instances,
    resolved: s.resolved_instances,
    costUsd: p.costUsd,
    costPerResolvedUsd: p.costPerResolvedUsd,
    passAtK: p.passAtK,
    ...(p.bestOfK !== undefined ? { bestOfK: p.bestOfK } : {}),
  });
  return {
    ...row,
    counts: {
      submitted: s.submitted_instances,
      completed: s.completed_instances,
      resolved: s.resolved_instances,
      unresolved: s.unresolved_instances,
      emptyPatch: s.empty_patch_instances,
      error: s.error_instances,
    },
    inputTokens: p.inputTokens,
    outputTokens: p.outputTokens,
    wallMs: p.wallMs,
    harnessMs: p.harnessMs,
    instances: p.instances.map((a) => ({
      id: inert(a.instance_id, 300),
      outcome: a.outcome,
      candidates: a.candidates,
      resolvedCandidates: a.resolvedCandidates,
      costUsd: a.costUsd,
      inputTokens: a.inputTokens,
      outputTokens: a.outputTokens,
      harnessMs: a.harnessMs,
      jobIds: a.jobIds.slice(0, 100).map((j) => inert(j, 200)),
      picked: a.picked ?? null,
    })),
    instancesCut: rec.instancesCut ?? 0,
  };
}
