// The batch API's types, errors and ids: shared by the client (batch.ts), the CLI and the dashboard.
import { JobSpecError, type JobStatus } from "../core/spec/spec.js";
import type { JobSummary } from "../queue/batch-index.js";
import { PatchbayError } from "../core/errors.js";

export interface BatchJob {
  line: number;
  jobId: string;
  state: "waiting" | "running" | "finished";
  startedAt?: number;
  result?: JobSummary;
}

export interface BatchStatus {
  batchId: string;
  name?: string;
  createdAt: number;
  /** When the last line's latest job ended (unset while any runs, and again after a retry). */
  finishedAt?: number;
  total: number;
  /** Lines whose latest job has ended. */
  done: number;
  running: number;
  waiting: number;
  /** By the status of each line's latest job. */
  counts: Record<JobStatus, number>;
  /** Latest jobs whose verify passed / failed (jobs without a verify are in neither). */
  verified: number;
  unverified: number;
  /** Spend of every attempt of every job of the batch, retried ones included. */
  spentUsd: number;
  budgetUsd?: number;
  cancelled: boolean;
  /** Per line, in line order: only with `{ jobs: true }`. */
  jobs?: BatchJob[];
}

export type BatchListEntry = Pick<BatchStatus, "batchId" | "name" | "createdAt" | "finishedAt" | "total" | "done" | "spentUsd" | "budgetUsd" | "cancelled">;

export interface SubmitBatchOptions {
  /** The batch id (letters, digits, _ . -); default: `b-` and a hash of the specs with their lines. */
  name?: string;
  budgetUsd?: number;
  /** The line (in its file) of each spec; default 1, 2, 3... */
  lines?: number[];
}

export interface SubmitBatchResult {
  batchId: string;
  /** Each line's latest job id, in line order. */
  ids: string[];
  /** How many jobs this call put in the queue (0 when the same batch was submitted before). */
  added: number;
}

export interface BatchProgress {
  status: BatchStatus;
  /** Jobs that ended since the previous call, with their summaries (lines' latest jobs only). */
  finished: { jobId: string; result: JobSummary }[];
}

export interface WaitForBatchOptions {
  onProgress?: (p: BatchProgress) => void;
  signal?: AbortSignal;
  /** How often the index is read (default 500 ms). */
  pollMs?: number;
  /** How often jobs without a result are checked in the queue itself (default 5 s; see reconcile). */
  reconcileMs?: number;
}

export class BatchNotFoundError extends PatchbayError {
  constructor(readonly batchId: string, readonly queueName: string) {
    super("not-found", `no batch ${batchId} in queue ${queueName}`);
  }
}

/** A batch name reused for other specs. */
export class BatchConflictError extends PatchbayError {
  constructor(readonly batchId: string, readonly queueName: string) {
    super("conflict", `batch ${batchId} already exists in queue ${queueName} with other jobs; use another --name`);
  }
}

const BATCH_ID_RE = /^[A-Za-z0-9_.-]{1,96}$/;

export function checkBatchName(name: string): string {
  if (!BATCH_ID_RE.test(name) || name === "." || name === "..") throw new JobSpecError(`batch name must be 1-96 characters from A-Z a-z 0-9 _ . - (got ${JSON.stringify(name)})`);
  return name;
}

export { batchJobId } from "../core/line-id.js";
