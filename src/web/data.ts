// What the dashboard's JSON API returns: rows of jobs (from lean fields: src/web/jobs-list.ts), one
// job in full, batches, campaigns and their changesets. Every string that can come from a job (task,
// error, summary, patch) or a changeset (repo, url, branch, reason) is made inert (safeText) here.
import { count } from "../core/count.js";
import type { Job } from "bullmq";
import type { CampaignStatus } from "../campaign/track.js";
import {
  CHANGESET_STATES,
  type Changeset,
  type ChangesetState,
  type ChecksState,
  type ReviewState,
} from "../campaign/changeset.js";
import type { BatchStatus } from "../batch/batch-types.js";
import { costPerMerged } from "../campaign/cost.js";
import type { JobData } from "../queue/client.js";
import { jobOutcome, type JobOutcome } from "../queue/outcome.js";
import { filesChangedCount, MAX_CANDIDATES, type JobResult } from "../core/spec/spec.js";
import { safeText } from "../core/term.js";
import { sanitizeDeep } from "./escape.js";

export interface JobRow {
  id: string;
  /** BullMQ's state: where the job is in the queue ("completed": a result was handed back, whatever its status). */
  state: string;
  /** The result's status once the job finished. */
  status?: string;
  /** What to show first: the status once finished, else waiting or running (src/queue/outcome.ts). */
  outcome: JobOutcome;
  model: string;
  turns?: number;
  costUsd?: number;
  durationMs?: number;
  createdAt?: number;
  startedAt?: number;
  finishedAt?: number;
  task?: string;
  batchId?: string;
  attemptsMade: number;
  failedReason?: string;
}

export interface JobDetail extends JobRow {
  patch?: string;
  /** Set when the patch is too long to show on the page: its size; GET /api/jobs/:id/patch has it. */
  patchBytes?: number;
  filesChanged?: string[];
  filesChangedTotal?: number;
  diffstat?: string;
  error?: string;
  summary?: string;
  verify?: { exitCode: number; outputTail: string };
  /** A job with candidates (docs/jobspec.md#candidates): each one's outcome, in order. */
  candidates?: CandidateView[];
  /** The number of the candidate picked; unset when none could be. */
  picked?: number;
}

/** One candidate of a job as its page shows it: texts inert and bounded, a number only where one is stored. */
export interface CandidateView {
  n: number;
  /** Its own job (`<job>-C<n>`), whose page has its transcript and patch. */
  jobId: string;
  status: string;
  verified?: boolean;
  costUsd?: number;
  turns?: number;
  patchBytes?: number;
  filesChanged?: number;
  error?: string;
}

type AnyJob = Job<JobData, JobResult>;

/** What a row is made of: the job hash's small fields, its spec and its bounded result (each read only under a size bound: src/web/jobs-list.ts). */
export interface JobFields {
  id: string;
  timestamp?: number;
  processedOn?: number;
  finishedOn?: number;
  attemptsMade: number;
  progress?: unknown;
  failedReason?: string;
  data?: JobData;
  /** The spec was too big to read for the list: its size. */
  dataBytes?: number;
  result?: JobResult;
}

const fieldsOfJob = (job: AnyJob): JobFields => ({
  id: job.id!,
  timestamp: job.timestamp,
  processedOn: job.processedOn ?? undefined,
  finishedOn: job.finishedOn ?? undefined,
  attemptsMade: job.attemptsMade,
  progress: job.progress,
  ...(job.failedReason ? { failedReason: job.failedReason } : {}),
  data: job.data,
  result: job.returnvalue ?? undefined,
});

/**
 * The batch a job belongs to: src/batch/batches.ts sets `batch: { id, line }` in a job's data (a plain
 * `batchId` is understood too).
 */
function batchOf(data: unknown): string | undefined {
  const d = data as { batchId?: unknown; batch?: { id?: unknown } } | undefined;
  const id = d?.batchId ?? d?.batch?.id;
  return typeof id === "string" && id ? safeText(id.slice(0, 256), { oneLine: true }) : undefined;
}

const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

