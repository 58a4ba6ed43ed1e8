// A second host for real: a second Docker engine on this machine (test/support/engine.ts: its own
// dockerd, data-root, exec-root, socket, containerd, cgroups and engine ID), with one worker per
// engine (DOCKER_HOST) sharing one Redis. Host A is the main engine, host B the second one. A "host"
// is killed whole: its worker and its dockerd, containerd, shims and container processes.
// Both hosts have the same hostname and pid namespace here, as two engines on one machine do.
//
// Backend: Docker (private engines killed and restarted).
import { Redis } from "ioredis";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import { keys } from "../../src/queue/keys.js";
import { engineEnv } from "../../src/core/config/config.js";
import { engineOptions, docker as mainDocker } from "../../src/backend/docker.js";
import { LABEL } from "../../src/backend/owner.js";
import { cli, freePort, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { startEngine, type Engine } from "../support/engine.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic } from "../support/fake-anthropic.js";
import { byTurn, taskOf } from "../support/scripts.js";

const IMAGE = process.env.PATCHBAY_IMAGE ?? "patchbay-sandbox:latest";
const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const QUEUE = "second-host";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let b: Engine;
let redis: Awaited<ReturnType<typeof startRedis>>;
let fake: FakeAnthropic;
let client: PatchbayClient;
let env: Record<string, string>;
const workers: WorkerProc[] = [];

/** A process that runs (a zombie waiting for this machine's init to reap it does not). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

function worker(host: "A" | "B"): WorkerProc {
  const w = startWorkerProc(host === "B" ? { ...env, DOCKER_HOST: b.host } : env);
  workers.push(w);
  return w;
}

/** Jobs whose attempt the worker's log reports completed. */
const completedBy = (w: WorkerProc, ids: string[]) =>
  ids.filter((id) => new RegExp(`job ${id} attempt \\d+: completed`).test(w.log()));

/** The jobs whose sandbox containers an engine created since `since` (its own event log). */
async function jobsCreatedOn(d: typeof b.docker, since: number, queue = QUEUE): Promise<string[]> {
  const stream = await d.getEvents({
    since,
    until: Math.ceil(Date.now() / 1000),
    filters: { type: ["container"], event: ["create"], label: [`${LABEL.queue}=${queue}`] },
  });
  let out = "";
  for await (const chunk of stream) out += chunk.toString();
  return out
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l).Actor.Attributes[LABEL.job] as string)
    .sort();
}

/** A running container labelled as a sandbox of this queue's, owned by `owner` (a sandbox as reapers see it).
 *  An orphan may be reaped between its create and its start (the reaper doing its work): its start's
 *  404/409 is then that, not a failure. */
async function plant(
  d: typeof b.docker,
  owner: string,
  labels: Record<string, string> = {},
  { orphan = false } = {},
): Promise<string> {
  const c = await d.createContainer({
    Image: IMAGE,
    Cmd: ["sleep", "infinity"],
    Entrypoint: [],
    HostConfig: { NetworkMode: "none" },
    Labels: {
      [LABEL.managed]: "1",
      [LABEL.worker]: owner,
      [LABEL.queue]: QUEUE,
      [LABEL.deadline]: String(Math.floor(Date.now() / 1000) + 3600),
      "patchbay.test": "1",
      ...labels,
    },
  });
  await c.start().catch((e: { statusCode?: number }) => {
    if (!(orphan && (e.statusCode === 404 || e.statusCode === 409))) throw e;
  });
  return c.id;
}

const present = (d: typeof b.docker, id: string) =>
  d
    .getContainer(id)
    .inspect()
    .then(
      () => true,
      () => false,
    );

async function leftoversOn(d: typeof b.docker): Promise<number> {
  const cs = await d.listContainers({ all: true, filters: { label: [`${LABEL.queue}=${QUEUE}`] } });
  const { Volumes } = await d.listVolumes({ filters: { label: [`${LABEL.queue}=${QUEUE}`] } });
  return cs.length + (Volumes ?? []).length;
}

