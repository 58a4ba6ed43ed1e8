// /api/jobs: one page of the jobs list, lean. A page is at most PAGE_MAX rows; each row is read
// from the job's hash with one Lua call per page that returns only the fields the list shows, and
// `data` (the spec) and `returnvalue` (the bounded result) only when they are under LEAN_FIELD_MAX
// (HSTRLEN first: a bigger one is never read). No page reads a whole patch, list or transcript.
//
// Order: active, waiting, prioritized and delayed jobs in BullMQ's own order, then the finished
// ones (completed and failed together) newest finished first. The cursor holds the offset reached
// in each state; a job that changes state between two pages may show twice or not at all.
// A status filter looks only at finished jobs, reading the status alone (the start of the result,
// where patchbay writes it), at most SCAN_PER_PAGE × limit jobs a request; a batch filter pages
// through the batch's lines (its index, src/queue/batch-index.ts). A filtered page may come back
// short with a cursor: the client asks again.
import { count } from "../core/count.js";
import type { Redis } from "ioredis";
import type { Queue } from "bullmq";
import { LIST_STATES, type JobData, type ListState } from "../queue/client.js";
import { keys } from "../queue/keys.js";
import { luaCommand } from "../core/lua.js";
import { JOB_STATUSES, type JobResult } from "../core/spec/spec.js";
import { isJobStatus } from "../queue/outcome.js";
import { jobRow, type JobFields, type JobRow } from "./data.js";
import { kinded } from "../core/errors.js";

export const PAGE_DEFAULT = 50;
export const PAGE_MAX = 200;
/** A job's spec or result over this is not read for the list (a bounded result is at most 64 KiB). */
export const LEAN_FIELD_MAX = 64 * 1024;
/** A filtered page looks at most this many times `limit` jobs. */
export const SCAN_PER_PAGE = 5;
const REASON_MAX = 2000;

export interface JobsQuery {
  states: ListState[];
  status?: string;
  batch?: string;
  limit: number;
  cursor: Cursor;
}

/** Offsets reached per state, or in a batch's lines. */
export type Cursor = { o: Partial<Record<ListState, number>> } | { b: number };

export interface JobsPage {
  jobs: JobRow[];
  /** Pass as `cursor` for the next page; absent at the end. */
  next?: string;
}

export class BadQuery extends kinded("usage") {}

const encode = (c: Cursor) => Buffer.from(JSON.stringify(c)).toString("base64url");
const offset = (v: unknown) => (Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : undefined);

export function decodeCursor(s: string | undefined): Cursor {
  if (!s) return { o: {} };
  try {
    const c = JSON.parse(Buffer.from(s.slice(0, 4096), "base64url").toString("utf8")) as Record<string, unknown>;
    if (c && typeof c === "object" && "b" in c && offset(c.b) !== undefined) return { b: c.b as number };
    if (c && typeof c === "object" && c.o && typeof c.o === "object") {
      const o: Partial<Record<ListState, number>> = {};
      for (const s of LIST_STATES) {
        const n = offset((c.o as Record<string, unknown>)[s]);
        if (n !== undefined) o[s] = n;
      }
      return { o };
    }
  } catch {
    // below
  }
  throw new BadQuery("bad cursor: pass back the `next` value of the previous page");
}

export function parseJobsQuery(q: Record<string, unknown>): JobsQuery {
  const str = (k: string) => {
    const v = q[k];
    return typeof v === "string" && v.trim() ? v.trim() : undefined;
  };
  const state = str("state");
  if (state && !(LIST_STATES as readonly string[]).includes(state))
    throw new BadQuery(`bad state "${state.slice(0, 40)}": one of ${LIST_STATES.join(", ")}`);
  const status = str("status");
  if (status && !isJobStatus(status))
    throw new BadQuery(
      `bad status "${status.slice(0, 40)}": one of ${JOB_STATUSES.join(", ")} (a finished job's; state= filters by queue state)`,
    );
  const limitText = str("limit");
  const limit = limitText === undefined ? PAGE_DEFAULT : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > PAGE_MAX)
    throw new BadQuery(`bad limit "${String(limitText).slice(0, 40)}": 1 to ${PAGE_MAX}`);
  return {
    states: state ? [state as ListState] : [...LIST_STATES],
    ...(status ? { status } : {}),
    ...(str("batch") ? { batch: str("batch")!.slice(0, 256) } : {}),
    limit,
    cursor: decodeCursor(str("cursor")),
  };
}

