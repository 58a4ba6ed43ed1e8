// Batches: many jobs under one id, with an index in Redis that stays cheap at 10,000 jobs, a shared
// USD budget, retry of some lines, cancel, and a summary. The index and the workers' hooks are in
// batch-index.ts, batch files in batch-file.ts, the summary in batch-summary.ts, the types, errors and ids
// in batch-types.ts, which jobs are the lines' own in batch-provenance.ts and batch-lines.ts, the
// written results in batch-out.ts.
import { setTimeout as sleep } from "node:timers/promises";
import { Job } from "bullmq";
import { keys } from "../queue/keys.js";
import { defaultClient, type JobData, type PatchbayClient } from "../queue/client.js";
import { credentialsProblem, jobOptions, prepareSpecs } from "../queue/enqueue-spec.js";
import {
  emptyResult,
  JOB_STATUSES,
  JobSpecError,
  type JobResult,
  type JobSpec,
  type JobStatus,
} from "../core/spec/spec.js";
import { batchHash, type BatchLine } from "./batch-file.js";
import { batchKeys, PARTS, recordFinished, scripted, type JobSummary } from "../queue/batch-index.js";
import { summarizeBatch, type BatchSummary } from "./batch-summary.js";

export { BatchFileError, parseBatchFile, readBatchFile, type BatchLine } from "./batch-file.js";
export { batchHooks, type BatchHooks, type JobSummary } from "../queue/batch-index.js";
export { mdCell, summarizeBatch, summaryMarkdown, type BatchSummary } from "./batch-summary.js";

export * from "./batch-types.js";
export { LineProvenanceError } from "../queue/batch-provenance.js";
import {
  BatchConflictError,
  type BatchCancel,
  BatchNotFoundError,
  checkBatchName,
  type BatchJob,
  type BatchListEntry,
  type BatchStatus,
  type BatchStatusOptions,
  type ListBatchesOptions,
  type RetryBatchOptions,
  type SubmitBatchOptions,
  type SubmitBatchResult,
  type WaitForBatchOptions,
  type WriteOutOptions,
} from "./batch-types.js";
import { enqueueSpans } from "../observability/trace.js";
import { batchJobId, isLineNumber } from "../core/line-id.js";
import { writeBatchOut } from "./batch-out.js";
import { specHash } from "../core/spec/hash.js";
import { LineProvenanceError } from "../queue/batch-provenance.js";
import { readLineJobs, type LineJobs, type LineRef } from "./batch-lines.js";

export type { LineJobs, LineRef };
import { usdBudgetProblem } from "../agent/prices.js";
import type { JobOrigin } from "../job/repo/source-check.js";

const retryOf = (jobId: string) => Number(/-r(\d+)$/.exec(jobId)?.[1] ?? 0);

// ---------------------------------------------------------------------------------------------
// The client's side
// ---------------------------------------------------------------------------------------------

const num = (s: string | undefined) => (s === undefined || s === "" ? undefined : Number(s));

function fromMeta(batchId: string, m: Record<string, string>, running: number): BatchStatus {
  const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, Number(m[`n:${s}`] ?? 0)])) as Record<
    JobStatus,
    number
  >;
  const total = Number(m.total ?? 0);
  const done = Number(m.done ?? 0);
  return {
    batchId,
    ...(m.name ? { name: m.name } : {}),
    createdAt: Number(m.createdAt ?? 0),
    ...(m.finishedAt ? { finishedAt: Number(m.finishedAt) } : {}),
    total,
    done,
    running,
    waiting: Math.max(0, total - done - running),
    counts,
    verified: Number(m.verified ?? 0),
    unverified: Number(m.unverified ?? 0),
    spentUsd: Number(m.spent ?? 0),
    ...(num(m.budgetUsd) !== undefined ? { budgetUsd: num(m.budgetUsd) } : {}),
    cancelled: m.cancelled === "1",
  };
}

/** Batches through one PatchbayClient (its Redis, its queue). */
export class BatchClient {
  /** `c`: the client whose Redis and queue the batches live on. */
  constructor(readonly c: PatchbayClient) {}

