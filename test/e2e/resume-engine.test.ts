// The Docker engine restarted (crashed and back) mid-job, on a PRIVATE engine (test/support/engine.ts;
// the main engine is never touched): the job completes from its checkpoint with no model request
// paid twice (the issue allows 2 more) and the same patch, and nothing is left on the engine.
//
// Backend: Docker (private engines killed and restarted).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LABEL } from "../../src/backend/owner.js";
import { PatchbayClient } from "../../src/queue/client.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { startEngine, type Engine } from "../support/engine.js";
import { startFakeAnthropic, type FakeAnthropic } from "../support/fake-anthropic.js";
import { startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { resumePolicy } from "../support/resume-scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("the Docker engine restarted mid-job", { timeout: 600_000 }, () => {
  let engine: Engine;
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let policy: ReturnType<typeof resumePolicy>;
  let worker: WorkerProc | undefined;
  let client: PatchbayClient | undefined;

  beforeAll(async () => {
    engine = await startEngine("pb-resume");
    await engine.loadImage();
    redis = await startRedis();
    policy = resumePolicy(10, 8); // the slow command sleeps 8 s (again, when a resumed attempt runs it again)
    fake = await startFakeAnthropic(policy.policy);
  }, 600_000);
  afterAll(async () => {
    await worker?.stop("SIGKILL");
    await client?.close();
    await fake?.close();
    await redis?.stop();
    await engine?.stop();
  }, 300_000);

  it("completes from its checkpoint, no model request paid twice, the same patch; no container or volume is left", async () => {
    const queue = `resume-engine-${process.pid}`;
    const workerId = `pb-test-resume-engine:${queue}:w`;
    worker = startWorkerProc({
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: queue,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      DOCKER_HOST: engine.host,
      PATCHBAY_WORKER_ID: workerId,
      PATCHBAY_CONCURRENCY: "1",
      PATCHBAY_REAP_MS: "2000",
      PATCHBAY_HEALTH_MAX_MS: "2000",
      // No warm pool: the leak check below counts every labelled container while the worker is alive,
      // and a pool refilled after the job is a live sandbox, not a leak (test/sandbox-pool covers the pool).
      PATCHBAY_POOL: "0",
    });
    await worker.waitFor(new RegExp(`ready: queue ${queue}`), 120_000);
    client = new PatchbayClient({ redisUrl: redis.url, queueName: queue });

    const plainTask = "ten turns on the private engine (uninterrupted)";
    const plain = await client.waitForResult(await client.enqueue({ task: plainTask, repo: { path: CLAMP } }), {
      timeoutMs: 300_000,
    });
    expect(plain.status).toBe("completed");
    const base = policy.count(plainTask);

    const task = "ten turns on the private engine, restarted in slow=5";
    const id = await client.enqueue({ task, repo: { path: CLAMP }, attempts: 3 });
    for await (const e of client.watch(id)) if (e.type === "tool_call" && e.turn === 5) break;
    await engine.restart(); // every process of the engine killed -9, then started again
    const result = await client.waitForResult(id, { timeoutMs: 300_000 });
    console.log(`engine restarted at turn 5: ${policy.count(task)} model requests (uninterrupted: ${base})`);
    if (policy.count(task) !== base) {
      const all: TranscriptEvent[] = [];
      for await (const e of client.watch(id)) all.push(e);
      console.log(all.map((e) => JSON.stringify(e).slice(0, 300)).join("\n"));
    }
    expect(result.status).toBe("completed");
    // Turn 5's answer was kept before its command ran: usually no request is paid twice. The issue
    // allows 2 more: when the shell's stream breaks a moment before dockerd dies, the container
    // still looks running, the model is asked for turn 6, and the resumed attempt asks again.
    expect(policy.count(task)).toBeGreaterThanOrEqual(base);
    expect(policy.count(task)).toBeLessThanOrEqual(base + 2);
    expect(result.patch).toBe(plain.patch);
    const events: TranscriptEvent[] = [];
    for await (const e of client.watch(id)) events.push(e);
    expect(events.find((e) => e.type === "resume")).toMatchObject({ restored: true, fromAttempt: 1, turns: 5 });
    expect(events.filter((e) => e.type === "job_finished" && e.status === "completed")).toHaveLength(1);

    // Nothing leaked: the sandbox the restart killed is removed by its own worker once the engine is back.
    const labelled = async () => {
      // This queue's sandboxes only: the engine's data-root outlives a run, and an earlier run's are not this one's leak.
      const c = await engine.docker.listContainers({
        all: true,
        filters: { label: [LABEL.managed, `${LABEL.queue}=${queue}`] },
      });
      const { Volumes } = await engine.docker.listVolumes({ filters: { label: [LABEL.managed] } });
      return c.length + (Volumes ?? []).length;
    };
    for (const t0 = Date.now(); (await labelled()) > 0; await sleep(500)) {
      if (Date.now() - t0 > 120_000)
        throw new Error(`labelled containers or volumes left on the engine:\n${worker.log()}`);
    }
    expect(await labelled()).toBe(0);
  });
});
