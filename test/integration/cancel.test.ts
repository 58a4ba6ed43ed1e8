// Cancellation through a worker (in-process, real Redis and SDK, on the local backend: see
// test/support/backend.ts): each of the two paths alone (the Redis channel, and the poll of the
// cancel mark), a job cancelled while it waits, and jobs cancelled while workers take them.
//
// Backend: local (in-process workers: `localWorkerConfig()`).
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { PatchbayClient } from "../../src/queue/client.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { startWorker, type WorkerHandle } from "../../src/queue/worker.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic } from "../support/fake-anthropic.js";
import { startRedis } from "../support/cluster.js";
import { jobSandbox, localWorkerConfig, untilInSandbox } from "../support/backend.js";
import { byTurn, taskOf } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const LONG = [
  reply(toolUse("bash", { command: "echo x >> /workspace/clamp.py; sleep 300" })),
  reply(text("never asked")),
];

let redis: Awaited<ReturnType<typeof startRedis>>;
let fake: FakeAnthropic;
let worker: WorkerHandle | undefined;
let client: PatchbayClient | undefined;
const logs: string[] = [];

beforeAll(async () => {
  redis = await startRedis();
  fake = await startFakeAnthropic(byTurn(LONG));
});
afterEach(async () => {
  await client?.close();
  await worker?.shutdown(5000);
  client = worker = undefined;
});
afterAll(async () => {
  await fake?.close();
  await redis?.stop();
});

/** A worker of its own queue on the local backend, configured by `env` over this environment. */
async function start(queueName: string, env: Record<string, string>) {
  worker = await startWorker({
    redisUrl: redis.url,
    queueName,
    concurrency: 1,
    model: () => new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 }),
    log: (l) => logs.push(`${queueName}: ${l}`),
    config: localWorkerConfig(env),
  });
  client = new PatchbayClient({ redisUrl: redis.url, queueName });
  return client;
}

async function waitForEvent(c: PatchbayClient, id: string, type: TranscriptEvent["type"]) {
  for await (const e of c.watch(id)) if (e.type === type) return e;
  throw new Error(`job ${id} ended without a ${type} event`);
}

/** Resolves once the job's long command runs (its first step shows in the sandbox). */
async function running(c: PatchbayClient, id: string) {
  await waitForEvent(c, id, "tool_call");
  await untilInSandbox("local", await jobSandbox(id, c), "grep -qx x /workspace/clamp.py");
}

async function transcript(c: PatchbayClient, id: string) {
  const events: TranscriptEvent[] = [];
  for await (const e of c.watch(id, { follow: false })) events.push(e);
  return events;
}

describe("cancelling a running job", () => {
  // Without the path under test a job would run on until its own timeout and end as "timeout".
  it("the poll alone (no Redis channel) cancels it", async () => {
    const c = await start("cancel-poll", { PATCHBAY_CANCEL_PUBSUB: "0", PATCHBAY_CANCEL_POLL_MS: "300" });
    const id = await c.enqueue({ task: "long job (poll)", repo: { path: CLAMP }, timeoutSec: 40 });
    await running(c, id);
    expect(await c.cancel(id)).toBe("signalled");
    const result = await c.waitForResult(id);
    expect(result).toMatchObject({ status: "cancelled", filesChanged: ["clamp.py"] });
    expect((await transcript(c, id)).find((e) => e.type === "tool_result")).toMatchObject({
      output: expect.stringMatching(/the command was stopped/),
    });
  });

  it("the Redis channel alone cancels it long before the next poll", async () => {
    // The poll comes every 60 s, the job's own timeout is 20 s: only the channel can cancel it.
    const c = await start("cancel-pubsub", { PATCHBAY_CANCEL_POLL_MS: "60000" });
    const id = await c.enqueue({ task: "long job (pubsub)", repo: { path: CLAMP }, timeoutSec: 20 });
    await running(c, id);
    expect(await c.cancel(id)).toBe("signalled");
    const result = await c.waitForResult(id);
    expect(result).toMatchObject({ status: "cancelled", filesChanged: ["clamp.py"] });
  });
});

describe("cancelling a job that waits in the queue", () => {
  it("ends it as cancelled at once, with the transcript a worker gives it: no sandbox, no model request", async () => {
    const c = await start("cancel-waiting", {});
    const runningId = await c.enqueue({ task: "long job (holds the only slot)", repo: { path: CLAMP } });
    await running(c, runningId);
    const waiting = await c.enqueue({ task: "waiting job to cancel", repo: { path: CLAMP } });
    expect((await c.status(waiting)).state).toBe("waiting");
    expect(await c.cancel(waiting)).toBe("cancelled");
    expect(await c.cancel(runningId)).toBe("signalled");
    expect((await c.waitForResult(runningId)).status).toBe("cancelled");
    const result = await c.waitForResult(waiting);
    expect(result).toMatchObject({
      status: "cancelled",
      turns: 0,
      error: "the job was cancelled before it started",
      patch: "",
    });
    expect((await transcript(c, waiting)).map((e) => e.type)).toEqual(["job_started", "job_finished"]);
    expect(fake.requests.filter((r) => /waiting job/.test(taskOf(r.body)))).toEqual([]);
  });
});

describe("cancelling jobs while workers take them", () => {
  it("each job either runs and is stopped by the mark, or is cancelled without running: never both, never lost (plain and prioritized)", async () => {
    const queueName = "cancel-race";
    worker = await startWorker({
      redisUrl: redis.url,
      queueName,
      concurrency: 3,
      model: () => new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 }),
      log: (l) => logs.push(`${queueName}: ${l}`),
      config: localWorkerConfig({}),
    });
    const c = (client = new PatchbayClient({ redisUrl: redis.url, queueName }));
    const task = (i: number) => `race job <${i}>`;
    // enqueue and cancel at once, while idle workers wait for exactly these jobs
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        const id = await c.enqueue({ task: task(i), repo: { path: CLAMP }, ...(i % 2 ? { priority: 1 + i } : {}) });
        return { i, id, cancel: await c.cancel(id) };
      }),
    );
    for (const { i, id, cancel } of outcomes) {
      const result = await c.waitForResult(id); // never lost: every one ends
      const types = (await transcript(c, id)).map((e) => e.type);
      expect(
        types.filter((t) => t === "job_finished"),
        `job ${i}`,
      ).toHaveLength(1);
      expect(
        types.filter((t) => t === "job_started"),
        `job ${i}`,
      ).toHaveLength(1);
      const asked = fake.requests.filter((r) => taskOf(r.body) === task(i)).length;
      if (cancel === "cancelled") {
        expect(result.error, `job ${i}`).toBe("the job was cancelled before it started");
        expect(types).toEqual(["job_started", "job_finished"]);
        expect(asked, `job ${i} ran after it was cancelled`).toBe(0);
        expect((await c.status(id)).attemptsMade).toBe(0);
      } else {
        expect(cancel, `job ${i}`).toBe("signalled"); // its command sleeps 300 s: it cannot have finished
        expect(result.status, `job ${i}`).toBe("cancelled");
      }
    }
  });
});