  private bk(batchId: string) {
    return batchKeys(this.c.queueName, batchId);
  }

  /**
   * Validates every spec, then enqueues them all under one batch id. Idempotent: each line's job
   * id is `<batch>-L<line>`, so the same batch submitted again (after a crash, say) adds only the
   * jobs that are not there yet. A name already used for other specs: BatchConflictError.
   */
  async submit(inputs: unknown[] | BatchLine[], opts: SubmitBatchOptions = {}): Promise<SubmitBatchResult> {
    const lines = this.submittedLines(inputs, opts); // a bad batch rejects (async) before the client is held
    return this.c.hold(async () => {
      const hash = batchHash(lines);
      const batchId = opts.name ?? `b-${hash.slice(0, 16)}`;
      const bk = this.bk(batchId);
      const r = this.c.redis;
      const existing = await r.hget(bk.meta, "hash");
      if (existing && existing !== hash) throw new BatchConflictError(batchId, this.c.queueName);
      const now = Date.now();
      await this.recordBatch(batchId, hash, lines, opts, now);
      const latest = await r.hgetall(bk.lines);
      // Lines not retried yet whose job is not in the queue: (re)add them.
      const first = lines.filter(({ line }) => latest[line] === batchJobId(batchId, line));
      // A job already under a line's id is the line's only if the batch made it (a resubmit after a crash).
      const seen = await this.lineJobs(
        batchId,
        first.map(({ line }) => ({ line, jobId: batchJobId(batchId, line) })),
      );
      const todo = first.filter((_, i) => !seen.exists[i]);
      if (todo.length) await this.enqueueLines(batchId, todo, now);
      await r.hset(bk.meta, "submitted", "1");
      await this.c.confirmEnqueued(
        todo.map(({ line }) => batchJobId(batchId, line)),
        "submit the batch again (only what is missing is added)",
      );
      await this.lineJobs(
        batchId,
        todo.map(({ line }) => ({ line, jobId: batchJobId(batchId, line) })),
      ); // one put there as they were added
      return { batchId, ids: lines.map(({ line }) => latest[line] ?? batchJobId(batchId, line)), added: todo.length };
    });
  }

  /**
   * submit's checks, before any Redis call: the budget, each spec, the lines; returns the lines
   * without the specs' own job ids (the batch names its jobs). Throws JobSpecError (or the name's error).
   */
  private submittedLines(inputs: unknown[] | BatchLine[], opts: SubmitBatchOptions): BatchLine[] {
    if (opts.budgetUsd !== undefined && !(Number.isFinite(opts.budgetUsd) && opts.budgetUsd > 0))
      throw new JobSpecError(`budgetUsd must be a positive number (got ${opts.budgetUsd})`);
    const lines = isBatchLines(inputs)
      ? inputs
      : prepareSpecs(inputs).map((spec, i) => ({ line: opts.lines?.[i] ?? i + 1, spec }));
    // Lines made elsewhere than prepareSpecs too: a token in a git URL never reaches Redis.
    const withToken = lines.find(({ spec }) => credentialsProblem(spec));
    if (withToken) throw new JobSpecError(`line ${withToken.line}: ${credentialsProblem(withToken.spec)}`);
    if (!lines.length) throw new JobSpecError("a batch needs at least one job");
    // A USD budget is held by the jobs' costs: a model whose price is unknown would spend nothing.
    const unpriced =
      opts.budgetUsd === undefined
        ? undefined
        : lines.find(({ spec }) => usdBudgetProblem(spec.model ?? this.c.defaultModel, opts.budgetUsd));
    if (unpriced)
      throw new JobSpecError(
        `line ${unpriced.line}: the batch's ${usdBudgetProblem(unpriced.spec.model ?? this.c.defaultModel, opts.budgetUsd)!.replace(/^budget\.usd: /, "USD budget: ")}`,
      );
    if (new Set(lines.map((l) => l.line)).size !== lines.length)
      throw new JobSpecError("two specs of a batch have the same line");
    const badLine = lines.find((l) => !isLineNumber(l.line));
    if (badLine)
      throw new JobSpecError(`a batch's lines are whole numbers from 1 (got ${JSON.stringify(badLine.line)})`);
    if (opts.name !== undefined) checkBatchName(opts.name);
    // The job id comes from the batch: a spec's own jobId is not used.
    return lines.map(({ line, spec }) => ({
      line,
      spec: spec.jobId ? (({ jobId: _, ...rest }) => rest)(spec) : spec,
    }));
  }

