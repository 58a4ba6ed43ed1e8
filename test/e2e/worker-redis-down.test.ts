// Issue 41: a worker's shutdown is bounded by its drain deadline whatever Redis does. A real worker
// process (`patchbay worker`, Docker sandboxes) runs a job whose model never answers, so the job is
// in flight with its sandbox (and the warm pool's sandboxes beside it); the test kills Redis by its
// pid (SIGKILL: no goodbye on any socket), then sends the worker SIGTERM. The worker must exit
// within PATCHBAY_DRAIN_MS plus its bounded clean-up, with every sandbox it made removed, and say
// which job it left. Once with one redis-server, once with a whole Sentinel group (master, replica
// and three sentinels) killed. Before: the worker was still alive minutes later.
//
// Backend: Docker (worker processes whose drain must remove their containers and volumes with Redis
// gone).
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import { docker } from "../../src/backend/docker.js";
import { LABEL } from "../../src/backend/owner.js";
import { removeQueueSandboxes, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { startFakeAnthropic, type FakeAnthropic } from "../support/fake-anthropic.js";
import { startRedisServer, startSentinelGroup, type RedisProc } from "../support/redis-topology.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const DRAIN_MS = 3000;
/** The documented bound on the clean-up after the deadline (src/queue/drain.ts CLEANUP_MS). */
const CLEANUP_MS = 10_000;
/** Room for a loaded machine on top: the worker must be gone by then, not minutes later. */
const SLACK_MS = 15_000;

/** The containers and volumes of a queue's sandboxes, by label. */
async function sandboxesOf(queue: string): Promise<string[]> {
  const filters = { label: [`${LABEL.queue}=${queue}`] };
  const containers = (await docker().listContainers({ all: true, filters })).map((c) => `container ${c.Names[0]}`);
  const volumes = ((await docker().listVolumes({ filters })).Volumes ?? []).map((v) => `volume ${v.Name}`);
  return [...containers, ...volumes];
}

/** Resolves with the exit code, or with "alive" once `ms` passed (the worker is then killed by its pid). */
async function exitWithin(w: WorkerProc, ms: number): Promise<number | null | "alive"> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"alive">((r) => (timer = setTimeout(() => r("alive"), ms)));
  const code = await Promise.race([w.exited, late]);
  clearTimeout(timer);
  if (code === "alive") await w.stop("SIGKILL");
  return code;
}

