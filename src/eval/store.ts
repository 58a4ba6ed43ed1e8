// An eval run in Redis, for the dashboard's eval pages and the API: its summary (SWE-bench's v2
// fields and patchbay's totals, per instance) as one record, a small row for the list, and an index
// by start time. run.ts saves a run as it grades it (again after each instance: the last save
// wins); the run's files on disk stay the whole account, this is what the pages read. Bounded: a
// record is at most 4 MiB (instances past that are cut, and their count said), the index keeps the
// newest 1,000 runs. Kept as long as the queue keeps things (PATCHBAY_RETENTION_SEC), renewed by
// every save, like a campaign's records (src/campaign/store.ts).
import type { Redis } from "ioredis";
import { z } from "zod";
import { checkBatchName } from "../batch/batch-types.js";
import { PatchbayError } from "../core/errors.js";
import { keys } from "../queue/keys.js";
import type { RunSummary } from "./types.js";

/** The most a record's JSON may take in Redis, in bytes. */
export const EVAL_RECORD_MAX_BYTES = 4 * 1024 * 1024;
/** The most runs the index keeps (and a list returns). */
export const EVAL_RUNS_MAX = 1000;

/** Where a run came from: its task set, when it started and the batch its jobs ran in. */
export interface EvalRunMeta {
  /** The task set's file (as given to `patchbay eval run`). */
  set: string;
  /** When the run started, epoch ms. */
  startedAt: number;
  /** The batch its jobs ran in. */
  batchId: string;
}

/** One run as the list shows it: small, whatever the run's size. */
export interface EvalRow extends EvalRunMeta {
  name: string;
  model: string;
  /** Candidates per instance (K). */
  candidates: number;
  total: number;
  resolved: number;
  costUsd: number;
  /** Spend per resolved instance; null when none resolved. */
  costPerResolvedUsd: number | null;
  /** pass@1 and pass@K, keyed "1" and K (src/eval/types.ts EvalTotals): `{ "1": …, "3": … }` for K = 3. */
  passAtK: Record<string, number>;
  /** best-of-K where a verify judged the candidates (src/eval/types.ts EvalTotals); absent or null where none did. */
  bestOfK?: number | null;
  /** When it was last saved, epoch ms. */
  savedAt: number;
}

/** One run as stored: its row's fields, its summary, and how many instances were left out of it. */
export interface EvalRecord extends EvalRunMeta {
  name: string;
  savedAt: number;
  summary: RunSummary;
  /** Instances left out of `summary.patchbay.instances` to keep the record under 4 MiB (the run's files have them all). */
  instancesCut?: number;
  /** Set when even the summary's id lists did not fit: they are empty here, the counts stay. */
  idListsCut?: boolean;
}

const ids = z.array(z.string());
const Account = z.object({
  instance_id: z.string(),
  outcome: z.enum(["resolved", "unresolved", "empty_patch", "patch_failed", "error", "pending"]),
  candidates: z.number(),
  resolvedCandidates: z.number(),
  costUsd: z.number(),
  inputTokens: z.number(),
  outputTokens: z.number(),
  jobMs: z.number(),
  modelMs: z.number(),
  gradeMs: z.number(),
  harnessMs: z.number(),
  jobIds: ids,
  picked: z.number().nullable().optional(),
});

/** A run's summary as read back (src/eval/types.ts RunSummary): what a record is checked against. */
export const RunSummarySchema = z.object({
  total_instances: z.number(),
  submitted_instances: z.number(),
  completed_instances: z.number(),
  resolved_instances: z.number(),
  unresolved_instances: z.number(),
  empty_patch_instances: z.number(),
  error_instances: z.number(),
  completed_ids: ids,
  incomplete_ids: ids,
  empty_patch_ids: ids,
  submitted_ids: ids,
  resolved_ids: ids,
  unresolved_ids: ids,
  error_ids: ids,
  schema_version: z.literal(2),
  patchbay: z.object({
    run: z.string(),
    model: z.string(),
    candidates: z.number(),
    costUsd: z.number(),
    inputTokens: z.number(),
    outputTokens: z.number(),
    wallMs: z.number(),
    costPerResolvedUsd: z.number().nullable(),
    passAtK: z.record(z.string(), z.number()),
    bestOfK: z.number().nullable().optional(),
    judged: z.number().optional(),
    harnessMs: z.object({ median: z.number(), total: z.number() }),
    instances: z.array(Account),
  }),
});

const Meta = { set: z.string(), startedAt: z.number(), batchId: z.string(), name: z.string(), savedAt: z.number() };

/** A stored record, checked as it is read. */
export const EvalRecordSchema = z.object({
  ...Meta,
  summary: RunSummarySchema,
  instancesCut: z.number().optional(),
  idListsCut: z.boolean().optional(),
});

/** A stored row, checked as it is read. */
export const EvalRowSchema = z.object({
  ...Meta,
  model: z.string(),
  candidates: z.number(),
  total: z.number(),
  resolved: z.number(),
  costUsd: z.number(),
  costPerResolvedUsd: z.number().nullable(),
  passAtK: z.record(z.string(), z.number()),
  bestOfK: z.number().nullable().optional(),
});

/** No eval run of that name is in the queue (it was never saved, or its record expired). */
export class EvalNotFoundError extends PatchbayError {
  constructor(
    readonly evalName: string,
    readonly queueName: string,
  ) {
    super(
      "not-found",
      `no eval run ${evalName.slice(0, 200)} in queue ${queueName} (the dashboard's /evals lists those there are)`,
    );
  }
}

