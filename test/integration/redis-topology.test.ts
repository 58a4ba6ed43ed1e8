// test/support/redis-topology.ts proved on its own, with redis-cli and ioredis (no patchbay code):
// the TLS server trusts only its CA, the ACL user is the only way in, the Sentinel trio promotes the
// replica when the master is SIGKILLed, the 3-master cluster serves keys on every node.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { promisify } from "node:util";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  makeTestCA,
  startRedisCluster,
  startRedisServer,
  startSentinelGroup,
  type RedisProc,
  type TestCA,
} from "../support/redis-topology.js";

const exec = promisify(execFile);

/** redis-cli's stdout, or its failure's text (exit code non-zero). */
async function redisCli(args: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const r = await exec("redis-cli", ["-h", "127.0.0.1", "--no-auth-warning", ...args]);
    return { ok: !/^(\(error\)|ERR|NOAUTH|WRONGPASS)/m.test(r.stdout), out: r.stdout + r.stderr };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    return { ok: false, out: `${e.stdout ?? ""}${e.stderr ?? ""}${e.message}` };
  }
}

const pidAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("TLS with a test CA", () => {
  let ca: TestCA;
  let server: RedisProc;
  beforeAll(async () => {
    ca = await makeTestCA();
    server = await startRedisServer({ tls: { cert: ca.serverCert, key: ca.serverKey, ca: ca.ca, clientAuth: true } });
  });
  afterAll(async () => {
    await server?.stop();
    ca?.remove();
  });

  it("PING with the CA and a client cert: PONG; with another CA, no CA or no client cert: refused", async () => {
    expect(server.url).toBe(`rediss://127.0.0.1:${server.port}`);
    const p = ["-p", String(server.port), "--tls"];
    const client = ["--cert", ca.clientCert, "--key", ca.clientKey];
    expect(await redisCli([...p, "--cacert", ca.ca, ...client, "PING"])).toEqual({ ok: true, out: "PONG\n" });
    const untrusted = await redisCli([...p, "--cacert", ca.untrustedCa, ...client, "PING"]);
    expect(untrusted.ok).toBe(false);
    expect(untrusted.out).toMatch(/certificate verify failed/);
    expect((await redisCli([...p, ...client, "PING"])).ok).toBe(false); // the system's CAs do not know it
    expect((await redisCli([...p, "--cacert", ca.ca, "PING"])).ok).toBe(false); // --tls-auth-clients yes
    const plain = await redisCli(["-p", String(server.port), "PING"]); // no TLS at all
    expect(plain.out).not.toMatch(/^PONG/m);
  });

  it("a server with the untrusted cert is refused by a client trusting the test CA (ioredis)", async () => {
    const other = await startRedisServer({ tls: { cert: ca.untrustedCert, key: ca.untrustedKey, ca: ca.untrustedCa } });
    try {
      const r = new Redis({
        host: "127.0.0.1",
        port: other.port,
        tls: { ca: [await readText(ca.ca)] },
        lazyConnect: true,
        retryStrategy: () => null,
        maxRetriesPerRequest: 0,
      });
      const errors: Error[] = [];
      r.on("error", (e: Error) => errors.push(e));
      await expect(r.connect()).rejects.toThrow();
      expect(errors[0]?.message).toMatch(/self[- ]signed|unable to verify|certificate/i);
      r.disconnect();
      const good = new Redis({
        host: "127.0.0.1",
        port: other.port,
        tls: { ca: [await readText(ca.untrustedCa)] },
        lazyConnect: true,
        retryStrategy: () => null,
      });
      await good.connect();
      expect(await good.ping()).toBe("PONG");
      good.disconnect();
    } finally {
      await other.stop();
    }
  });
});

async function readText(path: string): Promise<string> {
  const { readFile } = await import("node:fs/promises");
  return readFile(path, "utf8");
}