  /**
   * submit's record of the batch in one MULTI: its meta (set once), its place in the queue's list,
   * each line's job id, task and spec hash. Throws BatchConflictError when a racing submit of other
   * specs recorded the batch first.
   */
  private async recordBatch(
    batchId: string,
    hash: string,
    lines: BatchLine[],
    opts: SubmitBatchOptions,
    now: number,
  ): Promise<void> {
    const bk = this.bk(batchId);
    const m = this.c.redis.multi();
    m.hsetnx(bk.meta, "hash", hash)
      .hsetnx(bk.meta, "createdAt", String(now))
      .hsetnx(bk.meta, "total", String(lines.length));
    if (opts.name) m.hsetnx(bk.meta, "name", opts.name);
    if (opts.budgetUsd !== undefined) m.hset(bk.meta, "budgetUsd", String(opts.budgetUsd));
    m.zadd(keys(this.c.queueName).batches, "NX", now, batchId);
    // Each line's spec hash: what a job under the line's id must carry to be taken as the line's.
    for (const { line, spec } of lines)
      m.hsetnx(bk.lines, String(line), batchJobId(batchId, line))
        .hsetnx(bk.tasks, String(line), spec.task.slice(0, 200))
        .hsetnx(bk.specs, String(line), specHash(spec));
    for (const p of PARTS) m.expire(bk[p], this.c.retentionSec);
    m.hget(bk.meta, "hash");
    const res = (await m.exec()) ?? [];
    if (res.at(-1)?.[1] !== hash) throw new BatchConflictError(batchId, this.c.queueName); // a racing submit of other specs
  }

  /** submit's enqueue of the lines missing from the queue, each under its line's job id, in one addBulk. */
  private async enqueueLines(batchId: string, todo: BatchLine[], now: number): Promise<void> {
    // Each line's job carries its own enqueue span's context (src/observability/trace.ts), as enqueue's do.
    await enqueueSpans(this.c.queueName, todo.length, async (traces) =>
      (
        await this.c.queue.addBulk(
          todo.map(({ line, spec }, i) => ({
            name: "fix",
            data: {
              spec,
              enqueuedAt: now,
              batch: { id: batchId, line },
              origin: this.c.origin,
              ...(traces[i] ? { trace: traces[i] } : {}),
            } satisfies JobData,
            opts: { ...jobOptions(spec), jobId: batchJobId(batchId, line) },
          })),
        )
      ).map((j) => j.id!),
    );
  }

  /** Counts from one HGETALL (and an HLEN); with `{ jobs: true }` also every line's latest job. */
  status(batchId: string, opts: BatchStatusOptions = {}): Promise<BatchStatus> {
    return this.c.hold(async () => {
      const bk = this.bk(batchId);
      const r = this.c.redis;
      if (!opts.jobs) {
        const [[, meta], [, running]] = (await r.multi().hgetall(bk.meta).hlen(bk.started).exec()) as [
          [null, Record<string, string>],
          [null, number],
        ];
        if (!meta.createdAt) throw new BatchNotFoundError(batchId, this.c.queueName);
        return fromMeta(batchId, meta, running);
      }
      const res = (await r
        .multi()
        .hgetall(bk.meta)
        .hgetall(bk.lines)
        .hgetall(bk.results)
        .hgetall(bk.started)
        .exec()) as [null, Record<string, string>][];
      const [meta, lines, results, started] = res.map(([, v]) => v) as [
        Record<string, string>,
        Record<string, string>,
        Record<string, string>,
        Record<string, string>,
      ];
      if (!meta.createdAt) throw new BatchNotFoundError(batchId, this.c.queueName);
      const jobs: BatchJob[] = [];
      for (const [line, jobId] of Object.entries(lines)) {
        const summary = results[jobId];
        const startedAt = started[jobId];
        jobs.push({
          line: Number(line),
          jobId,
          state: summary ? "finished" : startedAt ? "running" : "waiting",
          ...(startedAt ? { startedAt: Number(startedAt) } : {}),
          ...(summary ? { result: JSON.parse(summary) as JobSummary } : {}),
        });
      }
      jobs.sort((a, b) => a.line - b.line);
      const st = fromMeta(batchId, meta, jobs.filter((j) => j.state === "running").length);
      return { ...st, jobs };
    });
  }

