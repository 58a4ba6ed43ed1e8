// The queue's side of a job with candidates (docs/jobspec.md#candidates; the plan is
// src/job/candidates/plan.ts). The job's worker runs setup once; its workspace (the seed) goes into
// Redis in chunks, bounded (PATCHBAY_SEED_MAX_BYTES), for as long as the job may run; the candidates
// are added as the job's children in BullMQ's flow, under `<job>-C<n>`, and the job waits for them
// (BullMQ's waiting-children). Any worker runs a candidate: it loads the seed, runs the agent and
// verify, and records its own result. Once every candidate ended, BullMQ hands the job to a worker
// again, which reads their results, picks one and records the job's.
//
// By construction: a worker runs a job as a candidate only where BullMQ names the job whose id its
// own id carries as its parent (a free job cannot take a -C<n> id, and the API cannot set a
// parent), and the job reads a candidate's result only from its own child.
import { count } from "../core/count.js";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { once } from "node:events";
import { createHash } from "node:crypto";
import { z } from "zod";
import { Job, WaitingChildrenError, type Queue } from "bullmq";
import type { Redis } from "ioredis";
import { candidateJobId, parseCandidateJobId } from "../core/candidate-id.js";
import type { CandidateOutcome, EventInput, JobResult, JobSpec } from "../core/spec/spec.js";
import { candidateOutcome, candidateSpec, candidatesResult } from "../job/candidates/plan.js";
import { SeedError, SeedMeta, type Seed } from "../job/candidates/seed.js";
import type { RunJobOptions } from "../job/run.js";
import type { JobData } from "./client.js";
import { jobOptions } from "./enqueue-spec.js";
import type { keys } from "./keys.js";
import { recordedResult, withStoredPatch } from "./result-record.js";

type Keys = ReturnType<typeof keys>;
type QueueJob = Job<JobData, JobResult>;

/** A seed's chunk in Redis. */
const CHUNK = 4 * 1024 * 1024;

/** What the candidates' executor needs of a worker. */
export interface CandidatesContext {
  redis: Redis;
  k: Keys;
  queue: Queue<JobData, JobResult>;
  seedMaxBytes: number;
  retentionSec: number;
}

/** Puts a seed into Redis (chunks and meta), for `ttlSec`; over `maxBytes` it is the job's fault (SeedError). */
export async function storeSeed(c: CandidatesContext, jobId: string, seed: Seed, ttlSec: number): Promise<void> {
  const tooLarge = () =>
    new SeedError(
      `the workspace after setup is ${count(seed.bytes, "byte")} as a tar, over this worker's bound of ${c.seedMaxBytes} for the candidates' seed (PATCHBAY_SEED_MAX_BYTES on the worker raises it)`,
    );
  if (seed.bytes > c.seedMaxBytes) throw tooLarge();
  const key = c.k.seed(jobId);
  await c.redis.del(key, c.k.seedMeta(jobId));
  let bytes = 0;
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(seed.file, { highWaterMark: CHUNK }) as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > c.seedMaxBytes) throw tooLarge();
    hash.update(chunk);
    await c.redis.multi().rpush(key, chunk).expire(key, ttlSec).exec();
  }
  const stored: StoredMeta = { meta: seed.meta, bytes, sha256: hash.digest("hex") };
  await c.redis.set(c.k.seedMeta(jobId), JSON.stringify(stored), "EX", ttlSec);
}

/**
 * What the seed's meta key holds: the meta, and the tar's size and SHA-256 as stored. A tar cut at a
 * member's end is still a tar (tar -x loads it without a word), so a seed that lost chunks, or one
 * read while the job's attempt ran again and stores it anew, is told by these alone.
 */
