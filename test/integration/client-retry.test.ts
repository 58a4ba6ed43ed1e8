// PatchbayClient.retry: a finished job runs again under its id, with its cancel mark and recorded
// result gone first (the dashboard's retry button calls it; the web server touches no queue key).
import { Worker } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobNotFoundError, PatchbayClient } from "../../src/queue/client.js";
import { keys } from "../../src/queue/keys.js";
import { emptyResult } from "../../src/core/spec/spec.js";
import { startRedis } from "../support/cluster.js";

const QUEUE = "client-retry";
const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;

describe("PatchbayClient.retry", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let client: PatchbayClient;
  const k = keys(QUEUE);

  beforeAll(async () => {
    redis = await startRedis();
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
  });
  afterAll(async () => {
    await client?.close();
    await redis?.stop();
  });

  /** Runs the queue's jobs to the end with a stand-in processor (no patchbay worker, no sandbox). */
  async function finish(ids: string[]): Promise<void> {
    const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
    const pending = new Set(ids);
    let done!: () => void;
    const all = new Promise<void>((r) => (done = r));
    const end = (id: string | undefined) => id && pending.delete(id) && pending.size === 0 && done();
    const worker = new Worker(
      QUEUE,
      async (job) => {
        if (job.id!.startsWith("fails")) throw new Error("no");
        return emptyResult("completed", "");
      },
      { connection },
    );
    worker.on("completed", (job) => end(job.id));
    worker.on("failed", (job) => end(job?.id));
    await all;
    await worker.close();
    connection.disconnect();
  }

  it("a completed or failed job is queued again, its cancel mark and result record gone; an unfinished one is left alone", async () => {
    const spec = (jobId: string) => ({ task: "t", repo: { path: CLAMP }, jobId, attempts: 1 });
    await client.enqueueBatch([spec("done-1"), spec("fails-1")]);
    await finish(["done-1", "fails-1"]);
    expect(await client.queue.getJobState("done-1")).toBe("completed");
    expect(await client.queue.getJobState("fails-1")).toBe("failed");

    for (const id of ["done-1", "fails-1"]) {
      await client.redis.set(k.cancel(id), "1");
      await client.redis.set(k.result(id), JSON.stringify(emptyResult("cancelled", "old")));
      expect(await client.retry(id)).toEqual({ retried: true });
      expect(await client.redis.exists(k.cancel(id), k.result(id))).toBe(0);
      expect(await client.queue.getJobState(id)).toBe("waiting");
    }

    // Waiting now: nothing is done, its state is said, and a mark set since stays.
    await client.redis.set(k.cancel("done-1"), "1");
    expect(await client.retry("done-1")).toEqual({ retried: false, state: "waiting" });
    expect(await client.redis.exists(k.cancel("done-1"))).toBe(1);

    await expect(client.retry("no-such-job")).rejects.toBeInstanceOf(JobNotFoundError);
  });
});