  /** Batches, newest first. */
  list(opts: ListBatchesOptions = {}): Promise<BatchListEntry[]> {
    return this.c.hold(async () => {
      const zkey = keys(this.c.queueName).batches;
      const ids = await this.c.redis.zrevrange(zkey, 0, (opts.limit ?? 50) - 1);
      const metas = await Promise.all(ids.map((id) => this.c.redis.hgetall(this.bk(id).meta)));
      const out: BatchListEntry[] = [];
      const gone: string[] = [];
      ids.forEach((batchId, i) => {
        const m = metas[i]!;
        if (!m.createdAt) return void gone.push(batchId); // expired
        const s = fromMeta(batchId, m, 0);
        out.push({
          batchId,
          ...(s.name ? { name: s.name } : {}),
          createdAt: s.createdAt,
          ...(s.finishedAt ? { finishedAt: s.finishedAt } : {}),
          total: s.total,
          done: s.done,
          spentUsd: s.spentUsd,
          ...(s.budgetUsd !== undefined ? { budgetUsd: s.budgetUsd } : {}),
          cancelled: s.cancelled,
        });
      });
      if (gone.length) await this.c.redis.zrem(zkey, ...gone);
      return out;
    });
  }

  /**
   * Cancels a batch: jobs not started yet end as cancelled without a sandbox when a worker takes
   * them; running ones are told as `patchbay cancel` does and stop within seconds. A batch whose
   * every line has ended is left as it is (`finished` says how its jobs ended).
   */
  cancel(batchId: string): Promise<BatchCancel> {
    return this.c.hold(async () => {
      const st = await this.status(batchId, { jobs: true });
      // A finished batch keeps the label its jobs earned: a cancel now stops nothing and changes
      // nothing (as `patchbay cancel` of a finished job), and says so.
      if (st.total > 0 && st.done >= st.total) return { signalled: 0, waiting: 0, finished: finalState(st) };
      const k = keys(this.c.queueName);
      const running = st.jobs!.filter((j) => j.state === "running").map((j) => j.jobId);
      const m = this.c.redis.multi().hset(this.bk(batchId).meta, "cancelled", "1");
      for (const id of running) m.set(k.cancel(id), "1", "EX", this.c.retentionSec).publish(k.cancelChannel, id);
      await m.exec();
      return { signalled: running.length, waiting: st.jobs!.filter((j) => j.state === "waiting").length };
    });
  }