// The list's fields of some jobs, never reading one over the max (src/web/lua/job-rows-n.lua: its
// header says what comes back).
const ROWS = luaCommand<unknown[]>("web/lua/job-rows-n.lua");

const num = (v: unknown) => (typeof v === "string" && v !== "" && Number.isFinite(Number(v)) ? Number(v) : undefined);
function json<T>(v: unknown): T | undefined {
  if (typeof v !== "string") return undefined;
  try {
    return JSON.parse(v) as T;
  } catch {
    return undefined;
  }
}

/** The list's fields of some jobs (undefined for a job that is gone), in one round trip. */
export async function leanJobs(redis: Redis, queue: Queue, ids: string[]): Promise<(JobFields | undefined)[]> {
  if (!ids.length) return [];
  const raw = (await ROWS(
    redis,
    ids.length,
    ...ids.map((id) => queue.toKey(id)),
    "row",
    LEAN_FIELD_MAX,
    REASON_MAX,
  )) as (unknown[] | null)[];
  return raw.map((v, i) => {
    if (!v) return undefined;
    const [timestamp, processedOn, finishedOn, atm, progress, reason, data, rv] = v;
    return {
      id: ids[i]!,
      timestamp: num(timestamp),
      processedOn: num(processedOn),
      finishedOn: num(finishedOn),
      attemptsMade: num(atm) ?? 0,
      progress: json(progress),
      ...(typeof reason === "string"
        ? { failedReason: reason }
        : typeof reason === "number"
          ? { failedReason: `(${count(reason, "byte")})` }
          : {}),
      data: json<JobData>(data),
      ...(typeof data === "number" ? { dataBytes: data } : {}),
      result: json<JobResult>(rv) ?? undefined,
    };
  });
}

