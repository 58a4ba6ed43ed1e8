// The parts startWorker composes, each alone against a private Redis (no Docker): the heartbeat and
// the owner verdicts the reaper asks (src/queue/heartbeat.ts), the cancel listener's channel and poll
// (src/queue/cancel-listener.ts), and the reaper loop's rounds (src/queue/reaper-loop.ts, on a
// backend that lists boxes from a table). The worker tests show them together: worker (the reaper
// by heartbeats), cancel (each cancel path through a real job), e2e-reliability (reaping a dead
// worker's sandboxes, the drain).
import { Redis } from "ioredis";
import { spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenForCancels } from "../../src/queue/cancel-listener.js";
import { deploymentId, ownerAliveFor, startHeartbeat } from "../../src/queue/heartbeat.js";
import { keys } from "../../src/queue/keys.js";
import { startReaperLoop } from "../../src/queue/reaper-loop.js";
import { LABEL, processLabel, processOwnerId } from "../../src/backend/owner.js";
import type { ReapReport, Backend } from "../../src/backend/types.js";
import { startRedis } from "../support/cluster.js";

let server: Awaited<ReturnType<typeof startRedis>>;
let redis: Redis;
const opened: Redis[] = [];
const connection = () => {
  const r = new Redis(server.url, { maxRetriesPerRequest: 1 });
  opened.push(r);
  return r;
};

beforeAll(async () => {
  server = await startRedis();
  redis = connection();
});
afterAll(async () => {
  for (const r of opened) r.disconnect();
  await server?.stop();
});

const aborted = (ctl: AbortController) =>
  new Promise<unknown>((resolve) =>
    ctl.signal.addEventListener("abort", () => resolve(ctl.signal.reason), { once: true }),
  );

describe("heartbeat", () => {
  it("beats at once with a TTL of three beats, and a clean exit removes it", async () => {
    const k = keys("hb");
    const hb = await startHeartbeat(redis, k.heartbeat("w1"), 2000);
    try {
      expect(Number(await redis.get(k.heartbeat("w1")))).toBeGreaterThan(Date.now() - 60_000);
      const ttl = await redis.ttl(k.heartbeat("w1"));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(6);
    } finally {
      hb.stop();
    }
    await hb.remove();
    expect(await redis.exists(k.heartbeat("w1"))).toBe(0);
  });

  it("one deployment id per Redis, whichever worker asks first", async () => {
    const k = keys("dep");
    const [a, b] = await Promise.all([deploymentId(redis, k), deploymentId(connection(), k)]);
    expect(a).toMatch(/^[0-9a-f]{16}$/);
    expect(b).toBe(a);
    expect(await deploymentId(redis, keys("dep"))).toBe(a);
  });
});

describe("ownerAliveFor", () => {
  const k = keys("own");
  const alive = (owner: string, labels: Record<string, string>) =>
    ownerAliveFor({ id: "me:1:aa", queueName: "own", deployment: "d1", redis, k })(owner, labels);
  const ours = { [LABEL.queue]: "own", [LABEL.redis]: "d1" };
  // A pid that was and is no more, in this pid namespace: its process label says so.
  const gone = (() => {
    const p = spawnSync("true");
    return { [LABEL.process]: processLabel()[LABEL.process]!.replace(/\/\d+\/\d+$/, `/${p.pid}/1`) };
  })();

  it("a worker of this queue and deployment on another host lives while its heartbeat does", async () => {
    await redis.set(k.heartbeat("far:7:bb"), "1", "EX", 30);
    expect(await alive("far:7:bb", ours)).toBe(true);
    expect(await alive("far:8:cc", ours)).toBe(false);
    expect(await alive("far:8:cc", { [LABEL.queue]: "own" })).toBe(false); // no deployment label: by heartbeat
  });

  it("itself, other queues' and other deployments' owners are alive; a local owner goes by its pid", async () => {
    expect(await alive("me:1:aa", ours)).toBe(true);
    expect(await alive("far:8:cc", { [LABEL.queue]: "other", [LABEL.redis]: "d1" })).toBe(true);
    expect(await alive("far:8:cc", { [LABEL.queue]: "own", [LABEL.redis]: "d2" })).toBe(true);
    expect(await alive("far:8:cc", { ...ours, ...processLabel() })).toBe(true); // this process, under another id
    expect(await alive("far:8:cc", { ...ours, ...gone })).toBe(false);
    // A live local owner is judged by its pid even without a heartbeat here.
    expect(await redis.exists(k.heartbeat(processOwnerId))).toBe(0);
    expect(await alive(processOwnerId, { ...ours, ...processLabel() })).toBe(true);
  });
});

