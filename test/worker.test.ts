// The worker in-process, for what needs a model that misbehaves: a job that ignores its timeout.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Model } from "../src/agent/model.js";
import { PatchbayClient } from "../src/queue.js";
import { docker, LABEL } from "../src/sandbox/docker.js";
import { startWorker, type WorkerHandle } from "../src/worker.js";
import { startRedis } from "./support/cluster.js";

const CLAMP = new URL("../examples/clamp", import.meta.url).pathname;

describe("worker hard deadline", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let worker: WorkerHandle;
  let client: PatchbayClient;
  // A model that never answers and ignores the abort signal, as a hung dependency would.
  const hung: Model = { complete: () => new Promise(() => {}) };

  beforeAll(async () => {
    redis = await startRedis();
    process.env.PATCHBAY_HARD_GRACE_MS = "1500";
    worker = await startWorker({ redisUrl: redis.url, queueName: "hard", concurrency: 1, model: () => hung, log: () => {} });
    client = new PatchbayClient({ redisUrl: redis.url, queueName: "hard" });
  });
  afterAll(async () => {
    delete process.env.PATCHBAY_HARD_GRACE_MS;
    await client?.close();
    await worker?.shutdown(2000);
    await redis?.stop();
  });

  it("ends a job that does not stop at its timeout as timeout, and kills its sandbox", async () => {
    const id = await client.enqueue({ task: "hang", repo: { path: CLAMP }, timeoutSec: 2 });
    const t0 = Date.now();
    const result = await client.waitForResult(id, { timeoutMs: 30_000 });
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(result.status).toBe("timeout");
    expect(result.error).toMatch(/did not stop at its 2 s timeout; its sandbox was killed/);
    const left = await docker().listContainers({ all: true, filters: { label: [`${LABEL.job}=${id}`, `${LABEL.queue}=hard`] } });
    expect(left).toEqual([]);
    const events = [];
    for await (const e of client.watch(id, { follow: false })) events.push(e.type);
    expect(events.at(-1)).toBe("job_finished");
  });
});
