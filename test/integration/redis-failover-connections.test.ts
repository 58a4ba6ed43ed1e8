// Issue 28: a connection patchbay opens through Sentinel lives through a failover. Every one
// reconnects to the promoted replica; none ends (an ended ioredis connection rejects every later
// command with "Connection is closed." and never comes back, which under a batch failed jobs for
// good). No Docker: Debian's redis-server and redis-sentinel on loopback, many connections at
// once, each busy with commands while the master is SIGKILLed. And should one end all the same, a
// worker (in-process, on the memory backend) and a client connect it again.
import { createConnection, createServer, type Server, type Socket } from "node:net";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { loadConfig } from "../../src/core/config/config.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { redisOptions } from "../../src/queue/keys.js";
import { startWorker } from "../../src/queue/worker.js";
import { openRedis } from "../../src/redis/connect.js";
import { startRedis } from "../support/cluster.js";
import { startFakeAnthropic } from "../support/fake-anthropic.js";
import { ask, startRedisServer, startSentinelGroup, type SentinelGroup } from "../support/redis-topology.js";
import { byTurn, clampScript } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A loopback proxy to a sentinel whose replies come `delayMs` late: a sentinel on a loaded machine. */
async function slowProxy(port: number, delayMs: number): Promise<{ port: number; close(): void }> {
  const socks = new Set<Socket>();
  const server: Server = createServer((client) => {
    const up = createConnection(port, "127.0.0.1");
    socks.add(client).add(up);
    client.on("data", (d) => up.write(d));
    up.on("data", (d) => setTimeout(() => !client.destroyed && client.write(d), delayMs));
    const end = () => (client.destroy(), up.destroy());
    client.on("close", end).on("error", end);
    up.on("close", end).on("error", end);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as { port: number }).port,
    close: () => (server.close(), socks.forEach((s) => s.destroy())),
  };
}

describe("connections through Sentinel across a failover", () => {
  let group: SentinelGroup;
  beforeAll(async () => {
    group = await startSentinelGroup({ password: "fo-pw" });
  }, 120_000);
  afterAll(async () => {
    await group?.stop();
  });

  it("40 busy connections: the master SIGKILLed, each reconnects to the new master and none ends", async () => {
    // Sentinels that answer late: a reconnect is still asking them for the master when they
    // announce the new one (+switch-master), the window in which a connection could end.
    const proxies = await Promise.all(group.sentinels.map((s) => slowProxy(s.port, 300)));
    const url = `redis+sentinel://:fo-pw@${proxies.map((p) => `127.0.0.1:${p.port}`).join(",")}/${group.masterName}`;
    const conns: Redis[] = Array.from({ length: 40 }, () => openRedis(url, {}, { ...redisOptions }));
    const ended: number[] = [];
    conns.forEach((c, i) => {
      c.on("error", () => {});
      c.on("end", () => ended.push(i));
    });
    await Promise.all(conns.map((c) => c.ping()));
    // Commands in flight on every connection through the failover; each is retried by ioredis.
    let stop = false;
    const failures: string[] = [];
    const busy = conns.map(async (c, i) => {
      for (let n = 0; !stop; n++) {
        await c.set(`k:${i}`, String(n)).catch((err: Error) => failures.push(`${i}: ${err.message}`));
        await sleep(20);
      }
    });
    const old = group.master.port;
    await group.master.kill("SIGKILL");
    const promoted = await group.waitForFailover(old, 60_000);
    // Long enough for every connection's reconnect and the sentinels' +switch-master to meet.
    const t0 = Date.now();
    while (Date.now() - t0 < 15_000 && !conns.every((c) => c.status === "ready")) await sleep(100);
    await sleep(2000);
    stop = true;
    await Promise.all(busy);
    expect(ended, "connections that ended").toEqual([]);
    expect(
      conns.map((c) => c.status).filter((s) => s !== "ready"),
      "not ready again",
    ).toEqual([]);
    expect(
      failures.filter((f) => /Connection is closed/.test(f)),
      failures.slice(0, 5).join("\n"),
    ).toEqual([]);
    // Each one writes to the promoted master now.
    const ports = await Promise.all(conns.map(async (c) => Number(/tcp_port:(\d+)/.exec(await c.info("server"))?.[1])));
    expect(new Set(ports)).toEqual(new Set([promoted]));
    await Promise.all(conns.map((c) => c.quit().catch(() => c.disconnect())));
    proxies.forEach((p) => p.close());
  }, 120_000);

  it("a failover the sentinels start while the master lives (SENTINEL FAILOVER): every connection writes to the promoted replica", async () => {
    const g = await startSentinelGroup({ password: "fo-pw" });
    try {
      const conns: Redis[] = Array.from({ length: 10 }, () => openRedis(g.url, {}, { ...redisOptions }));
      conns.forEach((c) => c.on("error", () => {}));
      await Promise.all(conns.map((c, i) => c.set(`k:${i}`, "before")));
      const old = g.master.port;
      await ask(g.sentinels[0]!.port, ["SENTINEL", "FAILOVER", g.masterName]);
      const promoted = await g.waitForFailover(old, 60_000);
      expect(promoted).toBe(g.replica.port);
      // The old master lives on, made a replica by the sentinels: a write sent to it is refused (READONLY).
      for (
        let t = Date.now();
        !/role:slave/.test(String(await ask(old, ["INFO", "replication"], { password: "fo-pw" })));
        await sleep(100)
      ) {
        if (Date.now() - t > 30_000) throw new Error(`the old master ${old} never became a replica`);
      }
      const t0 = Date.now();
      const results = await Promise.all(
        conns.map(async (c, i) => {
          for (;;) {
            try {
              await c.set(`k:${i}`, "after");
              return Number(/tcp_port:(\d+)/.exec(await c.info("server"))?.[1]);
            } catch (err) {
              if (Date.now() - t0 > 20_000) return (err as Error).message;
              await sleep(100);
            }
          }
        }),
      );
      expect(results).toEqual(conns.map(() => promoted));
      await Promise.all(conns.map((c) => c.quit().catch(() => c.disconnect())));
    } finally {
      await g.stop();
    }
  }, 120_000);
});

