// Issue 28 §1 and §2's Cluster: real batches through a Redis with TLS (a test CA and a client
// certificate), an ACL user, and a 3-master Cluster — Debian's redis-server on loopback
// (test/support/redis-topology.ts) — with worker processes on the memory backend (what is under
// test is Redis's part, not a sandbox's) and the CLI as a user runs it. And what a wrong password,
// an untrusted certificate or a master name no Sentinel knows does: a clear error at start, exit
// 1, nothing enqueued.
//
// Backend: memory (worker processes: Redis's part is the subject, not a sandbox's).
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Cluster } from "ioredis";
import { createServer, type AddressInfo, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic } from "../support/fake-anthropic.js";
import { cli, removeDir, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import {
  ask,
  makeTestCA,
  startRedisCluster,
  startRedisServer,
  startSentinelGroup,
  type RedisClusterProc,
  type RedisProc,
  type SentinelGroup,
  type TestCA,
} from "../support/redis-topology.js";
import { byTurn } from "../support/scripts.js";
import { http, sse } from "../support/api.js";
import { startDashboard } from "../../src/web/server.js";
import { loadConfig } from "../../src/core/config/config.js";
import { ensureBuilt } from "../support/cli-helpers.js";

const MEMORY = { PATCHBAY_BACKEND: "memory", PATCHBAY_TEST_BACKENDS: "1" };
const SECRET = "s3cret-Redis-pw";
const JOBS = 6;
const TOKEN = "dashboard-token-0123456789";

let fake: FakeAnthropic;
let dir: string;

beforeAll(async () => {
  await ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), "pb-redis-conn-"));
  writeFileSync(join(dir, "README"), "a tiny repo\n");
  fake = await startFakeAnthropic(
    byTurn([
      reply(toolUse("str_replace_based_edit_tool", { command: "create", path: "/workspace/done", file_text: "ok\n" })),
      reply(text("Done.")),
    ]),
  );
}, 300_000);

afterAll(async () => {
  await fake?.close();
  if (dir) removeDir(dir);
});

/** A batch of JOBS jobs through two worker processes on `env`'s Redis, waited for by the CLI; returns the summary. */
async function batchThrough(
  env: Record<string, string>,
  name: string,
): Promise<{ summary: { total: number; counts: Record<string, number> }; workers: WorkerProc[] }> {
  const full = {
    ...MEMORY,
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: "test-key",
    PATCHBAY_CONCURRENCY: "3",
    ...env,
  };
  const workers = [startWorkerProc(full), startWorkerProc(full)];
  try {
    await Promise.all(workers.map((w) => w.waitFor(/ready: queue /, 120_000)));
    const file = join(dir, `${name}.jsonl`);
    writeFileSync(
      file,
      Array.from({ length: JOBS }, (_, i) => JSON.stringify({ task: `job ${i}`, repo: { path: dir } })).join("\n") +
        "\n",
    );
    const sub = await cli(["batch", "submit", file, "--name", name], full);
    expect(sub.code, sub.stderr).toBe(0);
    const out = join(dir, `out-${name}`);
    const w = await cli(["batch", "wait", name, "--out", out], full, { timeoutMs: 300_000 });
    expect(w.code, `${w.stderr}\n${workers.map((x) => x.log()).join("\n")}`).toBe(0);
    return { summary: JSON.parse(readFileSync(join(out, "summary.json"), "utf8")), workers };
  } finally {
    await Promise.all(workers.map((w) => w.stop("SIGTERM")));
  }
}

/** What a command and a worker say, and exit with, on a Redis they cannot use; and that nothing was enqueued. */
async function refusedAtStart(
  env: Record<string, string>,
): Promise<{ submit: string; worker: string; doctor: { name: string; ok: boolean; detail: string }[] }> {
  const file = join(dir, "one.jsonl");
  writeFileSync(file, `${JSON.stringify({ task: "never", repo: { path: dir } })}\n`);
  const sub = await cli(["batch", "submit", file, "--name", "refused"], env);
  expect(sub.code, sub.stderr).toBe(1);
  const w = startWorkerProc({ ...MEMORY, ANTHROPIC_API_KEY: "k", ...env });
  expect(await w.exited).toBe(1);
  const doc = await cli(["doctor", "--json"], env, { timeoutMs: 60_000 });
  const all = sub.stderr + w.log() + doc.stdout + doc.stderr;
  expect(all).not.toMatch(/^\s+at |Unhandled error event/m);
  expect(all).not.toContain("wrong-pw-zz"); // the wrong password a test gives
  return { submit: sub.stderr, worker: w.log(), doctor: JSON.parse(doc.stdout) };
}