/** The status of finished jobs, from the start of their results (undefined: unknown or not finished). */
async function statuses(redis: Redis, queue: Queue, ids: string[]): Promise<(string | undefined)[]> {
  if (!ids.length) return [];
  const raw = (await ROWS(
    redis,
    ids.length,
    ...ids.map((id) => queue.toKey(id)),
    "status",
    LEAN_FIELD_MAX,
    REASON_MAX,
  )) as (unknown[] | null)[];
  return raw.map((v) => {
    if (!v) return undefined;
    const m = typeof v[3] === "string" ? /^\{"status":"([a-z_]+)"/.exec(v[3]) : null;
    return m ? m[1] : v[4] === 1 ? "failed" : undefined;
  });
}

const FINISHED: ListState[] = ["completed", "failed"];
const QUEUED: ListState[] = ["active", "waiting", "prioritized", "delayed"];

/** Up to `n` ids from the states in `states`, from the offsets in `o` (advanced): queued states one after another, then the finished ones merged. */
async function nextIds(
  redis: Redis,
  queue: Queue,
  states: ListState[],
  o: Partial<Record<ListState, number>>,
  n: number,
): Promise<{ ids: { id: string; state: ListState }[]; more: boolean }> {
  const out: { id: string; state: ListState }[] = [];
  for (const s of QUEUED.filter((s) => states.includes(s))) {
    const need = n - out.length;
    if (need <= 0) return { ids: out, more: true };
    const from = o[s] ?? 0;
    const ids = (await queue.getRanges([s], from, from + need - 1)).slice(0, need);
    o[s] = from + ids.length;
    out.push(...ids.map((id) => ({ id, state: s })));
    if (ids.length === need) return { ids: out, more: true };
  }
  const fin = FINISHED.filter((s) => states.includes(s));
  const need = n - out.length;
  if (!fin.length || need <= 0) return { ids: out, more: need <= 0 && fin.length > 0 };
  // completed and failed are zsets by finish time: merged exactly, newest first.
  const heads = await Promise.all(
    fin.map(async (s) => {
      const from = o[s] ?? 0;
      const flat = await redis.zrevrange(queue.keys[s]!, from, from + need - 1, "WITHSCORES");
      const rows: { id: string; state: ListState; at: number }[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) rows.push({ id: flat[i]!, state: s, at: Number(flat[i + 1]) });
      return rows;
    }),
  );
  // A k-way merge: each zset's own order is kept (ties included), so what a page took of each is a
  // prefix, and its offset says exactly where the next page starts.
  const merged: { id: string; state: ListState }[] = [];
  const at = heads.map(() => 0);
  while (merged.length < need) {
    let best = -1;
    heads.forEach((h, i) => {
      if (at[i]! < h.length && (best < 0 || h[at[i]!]!.at > heads[best]![at[best]!]!.at)) best = i;
    });
    if (best < 0) break;
    const r = heads[best]![at[best]!++]!;
    merged.push(r);
    o[r.state] = (o[r.state] ?? 0) + 1;
  }
  out.push(...merged);
  return { ids: out, more: merged.length === need };
}

/** One page of the jobs list (see the header). */
export async function listJobsPage(
  redis: Redis,
  queue: Queue,
  queueName: string,
  q: JobsQuery,
  defaultModel: string,
): Promise<JobsPage> {
  if (q.batch !== undefined) return batchPage(redis, queue, queueName, q, defaultModel);
  const o = "o" in q.cursor ? { ...q.cursor.o } : {};
  if (q.status === undefined) {
    const { ids, more } = await nextIds(redis, queue, q.states, o, q.limit);
    const rows = await rowsOf(redis, queue, ids, defaultModel);
    return { jobs: rows, ...(more ? { next: encode({ o }) } : {}) };
  }
  // A status is a finished job's: only those states are scanned, the status read alone.
  const states = q.states.filter((s) => FINISHED.includes(s));
  const picked: { id: string; state: ListState }[] = [];
  let more = states.length > 0;
  for (let scanned = 0; more && picked.length < q.limit && scanned < SCAN_PER_PAGE * q.limit;) {
    const before = { ...o };
    const chunk = await nextIds(redis, queue, states, o, q.limit);
    more = chunk.more;
    scanned += chunk.ids.length;
    const st = await statuses(
      redis,
      queue,
      chunk.ids.map((x) => x.id),
    );
    for (let i = 0; i < chunk.ids.length; i++) {
      if (st[i] !== q.status) continue;
      if (picked.length === q.limit) {
        // the page is full: the next one starts at this job
        Object.assign(o, before);
        for (const x of chunk.ids.slice(0, i)) o[x.state] = (o[x.state] ?? 0) + 1;
        more = true;
        break;
      }
      picked.push(chunk.ids[i]!);
    }
  }
  return { jobs: await rowsOf(redis, queue, picked, defaultModel), ...(more ? { next: encode({ o }) } : {}) };
}

async function rowsOf(
  redis: Redis,
  queue: Queue,
  ids: { id: string; state: ListState }[],
  defaultModel: string,
): Promise<JobRow[]> {
  const fields = await leanJobs(
    redis,
    queue,
    ids.map((x) => x.id),
  );
  const rows: JobRow[] = [];
  fields.forEach((f, i) => f && rows.push(jobRow(f, ids[i]!.state, defaultModel)));
  return rows;
}

/** A batch's jobs (the latest of each line), by line, from its index. */
async function batchPage(
  redis: Redis,
  queue: Queue,
  queueName: string,
  q: JobsQuery,
  defaultModel: string,
): Promise<JobsPage> {
  const from = "b" in q.cursor ? q.cursor.b : 0;
  const lines = await redis.hgetall(keys(queueName).batch(q.batch!, "lines"));
  const ids = Object.entries(lines)
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([, id]) => id);
  const slice = ids.slice(from, from + q.limit);
  const states = await Promise.all(slice.map((id) => queue.getJobState(id)));
  const fields = await leanJobs(redis, queue, slice);
  const jobs: JobRow[] = [];
  fields.forEach((f, i) => {
    if (!f) return;
    const row = jobRow(f, states[i]!, defaultModel);
    if (q.states.includes(row.state as ListState) && (q.status === undefined || row.status === q.status))
      jobs.push(row);
  });
  return { jobs, ...(from + slice.length < ids.length ? { next: encode({ b: from + slice.length }) } : {}) };
}
