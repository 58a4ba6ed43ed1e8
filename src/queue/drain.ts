// A worker's shutdown: it stops taking jobs, lets the active ones finish until the deadline, then
// abandons what is left (those run again elsewhere: src/queue/attempt.ts hands an abandoned job back),
// and closes what startWorker opened, in order.
//
// Bounded whatever Redis does: every step that may wait on Redis (BullMQ's close, an abandoned
// job's hand-back, QUIT with commands queued offline, the heartbeat's DEL, a Sentinel group asked
// again and again) is raced with a timer, so the whole drain ends by the deadline plus CLEANUP_MS.
// Before it returns, every sandbox labelled as this worker's is removed through the engine (the
// reaper's removal, by label), which needs no Redis.
import { count } from "../core/count.js";
import type { Worker } from "bullmq";
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";
import type { Log } from "../observability/log.js";
import type { Active } from "./attempt.js";

export interface DrainParts {
  log: Log;
  active: ReadonlyMap<string, Active>;
  worker: Worker;
  /** Stopped first: no health checks, no warm sandboxes, no beats, no reaping. */
  health: { close(): void };
  pool: { close(): Promise<void> };
  /** Finished jobs' sandboxes still being removed in the background: awaited before the heartbeat goes. */
  removals: { idle(): Promise<void>; readonly stats: { running: number; queued: number; blocked: number } };
  heartbeat: { stop(): void; remove(): Promise<void> };
  reaper: { stop(): void };
  /** Stopped once the jobs are over: a job still running can be cancelled until then. */
  cancels: { stop(): void };
  metrics: { close(): Promise<void> };
  /** Removes every sandbox (and its storage) labelled as this worker's; resolves to how many it removed. */
  sweep(): Promise<number>;
  redis: Redis;
  sub: Redis;
  /** BullMQ's connection: passed in, so BullMQ leaves it open. */
  workerConnection: Redis;
}

/**
 * What a drain left undone: the abandoned jobs it cannot say are back in the queue (every one of
 * them when Redis is unreachable at the end, else those whose attempt had not handed them back),
 * and whether Redis was unreachable.
 */
export interface DrainReport {
  notHandedBack: string[];
  redisDown: boolean;
}

/**
 * How long the clean-up may take once the deadline passed (abandoned jobs' sandboxes, the
 * background removals, the warm pool, the sweep, closing Redis): the drain ends by the deadline
 * plus this. With the default deadline (30 s) that is inside compose's 45 s stop_grace_period.
 */
export const CLEANUP_MS = 10_000;
/** How long a goodbye to Redis (QUIT, the heartbeat's DEL) may take before the connection is just dropped. */
const REDIS_BYE_MS = 1000;
/** Kept back for the sweep out of CLEANUP_MS, whatever the steps before it took. */
const SWEEP_MS = 4000;

/** `work`, or `fallback` once `ms` passed; the timer is cleared either way (none outlives the drain). */
async function within<T>(work: Promise<T>, ms: number, fallback: T): Promise<T> {
  const timer = new AbortController();
  try {
    return await Promise.race([work, sleep(Math.max(0, ms), fallback, { signal: timer.signal }).catch(() => fallback)]);
  } finally {
    timer.abort();
  }
}

export async function drain(p: DrainParts, deadlineMs: number): Promise<DrainReport> {
  const { log, active } = p;
  const deadline = Date.now() + deadlineMs;
  const end = deadline + CLEANUP_MS;
  const goodbyes = 3 * REDIS_BYE_MS; // the sub's QUIT, the heartbeat's DEL and the commands connection's QUIT
  const left = () => end - SWEEP_MS - goodbyes - Date.now(); // for the steps before the sweep
  log(`draining (${active.size} active, deadline ${deadlineMs} ms)`);
  p.health.close();
  const pooled = p.pool.close(); // warm sandboxes go at once; no more are made
  p.heartbeat.stop();
  p.reaper.stop();
  // worker.close() waits for active jobs with no timeout of its own, and on Redis for ever while it is away.
  // A close that fails (BullMQ reports its own errors) leaves the decision to the deadline.
  const drained = await within(
    p.worker.close().then(
      () => true,
      () => new Promise<boolean>(() => {}),
    ),
    deadlineMs,
    false,
  );
  const abandoned = drained ? [] : await abandon(p, left);
  p.cancels.stop();
  await settleRemovals(p, left());
  await within(
    pooled.catch(() => {}),
    left(),
    undefined,
  );
  const swept = await within(
    p.sweep().catch(() => 0),
    Math.max(SWEEP_MS, end - goodbyes - Date.now()),
    0,
  );
  if (swept) log(`removed ${count(swept, "sandbox", "sandboxes")} of this worker's that were still there`);
  await within(
    p.metrics.close().catch(() => {}),
    end - goodbyes - Date.now(),
    undefined,
  );
  const redisDown = p.redis.status !== "ready";
  const report = { notHandedBack: abandoned.filter((id) => redisDown || active.has(id)), redisDown };
  await closeRedis(p, report.redisDown);
  if (report.notHandedBack.length) log(stoppedLine(report), { level: "error" });
  else log("stopped");
  return report;
}