  /**
   * Runs again the lines whose latest job ended with one of `statuses` (default: every status but
   * completed), as new jobs (`<batch>-L<line>-r<n>`) of the same batch; their results replace the
   * old ones in the status and summary. Clears a cancel. Returns the new job ids.
   */
  retry(batchId: string, opts: RetryBatchOptions = {}): Promise<{ ids: string[]; missing: number[] }> {
    const statuses = new Set(opts.statuses ?? JOB_STATUSES.filter((s) => s !== "completed"));
    return this.c.hold(async () => {
      const st = await this.status(batchId, { jobs: true });
      // `lines`: those lines, whatever their status (a campaign's changesets in conflict ran fine).
      const chosen = st.jobs!.filter(
        (j) => j.result && (opts.lines ? opts.lines.includes(j.line) : statuses.has(j.result.status)),
      );
      const bk = this.bk(batchId);
      const now = Date.now();
      const add: { line: number; oldId: string; newId: string; spec: JobSpec; origin: JobOrigin }[] = [];
      const missing: number[] = [];
      // The spec run again is the line's own job's: a job under the line's id that is not is an error.
      await this.lineJobs(batchId, chosen);
      for (const j of chosen) {
        const old = await Job.fromId<JobData, JobResult>(this.c.queue, j.jobId);
        if (!old?.data?.spec) {
          missing.push(j.line); // removed from the queue (finished jobs are kept 7 days)
          continue;
        }
        // The operator's own line stays the operator's; the API's (or one that does not say) never becomes it.
        const origin = old.data.origin === "operator" && this.c.origin === "operator" ? "operator" : "api";
        add.push({
          line: j.line,
          oldId: j.jobId,
          newId: batchJobId(batchId, j.line, retryOf(j.jobId) + 1),
          spec: old.data.spec,
          origin,
        });
      }
      const fresh = add.map(({ line, newId }) => ({ line, jobId: newId }));
      await this.lineJobs(batchId, fresh); // a job already under a retry's id is taken only if it is the line's own
      if (add.length) {
        await enqueueSpans(this.c.queueName, add.length, async (traces) =>
          (
            await this.c.queue.addBulk(
              add.map(({ line, newId, spec, origin }, i) => ({
                name: "fix",
                data: {
                  spec,
                  enqueuedAt: now,
                  batch: { id: batchId, line },
                  origin,
                  ...(traces[i] ? { trace: traces[i] } : {}),
                } satisfies JobData,
                opts: { ...jobOptions(spec), jobId: newId },
              })),
            )
          ).map((j) => j.id!),
        );
        // One put there as they were added: its line is not switched to it.
        const raced = await this.lineJobs(batchId, fresh, { throw: false });
        const s = scripted(this.c.redis);
        await this.c.redis.hdel(bk.meta, "cancelled");
        await Promise.all(
          add
            .filter((a) => !raced.some((p) => p.jobId === a.newId))
            .map(({ line, oldId, newId }) =>
              s.pbBatchSwitch(bk.meta, bk.lines, bk.results, String(line), oldId, newId),
            ),
        );
        if (raced.length) throw new LineProvenanceError(batchId, raced);
      }
      return { ids: add.map((a) => a.newId), missing };
    });
  }

  /**
   * Waits until every line's latest job has ended; calls onProgress after each read of the index
   * with the jobs that ended since. Jobs the index has no result for are also looked up in the
   * queue now and then (a job BullMQ failed without a worker recording it, e.g. one that stalled
   * too often, or one removed from the queue): see reconcile.
   */
  async wait(batchId: string, opts: WaitForBatchOptions = {}): Promise<BatchStatus> {
    const pollMs = opts.pollMs ?? 500;
    const reconcileMs = opts.reconcileMs ?? 5000;
    const bk = this.bk(batchId);
    let cursor = 0;
    let lastReconcile = Date.now();
    const suspects = new Map<string, number>();
    for (;;) {
      opts.signal?.throwIfAborted();
      const st = await this.readOrRetry(() => this.status(batchId));
      const ids = await this.readOrRetry(() =>
        this.c.hold(() => this.c.redis.lrange(bk.finished, cursor, cursor + 999)),
      );
      cursor += ids.length;
      const summaries = ids.length
        ? await this.readOrRetry(() => this.c.hold(() => this.c.redis.hmget(bk.results, ...ids)))
        : [];
      let finished = ids.flatMap((jobId, i) =>
        summaries[i] ? [{ jobId, result: JSON.parse(summaries[i]) as JobSummary }] : [],
      );
      if (finished.length) {
        // Only each line's latest job: not the attempts a retry replaced (a second wait after a retry).
        const latest = await this.readOrRetry(() =>
          this.c.hold(() => this.c.redis.hmget(bk.lines, ...finished.map((f) => String(f.result.line)))),
        );
        finished = finished.filter((f, i) => latest[i] === f.jobId);
      }
      opts.onProgress?.({ status: st, finished });
      if (ids.length === 1000) continue; // more to read at once
      if (st.done >= st.total) return this.status(batchId, { jobs: true });
      if (Date.now() - lastReconcile >= reconcileMs) {
        lastReconcile = Date.now();
        await this.reconcile(batchId, suspects).catch(() => {});
      }
      await sleep(pollMs, undefined, { signal: opts.signal });
    }
  }