describe("ACL user", () => {
  it("the ACL user gets in; the default user, no credentials and a wrong password are refused; stop ends the pid and removes the dir", async () => {
    const server = await startRedisServer({ acl: { user: "pbuser", password: "s3cret-acl" } });
    try {
      expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
      const p = ["-p", String(server.port)];
      expect(await redisCli([...p, "--user", "pbuser", "--pass", "s3cret-acl", "PING"])).toEqual({
        ok: true,
        out: "PONG\n",
      });
      expect((await redisCli([...p, "PING"])).out).toMatch(/NOAUTH/);
      expect((await redisCli([...p, "--user", "default", "--pass", "anything", "PING"])).out).toMatch(
        /WRONGPASS|disabled/,
      );
      expect((await redisCli([...p, "--user", "pbuser", "--pass", "wrong", "PING"])).out).toMatch(/WRONGPASS/);
      const r = new Redis({
        host: "127.0.0.1",
        port: server.port,
        username: "pbuser",
        password: "s3cret-acl",
        lazyConnect: true,
      });
      await r.connect();
      expect(await r.config("GET", "maxmemory-policy")).toEqual(["maxmemory-policy", "noeviction"]);
      r.disconnect();
    } finally {
      await server.stop();
    }
    expect(pidAlive(server.pid)).toBe(false);
    expect(existsSync(server.dir)).toBe(false);
  });
});

describe("Sentinel: a master, a replica, three sentinels", () => {
  it("SIGKILL the master: the sentinels promote the replica, which keeps the data and takes writes", async () => {
    const g = await startSentinelGroup({ password: "sentinel-pass" });
    try {
      expect(g.url).toBe(
        `redis+sentinel://:sentinel-pass@${g.sentinels.map((s) => `127.0.0.1:${s.port}`).join(",")}/pbmaster`,
      );
      expect(await g.currentMasterPort()).toBe(g.master.port);
      const m = new Redis({ host: "127.0.0.1", port: g.master.port, password: "sentinel-pass" });
      await m.set("before-failover", "kept");
      expect(await m.wait(1, 5000)).toBe(1); // replicated before the kill
      m.disconnect();
      await g.master.kill("SIGKILL");
      expect(await g.waitForFailover(g.master.port)).toBe(g.replica.port);
      expect(await g.currentMasterPort()).toBe(g.replica.port);
      const via = new Redis({
        sentinels: g.sentinels.map((s) => ({ host: "127.0.0.1", port: s.port })),
        name: "pbmaster",
        password: "sentinel-pass",
      });
      expect(await via.get("before-failover")).toBe("kept");
      await via.set("after-failover", "1");
      expect(await via.role()).toEqual(expect.arrayContaining(["master"]));
      via.disconnect();
    } finally {
      await g.stop();
    }
    for (const p of [g.master, g.replica, ...g.sentinels]) expect(pidAlive(p.pid), String(p.port)).toBe(false);
  });
});

describe("Cluster: three masters", () => {
  it("cluster_state:ok with 3 masters on every node, and keys spread over all three through ioredis Cluster", async () => {
    const c = await startRedisCluster();
    try {
      expect(c.url).toBe(`redis+cluster://${c.nodes.map((n) => `127.0.0.1:${n.port}`).join(",")}`);
      for (const n of c.nodes) {
        const info = (await redisCli(["-p", String(n.port), "CLUSTER", "INFO"])).out;
        expect(info).toMatch(/^cluster_state:ok\r?$/m);
        expect(info).toMatch(/^cluster_size:3\r?$/m);
      }
      const cluster = new Cluster(c.nodes.map((n) => ({ host: "127.0.0.1", port: n.port })));
      for (let i = 0; i < 30; i++) await cluster.set(`k${i}`, String(i));
      for (let i = 0; i < 30; i++) expect(await cluster.get(`k${i}`)).toBe(String(i));
      await cluster.quit();
      for (const n of c.nodes)
        expect(Number((await redisCli(["-p", String(n.port), "DBSIZE"])).out), String(n.port)).toBeGreaterThan(0);
    } finally {
      await c.stop();
    }
  });
});
