// The batch API's types, errors and ids: shared by the client (batch.ts), the CLI and the dashboard.
import { JobSpecError, type JobStatus } from "../core/spec/spec.js";
import type { JobSummary } from "../queue/batch-index.js";
import { PatchbayError } from "../core/errors.js";

/** One line of a batch and its latest job. */
export interface BatchJob {
  /** The line (in the batch file) the job is of. */
  line: number;
  /** The line's latest job (`<batch>-L<line>`, `-r<n>` after a retry). */
  jobId: string;
  /** Whether it waits in the queue, runs, or ended. */
  state: "waiting" | "running" | "finished";
  /** When a worker took it, epoch ms. */
  startedAt?: number;
  /** Its result's summary, once it ended. */
  result?: JobSummary;
}

/** Where a batch is, counted by its lines' latest jobs. */
export interface BatchStatus {
  /** The batch's id. */
  batchId: string;
  /** The name it was submitted under, where it was given one. */
  name?: string;
  /** When it was submitted, epoch ms. */
  createdAt: number;
  /** When the last line's latest job ended (unset while any runs, and again after a retry). */
  finishedAt?: number;
  /** Its lines. */
  total: number;
  /** Lines whose latest job has ended. */
  done: number;
  /** Lines whose latest job runs. */
  running: number;
  /** Lines whose latest job waits in the queue. */
  waiting: number;
  /** By the status of each line's latest job. */
  counts: Record<JobStatus, number>;
  /** Latest jobs whose verify passed / failed (jobs without a verify are in neither). */
  verified: number;
  /** Latest jobs whose verify failed. */
  unverified: number;
  /** Spend of every attempt of every job of the batch, retried ones included. */
  spentUsd: number;
  /** The batch's shared USD budget, where it has one. */
  budgetUsd?: number;
  /** Whether it was cancelled (a retry clears it). */
  cancelled: boolean;
  /** Per line, in line order: only with `{ jobs: true }`. */
  jobs?: BatchJob[];
}

/** A batch as listBatches shows it: its status without the counts by status. */
export type BatchListEntry = Pick<
  BatchStatus,
  "batchId" | "name" | "createdAt" | "finishedAt" | "total" | "done" | "spentUsd" | "budgetUsd" | "cancelled"
>;

/** How submitBatch names and bounds a batch. */
export interface SubmitBatchOptions {
  /**
   * The batch id (letters, digits, _ . -).
   * @default `b-` and a hash of the specs with their lines
   */
  name?: string;
  /** A USD budget the batch's jobs share: once spent, jobs not started end budget_exceeded and running ones stop after their turn. */
  budgetUsd?: number;
  /**
   * The line (in its file) of each spec.
   * @default 1, 2, 3, ...
   */
  lines?: number[];
}

/** What submitBatch did. */
export interface SubmitBatchResult {
  /** The batch's id. */
  batchId: string;
  /** Each line's latest job id, in line order. */
  ids: string[];
  /** How many jobs this call put in the queue (0 when the same batch was submitted before). */
  added: number;
}

/** What waitForBatch's onProgress gets after each read of the index. */
export interface BatchProgress {
  /** The batch's counts now. */
  status: BatchStatus;
  /** Jobs that ended since the previous call, with their summaries (lines' latest jobs only). */
  finished: { jobId: string; result: JobSummary }[];
}

/** How waitForBatch waits. */
export interface WaitForBatchOptions {
  /** Called after each read of the index, with the jobs that ended since the previous call. */
  onProgress?: (p: BatchProgress) => void;
  /** Aborting ends the wait (it rejects with the signal's reason); the batch runs on. */
  signal?: AbortSignal;
  /**
   * How often the index is read, in ms.
   * @default 500
   */
  pollMs?: number;
  /**
   * How often jobs without a result are looked up in the queue itself, in ms (see BatchClient.reconcile).
   * @default 5000
   */
  reconcileMs?: number;
}

/** How batchStatus reads a batch. */
export interface BatchStatusOptions {
  /**
   * Also every line's latest job (`jobs`), in line order; without it one HGETALL and an HLEN.
   * @default false
   */
  jobs?: boolean;
}

/** Which batches listBatches returns. */
export interface ListBatchesOptions {
  /**
   * The most batches returned, newest first.
   * @default 50
   */
  limit?: number;
}

/** Which lines retryBatch runs again. */
export interface RetryBatchOptions {
  /**
   * The lines whose latest job ended with one of these statuses.
   * @default every status but completed
   */
  statuses?: readonly JobStatus[];
  /** These lines, whatever their status (instead of `statuses`). */
  lines?: readonly number[];
}

/** How BatchClient.writeOut writes a batch's results. */
export interface WriteOutOptions {
  /**
   * Jobs written at once.
   * @default 8
   */
  concurrency?: number;
}

/** No batch of that id in the queue (or no longer: it is kept as long as its jobs). */
export class BatchNotFoundError extends PatchbayError {
  constructor(
    readonly batchId: string,
    readonly queueName: string,
  ) {
    super("not-found", `no batch ${batchId} in queue ${queueName}`);
  }
}

/** A batch name reused for other specs. */
export class BatchConflictError extends PatchbayError {
  constructor(
    readonly batchId: string,
    readonly queueName: string,
  ) {
    super("conflict", `batch ${batchId} already exists in queue ${queueName} with other jobs; use another --name`);
  }
}

/** What a batch's cancel did. */
export interface BatchCancel {
  /** Running jobs told to stop. */
  signalled: number;
  /** Jobs not started yet, which end as cancelled when a worker takes them. */
  waiting: number;
  /**
   * Set when every line had already ended: nothing was cancelled, and the batch keeps the statuses
   * its jobs ended with; says how they ended, e.g. "finished: 2 completed, 1 failed".
   */
  finished?: string;
}

const BATCH_ID_RE = /^[A-Za-z0-9_.-]{1,96}$/;

export function checkBatchName(name: string): string {
  if (!BATCH_ID_RE.test(name) || name === "." || name === "..")
    throw new JobSpecError(`batch name must be 1-96 characters from A-Z a-z 0-9 _ . - (got ${JSON.stringify(name)})`);
  return name;
}

export { batchJobId } from "../core/line-id.js";