beforeAll(async () => {
  [b, redis, fake] = await Promise.all([
    freePort().then((tlsPort) => startEngine("second-host", { tlsPort })),
    startRedis(),
    // Each job: one command that takes `sleep=N` seconds in its sandbox, then the end of its turn.
    startFakeAnthropic(
      byTurn((body) => [
        reply(
          toolUse("bash", {
            command: `echo ran >> /workspace/notes.txt; sleep ${/sleep=(\d+)/.exec(taskOf(body))?.[1] ?? 1}`,
          }),
        ),
        reply(text("Done.")),
      ]),
    ),
  ]);
  await b.loadImage(IMAGE);
  // No warm pool: each job's sandbox is made for it, so an engine's events tell whose jobs it ran
  // and every sandbox of this queue on engine B after host B's death is a leftover of it.
  env = {
    PATCHBAY_POOL: "0",
    REDIS_URL: redis.url,
    PATCHBAY_QUEUE: QUEUE,
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: "test-key",
    PATCHBAY_CONCURRENCY: "2",
    PATCHBAY_LOCK_MS: "3000",
    PATCHBAY_STALLED_MS: "1000",
    PATCHBAY_REAP_MS: "500",
    PATCHBAY_HEARTBEAT_MS: "1000",
  };
  client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
}, 300_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop("SIGKILL")));
  await client?.close();
  await fake?.close();
  await redis?.stop();
  await b?.stop();
}, 120_000);

describe("the second engine", () => {
  it("is its own engine: a container there is not on the main engine, and a killed host comes back", async () => {
    const [mainInfo, bInfo] = await Promise.all([mainDocker().info(), b.docker.info()]);
    expect(bInfo.ID).not.toBe(mainInfo.ID);
    expect(bInfo.DockerRootDir).toBe("/var/lib/patchbay-engines/second-host");

    const c = await b.docker.createContainer({
      Image: IMAGE,
      Cmd: ["sleep", "infinity"],
      Entrypoint: [],
      Labels: { "patchbay.test": "second-host" },
      HostConfig: { NetworkMode: "none" },
    });
    await c.start();
    const pid = (await c.inspect()).State.Pid;
    expect(running(pid)).toBe(true);
    await expect(mainDocker().getContainer(c.id).inspect()).rejects.toMatchObject({ statusCode: 404 });

    await b.kill(); // dockerd, containerd, the shim and the container's processes, all SIGKILLed
    expect(await b.running()).toBe(false);
    expect(running(pid)).toBe(false);
    // The main engine lives on, and never had the container.
    expect((await mainDocker().info()).ID).toBe(mainInfo.ID);
    expect(await mainDocker().listContainers({ all: true, filters: { label: ["patchbay.test=second-host"] } })).toEqual(
      [],
    );

    await b.start();
    const after = await c.inspect();
    expect(after.State.Running).toBe(false);
    await c.remove({ force: true, v: true });
    await expect(c.inspect()).rejects.toMatchObject({ statusCode: 404 });
  });
});

