// Issue 29: a finished job's sandbox is removed off its critical path. The worker hands the result
// back first (BullMQ completes the job) and removes the container in the background, bounded
// (PATCHBAY_REMOVALS at once, PATCHBAY_REMOVALS_QUEUE waiting, then a finished job waits for room),
// counted (metrics), and never leaked (a worker killed before its removal leaves it to the reaper).
// Docker: worker processes whose "engine" is a proxy that holds container removals
// (support/docker-proxy.ts), so what happens while a removal is under way is seen, not raced.
//
// Backend: Docker (worker processes whose engine is a proxy holding container removals: the removal
// is the subject).
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import { docker } from "../../src/backend/docker.js";
import { LABEL } from "../../src/backend/owner.js";
import { BackgroundRemovals } from "../../src/sandbox/removals.js";
import { reply, startFakeAnthropic, text, type FakeAnthropic } from "../support/fake-anthropic.js";
import { freePort, removeQueueSandboxes, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { startDockerProxy, type DockerProxy } from "../support/docker-proxy.js";
import { metricValue, parsePrometheusText } from "../support/prom-text.js";
import { byTurn } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A condition polled until true (a condition, not a sleep: the bound only turns a hang into a message). */
async function until(
  what: () => boolean | Promise<boolean>,
  label: string,
  log: () => string = () => "",
): Promise<void> {
  for (const t0 = Date.now(); !(await what()); await sleep(100))
    if (Date.now() - t0 > 120_000) throw new Error(`timed out waiting for ${label}\n${log()}`);
}

/** A removal the test ends by hand, and a promise that settles when it starts. */
function gated() {
  let open!: (fail?: boolean) => void;
  let began!: () => void;
  const started = new Promise<void>((ok) => (began = ok));
  const remove = () => (
    began(),
    new Promise<void>((ok, no) => (open = (fail) => (fail ? no(new Error("the engine said no")) : ok())))
  );
  return { remove, started, open: (fail?: boolean) => open(fail) };
}

describe("BackgroundRemovals", () => {
  it("runs `concurrency` at once, queues `maxQueued`, holds later hands until there is room, in order; counts; idle once all settled", async () => {
    const logged: string[] = [];
    const r = new BackgroundRemovals({ concurrency: 2, maxQueued: 1, log: (m) => logged.push(m) });
    const g = [0, 1, 2, 3, 4].map(() => gated());
    const handed: number[] = [];
    const hands = g.map((x, i) => r.hand(x.remove).then(() => handed.push(i)));
    await Promise.all([hands[0], hands[1], hands[2], g[0]!.started, g[1]!.started]);
    expect(r.stats).toEqual({ running: 2, queued: 1, blocked: 2, removed: 0, failed: 0 });
    expect(handed).toEqual([0, 1, 2]);

    g[0]!.open(); // a slot: 2 starts, 3 gets the queue's place, 4 still waits
    await Promise.all([hands[3], g[2]!.started]);
    expect(r.stats).toEqual({ running: 2, queued: 1, blocked: 1, removed: 1, failed: 0 });
    g[1]!.open(true); // a failure is counted and logged, and frees its slot too
    await Promise.all([hands[4], g[3]!.started]);
    expect(handed).toEqual([0, 1, 2, 3, 4]);
    expect(r.stats).toEqual({ running: 2, queued: 1, blocked: 0, removed: 1, failed: 1 });
    expect(logged).toEqual(["removing a sandbox in the background failed: the engine said no"]);

    let idle = false;
    const settled = r.idle().then(() => (idle = true));
    g[2]!.open();
    g[3]!.open();
    await g[4]!.started;
    expect(idle).toBe(false);
    g[4]!.open();
    await settled;
    expect(r.stats).toEqual({ running: 0, queued: 0, blocked: 0, removed: 4, failed: 1 });
  });
});

describe("a worker's sandbox removals (Docker, through a proxy that holds container removals)", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let proxy: DockerProxy | undefined;
  let client: PatchbayClient | undefined;
  let workers: WorkerProc[] = [];
  let queue = "";
  let n = 0;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeAnthropic(byTurn([reply(text("Nothing to change."))])); // one turn, an empty patch
  });
  afterEach(async () => {
    await Promise.all(workers.map((w) => w.stop("SIGKILL")));
    workers = [];
    await proxy?.close();
    await client?.close();
    if (queue) await removeQueueSandboxes(queue);
  });
  afterAll(async () => {
    await fake?.close();
    await redis?.stop();
  });

  // Owner ids of a host that is not this one: other files' reapers judge this host's owners by pid
  // and would take a killed worker's sandbox themselves; an owner elsewhere they leave to the
  // workers of its own queue, which judge it by its heartbeat (1 s here, lapsing after 3).
  const env = (who: string) => ({
    REDIS_URL: redis.url,
    PATCHBAY_QUEUE: queue,
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: "test-key",
    PATCHBAY_POOL: "0",
    PATCHBAY_CONCURRENCY: "1",
    PATCHBAY_WORKER_ID: `pb-test-removals-elsewhere:${queue}:${who}`,
    PATCHBAY_HEARTBEAT_MS: "1000",
  });
  /** A worker whose Docker is the holding proxy, with its metrics served. */
  const setup = async (extra: Record<string, string> = {}) => {
    queue = `removals-${++n}-${process.pid}`;
    client = new PatchbayClient({ redisUrl: redis.url, queueName: queue });
    proxy = await startDockerProxy({ holdRemovals: true });
    const port = await freePort();
    const w = startWorkerProc({ ...env("a"), DOCKER_HOST: proxy.url, ...extra }, ["--metrics-port", String(port)]);
    workers.push(w);
    await w.waitFor(/ready: queue/, 60_000);
    const metrics = async () => parsePrometheusText(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
    return { client, proxy, w, metrics };
  };
  const filters = (jobId?: string) => ({
    label: [`${LABEL.queue}=${queue}`, ...(jobId ? [`${LABEL.job}=${jobId}`] : [])],
  });
  const containers = async (jobId?: string) =>
    (await docker().listContainers({ all: true, filters: filters(jobId) })).length;
  const volumes = async (jobId?: string) =>
    ((await docker().listVolumes({ filters: filters(jobId) })).Volumes ?? []).length;
  const completed = async (c: PatchbayClient, ids: string[]) =>
    (await Promise.all(ids.map((id) => c.status(id)))).filter((s) => s.state === "completed").length;

  it("hands the job's result back before its container is removed; the worker then removes it", async () => {
    const { client, proxy, w, metrics } = await setup();
    const id = await client.enqueue({ task: "nothing to do", repo: { path: CLAMP } });
    // Before: the removal was awaited before the result, so with it held the job never completed.
    await until(
      async () => (await client.status(id)).state === "completed",
      "the job completed while its removal is held",
      w.log,
    );
    expect((await client.waitForResult(id, { timeoutMs: 10_000 })).status).toBe("completed");
    await until(() => proxy.held() === 1, "the removal asked of the engine");
    expect(await containers(id)).toBe(1); // handed back, and its container still there
    expect(metricValue(await metrics(), "patchbay_sandbox_removals_running")).toBe(1);

    proxy.releaseRemovals();
    await until(
      async () => metricValue(await metrics(), "patchbay_sandbox_removals_total", { outcome: "removed" }) === 1,
      "the background removal done",
      w.log,
    );
    expect(await containers(id)).toBe(0);
    expect(await volumes(id)).toBe(0);
    expect(metricValue(await metrics(), "patchbay_sandbox_removals_running")).toBe(0);
  }, 240_000);

  it("a job with verify: its verify sandbox goes to the background removals too; the result comes before either removal", async () => {
    const { client, proxy, w, metrics } = await setup();
    const id = await client.enqueue({ task: "nothing to do", repo: { path: CLAMP }, verify: "true" });
    // Before: the verify sandbox's removal was awaited at the job's end, so with it held the job never completed.
    await until(
      async () => (await client.status(id)).state === "completed",
      "the job completed while both removals are held",
      w.log,
    );
    const r = await client.waitForResult(id, { timeoutMs: 10_000 });
    expect([r.status, r.verify?.exitCode]).toEqual(["completed", 0]);
    await until(() => proxy.held() === 2, "the job's and the verify sandbox's removals asked of the engine");
    expect(await containers(id)).toBe(2);
    proxy.releaseRemovals();
    await until(
      async () => metricValue(await metrics(), "patchbay_sandbox_removals_total", { outcome: "removed" }) === 2,
      "both background removals done",
      w.log,
    );
    expect(await containers(id)).toBe(0);
    expect(await volumes(id)).toBe(0);
  }, 240_000);

  it("a worker SIGKILLed right after handing a result back leaves the container; another worker's reaper removes it", async () => {
    const { client, proxy, w } = await setup();
    const id = await client.enqueue({ task: "nothing to do", repo: { path: CLAMP } });
    await until(
      async () => (await client.status(id)).state === "completed",
      "the job completed while its removal is held",
      w.log,
    );
    await until(() => proxy.held() === 1, "the removal asked of the engine");
    await w.stop("SIGKILL"); // its removal dies with its connection, before the engine saw it
    expect(await containers(id)).toBe(1);
    expect(await volumes(id)).toBe(1);

    // Another worker of the queue (straight to the engine) reaps them once the dead one's heartbeat lapsed.
    const survivor = startWorkerProc({ ...env("b"), PATCHBAY_REAP_MS: "1000" });
    workers.push(survivor);
    await until(
      async () => (await containers(id)) + (await volumes(id)) === 0,
      "the dead worker's container and volume reaped",
      survivor.log,
    );
    await survivor.waitFor(/reaped [1-9]\d* containers?, [1-9]\d* volumes?/); // this worker did it (other files' reapers leave an owner elsewhere alone)
  }, 240_000);

  it("many jobs finishing at once: at most PATCHBAY_REMOVALS removals run, PATCHBAY_REMOVALS_QUEUE wait, the next finished job waits for room", async () => {
    const { client, proxy, w, metrics } = await setup({
      PATCHBAY_CONCURRENCY: "4",
      PATCHBAY_REMOVALS: "1",
      PATCHBAY_REMOVALS_QUEUE: "2",
    });
    const ids = await Promise.all(
      [1, 2, 3, 4].map((i) => client.enqueue({ task: `nothing to do, job ${i}`, repo: { path: CLAMP } })),
    );
    const blocked = async () => metricValue(await metrics(), "patchbay_sandbox_removals_blocked");
    // Three handed back (one removal held at the engine, two queued), the fourth waiting for room.
    // Before: four removals at once and no job handed back (stops at once on a second held removal).
    await until(
      async () => proxy.held() > 1 || ((await completed(client, ids)) === 3 && (await blocked()) === 1),
      "three jobs handed back, one waiting for room",
      w.log,
    );
    expect(proxy.held()).toBe(1);
    expect(proxy.maxHeld()).toBe(1);
    const m = await metrics();
    expect(metricValue(m, "patchbay_sandbox_removals_running")).toBe(1);
    expect(metricValue(m, "patchbay_sandbox_removals_queued")).toBe(2);
    expect(metricValue(m, "patchbay_sandbox_removals_blocked")).toBe(1);
    expect(await completed(client, ids)).toBe(3);
    expect(await containers()).toBe(4);

    proxy.releaseRemovals();
    await until(
      async () =>
        (await completed(client, ids)) === 4 &&
        metricValue(await metrics(), "patchbay_sandbox_removals_total", { outcome: "removed" }) === 4,
      "every job handed back and removed",
      w.log,
    );
    expect(await containers()).toBe(0);
    expect(await volumes()).toBe(0);
  }, 240_000);
});