  /** Redis unreachable for a moment: keep trying (as waitForResult does). */
  private async readOrRetry<T>(fn: () => Promise<T>): Promise<T> {
    for (let delay = 200; ; delay = Math.min(delay * 2, 2000)) {
      try {
        return await fn();
      } catch (err) {
        if (err instanceof BatchNotFoundError) throw err;
        await sleep(delay);
      }
    }
  }

  /**
   * Jobs without a result in the index, looked up in the queue: one BullMQ failed for good is
   * recorded as failed (with its reason); one that completed, or is not in the queue at all, seen
   * so twice in a row, is recorded from its return value or as failed. A worker's own record wins.
   */
  async reconcile(batchId: string, suspects = new Map<string, number>()): Promise<number> {
    return this.c.hold(async () => {
      const st = await this.status(batchId, { jobs: true });
      const meta = await this.c.redis.hget(this.bk(batchId).meta, "submitted");
      const pending = st.jobs!.filter((j) => j.state !== "finished").slice(0, 2000);
      // A job under a line's id that is not the line's own ends the line failed, naming it: never its result.
      const foreign = new Map((await this.lineJobs(batchId, pending, { throw: false })).map((p) => [p.jobId, p]));
      let fixed = 0;
      await Promise.all(
        pending.map(async (j) => {
          const state = await this.c.queue.getJobState(j.jobId);
          let result: JobResult | undefined;
          const notOurs = foreign.get(j.jobId);
          if (notOurs && (state === "failed" || state === "completed")) {
            result = emptyResult("failed", new LineProvenanceError(batchId, [notOurs]).message, { jobId: j.jobId });
          } else if (state === "failed") {
            const job = await Job.fromId<JobData, JobResult>(this.c.queue, j.jobId);
            result = emptyResult("failed", job?.failedReason ?? "the job failed", {
              jobId: j.jobId,
              ...(job ? { attempt: Math.max(1, job.attemptsMade) } : {}),
            });
          } else if (
            (state === "completed" || (state === "unknown" && meta === "1")) &&
            (suspects.get(j.jobId) ?? 0) >= 1
          ) {
            const job = state === "completed" ? await Job.fromId<JobData, JobResult>(this.c.queue, j.jobId) : undefined;
            result =
              job?.returnvalue ??
              emptyResult("failed", `job ${j.jobId} is not in queue ${this.c.queueName} (removed?)`, {
                jobId: j.jobId,
              });
          } else if (state === "completed" || state === "unknown") {
            suspects.set(j.jobId, (suspects.get(j.jobId) ?? 0) + 1);
          }
          if (
            result &&
            (await recordFinished(
              this.c.redis,
              this.c.queueName,
              { id: batchId, line: j.line },
              j.jobId,
              result.attempt ?? 1,
              result,
              { ttlSec: this.c.retentionSec, onlyIfAbsent: true },
            ))
          )
            fixed++;
        }),
      );
      return fixed;
    });
  }

  /** The summary of a batch (status with every job, the tasks, the totals). */
  summary(batchId: string): Promise<BatchSummary> {
    return this.c.hold(async () => {
      const st = await this.status(batchId, { jobs: true });
      const tasks = await this.c.redis.hgetall(this.bk(batchId).tasks);
      return summarizeBatch(st, tasks);
    });
  }

  /**
   * Writes DIR/<jobId>/{patch.diff,transcript.jsonl,result.json} (and transcript.html where the
   * dashboard's renderer is there) for each line's latest job, then DIR/summary.json and
   * DIR/summary.md (src/batch/batch-out.ts). Returns the summary.
   */
  writeOut(batchId: string, dir: string, opts: WriteOutOptions = {}): Promise<BatchSummary> {
    return writeBatchOut(this, batchId, dir, opts);
  }