describe("cancel listener", () => {
  it("the channel aborts the job it names, if it runs here, and no other", async () => {
    const k = keys("cch");
    const a = new AbortController();
    const b = new AbortController();
    const active = new Map([
      ["b", { ctl: b }],
      ["a", { ctl: a }],
    ]);
    const l = await listenForCancels({ sub: connection(), redis, k, pubSub: true, pollMs: 3_600_000, active });
    try {
      expect(await redis.pubsub("NUMSUB", k.cancelChannel)).toEqual([k.cancelChannel, 1]);
      const cancelled = aborted(a);
      await redis.publish(k.cancelChannel, "elsewhere");
      await redis.publish(k.cancelChannel, "a");
      expect(await cancelled).toBe("cancelled");
      expect(b.signal.aborted).toBe(false);
    } finally {
      l.stop();
    }
  });

  it("with the channel off, the poll of the cancel keys aborts the job whose key is set, and no other", async () => {
    const k = keys("cpoll");
    const a = new AbortController();
    const b = new AbortController();
    const active = new Map([
      ["b", { ctl: b }],
      ["a", { ctl: a }],
    ]);
    const l = await listenForCancels({ sub: connection(), redis, k, pubSub: false, pollMs: 20, active });
    try {
      expect(await redis.pubsub("NUMSUB", k.cancelChannel)).toEqual([k.cancelChannel, 0]);
      const cancelled = aborted(a);
      await redis.set(k.cancel("a"), "1");
      expect(await cancelled).toBe("cancelled");
      expect(b.signal.aborted).toBe(false);
    } finally {
      l.stop();
    }
  });
});

describe("reaper loop", () => {
  /** A backend whose boxes are a table of labels: reap() removes those the reaper judges dead. */
  function table(boxes: Record<string, Record<string, string>>, o: { failedRemovals?: number; broken?: boolean } = {}) {
    const reaped: string[] = [];
    const backend = {
      retryRemovals: async () => o.failedRemovals ?? 0,
      reap: async (dead: (labels: Record<string, string>) => Promise<boolean>): Promise<ReapReport> => {
        if (o.broken) throw new Error("connect ENOENT /var/run/docker.sock");
        for (const [name, labels] of Object.entries(boxes)) if (await dead(labels)) reaped.push(name);
        return { containers: reaped, volumes: reaped.map((n) => `${n}-vol`) };
      },
    } as unknown as Backend;
    return { backend, reaped };
  }
  const box = (owner: string, extra: Record<string, string> = {}) => ({
    [LABEL.managed]: "1",
    [LABEL.worker]: owner,
    [LABEL.queue]: "rl",
    [LABEL.redis]: "d",
    ...extra,
  });

  it("retries failed removals, reaps the boxes of owners that are gone and of passed deadlines, sweeps snapshots, and says so", async () => {
    const { backend, reaped } = table(
      {
        live: box("w-live"),
        dead: box("w-dead"),
        late: box("w-live", { [LABEL.deadline]: String(Math.floor(Date.now() / 1000) - 60) }),
      },
      { failedRemovals: 2 },
    );
    const logs: string[] = [];
    const asked: string[] = [];
    const health = { ok: true, check: async () => true };
    const loop = startReaperLoop({
      backend,
      health,
      log: (l) => logs.push(l),
      everyMs: 3_600_000,
      sweep: async () => 3,
      ownerAlive: async (owner) => (asked.push(owner), owner === "w-live"),
    });
    try {
      await loop.run();
    } finally {
      loop.stop();
    }
    expect(reaped.sort()).toEqual(["dead", "late"]);
    expect(asked).toEqual(["w-live", "w-dead"]); // the late box's owner is not asked
    expect(logs).toEqual([
      "removed 2 sandboxes whose removal had failed",
      "reaped 2 containers, 2 volumes",
      "removed 3 verify snapshots of workers that are gone",
    ]);
  });

  it("does nothing while the worker is unhealthy; a failing backend is logged and the health gate asked at once", async () => {
    const { backend, reaped } = table({ dead: box("w-dead") }, { broken: true });
    const logs: string[] = [];
    let checks = 0;
    const health = { ok: false as boolean | undefined, check: async () => (checks++, false) };
    const loop = startReaperLoop({
      backend,
      health,
      log: (l) => logs.push(l),
      everyMs: 3_600_000,
      sweep: async () => 0,
      ownerAlive: async () => false,
    });
    try {
      await loop.run();
      expect([logs, checks]).toEqual([[], 0]);
      health.ok = undefined; // before the first check: it runs
      await loop.run();
    } finally {
      loop.stop();
    }
    expect(reaped).toEqual([]);
    expect(logs).toEqual(["reaper: connect ENOENT /var/run/docker.sock"]);
    expect(checks).toBe(1);
  });
});