export function jobRow(f: JobFields, state: string, defaultModel: string, now = Date.now()): JobRow {
  const r = f.result && typeof f.result === "object" ? f.result : undefined;
  const progress = f.progress as { turn?: unknown } | number | undefined;
  const progressTurn =
    typeof progress === "object" && progress && typeof progress.turn === "number" ? progress.turn : undefined;
  const spec = f.data?.spec;
  const started = f.processedOn;
  const totalMs = num(r?.timings?.totalMs);
  const durationMs = totalMs ?? (started ? (f.finishedOn ?? now) - started : undefined);
  const rawTask =
    typeof spec?.task === "string"
      ? spec.task
      : f.dataBytes !== undefined
        ? `(a spec of ${count(f.dataBytes, "byte")}: too big for the list; open the job)`
        : undefined;
  const task =
    rawTask !== undefined
      ? safeText(rawTask.length > 300 ? `${rawTask.slice(0, 300)}…` : rawTask, { oneLine: true })
      : undefined;
  const batchId = batchOf(f.data);
  const status = typeof r?.status === "string" ? safeText(r.status.slice(0, 64), { oneLine: true }) : undefined;
  return {
    id: f.id,
    state,
    ...(status ? { status } : state === "failed" ? { status: "failed" } : {}),
    outcome: jobOutcome(state, r?.status),
    // A finished job's own result says the model it ran with (a scripted worker's `scripted:<file>`, whatever its spec named).
    model: safeText(
      String((typeof r?.model === "string" ? r.model : undefined) ?? spec?.model ?? defaultModel).slice(0, 200),
      {
        oneLine: true,
      },
    ),
    ...(r
      ? {
          ...(num(r.turns) !== undefined ? { turns: r.turns } : {}),
          ...(num(r.costUsd) !== undefined ? { costUsd: r.costUsd } : {}),
        }
      : progressTurn !== undefined
        ? { turns: progressTurn }
        : {}),
    ...(durationMs !== undefined ? { durationMs } : {}),
    createdAt: f.data?.enqueuedAt ?? f.timestamp,
    ...(started ? { startedAt: started } : {}),
    ...(f.finishedOn ? { finishedAt: f.finishedOn } : {}),
    ...(task !== undefined ? { task } : {}),
    ...(batchId ? { batchId } : {}),
    attemptsMade: f.attemptsMade,
    ...(f.failedReason ? { failedReason: safeText(f.failedReason) } : {}),
  };
}

/** The job page's data. `patch`: the stored patch when the result keeps it under its own key (undefined: too long to show, or gone). */
export function jobDetail(job: AnyJob, state: string, defaultModel: string, stored?: { patch?: string }): JobDetail {
  const row = jobRow(fieldsOfJob(job), state, defaultModel);
  const r = job.returnvalue as JobResult | null | undefined;
  const task = typeof job.data?.spec?.task === "string" ? safeText(job.data.spec.task) : undefined;
  if (!r) return { ...row, ...(task !== undefined ? { task } : {}) };
  const patch = r.patchStored ? stored?.patch : r.patch;
  return sanitizeDeep({
    ...row,
    ...(task !== undefined ? { task } : {}),
    ...(patch !== undefined ? { patch } : {}),
    ...(r.patchStored ? { patchBytes: r.patchStored.bytes } : {}),
    filesChanged: r.filesChanged,
    filesChangedTotal: filesChangedCount(r),
    diffstat: r.diffstat,
    ...(r.error ? { error: r.error } : {}),
    ...(r.summary ? { summary: r.summary } : {}),
    ...(r.verify ? { verify: r.verify } : {}),
    ...candidatesOf(r),
  }) as JobDetail;
}

/**
 * A result's candidates and pick for the job page. The result is read from Redis unchecked, so each
 * field is taken only as what it should be: at most MAX_CANDIDATES, every text one line and bounded.
 */
function candidatesOf(r: JobResult): Pick<JobDetail, "candidates" | "picked"> {
  const stored: unknown = r.candidates;
  if (!Array.isArray(stored) || !stored.length) return {};
  const candidates = stored.slice(0, MAX_CANDIDATES).map((raw: unknown, i): CandidateView => {
    const c = (raw && typeof raw === "object" ? raw : {}) as Record<string, unknown>;
    const nums = (["costUsd", "turns", "patchBytes", "filesChanged"] as const).flatMap((k) =>
      num(c[k]) !== undefined ? [[k, c[k]]] : [],
    );
    return {
      n: num(c.n) ?? i + 1,
      jobId: inert(typeof c.jobId === "string" ? c.jobId : "", 200),
      status: inert(typeof c.status === "string" ? c.status : "unknown", 64),
      ...(typeof c.verified === "boolean" ? { verified: c.verified } : {}),
      ...(Object.fromEntries(nums) as Partial<CandidateView>),
      ...(typeof c.error === "string" && c.error ? { error: inert(c.error, 2000) } : {}),
    };
  });
  const picked = num(r.picked);
  return { candidates, ...(picked !== undefined ? { picked } : {}) };
}

export interface BatchRow {
  id: string;
  name?: string;
  total: number;
  done: number;
  running: number;
  waiting: number;
  /** Non-zero counts of the lines' latest jobs by status. */
  byStatus: Record<string, number>;
  verified: number;
  unverified: number;
  spentUsd: number;
  budgetUsd?: number;
  cancelled: boolean;
  createdAt: number;
  finishedAt?: number;
}

