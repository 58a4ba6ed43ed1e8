// The warm pool (src/sandbox/pool.ts): a job takes a warm sandbox, the pool refills, a used
// sandbox is never handed out again; a worker's drain removes its pool; the reaper removes a dead
// worker's pool. Every sandbox here is scoped by its own queue label or owner.
//
// Backend: Docker (the hardened container and its image).
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../../src/agent/model.js";
import { loadConfig } from "../../../src/core/config/config.js";
import { prepareSandbox } from "../../../src/job/repo/load.js";
import { runJob } from "../../../src/job/run.js";
import { startWorker } from "../../../src/queue/worker.js";
import { docker } from "../../../src/backend/docker.js";
import { LABEL } from "../../../src/backend/owner.js";
import { POOL_LABEL, SandboxPool } from "../../../src/sandbox/pool.js";
import { startFakeAnthropic, type FakeAnthropic } from "../../support/fake-anthropic.js";
import { startRedis, startWorkerProc } from "../../support/cluster.js";
import { cgroupLimits, exists } from "../../support/sandbox.js";
import type { Sandbox } from "../../../src/sandbox/sandbox.js";
import { byTurn, clampScript } from "../../support/scripts.js";

const CLAMP = new URL("../../../examples/clamp", import.meta.url).pathname;
const tag = `pool-${process.pid}`;

