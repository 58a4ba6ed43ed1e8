// The worker in-process: a job that ignores its timeout (a model that misbehaves), and the
// worker's reaper judging owners on other hosts by their heartbeats.
import { Redis } from "ioredis";
import type { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Model } from "../src/agent/model.js";
import { keys } from "../src/queue/keys.js";
import { PatchbayClient } from "../src/queue/client.js";
import { docker } from "../src/runtime/docker.js";
import { LABEL } from "../src/runtime/owner.js";
import { Sandbox } from "../src/sandbox/sandbox.js";
import { startWorker, type WorkerHandle } from "../src/queue/worker.js";
import { exists } from "./support/sandbox.js";
import { startRedis } from "./support/cluster.js";

const CLAMP = new URL("../examples/clamp", import.meta.url).pathname;

interface DockerEvent {
  Type: string;
  Action: string;
  Actor: { ID: string; Attributes: Record<string, string> };
}

/** Docker's event stream from now on; `next` resolves on the first matching event, past or future. */
async function dockerEvents(filters: Record<string, string[]>) {
  const stream = (await docker().getEvents({ filters })) as unknown as Readable;
  const seen: DockerEvent[] = [];
  const waiters: { pred: (e: DockerEvent) => boolean; resolve: (e: DockerEvent) => void }[] = [];
  let carry = "";
  stream.on("data", (chunk: Buffer) => {
    const lines = (carry + chunk.toString("utf8")).split("\n");
    carry = lines.pop()!;
    for (const line of lines.filter(Boolean)) {
      const e = JSON.parse(line) as DockerEvent;
      seen.push(e);
      for (const w of [...waiters]) if (w.pred(e)) (waiters.splice(waiters.indexOf(w), 1), w.resolve(e));
    }
  });
  return {
    next: (pred: (e: DockerEvent) => boolean) =>
      new Promise<DockerEvent>((resolve) => {
        const hit = seen.find(pred);
        if (hit) resolve(hit);
        else waiters.push({ pred, resolve });
      }),
    close: () => stream.destroy(),
  };
}


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
    // The sandbox is removed in the background after the result: its removal is awaited through
    // Docker's events, not guessed by listing at some moment.
    const events = await dockerEvents({ type: ["container", "volume"], event: ["destroy"] });
    try {
      // timeoutSec counts the sandbox's start too: long enough that the hung model is reached.
      const id = await client.enqueue({ task: "hang", repo: { path: CLAMP }, timeoutSec: 10 });
      const result = await client.waitForResult(id, { timeoutMs: 60_000 });
      expect(result.status).toBe("timeout");
      expect(result.error).toMatch(/did not stop at its 10 s timeout; its sandbox was killed/);
      // The job's container by its transcript (a warm pool's sandbox has no job label).
      let name = "";
      for await (const e of client.watch(id, { follow: false })) if (e.type === "sandbox_ready") name = e.container;
      await events.next((e) => e.Type === "container" && e.Actor.Attributes.name === name);
      await events.next((e) => e.Type === "volume" && e.Actor.ID === `${name}-ws`);
      expect(await exists("container", name)).toBe(false);
      expect(await exists("volume", `${name}-ws`)).toBe(false);
      const left = await docker().listContainers({ all: true, filters: { name: [name] } });
      expect(left.filter((c) => c.Names.includes(`/${name}`))).toEqual([]);
      const types = [];
      for await (const e of client.watch(id, { follow: false })) types.push(e.type);
      expect(types.at(-1)).toBe("job_finished");
    } finally {
      events.close();
    }
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
    process.env.PATCHBAY_REAP_MS = "300";
    try {
      worker = await startWorker({ redisUrl: redis.url, queueName: QUEUE, concurrency: 1, model: () => ({ complete: () => new Promise(() => {}) }), log: (l) => log.push(l) });
    } finally {
      delete process.env.PATCHBAY_REAP_MS;
    }
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
    const kept = await Sandbox.create({ owner: alive, labels });
    // Another queue's owner without a heartbeat is not this worker's to judge.
    const foreign = await Sandbox.create({ owner: dead, labels: { ...labels, [LABEL.queue]: "some-other-queue" } });
    // Created last: once the reaper removed it, a pass that saw all three is over.
    const reaped = await Sandbox.create({ owner: dead, labels });
    await r.del(keys(QUEUE).heartbeat(dead)); // its owner stops beating
    try {
      while (await exists("container", reaped.name)) await new Promise((ok) => setTimeout(ok, 200));
      expect(await exists("container", kept.name)).toBe(true);
      expect(await exists("volume", `${kept.name}-ws`)).toBe(true);
      expect((await kept.shell.run("echo ok")).output).toBe("ok\n");
      expect(await exists("container", foreign.name)).toBe(true);
      expect(log.join("\n")).toMatch(/reaped 1 containers/);
    } finally {
      await Promise.all([kept.destroy(), foreign.destroy(), reaped.destroy()]);
    }
  });
});