describe("TLS with a test CA and a client certificate", () => {
  let ca: TestCA;
  let server: RedisProc;
  let untrusted: RedisProc;
  let plain: RedisProc;
  beforeAll(async () => {
    plain = await startRedisServer();
    ca = await makeTestCA();
    server = await startRedisServer({
      tls: { cert: ca.serverCert, key: ca.serverKey, ca: ca.ca, clientAuth: true },
      requirePass: SECRET,
    });
    untrusted = await startRedisServer({ tls: { cert: ca.untrustedCert, key: ca.untrustedKey, ca: ca.untrustedCa } }); // its cert signed by another CA
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    await untrusted?.stop();
    await plain?.stop();
    ca?.remove();
  });

  it("a batch runs through rediss:// with the CA and client certificate from PATCHBAY_REDIS_TLS_*; doctor names tls and auth", async () => {
    const env = {
      REDIS_URL: `rediss://:${SECRET}@127.0.0.1:${server.port}`,
      PATCHBAY_QUEUE: "tls",
      PATCHBAY_REDIS_TLS_CA: ca.ca,
      PATCHBAY_REDIS_TLS_CERT: ca.clientCert,
      PATCHBAY_REDIS_TLS_KEY: ca.clientKey,
    };
    const { summary, workers } = await batchThrough(env, "tls-batch");
    expect(summary).toMatchObject({ total: JOBS, counts: { completed: JOBS } });
    for (const w of workers) expect(w.log()).not.toContain(SECRET);
    const doc = await cli(["doctor", "--json"], env, { timeoutMs: 60_000 });
    const checks = JSON.parse(doc.stdout) as { name: string; ok: boolean; detail: string }[];
    expect(checks).toContainEqual(
      expect.objectContaining({
        name: "redis tls",
        ok: true,
        detail: expect.stringMatching(/certificate verified against the configured CA; client certificate sent/),
      }),
    );
    expect(checks).toContainEqual(expect.objectContaining({ name: "redis auth", ok: true }));
    expect(checks).toContainEqual(
      expect.objectContaining({ name: "redis eviction", ok: true, detail: expect.stringMatching(/noeviction/) }),
    );
    expect(doc.stdout + doc.stderr).not.toContain(SECRET);
    // The same through the URL's own query, the library's way to say it.
    const viaQuery = await cli(
      [
        "batch",
        "status",
        "tls-batch",
        "--redis-url",
        `rediss://:${SECRET}@127.0.0.1:${server.port}?ca=${ca.ca}&cert=${ca.clientCert}&key=${ca.clientKey}`,
        "--queue",
        "tls",
      ],
      {},
    );
    expect(viaQuery.code, viaQuery.stderr).toBe(0);
    expect(viaQuery.stdout).toMatch(/completed 6/);
  }, 300_000);

  it("an untrusted certificate, a plain port, a missing client certificate: exit 1 at start, saying which", async () => {
    const bad = await refusedAtStart({
      REDIS_URL: `rediss://127.0.0.1:${untrusted.port}`,
      PATCHBAY_QUEUE: "tls-bad",
      PATCHBAY_REDIS_TLS_CA: ca.ca,
    });
    expect(bad.submit).toMatch(
      /Redis at rediss:\/\/127\.0\.0\.1:\d+: Redis's TLS certificate is not trusted \(\w+\): set PATCHBAY_REDIS_TLS_CA/,
    );
    expect(bad.worker).toMatch(/Redis's TLS certificate is not trusted/);
    expect(bad.doctor).toContainEqual(expect.objectContaining({ name: "redis tls", ok: false }));
    const noCert = await cli(["batch", "list"], {
      REDIS_URL: `rediss://:${SECRET}@127.0.0.1:${server.port}`,
      PATCHBAY_REDIS_TLS_CA: ca.ca,
    });
    expect(noCert.code).toBe(1);
    expect(noCert.stderr).toMatch(
      /Redis at rediss:\/\/:\*\*\*@127\.0\.0\.1:\d+: Redis asks for a client certificate: set PATCHBAY_REDIS_TLS_CERT and PATCHBAY_REDIS_TLS_KEY/,
    );
    expect(noCert.stderr).not.toContain(SECRET);
    const plainPort = await cli(["batch", "list"], {
      REDIS_URL: `rediss://127.0.0.1:${plain.port}`,
      PATCHBAY_REDIS_TLS_CA: ca.ca,
    });
    expect(plainPort.code).toBe(1);
    expect(plainPort.stderr).toMatch(/this port speaks plain Redis, not TLS: use redis:\/\//);
    const tlsPort = await cli(["batch", "list"], { REDIS_URL: `redis://127.0.0.1:${server.port}` });
    expect(tlsPort.code).toBe(1);
    expect(tlsPort.stderr).toMatch(/this port speaks TLS: use rediss:\/\//);
    // Nothing enqueued anywhere: the refused submit never reached a Redis it could write.
    expect(
      await ask(untrusted.port, ["DBSIZE"], {
        tls: { cert: ca.untrustedCert, key: ca.untrustedKey, ca: ca.untrustedCa },
      }),
    ).toBe(0);
  }, 180_000);
});

describe("a database that is not there, a server that never answers", () => {
  let server: RedisProc;
  let silent: Server;
  beforeAll(async () => {
    server = await startRedisServer();
    silent = createServer(() => {}).listen(0, "127.0.0.1"); // accepts, never answers
    await new Promise((r) => silent.once("listening", r));
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    silent?.close();
  });

  it("exit 1 at start, each said: no such database (not db 0 instead), no answer (not a hang)", async () => {
    const db = await cli(["batch", "list"], { REDIS_URL: `redis://127.0.0.1:${server.port}/99999` });
    expect(db.code).toBe(1);
    expect(db.stderr).toMatch(/this Redis has no database 99999: use one below its `databases` setting/);
    const quiet = await cli(
      ["batch", "list"],
      { REDIS_URL: `redis://127.0.0.1:${(silent.address() as AddressInfo).port}` },
      { timeoutMs: 60_000 },
    );
    expect(quiet.code).toBe(1);
    expect(quiet.stderr).toMatch(
      /cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+ \(something accepted the connection and answered nothing to a Redis PING within \d+ ms: not Redis, or a Redis that hangs; check the host and port/,
    );
  }, 120_000);
});

describe("an ACL user", () => {
  let server: RedisProc;
  beforeAll(async () => {
    server = await startRedisServer({ acl: { user: "pb", password: SECRET } });
  }, 60_000);
  afterAll(async () => server?.stop());

  it("a batch runs as redis://pb:PASSWORD@…; the default user is off", async () => {
    const env = { REDIS_URL: `redis://pb:${SECRET}@127.0.0.1:${server.port}`, PATCHBAY_QUEUE: "acl" };
    const { summary, workers } = await batchThrough(env, "acl-batch");
    expect(summary).toMatchObject({ total: JOBS, counts: { completed: JOBS } });
    for (const w of workers) expect(w.log()).not.toContain(SECRET);
    const doc = JSON.parse((await cli(["doctor", "--json"], env, { timeoutMs: 60_000 })).stdout);
    expect(doc).toContainEqual(
      expect.objectContaining({ name: "redis auth", ok: true, detail: "authenticated as ACL user 'pb'" }),
    );
  }, 300_000);

  it("a wrong password: exit 1 at start, saying so without the password, nothing enqueued", async () => {
    const r = await refusedAtStart({
      REDIS_URL: `redis://pb:wrong-pw-zz@127.0.0.1:${server.port}`,
      PATCHBAY_QUEUE: "acl-bad",
    });
    expect(r.submit).toMatch(
      /Redis at redis:\/\/pb:\*\*\*@127\.0\.0\.1:\d+: Redis refused the password of user 'pb': set the right one in REDIS_URL/,
    );
    expect(r.worker).toMatch(/Redis refused the password of user 'pb'/);
    expect(r.doctor).toContainEqual(expect.objectContaining({ name: "redis auth", ok: false }));
    for (const text of [r.submit, r.worker, JSON.stringify(r.doctor)]) expect(text).not.toContain("wrong-pw-zz");
    expect(await ask(server.port, ["KEYS", "*acl-bad*"], { username: "pb", password: SECRET })).toEqual([]);
  }, 120_000);
});

describe("a Sentinel master name no sentinel knows", () => {
  let group: SentinelGroup;
  beforeAll(async () => {
    group = await startSentinelGroup();
  }, 120_000);
  afterAll(async () => group?.stop());

  it("exit 1 at start, naming the master names the sentinels do know; doctor's sentinel check agrees on the right name", async () => {
    const wrong = group.url.replace(/\/pbmaster$/, "/nosuchmaster");
    const r = await refusedAtStart({ REDIS_URL: wrong, PATCHBAY_QUEUE: "sentinel-bad" });
    expect(r.submit).toMatch(
      /no Sentinel at 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+ knows a master named 'nosuchmaster' \(they know 'pbmaster'\): fix the name/,
    );
    expect(r.worker).toMatch(/knows a master named 'nosuchmaster'/);
    expect(r.doctor).toContainEqual(expect.objectContaining({ name: "redis sentinel", ok: false }));
    expect(await ask(group.master.port, ["DBSIZE"])).toBe(0);
    const good = JSON.parse((await cli(["doctor", "--json"], { REDIS_URL: group.url }, { timeoutMs: 60_000 })).stdout);
    expect(good).toContainEqual(
      expect.objectContaining({
        name: "redis sentinel",
        ok: true,
        detail: expect.stringMatching(
          /master 'pbmaster': (127\.0\.0\.1:\d+ says 127\.0\.0\.1:\d+, 1 replica, quorum ok(; )?){3}/,
        ),
      }),
    );
  }, 120_000);
});

describe("a 3-master Redis Cluster", () => {
  let cluster: RedisClusterProc;
  beforeAll(async () => {
    cluster = await startRedisCluster({ password: SECRET });
  }, 120_000);
  afterAll(async () => cluster?.stop());

  it("a batch runs to completion with every key of the queue in one slot ({queue})", async () => {
    const env = { REDIS_URL: cluster.url, PATCHBAY_QUEUE: "fleet" };
    const { summary } = await batchThrough(env, "cluster-batch");
    expect(summary).toMatchObject({ total: JOBS, counts: { completed: JOBS } });
    // Every key patchbay and BullMQ wrote is hash-tagged {fleet}: on one node, in one slot.
    const c = new Cluster(
      cluster.nodes.map((n) => ({ host: "127.0.0.1", port: n.port })),
      { redisOptions: { password: SECRET } },
    );
    try {
      await new Promise((ready) => c.once("ready", ready));
      const keys: string[] = [];
      for (const node of c.nodes("master")) keys.push(...(await node.keys("*")));
      expect(keys.length).toBeGreaterThan(JOBS);
      expect(keys.filter((k) => !k.includes("{fleet}"))).toEqual([]);
      const slots = new Set(await Promise.all(keys.map((k) => c.call("CLUSTER", "KEYSLOT", k))));
      expect(slots.size).toBe(1);
    } finally {
      c.disconnect();
    }
    const doc = JSON.parse((await cli(["doctor", "--json"], env, { timeoutMs: 60_000 })).stdout);
    expect(doc).toContainEqual(
      expect.objectContaining({
        name: "redis cluster",
        ok: true,
        detail: expect.stringMatching(/cluster_state ok, 3 master/),
      }),
    );
    // The dashboard on the Cluster: its job list (a multi-key script over the queue's slot) and a
    // finished job's live transcript (the blocking read, short on a Cluster).
    const dash = await startDashboard({
      port: 0,
      redisUrl: cluster.url,
      queueName: "fleet",
      token: TOKEN,
      config: loadConfig({ ...process.env, REDIS_URL: cluster.url }),
    });
    try {
      const list = await http(dash.url, "GET", "/api/v1/jobs", { token: TOKEN });
      expect(list.status, list.text).toBe(200);
      expect(list.json.jobs.length).toBe(JOBS);
      const events = await sse(dash.url, "/api/v1/jobs/cluster-batch-L1/events", { authorization: `Bearer ${TOKEN}` });
      expect(events.status).toBe(200);
      expect(events.messages.at(-1)).toMatchObject({ event: "end", data: JSON.stringify({ state: "completed" }) });
    } finally {
      await dash.close();
    }
  }, 300_000);

  it("what cannot work on a Cluster is refused at start: a WAIT for replicas", async () => {
    const r = await cli(["batch", "list"], { REDIS_URL: cluster.url, PATCHBAY_REDIS_WAIT_REPLICAS: "1" });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/PATCHBAY_REDIS_WAIT_REPLICAS=1 cannot work on a Redis Cluster .*: set it to auto or 0/);
    const w = startWorkerProc({
      ...MEMORY,
      ANTHROPIC_API_KEY: "k",
      REDIS_URL: cluster.url,
      PATCHBAY_REDIS_WAIT_REPLICAS: "1",
    });
    expect(await w.exited).toBe(1);
    expect(w.log()).toMatch(/cannot work on a Redis Cluster/);
    expect(w.log()).not.toContain(SECRET);
  }, 120_000);
});