describe("one worker per engine, one Redis", () => {
  let a: WorkerProc;
  let hb: WorkerProc;

  beforeAll(async () => {
    a = worker("A");
    hb = worker("B");
    await Promise.all([a, hb].map((w) => w.waitFor(new RegExp(`ready: queue ${QUEUE}`), 60_000)));
  }, 120_000);

  it("a batch spreads over both hosts, each worker's sandboxes in its own engine", async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const ids = await client.enqueueBatch(
      Array.from({ length: 6 }, (_, i) => ({ task: `spread ${i} sleep=2`, repo: { path: CLAMP } })),
    );
    const results = await Promise.all(ids.map((id) => client.waitForResult(id, { timeoutMs: 120_000 })));
    expect(results.map((r) => r.status)).toEqual(ids.map(() => "completed"));
    const onA = completedBy(a, ids);
    const onB = completedBy(hb, ids);
    expect(onA.length).toBeGreaterThan(0);
    expect(onB.length).toBeGreaterThan(0);
    expect(onA.length + onB.length).toBe(ids.length);
    // Engine B made a sandbox for each of worker B's jobs and for none of worker A's. (The busy main
    // engine's event log is too short to be read back the same way.)
    expect(await jobsCreatedOn(b.docker, since)).toEqual([...onB].sort());
  }, 180_000);

  it("host B killed whole mid-batch: every job completes on host A; A's reaper cannot touch B's leftovers, B's own reaper removes them when B is back", async () => {
    const ids = await client.enqueueBatch(
      Array.from({ length: 4 }, (_, i) => ({ task: `kill ${i} sleep=3`, repo: { path: CLAMP } })),
    );
    // A job of host B's inside its command, its sandbox running on engine B.
    let held: string | undefined;
    while (!(held = ids.find((id) => new RegExp(`job ${id} attempt \\d+: started`).test(hb.log())))) await sleep(100);
    for await (const e of client.watch(held)) if (e.type === "tool_call") break;
    expect((await b.docker.listContainers({ filters: { label: [`${LABEL.job}=${held}`] } })).length).toBe(1);

    const killedAt = Date.now();
    hb.proc.kill("SIGKILL");
    await Promise.all([hb.exited, b.kill()]);
    const results = await Promise.all(ids.map((id) => client.waitForResult(id, { timeoutMs: 150_000 })));
    console.log(
      `[second-host] host B killed whole: all ${ids.length} jobs completed ${Date.now() - killedAt} ms later (lock ${env.PATCHBAY_LOCK_MS} ms)`,
    );
    expect(results.map((r) => r.status)).toEqual(ids.map(() => "completed"));
    const onA = completedBy(a, ids);
    expect(onA).toContain(held);
    expect(new Set([...onA, ...completedBy(hb, ids)])).toEqual(new Set(ids));

    // Host B is back, without its worker: its dead worker's sandboxes sit on engine B. An orphan of
    // this queue planted on host A's engine (an owner elsewhere, no heartbeat) is gone once host A's
    // reaper has passed; engine B's are untouched by it.
    await b.start();
    const before = await leftoversOn(b.docker);
    expect(before).toBeGreaterThan(0);
    // (An owner on another host, no heartbeat: other test files' reapers leave it to this queue's.)
    const planted = await plant(mainDocker(), "pb-test-second-host-elsewhere:1:gone", {}, { orphan: true });
    while (await present(mainDocker(), planted)) await sleep(200);
    expect(await leftoversOn(b.docker)).toBe(before);

    const backAt = Date.now();
    hb = worker("B");
    while ((await leftoversOn(b.docker)) > 0) await sleep(200);
    console.log(
      `[second-host] host B back: its new worker removed ${before} leftovers ${Date.now() - backAt} ms after it was started`,
    );
    await hb.waitFor(/reaped [1-9]\d* containers?\b/); // it did it (the line follows the pass)
  }, 240_000);

  it("a live worker on another host with the same hostname keeps its sandbox; once its heartbeat stops it is reaped", async () => {
    // On engine B, judged by host B's worker alone (no other test file's reaper sees that engine).
    // Another machine named like this one: its pid means nothing here (this pid is not running).
    let pid = 30_000;
    while (running(pid)) pid--;
    const owner = `${hostname()}:${pid}:elsewhere`;
    const r = new Redis(redis.url);
    try {
      await r.set(keys(QUEUE).heartbeat(owner), String(Date.now()), "EX", 120);
      const kept = await plant(b.docker, owner, { [LABEL.process]: `another-boot/4026531836/${pid}/12345` });
      // Planted last: once host B's worker logs a pass that removed it, that pass saw both.
      const from = hb.log().length;
      const orphan = await plant(b.docker, "pb-test-second-host-elsewhere:2:gone", {}, { orphan: true });
      while (await present(b.docker, orphan)) await sleep(200);
      while (!/reaped \d+ containers?\b/.test(hb.log().slice(from))) await sleep(100);
      expect((await b.docker.getContainer(kept).inspect()).State.Running).toBe(true);

      await r.del(keys(QUEUE).heartbeat(owner)); // that worker dies
      while (await present(b.docker, kept)) await sleep(200);
    } finally {
      r.disconnect();
    }
  }, 120_000);
});