/**
 * Past the deadline: stop each job's agent loop and remove its sandbox at once (its patch is of no
 * use to anyone now); its attempt hands the job back to the queue, and another worker runs it
 * again. Waited for until the clean-up's end; BullMQ's own connections are then dropped, so
 * nothing of BullMQ's keeps asking an unreachable Redis. Resolves to the abandoned jobs' ids.
 */
async function abandon(p: DrainParts, left: () => number): Promise<string[]> {
  p.log(`deadline passed: abandoning ${count(p.active.size, "job")} (they will run again on another worker)`);
  const ids = [...p.active.keys()];
  const jobs = [...p.active.values()];
  for (const a of jobs) a.ctl.abort("abandoned");
  await within(
    Promise.all(jobs.map((a) => Promise.all([a.done, a.sandbox?.destroy().catch(() => {})]))),
    left(),
    undefined,
  );
  // The hand-backs (each attempt leaves `active` when its job is back in the queue), up to half of what is left.
  const handBack = Date.now() + left() / 2;
  while (p.active.size > 0 && Date.now() < handBack) await sleep(50);
  await within(
    p.worker.disconnect().catch(() => {}),
    REDIS_BYE_MS,
    undefined,
  );
  return ids;
}

/** QUIT where Redis answers (bounded), else nothing to say goodbye to: every connection is dropped in the end. */
async function closeRedis(p: DrainParts, redisDown: boolean): Promise<void> {
  const bye = async (c: Redis) => {
    if (!redisDown)
      await within(
        c.quit().catch(() => {}),
        REDIS_BYE_MS,
        undefined,
      );
    c.disconnect(); // also fails what QUIT left queued offline
  };
  await bye(p.sub);
  // The heartbeat goes last but one: until then the reaper of another worker leaves this one's sandboxes alone.
  if (!redisDown)
    await within(
      p.heartbeat.remove().catch(() => {}),
      REDIS_BYE_MS,
      undefined,
    );
  await bye(p.redis);
  p.workerConnection.disconnect();
}

/** The last line of a drain that left jobs it could not hand back: they come back as stalled once their locks expire. */
function stoppedLine(r: DrainReport): string {
  const which =
    r.notHandedBack.length === 1 ? `job ${r.notHandedBack[0]} was` : `jobs ${r.notHandedBack.join(", ")} were`;
  return `stopped${r.redisDown ? " with Redis unreachable" : ""}: ${which} not handed back (another worker takes ${r.notHandedBack.length === 1 ? "it" : "them"} up once the lock expires); its sandboxes are removed`;
}

/**
 * The background removals (src/sandbox/removals.ts) awaited up to `ms`. The heartbeat goes only after
 * this: a removal left undone is the sweep's, else the reaper's once this owner is gone (its labels say whose it is).
 */
async function settleRemovals(p: DrainParts, ms: number): Promise<void> {
  const { running, queued, blocked } = p.removals.stats;
  if (running + queued + blocked === 0) return;
  const settled = await within(
    p.removals.idle().then(() => true),
    ms,
    false,
  );
  const still = p.removals.stats;
  if (!settled)
    p.log(`${count(still.running + still.queued + still.blocked, "sandbox removal")} left to the sweep`, {
      level: "warn",
    });
}
