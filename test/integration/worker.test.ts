// The worker in-process, on the local backend (test/support/backend.ts: this is the worker's
// logic, not Docker's): a job that ignores its timeout (a model that misbehaves), and the worker's
// reaper judging owners on other hosts by their heartbeats.
//
// Backend: local (in-process workers: `localWorkerConfig()`).
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Model } from "../../src/agent/model.js";
import { keys } from "../../src/queue/keys.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { LABEL } from "../../src/backend/owner.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";
import { startWorker, type WorkerHandle } from "../../src/queue/worker.js";
import { localBackend, localWorkerConfig, sandboxLeft } from "../support/backend.js";
import { startRedis } from "../support/cluster.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;

const sleep = (ms: number) => new Promise((ok) => setTimeout(ok, ms));

describe("worker hard deadline", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let worker: WorkerHandle;
  let client: PatchbayClient;
  // A model that never answers and ignores the abort signal, as a hung dependency would.
  const hung: Model = { complete: () => new Promise(() => {}) };

  beforeAll(async () => {
    redis = await startRedis();
    worker = await startWorker({
      redisUrl: redis.url,
      queueName: "hard",
      concurrency: 1,
      model: () => hung,
      log: () => {},
      config: localWorkerConfig({ PATCHBAY_HARD_GRACE_MS: "1500" }),
    });
    client = new PatchbayClient({ redisUrl: redis.url, queueName: "hard" });
  });
  afterAll(async () => {
    await client?.close();
    await worker?.shutdown(2000);
    await redis?.stop();
  });

  it("ends a job that does not stop at its timeout as timeout, and kills its sandbox", async () => {
    // timeoutSec counts the sandbox's start too: long enough that the hung model is reached.
    const id = await client.enqueue({ task: "hang", repo: { path: CLAMP }, timeoutSec: 10 });
    // The job's sandbox by its transcript (a warm pool's sandbox has no job label), there while the job runs.
    let name = "";
    for await (const e of client.watch(id)) if (e.type === "sandbox_ready" && (name = e.container)) break;
    expect(await sandboxLeft("local", name)).toBe(true);
    const result = await client.waitForResult(id, { timeoutMs: 60_000 });
    expect(result.status).toBe("timeout");
    expect(result.error).toMatch(/did not stop at its 10 s timeout; its sandbox was killed/);
    // It is removed in the background after the result: awaited as a condition (the test's timeout bounds it).
    while (await sandboxLeft("local", name)) await sleep(100);
    const types = [];
    for await (const e of client.watch(id, { follow: false })) types.push(e.type);
    expect(types.at(-1)).toBe("job_finished");
  });
});

describe("worker reaper: owners on other hosts", () => {
  const QUEUE = "owners";
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let worker: WorkerHandle;
  let r: Redis;
  const log: string[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    r = new Redis(redis.url);
    worker = await startWorker({
      redisUrl: redis.url,
      queueName: QUEUE,
      concurrency: 1,
      model: () => ({ complete: () => new Promise(() => {}) }),
      log: (l) => log.push(l),
      config: localWorkerConfig({ PATCHBAY_REAP_MS: "300" }),
    });
  });
  afterAll(async () => {
    await worker?.shutdown(2000);
    r?.disconnect();
    await redis?.stop();
  });

  it("keeps a sandbox whose owner on another host still beats, reaps one whose owner stopped beating", async () => {
    // Hosts that are not this one: other test files' reapers leave these alone (another host's
    // owner is trusted until its deadline unless it is a worker of their own queue), so only this
    // worker judges them.
    const alive = "pb-test-elsewhere-a:4242:beating";
    const dead = "pb-test-elsewhere-b:4243:silent";
    await r.set(keys(QUEUE).heartbeat(alive), String(Date.now()), "EX", 120);
    await r.set(keys(QUEUE).heartbeat(dead), String(Date.now()), "EX", 120); // until its sandbox is up
    const labels = { [LABEL.queue]: QUEUE, "patchbay.test": "1" };
    const backend = localBackend();
    const kept = await Sandbox.create({ backend, owner: alive, labels });
    // Another queue's owner without a heartbeat is not this worker's to judge.
    const foreign = await Sandbox.create({
      backend,
      owner: dead,
      labels: { ...labels, [LABEL.queue]: "some-other-queue" },
    });
    // Created last: once the reaper removed it, a pass that saw all three is over.
    const reaped = await Sandbox.create({ backend, owner: dead, labels });
    await r.del(keys(QUEUE).heartbeat(dead)); // its owner stops beating
    try {
      while (await sandboxLeft("local", reaped.name)) await sleep(200);
      expect(await sandboxLeft("local", kept.name)).toBe(true);
      expect(await kept.running()).toBe(true);
      expect((await kept.shell.run("echo ok")).output).toBe("ok\n");
      expect(await sandboxLeft("local", foreign.name)).toBe(true);
      expect(await foreign.running()).toBe(true);
      expect(log.join("\n")).toMatch(/reaped 1 container\b/);
    } finally {
      await Promise.all([kept.destroy(), foreign.destroy(), reaped.destroy()]);
    }
  });
});