describe("remote engines", () => {
  it("a worker reaches its engine over TCP with TLS and a client certificate (DOCKER_TLS_VERIFY, DOCKER_CERT_PATH)", async () => {
    const queue = "second-host-tls";
    const since = Math.floor(Date.now() / 1000) - 1;
    const w = startWorkerProc({
      ...env,
      PATCHBAY_QUEUE: queue,
      DOCKER_HOST: b.tls!.host,
      DOCKER_TLS_VERIFY: "1",
      DOCKER_CERT_PATH: b.tls!.certPath,
    });
    workers.push(w);
    const tlsClient = new PatchbayClient({ redisUrl: redis.url, queueName: queue });
    try {
      await w.waitFor(new RegExp(`ready: queue ${queue}`), 60_000);
      expect(w.log()).not.toMatch(/unhealthy/);
      const id = await tlsClient.enqueue({ task: "over tls sleep=1", repo: { path: CLAMP } });
      expect((await tlsClient.waitForResult(id, { timeoutMs: 120_000 })).status).toBe("completed");
      expect(await jobsCreatedOn(b.docker, since, queue)).toEqual([id]);
      // The CLI reads the same variables: doctor finds an image tag that only engine B has.
      await b.docker.getImage(IMAGE).tag({ repo: "patchbay-sandbox", tag: "second-host-only" });
      const doctor = await cli(["doctor", "--json"], {
        DOCKER_HOST: b.tls!.host,
        DOCKER_TLS_VERIFY: "1",
        DOCKER_CERT_PATH: b.tls!.certPath,
        PATCHBAY_IMAGE: "patchbay-sandbox:second-host-only",
        REDIS_URL: redis.url,
      });
      const checks = JSON.parse(doctor.stdout) as { name: string; ok: boolean; detail: string }[];
      expect(checks.find((c) => c.name === "engine")).toMatchObject({
        ok: true,
        detail: expect.stringContaining(b.tls!.host),
      });
      expect(checks.find((c) => c.name === "image")).toMatchObject({ ok: true });
    } finally {
      await tlsClient.close();
    }
  }, 180_000);

  it("reads the TLS variables as the docker CLI does, and refuses ssh:// (no host key check in dockerode)", () => {
    const certPath = b.tls!.certPath;
    expect(engineOptions(engineEnv({ DOCKER_HOST: "tcp://127.0.0.1:2375" }))).toEqual({});
    expect(
      engineOptions(engineEnv({ DOCKER_HOST: "unix:///x.sock", DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: certPath })),
    ).toEqual({});
    for (const v of ["1", "true", "yes"]) {
      const o = engineOptions(
        engineEnv({ DOCKER_HOST: "tcp://10.0.0.2:2375", DOCKER_TLS_VERIFY: v, DOCKER_CERT_PATH: certPath }),
      );
      expect(o.protocol).toBe("https");
      expect(String(o.ca)).toBe(readFileSync(`${certPath}/ca.pem`, "utf8"));
      expect(String(o.cert)).toBe(readFileSync(`${certPath}/cert.pem`, "utf8"));
    }
    expect(() =>
      engineOptions(
        engineEnv({ DOCKER_HOST: "tcp://10.0.0.2:2376", DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: "/nonexistent" }),
      ),
    ).toThrow(/ca\.pem/);
    expect(() => engineOptions(engineEnv({ DOCKER_HOST: "ssh://me@engine-host" }))).toThrow(
      /ssh:\/\/ is not supported .*host key.*DOCKER_HOST=unix:/,
    );
  });
});