const StoredMeta = z.strictObject({
  meta: SeedMeta,
  bytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
type StoredMeta = z.infer<typeof StoredMeta>;

/** Reads a job's seed from Redis into a file on this host (removed with the candidate's attempt). */
export async function loadSeed(c: CandidatesContext, jobId: string): Promise<Seed> {
  const raw = await c.redis.get(c.k.seedMeta(jobId));
  if (raw === null)
    throw new SeedError(`job ${jobId}'s workspace after setup is gone from Redis (its job ended, or it expired)`);
  const meta = StoredMeta.safeParse(safeJson(raw));
  if (!meta.success)
    throw new SeedError(`job ${jobId}'s seed is not one a worker wrote: ${meta.error.issues[0]?.message}`);
  const want = meta.data;
  const notWhole = (got: string) =>
    new SeedError(
      `job ${jobId}'s seed is not whole (${got}, where its worker stored ${count(want.bytes, "byte")}): it lost a chunk, or the job's attempt is storing it anew`,
    );
  const key = c.k.seed(jobId);
  const n = await c.redis.llen(key);
  // In a directory the snapshot sweep knows (src/job/verify.ts): one a dead process left is removed.
  const dir = await mkdtemp(join(tmpdir(), `patchbay-verify-${process.pid}-`));
  const file = join(dir, "workspace.tar");
  const remove = () => rm(dir, { recursive: true, force: true });
  try {
    const out = createWriteStream(file, { mode: 0o600 });
    const hash = createHash("sha256");
    let bytes = 0;
    for (let i = 0; i < n; i++) {
      const chunk = await c.redis.lindexBuffer(key, i);
      if (!chunk) throw new SeedError(`job ${jobId}'s seed lost chunk ${i + 1} of ${n} (it expired meanwhile)`);
      bytes += chunk.length;
      if (bytes > c.seedMaxBytes)
        throw new SeedError(
          `job ${jobId}'s seed is over this worker's bound of ${count(c.seedMaxBytes, "byte")} (PATCHBAY_SEED_MAX_BYTES)`,
        );
      if (bytes > want.bytes) throw notWhole(`over ${count(want.bytes, "byte")}`);
      hash.update(chunk);
      if (!out.write(chunk)) await once(out, "drain");
    }
    out.end();
    await once(out, "close");
    if (bytes !== want.bytes) throw notWhole(count(bytes, "byte"));
    if (hash.digest("hex") !== want.sha256) throw notWhole("its bytes differ");
    return { file, bytes, remove, meta: want.meta };
  } catch (err) {
    await remove();
    throw err;
  }
}

function safeJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

/**
 * The job's keepSeed (src/job/run.ts): the seed into Redis, the candidates added as the job's
 * children, and the job moved to wait for them (thrown: BullMQ's WaitingChildrenError). Where they
 * all ended already, the job's result at once.
 */
export async function addCandidates(
  c: CandidatesContext,
  job: QueueJob,
  token: string | undefined,
  spec: JobSpec,
  seed: Seed,
  emit: (e: EventInput) => void,
): Promise<JobResult> {
  const jobId = job.id!;
  const n = spec.candidates ?? 1;
  // As long as a candidate may wait and run, and the job's retention past that.
  await storeSeed(c, jobId, seed, c.retentionSec);
  const child = candidateSpec(spec);
  const ids = Array.from({ length: n }, (_, i) => candidateJobId(jobId, i + 1));
  await c.queue.addBulk(
    ids.map((id, i) => ({
      name: "candidate",
      data: {
        spec: child,
        enqueuedAt: Date.now(),
        ...(job.data.origin ? { origin: job.data.origin } : {}),
        candidate: {
          n: i + 1,
          ...(spec.stopAfterVerified ? { stopAfterVerified: spec.stopAfterVerified, of: n } : {}),
        },
      } satisfies JobData,
      opts: {
        ...jobOptions(child),
        jobId: id,
        parent: { id: jobId, queue: job.queueQualifiedName },
        // A candidate that failed for good does not hold the job: it is read as failed.
        ignoreDependencyOnFailure: true,
      },
    })),
  );
  emit({ type: "candidates_started", jobIds: ids, seedBytes: seed.bytes });
  await job.updateData({ ...job.data, step: "candidates" });
  return gatherCandidates(c, job, token, spec, emit);
}

/**
 * The job's result once its candidates ended: each one's read from its own child job, one picked.
 * Where some have not ended (the attempt that added them was handed back, or stalled, before it
 * waited for them), the job waits for them again (thrown: BullMQ's WaitingChildrenError).
 */
export async function gatherCandidates(
  c: CandidatesContext,
  job: QueueJob,
  token: string | undefined,
  spec: JobSpec,
  emit: (e: EventInput) => void,
): Promise<JobResult> {
  if (token && (await job.moveToWaitingChildren(token))) throw new WaitingChildrenError();
  const jobId = job.id!;
  const n = spec.candidates ?? 1;
  const results: (JobResult | undefined)[] = [];
  const outcomes: CandidateOutcome[] = [];
  for (let i = 1; i <= n; i++) {
    const r = await candidateResult(c, job, i);
    results.push("failed" in r ? undefined : r);
    outcomes.push(candidateOutcome(jobId, i, r));
  }
  const now = Date.now();
  const { result, why } = candidatesResult(spec, outcomes, results, {
    jobId,
    timings: {
      queuedMs: Math.max(0, (job.processedOn ?? now) - (job.data.enqueuedAt ?? job.timestamp)),
      sandboxMs: 0,
      agentMs: 0,
      totalMs: Math.max(0, now - (job.data.enqueuedAt ?? job.timestamp)),
    },
  });
  emit({ type: "candidate_picked", ...(result.picked ? { picked: result.picked } : {}), why, candidates: outcomes });
  await c.redis.del(c.k.seed(jobId), c.k.seedMeta(jobId), c.k.candidates(jobId)).catch(() => {});
  return result;
}

/** Candidate `n`'s whole result, read only from the job's own child; else why it has none. */
async function candidateResult(
  c: CandidatesContext,
  job: QueueJob,
  n: number,
): Promise<JobResult | { failed: string }> {
  const id = candidateJobId(job.id!, n);
  const child = await Job.fromId<JobData, JobResult>(c.queue, id);
  if (!child) return { failed: "it is gone from the queue" };
  if (child.parentKey !== `${job.queueQualifiedName}:${job.id}`)
    return { failed: "the job under its id is not this job's candidate" };
  if (child.failedReason && (await child.isFailed())) return { failed: child.failedReason.slice(0, 2000) };
  const r = child.returnvalue ?? (await recordedResult(c.redis, c.k.result(id)));
  if (!r || typeof r !== "object") return { failed: "it ended with no result" };
  return withStoredPatch(c.redis, c.k, id, r).catch((err: Error) => ({ failed: err.message }));
}

/**
 * Whether a job is one of a job's candidates: its id is in the namespace and BullMQ names that job
 * as its parent. Its parent's id, or why it is not one (a job that claims to be).
 */
export function candidateOf(job: QueueJob): { parent: string; n: number } | { refused: string } | undefined {
  const claims = job.data.candidate;
  const at = parseCandidateJobId(job.id ?? "");
  if (!claims) return undefined;
  if (!at || at.n !== claims.n) return { refused: "it says it is a candidate, but its id is none of a candidate's" };
  if (job.parentKey !== `${job.queueQualifiedName}:${at.jobId}`)
    return { refused: `it says it is candidate ${at.n} of job ${at.jobId}, but that job did not add it` };
  return { parent: at.jobId, n: at.n };
}

/**
 * After a candidate's result: where the job asked to stop after k verified and this one makes k,
 * every other candidate is cancelled (one waiting ends at once when it starts; one running stops).
 */
export async function candidateEnded(c: CandidatesContext, job: QueueJob, result: JobResult): Promise<void> {
  const cand = candidateOf(job);
  const { stopAfterVerified: k, of } = job.data.candidate ?? {};
  if (!cand || "refused" in cand || !result.verified || !k || !of) return;
  const { parent, n } = cand;
  const verified = await c.redis.hincrby(c.k.candidates(parent), "verified", 1);
  await c.redis.expire(c.k.candidates(parent), c.retentionSec);
  if (verified !== k) return;
  for (let i = 1; i <= of; i++) {
    if (i === n) continue;
    const id = candidateJobId(parent, i);
    await c.redis.set(c.k.cancel(id), "1", "EX", c.retentionSec);
    await c.redis.publish(c.k.cancelChannel, id);
  }
}

/** The cancel keys that stop a job: its own, and a candidate's job's too (cancelling a job cancels its candidates). */
export function cancelKeys(k: Keys, jobId: string): string[] {
  const at = parseCandidateJobId(jobId);
  return at ? [k.cancel(jobId), k.cancel(at.jobId)] : [k.cancel(jobId)];
}

/**
 * How an attempt runs this job beside runJob's usual options: a candidate from its job's seed; a job
 * with candidates up to its seed, then adding them (src/job/run.ts keepSeed); any other, as it is.
 */
export function candidateOptions(
  c: CandidatesContext,
  job: QueueJob,
  token: string | undefined,
  spec: JobSpec,
  emit: (e: EventInput) => void,
): Pick<RunJobOptions, "seed" | "keepSeed"> {
  const cand = candidateOf(job);
  if (cand && "parent" in cand) return { seed: () => loadSeed(c, cand.parent) };
  // The budget runJob admitted (the worker's cap where the spec set none) is what the candidates
  // share. Only the budget: the other caps and a forced runtime are each candidate's worker's to apply
  // (a fleet's workers may differ), so the spec is otherwise the job's as sent.
  if ((spec.candidates ?? 1) > 1)
    return {
      keepSeed: (seed, admitted) =>
        addCandidates(c, job, token, { ...spec, ...(admitted.budget ? { budget: admitted.budget } : {}) }, seed, emit),
    };
  return {};
}