/**
 * A sentinel not yet told of a failover: it names `stale` as the master for its first `staleFor`
 * answers, then `master`. A RESP server of the test's own, answering what ioredis asks a sentinel.
 */
async function lateSentinel(
  stale: number,
  master: number,
  staleFor: number,
): Promise<{ port: number; asked: () => number; close(): void }> {
  let asked = 0;
  const socks = new Set<Socket>();
  const bulk = (x: string) => `$${Buffer.byteLength(x)}\r\n${x}\r\n`;
  const server = createServer((c) => {
    socks.add(c);
    let buf = "";
    c.on("data", (d) => {
      buf += d.toString("latin1");
      // Each command is an array of bulk strings; answer once a whole one is in.
      for (;;) {
        const m = /^\*(\d+)\r\n/.exec(buf);
        if (!m) return;
        let at = m[0].length;
        const args: string[] = [];
        for (let i = 0; i < Number(m[1]); i++) {
          const h = /^\$(\d+)\r\n/.exec(buf.slice(at));
          if (!h || buf.length < at + h[0].length + Number(h[1]) + 2) return;
          args.push(buf.slice(at + h[0].length, at + h[0].length + Number(h[1])));
          at += h[0].length + Number(h[1]) + 2;
        }
        buf = buf.slice(at);
        const cmd = args.map((a) => a.toLowerCase());
        if (cmd[0] === "sentinel" && cmd[1] === "get-master-addr-by-name")
          c.write(`*2\r\n${bulk("127.0.0.1")}${bulk(String(asked++ < staleFor ? stale : master))}`);
        else if (cmd[0] === "sentinel") c.write("*0\r\n");
        else c.write("+OK\r\n");
      }
    });
    c.on("error", () => {});
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as { port: number }).port,
    asked: () => asked,
    close: () => (server.close(), socks.forEach((x) => x.destroy())),
  };
}