const jsonOrUndefined = (raw: string): unknown => {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
};

const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v), "utf8");

const ID_LISTS = [
  "completed_ids",
  "incomplete_ids",
  "empty_patch_ids",
  "submitted_ids",
  "resolved_ids",
  "unresolved_ids",
  "error_ids",
] as const;

/**
 * The record with as many of its instances as fit in `maxBytes` (the first ones, in the run's
 * order), and how many were cut. A summary too big even with no instance (a set of very many, very
 * long ids) keeps its counts and loses its id lists too (`idListsCut`): the run's files have them.
 */
export function boundedRecord(record: EvalRecord, maxBytes = EVAL_RECORD_MAX_BYTES): EvalRecord {
  if (bytes(record) <= maxBytes) return record;
  const all = record.summary.patchbay.instances;
  let base = record;
  const keeping = (n: number): EvalRecord => ({
    ...base,
    summary: { ...base.summary, patchbay: { ...base.summary.patchbay, instances: all.slice(0, n) } },
    instancesCut: all.length - n,
  });
  if (bytes(keeping(0)) > maxBytes) {
    const summary = { ...record.summary };
    for (const list of ID_LISTS) summary[list] = [];
    base = { ...record, summary, idListsCut: true };
  }
  // The most instances that fit (none, at worst: the search ends at 0).
  let lo = 0;
  let hi = all.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (bytes(keeping(mid)) <= maxBytes) lo = mid;
    else hi = mid - 1;
  }
  return keeping(lo);
}

/** The list's row of a record. */
export function evalRow(r: EvalRecord): EvalRow {
  const p = r.summary.patchbay;
  return {
    name: r.name,
    set: r.set,
    startedAt: r.startedAt,
    batchId: r.batchId,
    savedAt: r.savedAt,
    model: p.model,
    candidates: p.candidates,
    total: r.summary.total_instances,
    resolved: r.summary.resolved_instances,
    costUsd: p.costUsd,
    costPerResolvedUsd: p.costPerResolvedUsd,
    passAtK: p.passAtK,
    ...(p.bestOfK !== undefined ? { bestOfK: p.bestOfK } : {}),
  };
}

/** Eval runs in the queue's Redis: save, get one, list the newest. */
export class EvalStore {
  constructor(
    private readonly redis: Redis,
    readonly queueName: string,
    private readonly ttlSec: number,
  ) {}

  /**
   * Stores a run's summary under its name (`summary.patchbay.run`, checked like a batch's name),
   * replacing what an earlier save of the same run stored; the newest 1,000 runs stay listed.
   */
  async save(summary: RunSummary, meta: EvalRunMeta): Promise<EvalRecord> {
    const name = checkBatchName(summary.patchbay.run);
    const record = boundedRecord({
      name,
      set: meta.set,
      startedAt: meta.startedAt,
      batchId: meta.batchId,
      savedAt: Date.now(),
      summary,
    });
    const k = keys(this.queueName);
    await this.redis
      .multi()
      .set(k.eval(name, "record"), JSON.stringify(record), "EX", this.ttlSec)
      .set(k.eval(name, "row"), JSON.stringify(evalRow(record)), "EX", this.ttlSec)
      .zadd(k.evals, meta.startedAt, name)
      .zremrangebyrank(k.evals, 0, -(EVAL_RUNS_MAX + 1))
      .exec();
    return record;
  }

  /** A run's record; EvalNotFoundError for a name that is no run's (or not a valid name at all). */
  async get(name: string): Promise<EvalRecord> {
    if (!validEvalName(name)) throw new EvalNotFoundError(name, this.queueName);
    const raw = await this.redis.get(keys(this.queueName).eval(name, "record"));
    if (!raw) throw new EvalNotFoundError(name, this.queueName);
    return EvalRecordSchema.parse(JSON.parse(raw));
  }

  /** Whether a run of that name is stored (an invalid name is none), without reading its record. */
  async has(name: string): Promise<boolean> {
    return validEvalName(name) && (await this.redis.exists(keys(this.queueName).eval(name, "record"))) === 1;
  }

  /** The newest runs first, at most `limit` (1 to 1,000); runs whose records expired are left out. */
  async list({ limit = 50 }: { limit?: number } = {}): Promise<EvalRow[]> {
    if (!Number.isInteger(limit) || limit < 1 || limit > EVAL_RUNS_MAX)
      throw new PatchbayError("usage", `an eval list's limit is 1 to ${EVAL_RUNS_MAX} (got ${limit})`);
    const k = keys(this.queueName);
    const names = await this.redis.zrevrange(k.evals, 0, limit - 1);
    if (!names.length) return [];
    const raws = await this.redis.mget(names.map((n) => k.eval(n, "row")));
    const rows: EvalRow[] = [];
    raws.forEach((raw, i) => {
      const row = raw ? EvalRowSchema.safeParse(jsonOrUndefined(raw)) : undefined;
      if (row?.success) rows.push(row.data);
      else if (!raw) void this.redis.zrem(k.evals, names[i]!).catch(() => {}); // expired: off the index
    });
    return rows;
  }
}

/** Whether `name` can be an eval run's (a batch name's rule): anything else names none, unread. */
export function validEvalName(name: string): boolean {
  try {
    checkBatchName(name);
    return true;
  } catch {
    return false;
  }
}
