// A worker's shutdown: it stops taking jobs, lets the active ones finish until the deadline, then
// abandons what is left (those run again elsewhere: src/queue/attempt.ts hands an abandoned job back),
// and closes what startWorker opened, in order.
import type { Worker } from "bullmq";
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";
import type { Log } from "../log.js";
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
  redis: Redis;
  sub: Redis;
  /** BullMQ's connection: passed in, so BullMQ leaves it open. */
  workerConnection: Redis;
}

/** How long abandoned jobs' sandboxes, and the background removals, get once the deadline passed. */
const ABANDONED_MS = 20_000;

export async function drain(p: DrainParts, deadlineMs: number): Promise<void> {
  const { log, active } = p;
  const deadline = Date.now() + deadlineMs;
  log(`draining (${active.size} active, deadline ${deadlineMs} ms)`);
  p.health.close();
  const pooled = p.pool.close(); // warm sandboxes go at once; no more are made
  p.heartbeat.stop();
  p.reaper.stop();
  // worker.close() waits for active jobs with no timeout of its own: race it with the deadline.
  const drained = await Promise.race([p.worker.close().then(() => true), sleep(deadlineMs).then(() => false)]);
  if (!drained) {
    // Abandon what is left: stop its agent loop and let runJob remove its sandbox; its attempt
    // hands the job back to the queue, and another worker runs it again.
    log(`deadline passed: abandoning ${active.size} jobs (they will run again on another worker)`);
    const left = [...active.values()];
    for (const a of left) a.ctl.abort("abandoned");
    // Its patch is of no use to anyone now: the sandbox goes at once rather than after one.
    await Promise.race([Promise.all(left.map((a) => Promise.all([a.done, a.sandbox?.destroy().catch(() => {})]))), sleep(ABANDONED_MS)]);
  }
  p.cancels.stop();
  await settleRemovals(p, Math.max(deadline - Date.now(), ABANDONED_MS));
  await pooled;
  await p.metrics.close();
  await p.sub.quit().catch(() => p.sub.disconnect());
  await p.heartbeat.remove();
  await p.redis.quit().catch(() => p.redis.disconnect());
  p.workerConnection.disconnect();
  log("stopped");
}

/**
 * The background removals (src/sandbox/removals.ts) awaited up to `ms`. The heartbeat goes only after
 * this: a removal left undone is the reaper's once this owner is gone (its labels say whose it is).
 */
async function settleRemovals(p: DrainParts, ms: number): Promise<void> {
  const { running, queued, blocked } = p.removals.stats;
  if (running + queued + blocked === 0) return;
  const timer = new AbortController();
  const settled = await Promise.race([p.removals.idle().then(() => true), sleep(ms, false, { signal: timer.signal }).catch(() => false)]);
  timer.abort(); // no timer outlives the drain
  const left = p.removals.stats;
  if (!settled) p.log(`${left.running + left.queued + left.blocked} sandbox removals left to the reaper`, { level: "warn" });
}
