// A spec past the bounds the queue's workers publish (src/queue/worker-bounds.ts) is refused at
// enqueue, naming the bound and the worker, by the CLI (exit 2, in terms of its flag) and by the
// library (WorkerBoundsError); with no worker it is enqueued as before. Real Redis, a real worker.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { join } from "node:path";
import { PatchbayClient } from "../../src/queue/client.js";
import { keys } from "../../src/queue/keys.js";
import { WorkerBoundsError } from "../../src/queue/worker-bounds.js";
import { ensureBuilt, patchbay, ROOT } from "../support/cli-helpers.js";
import { LOCAL_WORKER_ENV } from "../support/backend.js";
import { startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";

const CLAMP = join(ROOT, "examples/clamp");
const K = keys("q-bounds");

describe("the workers' published bounds, checked at enqueue", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let worker: WorkerProc;
  const q = "q-bounds";

  beforeAll(async () => {
    await ensureBuilt();
    redis = await startRedis();
    worker = startWorkerProc({
      ...LOCAL_WORKER_ENV,
      ANTHROPIC_API_KEY: "test-key",
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: q,
      PATCHBAY_WORKER_ID: "bounded-1",
      PATCHBAY_MAX_TIMEOUT_SEC: "3600",
    });
    await worker.waitFor(/ready: queue/, 60_000);
  }, 120_000);

  afterAll(async () => {
    await worker?.stop();
    await redis?.stop();
  });

  it("enqueue --timeout past the worker's bound: exit 2 at once, naming the bound and the worker", async () => {
    const r = await patchbay(
      ["enqueue", "--repo", CLAMP, "--task", "t", "--timeout", "100000", "--queue", q, "--redis-url", redis.url],
      {},
    );
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(
      "--timeout: 100000 is over the bound of 3600 that worker bounded-1 of this queue publishes (PATCHBAY_MAX_TIMEOUT_SEC on the worker raises it)",
    );
    const c = new PatchbayClient({ redisUrl: redis.url, queueName: q });
    try {
      expect(await c.queue.getWaitingCount()).toBe(0); // nothing enqueued
      const err = await c.enqueue({ task: "t", repo: { path: CLAMP }, timeoutSec: 100000 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(WorkerBoundsError);
      expect((err as Error).message).toMatch(/timeoutSec: 100000 is over the bound of 3600 that worker bounded-1/);
    } finally {
      await c.close();
    }
  });

  it("within the bound, or on a queue where no worker published any, it is enqueued as before", async () => {
    const within = await patchbay(
      ["enqueue", "--repo", CLAMP, "--task", "t", "--timeout", "600", "--queue", q, "--redis-url", redis.url],
      {},
    );
    expect(within.code, within.stderr).toBe(0);
    const none = await patchbay(
      [
        "enqueue",
        "--repo",
        CLAMP,
        "--task",
        "t",
        "--timeout",
        "100000",
        "--queue",
        "q-no-worker",
        "--redis-url",
        redis.url,
      ],
      {},
    );
    expect(none.code, none.stderr).toBe(0);
  });

  it("a forged heartbeat key: its id reaches the terminal as safe text, its stale or absurd bounds are ignored", async () => {
    const c = new PatchbayClient({ redisUrl: redis.url, queueName: q });
    try {
      const fresh = JSON.stringify({ at: Date.now(), everyMs: 10_000, bounds: { timeoutSec: 1000 } });
      await c.redis.set(K.heartbeat("\x1b]0;PWNED\x07\x1b[2J\u202eevil"), fresh, "EX", 60);
      await c.redis.set(K.heartbeat("stale"), JSON.stringify({ at: 1, bounds: { timeoutSec: 1 } })); // no expiry
      await c.redis.set(
        K.heartbeat("absurd"),
        JSON.stringify({ at: Date.now(), bounds: { timeoutSec: -1 } }),
        "EX",
        60,
      );
      const r = await patchbay(
        ["enqueue", "--repo", CLAMP, "--task", "t", "--timeout", "5000", "--queue", q, "--redis-url", redis.url],
        {},
      );
      expect(r.code, r.stderr).toBe(2); // over the forged 1000 and bounded-1's 3600: both named, escaped
      expect(r.stderr).not.toMatch(/[\x1b\x07\u202e]/);
      expect(r.stderr).toContain("\uFFFDevil"); // the escape sequences gone whole, the bidi override made visible
      expect(r.stderr).not.toMatch(/stale|absurd/); // neither refuses anything
      const ok = await patchbay(
        ["enqueue", "--repo", CLAMP, "--task", "t", "--timeout", "60", "--queue", q, "--redis-url", redis.url],
        {},
      );
      expect(ok.code, ok.stderr).toBe(0);
    } finally {
      await c.redis.del(K.heartbeat("stale"), K.heartbeat("absurd"));
      await c.close();
    }
  });
});