/** Containers (running or not) with all these labels. */
async function containers(...labels: string[]): Promise<{ name: string; labels: Record<string, string> }[]> {
  const list = await docker().listContainers({ all: true, filters: { label: labels } });
  return list.map((c) => ({ name: c.Names[0]!.replace(/^\//, ""), labels: c.Labels }));
}

async function until(cond: () => Promise<boolean> | boolean): Promise<void> {
  while (!(await cond())) await sleep(100);
}

let fake: FakeAnthropic;
beforeAll(async () => {
  fake = await startFakeAnthropic(byTurn(clampScript()));
});
afterAll(async () => {
  await fake?.close();
});

describe("warm pool (real engine)", () => {
  it("a job takes a warm sandbox, the pool refills, and a used sandbox is never handed out again", async () => {
    const labels = { "patchbay.test": `${tag}-take` };
    const pool = new SandboxPool({ size: 1, labels });
    try {
      await until(() => pool.size === 1);
      const [warm] = await containers(`patchbay.test=${tag}-take`, POOL_LABEL);
      expect(warm).toBeDefined();
      const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
      const used: string[] = [];
      for (let i = 0; i < 2; i++) {
        // Refilled (in the background) before the next job asks.
        await until(() => pool.size === 1);
        let container = "";
        const r = await runJob(
          { task: `clamp ${i}`, repo: { path: CLAMP } },
          { model, pool, onEvent: (e) => e.type === "sandbox_ready" && (container = e.container) },
        );
        expect(r.status).toBe("completed");
        expect(r.filesChanged).toEqual(["clamp.py"]);
        used.push(container);
        expect(await exists("container", container)).toBe(false); // removed with the job, never back in the pool
      }
      expect(used[0]).toBe(warm!.name);
      expect(used[1]).not.toBe(used[0]);
      expect(pool.stats).toMatchObject({ taken: 2, missed: 0 });
      // A kind the pool does not hold is a miss (the job creates its own), and is kept warm from then on.
      expect(pool.take({ limits: { pids: 200 } }, 60)).toBeUndefined();
      await until(() => pool.size === 2);
      const other = pool.take({ limits: { pids: 200 } }, 60)!;
      try {
        expect((await cgroupLimits(other)).pids).toBe(200);
        // One whose deadline is too near for the job is not handed out.
        await until(() => pool.size === 2);
        expect(pool.take({ limits: { pids: 200 } }, 7 * 24 * 3600)).toBeUndefined();
      } finally {
        await other.destroy();
      }
    } finally {
      await pool.close();
    }
    expect(await containers(`patchbay.test=${tag}-take`)).toEqual([]);
  }, 300_000);

  it("a warm sandbox is prepared while it waits (tools probed, the private git store made); a prepare that fails still leaves it usable", async () => {
    const store = (sb: Sandbox) =>
      sb.exec(["test", "-f", "/patchbay/git/HEAD"], { user: "0:0" }).then((r) => r.exitCode);
    const ok = new SandboxPool({ size: 1, labels: { "patchbay.test": `${tag}-prep` }, prepare: prepareSandbox });
    const failing = new SandboxPool({
      size: 1,
      labels: { "patchbay.test": `${tag}-prep` },
      prepare: () => Promise.reject(new Error("boom")),
    });
    try {
      await until(() => ok.size === 1 && failing.size === 1);
      const a = ok.take({}, 60)!;
      const b = failing.take({}, 60)!;
      try {
        expect(await store(a)).toBe(0);
        expect(await a.splitsStdin()).toBe(true); // the image's tools known before any repo load
        expect(await store(b)).toBe(1); // not made: the job's own baseline makes it
        expect(await b.splitsStdin()).toBe(false); // not probed: the job's own load asks
        expect((await b.exec(["true"])).exitCode).toBe(0);
      } finally {
        await Promise.all([a.destroy(), b.destroy()]);
      }
    } finally {
      await Promise.all([ok.close(), failing.close()]);
    }
    expect(await containers(`patchbay.test=${tag}-prep`)).toEqual([]);
  }, 180_000);

  describe("with a worker", () => {
    let redis: Awaited<ReturnType<typeof startRedis>>;
    beforeAll(async () => {
      redis = await startRedis();
    });
    afterAll(async () => {
      await redis?.stop();
    });

    it("a worker keeps its pool warm (labelled with its owner and queue) and its drain removes it", async () => {
      const queueName = `${tag}-drain`;
      const logs: string[] = [];
      const worker = await startWorker({ redisUrl: redis.url, queueName, concurrency: 2, log: (l) => logs.push(l) });
      try {
        await until(async () => (await containers(`${LABEL.queue}=${queueName}`, POOL_LABEL)).length === 2);
        const pooled = await containers(`${LABEL.queue}=${queueName}`, POOL_LABEL);
        expect(pooled.every((c) => c.labels[LABEL.worker] === worker.id)).toBe(true);
      } finally {
        await worker.shutdown(5000);
      }
      expect(await containers(`${LABEL.queue}=${queueName}`)).toEqual([]);
      expect(logs.join("\n")).toMatch(/stopped/);
    }, 180_000);

    it("the reaper removes a dead worker's pool", async () => {
      const queueName = `${tag}-dead`;
      const w = startWorkerProc({
        REDIS_URL: redis.url,
        PATCHBAY_QUEUE: queueName,
        PATCHBAY_CONCURRENCY: "1",
        PATCHBAY_POOL: "2",
        PATCHBAY_REAP_MS: "1000",
      });
      await w.waitFor(new RegExp(`ready: queue ${queueName}`), 120_000);
      await until(async () => (await containers(`${LABEL.queue}=${queueName}`, POOL_LABEL)).length === 2);
      const pooled = await containers(`${LABEL.queue}=${queueName}`, POOL_LABEL);
      const names = pooled.map((c) => c.name);
      w.proc.kill("SIGKILL");
      await w.exited;
      // Not checked here that both outlived it: another test file's worker on this engine may reap
      // them at once (any worker judges a local owner by its pid); the deadlines below say how.
      // A live worker of the queue on this host judges the dead one by its pid and reaps its pool
      // (healthy, so its reaper runs: with credentials, and every second).
      const config = loadConfig({ ...process.env, ANTHROPIC_API_KEY: "test-key", PATCHBAY_REAP_MS: "1000" });
      const survivor = await startWorker({ redisUrl: redis.url, queueName, concurrency: 1, pool: 0, config });
      try {
        await until(async () => (await containers(`${LABEL.queue}=${queueName}`)).length === 0);
        await until(async () => !(await Promise.all(names.map((n) => exists("volume", `${n}-ws`)))).some(Boolean));
        // Gone long before their deadline, so reaped as a dead owner's. Not necessarily by this
        // reaper: any worker on this host judges a local owner by its pid, and in a parallel run
        // other test files' workers share the engine (CI once saw this one reap 1 of the 2).
        const deadlines = pooled.map((c) => Number(c.labels[LABEL.deadline]));
        expect(deadlines.every((d) => d * 1000 > Date.now() + 60_000)).toBe(true);
      } finally {
        await survivor.shutdown(5000);
      }
    }, 300_000);
  });
});
