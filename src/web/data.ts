// What the dashboard's JSON API returns: rows of jobs, one job in full, batches. Every string that
// can come from a job (task, error, summary, patch) is made inert (safeText) here.
import type { Job } from "bullmq";
import type { BatchStatus } from "../queue/batch.js";
import { LIST_STATES, type JobData, type ListState } from "../queue/client.js";
import type { JobResult } from "../spec.js";
import { safeText } from "../term.js";
import { sanitizeDeep } from "./escape.js";

export interface JobRow {
  id: string;
  state: string;
  /** The result's status once the job finished. */
  status?: string;
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
  filesChanged?: string[];
  diffstat?: string;
  error?: string;
  summary?: string;
  verify?: { exitCode: number; outputTail: string };
}

type AnyJob = Job<JobData, JobResult>;

/**
 * The batch a job belongs to: src/queue/batch.ts sets `batch: { id, line }` in a job's data (a plain
 * `batchId` is understood too).
 */
export function batchOf(job: AnyJob): string | undefined {
  const d = job.data as unknown as { batchId?: unknown; batch?: { id?: unknown } } | undefined;
  const id = d?.batchId ?? d?.batch?.id;
  return typeof id === "string" && id ? safeText(id, { oneLine: true }) : undefined;
}

export function jobRow(job: AnyJob, state: string, defaultModel: string, now = Date.now()): JobRow {
  const r = job.returnvalue as JobResult | null | undefined;
  const progress = job.progress as { turn?: unknown } | number | undefined;
  const progressTurn = typeof progress === "object" && progress && typeof progress.turn === "number" ? progress.turn : undefined;
  const spec = job.data?.spec;
  const started = job.processedOn ?? undefined;
  const durationMs = r?.timings?.totalMs ?? (started ? (job.finishedOn ?? now) - started : undefined);
  const task = typeof spec?.task === "string" ? safeText(spec.task.length > 300 ? `${spec.task.slice(0, 300)}…` : spec.task, { oneLine: true }) : undefined;
  const batchId = batchOf(job);
  return {
    id: job.id!,
    state,
    ...(r?.status ? { status: r.status } : state === "failed" ? { status: "failed" } : {}),
    model: safeText(String(spec?.model ?? defaultModel), { oneLine: true }),
    ...(r ? { turns: r.turns, costUsd: r.costUsd } : progressTurn !== undefined ? { turns: progressTurn } : {}),
    ...(durationMs !== undefined ? { durationMs } : {}),
    createdAt: job.data?.enqueuedAt ?? job.timestamp,
    ...(started ? { startedAt: started } : {}),
    ...(job.finishedOn ? { finishedAt: job.finishedOn } : {}),
    ...(task !== undefined ? { task } : {}),
    ...(batchId ? { batchId } : {}),
    attemptsMade: job.attemptsMade,
    ...(job.failedReason ? { failedReason: safeText(job.failedReason) } : {}),
  };
}

export function jobDetail(job: AnyJob, state: string, defaultModel: string): JobDetail {
  const row = jobRow(job, state, defaultModel);
  const r = job.returnvalue as JobResult | null | undefined;
  const task = typeof job.data?.spec?.task === "string" ? safeText(job.data.spec.task) : undefined;
  if (!r) return { ...row, ...(task !== undefined ? { task } : {}) };
  return sanitizeDeep({
    ...row,
    ...(task !== undefined ? { task } : {}),
    patch: r.patch,
    filesChanged: r.filesChanged,
    diffstat: r.diffstat,
    ...(r.error ? { error: r.error } : {}),
    ...(r.summary ? { summary: r.summary } : {}),
    ...(r.verify ? { verify: r.verify } : {}),
  }) as JobDetail;
}

export interface JobFilter {
  states?: ListState[];
  status?: string;
  batch?: string;
  limit?: number;
}

export function parseFilter(q: Record<string, unknown>): JobFilter {
  const str = (k: string) => (typeof q[k] === "string" && (q[k] as string).trim() ? (q[k] as string).trim() : undefined);
  const state = str("state");
  const limit = Number(str("limit") ?? 200);
  return {
    ...(state && (LIST_STATES as readonly string[]).includes(state) ? { states: [state as ListState] } : {}),
    ...(str("status") ? { status: str("status") } : {}),
    ...(str("batch") ? { batch: str("batch") } : {}),
    limit: Number.isInteger(limit) && limit > 0 ? Math.min(limit, 2000) : 200,
  };
}

/** Jobs newest first, filtered by state (BullMQ's), status (the result's) and batch. */
export async function listJobs(
  getJobs: (states: ListState[], start: number, end: number) => Promise<AnyJob[]>,
  f: JobFilter,
  defaultModel: string,
): Promise<JobRow[]> {
  const limit = f.limit ?? 200;
  // A status or batch filter looks further back than the page it returns.
  const scan = f.status || f.batch ? Math.max(limit, 2000) : limit;
  const perState = await Promise.all((f.states ?? [...LIST_STATES]).map(async (s) => (await getJobs([s], 0, scan - 1)).filter(Boolean).map((j) => jobRow(j, s, defaultModel))));
  return perState
    .flat()
    .filter((r) => (!f.status || r.status === f.status) && (!f.batch || r.batchId === f.batch))
    .sort((a, b) => (b.createdAt ?? 0) - (a.createdAt ?? 0))
    .slice(0, limit);
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

/** A batch's status (src/queue/batch.ts) as the batches page shows it. */
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