describe("a worker's shutdown with Redis gone", () => {
  let fake: FakeAnthropic;
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));

  beforeAll(async () => {
    // Every model call waits until the test ends: the job stays in flight with its sandbox.
    fake = await startFakeAnthropic(async () => {
      await held;
      return { kind: "error", status: 500, type: "api_error", message: "the test is over" };
    });
  });
  afterAll(async () => {
    release();
    await fake?.close();
  });

  /** `held`: a job in flight whose model never answers; else the worker is idle (its warm sandbox only). */
  async function drainWithRedisKilled(url: string, kill: () => Promise<void>, held = true): Promise<void> {
    const queue = `redis-down-${randomBytes(3).toString("hex")}`;
    const workerId = `redis-down-worker-${randomBytes(3).toString("hex")}`;
    const worker = startWorkerProc({
      REDIS_URL: url,
      PATCHBAY_QUEUE: queue,
      PATCHBAY_WORKER_ID: workerId,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_DRAIN_MS: String(DRAIN_MS),
      PATCHBAY_CONCURRENCY: "1",
      PATCHBAY_POOL: "1",
    });
    try {
      await worker.waitFor(new RegExp(`ready: queue ${queue}`), 120_000);
      const id = `held-${queue}`;
      if (held) {
        const client = new PatchbayClient({ redisUrl: url, queueName: queue });
        const asked = fake.requests.length;
        await client.enqueue({ task: "A job whose model never answers.", repo: { path: CLAMP }, jobId: id });
        await client.close();
        // The model was asked: the job's sandbox is up (and the pool made another beside it).
        for (let t0 = Date.now(); fake.requests.length === asked;) {
          if (Date.now() - t0 > 120_000) throw new Error(`the job never asked the model:\n${worker.log()}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      } else {
        // its warm sandbox is made in the background: its volume first, then its container
        const containers = async () => (await sandboxesOf(queue)).filter((s) => s.startsWith("container"));
        for (let t0 = Date.now(); (await containers()).length === 0;) {
          if (Date.now() - t0 > 120_000) throw new Error(`no warm sandbox:\n${worker.log()}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      const before = await sandboxesOf(queue);
      expect(before.filter((s) => s.startsWith("container")).length, before.join("\n")).toBeGreaterThanOrEqual(1);

      await kill();
      await worker.waitFor(/redis: .*reconnecting/, 30_000); // the worker saw Redis go
      const t0 = Date.now();
      worker.proc.kill("SIGTERM");
      const code = await exitWithin(worker, DRAIN_MS + CLEANUP_MS + SLACK_MS);
      const log = worker.log();
      if (held) {
        expect(code, `exit after ${Date.now() - t0} ms:\n${log}`).toBe(1); // it says which job it could not hand back
        expect(log).toMatch(/deadline passed: abandoning 1 job\b/);
        expect(log).toMatch(new RegExp(`stopped with Redis unreachable: job ${id} was not handed back`));
      } else {
        expect(code, `exit after ${Date.now() - t0} ms:\n${log}`).toBe(0); // nothing was left undone
        expect(log).toMatch(/\] stopped$/m);
      }
      expect(await sandboxesOf(queue), log).toEqual([]);
    } finally {
      await worker.stop("SIGKILL");
      await removeQueueSandboxes(queue);
    }
  }

  it("one redis-server, SIGKILLed: the worker exits within its deadline and removes its sandboxes", async () => {
    let redis: RedisProc | undefined = await startRedisServer();
    try {
      await drainWithRedisKilled(redis.url, () => redis!.kill("SIGKILL"));
    } finally {
      await redis?.stop();
      redis = undefined;
    }
  }, 300_000);

  it("an idle worker (its warm sandbox only) behind a whole Sentinel group, SIGKILLed: exits 0 within its deadline, its sandbox removed", async () => {
    const group = await startSentinelGroup();
    try {
      await drainWithRedisKilled(
        group.url,
        async () => {
          for (const p of [...group.sentinels, group.master, group.replica]) await p.kill("SIGKILL");
        },
        false,
      );
    } finally {
      await group.stop();
    }
  }, 300_000);

  // The sweep removes boxes by label; two workers with one id (PATCHBAY_WORKER_ID given twice, or
  // two startWorker calls in one process) on one queue and Redis must not sweep each other's.
  it("two workers with the same id on one queue: one's drain sweeps its own boxes, not the other's", async () => {
    const redis = await startRedisServer();
    const queue = `redis-down-${randomBytes(3).toString("hex")}`;
    const env = {
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: queue,
      PATCHBAY_WORKER_ID: `shared-${queue}`,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_DRAIN_MS: String(DRAIN_MS),
      PATCHBAY_CONCURRENCY: "1",
      PATCHBAY_POOL: "1",
    };
    const a = startWorkerProc(env);
    const b = startWorkerProc(env);
    try {
      await a.waitFor(new RegExp(`ready: queue ${queue}`), 120_000);
      await b.waitFor(new RegExp(`ready: queue ${queue}`), 120_000);
      const containers = async () => (await sandboxesOf(queue)).filter((s) => s.startsWith("container"));
      for (let t0 = Date.now(); (await containers()).length < 2;) {
        if (Date.now() - t0 > 120_000) throw new Error(`two warm sandboxes never came:\n${a.log()}\n${b.log()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      a.proc.kill("SIGTERM");
      expect(await exitWithin(a, DRAIN_MS + CLEANUP_MS + SLACK_MS), a.log()).toBe(0);
      expect((await containers()).length, `${a.log()}\n${b.log()}`).toBe(1); // b's warm box, still there
    } finally {
      await a.stop("SIGKILL");
      await b.stop("SIGKILL");
      await removeQueueSandboxes(queue);
      await redis.stop();
    }
  }, 300_000);

  it("a whole Sentinel group (master, replica, sentinels), SIGKILLed: the same", async () => {
    const group = await startSentinelGroup();
    try {
      await drainWithRedisKilled(group.url, async () => {
        for (const p of [...group.sentinels, group.master, group.replica]) await p.kill("SIGKILL");
      });
    } finally {
      await group.stop();
    }
  }, 300_000);
});