/** A batch's status (src/batch/batches.ts) as the batches page shows it. */
export function batchRow(st: BatchStatus): BatchRow {
  return {
    id: safeText(st.batchId, { oneLine: true }),
    ...(st.name ? { name: safeText(st.name, { oneLine: true }) } : {}),
    total: st.total,
    done: st.done,
    running: st.running,
    waiting: st.waiting,
    byStatus: Object.fromEntries(Object.entries(st.counts).filter(([, n]) => n > 0)),
    verified: st.verified,
    unverified: st.unverified,
    spentUsd: st.spentUsd,
    ...(st.budgetUsd !== undefined ? { budgetUsd: st.budgetUsd } : {}),
    cancelled: st.cancelled,
    createdAt: st.createdAt,
    ...(st.finishedAt ? { finishedAt: st.finishedAt } : {}),
  };
}

/** A campaign in the campaigns list: its changesets by state (the burndown), its jobs and spend. */
export interface CampaignRow {
  id: string;
  createdAt: number;
  /** Repositories (one changeset each). */
  total: number;
  counts: Record<ChangesetState, number>;
  jobs: { done: number; total: number };
  spentUsd: number;
  budgetUsd?: number;
  /** The spend per merged changeset (src/campaign/cost.ts); null while none merged. */
  costPerMergedUsd: number | null;
}

/** Counts by state of the repositories' changesets: a line with no record is unpublished. */
export function countByState(
  lines: readonly number[],
  recorded: ReadonlyMap<number, Pick<Changeset, "state">>,
): Record<ChangesetState, number> {
  const counts = Object.fromEntries(CHANGESET_STATES.map((s) => [s, 0])) as Record<ChangesetState, number>;
  for (const line of lines) counts[recorded.get(line)?.state ?? "unpublished"]++;
  return counts;
}

export function campaignRow(
  id: string,
  createdAt: number,
  counts: Record<ChangesetState, number>,
  batch: BatchStatus | undefined,
  total: number,
): CampaignRow {
  return {
    id: safeText(id, { oneLine: true }),
    createdAt,
    total,
    counts,
    jobs: { done: batch?.done ?? 0, total: batch?.total ?? total },
    spentUsd: batch?.spentUsd ?? 0,
    ...(batch?.budgetUsd !== undefined ? { budgetUsd: batch.budgetUsd } : {}),
    costPerMergedUsd: costPerMerged(batch?.spentUsd ?? 0, counts.merged),
  };
}

/** One repository's changeset as the campaign page shows it (every string from a repo, a forge or git made inert and bounded). */
export interface ChangesetRow {
  line: number;
  repo: string;
  state: ChangesetState;
  /** Where it was published: a GitHub pull request (#n), a GitLab merge request (!n), a branch alone. */
  forge?: "github" | "gitlab" | "git";
  checks?: ChecksState;
  review?: ReviewState;
  url?: string;
  number?: number;
  branch?: string;
  verified?: boolean;
  reason?: string;
  jobId: string;
}

/** The campaign page's data: the burndown (counts, checks of the open ones), jobs and spend, a row per repository. */
export interface CampaignView extends CampaignRow {
  checks: CampaignStatus["checks"];
  jobs: { done: number; total: number; running: number; waiting: number };
  changesets: ChangesetRow[];
}

const inert = (s: string, max: number) => safeText(s.length > max ? `${s.slice(0, max)}…` : s, { oneLine: true });

export function changesetRow(c: Changeset): ChangesetRow {
  return {
    line: c.line,
    repo: inert(c.repo, 1000),
    state: c.state,
    ...(c.forge ? { forge: c.forge } : {}),
    ...(c.checks ? { checks: c.checks } : {}),
    ...(c.review ? { review: c.review } : {}),
    ...(c.url ? { url: inert(c.url, 2000) } : {}),
    ...(c.number !== undefined ? { number: c.number } : {}),
    ...(c.branch ? { branch: inert(c.branch, 300) } : {}),
    ...(c.verified !== undefined ? { verified: c.verified } : {}),
    ...(c.reason ? { reason: inert(c.reason, 1000) } : {}),
    jobId: inert(c.jobId, 200),
  };
}

export function campaignView(st: CampaignStatus): CampaignView {
  const b = st.batch;
  return {
    ...campaignRow(st.campaignId, st.createdAt, st.counts, b, st.changesets.length),
    checks: st.checks,
    jobs: { done: b.done, total: b.total, running: b.running, waiting: b.waiting },
    changesets: st.changesets.map(changesetRow),
  };
}