describe("a sentinel behind the others", () => {
  it("sends a connection to the old master, now a replica: its write is refused (READONLY), it asks again and the write lands on the master", async () => {
    const master = await startRedisServer({ requirePass: "fo-pw" });
    const replica = await startRedisServer({
      requirePass: "fo-pw",
      args: ["--replicaof", "127.0.0.1", String(master.port), "--masterauth", "fo-pw"],
    });
    const sentinel = await lateSentinel(replica.port, master.port, 2);
    const conn = openRedis(`redis+sentinel://:fo-pw@127.0.0.1:${sentinel.port}/pbmaster`, {}, { ...redisOptions });
    conn.on("error", () => {});
    try {
      await conn.set("k", "v");
      expect(Number(/tcp_port:(\d+)/.exec(await conn.info("server"))?.[1])).toBe(master.port);
      expect(sentinel.asked()).toBeGreaterThan(2);
    } finally {
      conn.disconnect();
      sentinel.close();
      await replica.stop();
      await master.stop();
    }
  }, 60_000);
});

describe("a worker whose own connection ended", () => {
  it("connects it again and runs the jobs, each at its first attempt (none is failed by a dead connection)", async () => {
    const redis = await startRedis();
    const fake = await startFakeAnthropic(byTurn(clampScript()));
    const lines: string[] = [];
    const config = loadConfig({ ...process.env, PATCHBAY_BACKEND: "memory", PATCHBAY_TEST_BACKENDS: "1" });
    const model = () => new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
    const t0 = Date.now();
    const worker = await startWorker({
      redisUrl: redis.url,
      queueName: "ended",
      concurrency: 1,
      model,
      log: (m) => void lines.push(`${Date.now() - t0} ${m}`),
      config,
    });
    const client = new PatchbayClient({ redisUrl: redis.url, queueName: "ended" });
    try {
      // A job first: the worker is under way (its loop, stalled checks and lock renewals running).
      expect(
        (
          await client.waitForResult(await client.enqueue({ task: "Fix clamp.", repo: { path: CLAMP } }), {
            timeoutMs: 60_000,
          })
        ).status,
      ).toBe("completed");
      // BullMQ's connection (the one it takes jobs on) ended, as ioredis ends one it gives up on.
      const conn = worker.worker.opts.connection as Redis;
      conn.disconnect();
      const ids = await Promise.all([1, 2, 3].map(() => client.enqueue({ task: "Fix clamp.", repo: { path: CLAMP } })));
      const results = await Promise.all(ids.map((id) => client.waitForResult(id, { timeoutMs: 60_000 }))).catch(
        (err: Error) => Promise.reject(new Error(`${err.message}\n${lines.join("\n")}`)),
      );
      expect(results.map((r) => `${r.status} ${r.attempt}`)).toEqual(["completed 1", "completed 1", "completed 1"]);
      expect(
        lines.some((l) => /redis: its connection \(queue\) ended; connecting again/.test(l)),
        lines.join("\n"),
      ).toBe(true);
      expect(conn.status).toBe("ready");
    } finally {
      await client.close();
      await worker.shutdown(2000);
      await fake.close();
      await redis.stop();
    }
  }, 120_000);
});

describe("a client whose connection ended", () => {
  it("connects it again: its next calls work; one it closed stays closed", async () => {
    const redis = await startRedis();
    const client = new PatchbayClient({ redisUrl: redis.url, queueName: "client-ended" });
    try {
      const id = await client.enqueue({ task: "t", repo: { path: CLAMP } });
      client.redis.disconnect(); // as ioredis ends one it gives up on
      await new Promise((r) => client.redis.once("end", r));
      for (let t = Date.now(); client.redis.status !== "ready"; await sleep(50))
        if (Date.now() - t > 10_000) throw new Error(`still ${client.redis.status}`);
      expect((await client.status(id)).state).toBe("waiting");
      await client.close();
      await sleep(1500);
      expect(client.redis.status).toBe("end");
    } finally {
      await client.close();
      await redis.stop();
    }
  }, 60_000);
});
