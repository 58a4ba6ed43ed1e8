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

export async function drain(p: DrainParts, deadlineMs: number): Promise<void> {
  const { log, active } = p;
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
    await Promise.race([Promise.all(left.map((a) => Promise.all([a.done, a.sandbox?.destroy().catch(() => {})]))), sleep(20_000)]);
  }
  p.cancels.stop();
  await pooled;
  await p.metrics.close();
  await p.sub.quit().catch(() => p.sub.disconnect());
  await p.heartbeat.remove();
  await p.redis.quit().catch(() => p.redis.disconnect());
  p.workerConnection.disconnect();
  log("stopped");
}