  /**
   * The jobs under lines' ids that are there but are not the lines' own (src/queue/batch-provenance.ts):
   * a LineProvenanceError naming them, or with `{ throw: false }` the list.
   */
  async lineJobs(batchId: string, entries: readonly LineRef[]): Promise<LineJobs>;
  /** The same, with `{ throw: false }`: the jobs that are not the lines' own, as a list. */
  async lineJobs(
    batchId: string,
    entries: readonly LineRef[],
    o: LineJobsOptions & { throw: false },
  ): Promise<LineJobs["problems"]>;
  async lineJobs(
    batchId: string,
    entries: readonly LineRef[],
    o: LineJobsOptions = {},
  ): Promise<LineJobs | LineJobs["problems"]> {
    const read = await this.c.hold(() =>
      readLineJobs(
        this.c.redis,
        this.c.queue,
        this.bk(batchId).specs,
        batchId,
        entries.map(({ line, jobId }) => ({ line, jobId })),
      ),
    );
    if (o.throw === false) return read.problems;
    if (read.problems.length) throw new LineProvenanceError(batchId, read.problems);
    return read;
  }

  /** Throws a LineProvenanceError when the queue's job under the line's id is not the line's own (a job not there passes). */
  async checkLine(batchId: string, j: LineRef): Promise<void> {
    await this.lineJobs(batchId, [j]);
  }
}

/** How BatchClient.lineJobs answers. */
export interface LineJobsOptions {
  /**
   * false: the jobs that are not the lines' own, as a list, instead of a LineProvenanceError.
   * @default true
   */
  throw?: boolean;
}

function isBatchLines(x: unknown[]): x is BatchLine[] {
  return (
    x.length > 0 &&
    x.every((e) => e !== null && typeof e === "object" && "line" in e && "spec" in e && Object.keys(e).length === 2)
  );
}

// ---------------------------------------------------------------------------------------------
// The library API over the default client (REDIS_URL, PATCHBAY_QUEUE)
// ---------------------------------------------------------------------------------------------

let batches: BatchClient | undefined;
const b = () => (batches ??= new BatchClient(defaultClient()));
/** Enqueues specs as one batch: `{ batchId, ids, added }`. (`enqueueBatch(specs)` enqueues plain jobs and returns their ids.) */
export const submitBatch = (specs: unknown[], opts?: SubmitBatchOptions) => b().submit(specs, opts);
/** BatchClient.status on the default client: a batch's counts, and with `{ jobs: true }` every line's latest job. */
export const batchStatus = (batchId: string, opts?: BatchStatusOptions) => b().status(batchId, opts);
/** BatchClient.wait on the default client: resolves to the status once every line's latest job ended. */
export const waitForBatch = (batchId: string, opts?: WaitForBatchOptions) => b().wait(batchId, opts);
/** BatchClient.retry on the default client: runs the chosen lines again as new jobs, resolves to their ids. */
export const retryBatch = (batchId: string, opts?: RetryBatchOptions) => b().retry(batchId, opts);
/** BatchClient.cancel on the default client. */
export const cancelBatch = (batchId: string) => b().cancel(batchId);
/** BatchClient.list on the default client: batches, newest first. */
export const listBatches = (opts?: ListBatchesOptions) => b().list(opts);
/** BatchClient.summary on the default client. */
export const batchSummary = (batchId: string) => b().summary(batchId);

/** What a finished batch's lines ended as: "finished: 2 completed, 1 failed" (", cancelled" when it was). */
function finalState(st: BatchStatus): string {
  const ended = Object.entries(st.counts)
    .filter(([, n]) => n > 0)
    .map(([status, n]) => `${n} ${status}`)
    .join(", ");
  return `finished${st.cancelled ? " (cancelled)" : ""}: ${ended || "no jobs"}`;
}
