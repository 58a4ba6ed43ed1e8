// Reliability end to end: a worker killed with SIGKILL, SIGTERM drain, Redis restarted mid-job.
//
// Backend: Docker (the survivor's reaper removing the dead worker's container and volume).
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { docker } from "../../src/backend/docker.js";
import { LABEL } from "../../src/backend/owner.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic } from "../support/fake-anthropic.js";
import { startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { byTurn, taskOf } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// A job that takes a few seconds inside the sandbox, then fixes nothing and ends.
const slowScript = (sec: number) => [
  reply(toolUse("bash", { command: `echo slow >> /workspace/notes.txt; sleep ${sec}; echo done` })),
  reply(text("Done.")),
];

// Each worker's id names a host that is not this one. The reapers of other test files' workers
// (and of library users) judge an owner on this host by its pid, so they would remove a killed
// worker's sandbox themselves; an owner elsewhere they leave to the workers of its own queue,
// which judge it by its heartbeat. So what happens to these sandboxes is these workers' doing.
const workerId = (queue: string, i: number) => `pb-test-rel-elsewhere:${queue}-${i}:w`;

async function containersOf(w: WorkerProc): Promise<string[]> {
  const list = await docker().listContainers({ all: true, filters: { label: [`${LABEL.worker}=${idOf.get(w)}`] } });
  return list.map((c) => c.Id);
}
async function volumesOf(w: WorkerProc): Promise<string[]> {
  const { Volumes } = await docker().listVolumes({ filters: { label: [`${LABEL.worker}=${idOf.get(w)}`] } });
  return (Volumes ?? []).map((v) => v.Name);
}
const idOf = new Map<WorkerProc, string>();

/** Resolves once the job's transcript has an event of that type (its command is running, say). */
async function waitForEvent(client: PatchbayClient, id: string, type: string) {
  for await (const e of client.watch(id)) if (e.type === type) return;
  throw new Error(`job ${id} ended without a ${type} event`);
}

describe("reliability", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let env: Record<string, string>;
  let client: PatchbayClient;
  let workers: WorkerProc[] = [];
  let queue = 0;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeAnthropic(byTurn((body) => slowScript(Number(/sleep=(\d+)/.exec(taskOf(body))?.[1] ?? 3))));
  });
  afterEach(async () => {
    await Promise.all(workers.map((w) => w.stop("SIGKILL")));
    workers = [];
    await client?.close();
  });
  afterAll(async () => {
    await fake?.close();
    await redis?.stop();
  });

  const setup = async (n: number, extra: Record<string, string> = {}) => {
    const name = `rel-${++queue}`;
    env = {
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: name,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_LOCK_MS: "3000",
      PATCHBAY_STALLED_MS: "1000",
      PATCHBAY_REAP_MS: "1000",
      PATCHBAY_HEARTBEAT_MS: "1000",
      PATCHBAY_DRAIN_MS: "20000",
      PATCHBAY_POOL: "0",
      ...extra,
    }; // counts each worker's job sandboxes (no warm pool)
    workers = Array.from({ length: n }, (_, i) => {
      const w = startWorkerProc({ ...env, PATCHBAY_CONCURRENCY: "1", PATCHBAY_WORKER_ID: workerId(name, i) });
      idOf.set(w, workerId(name, i));
      return w;
    });
    await Promise.all(workers.map((w) => w.waitFor(new RegExp(`ready: queue ${name}`))));
    client = new PatchbayClient({ redisUrl: redis.url, queueName: name });
  };

  it("kill -9 of the worker holding a job: the job completes on the other, and the reaper removes the dead one's container", async () => {
    await setup(2);
    const id = await client.enqueue({ task: "slow job sleep=6", repo: { path: CLAMP } });
    const holder = await Promise.race(
      workers.map((w) => w.waitFor(new RegExp(`job ${id} attempt \\d+: started`)).then(() => w)),
    );
    const other = workers.find((w) => w !== holder)!;
    await waitForEvent(client, id, "tool_call"); // inside the slow command, its sandbox running
    expect((await containersOf(holder)).length).toBe(1);
    holder.proc.kill("SIGKILL");
    await holder.exited;
    const result = await client.waitForResult(id, { timeoutMs: 60_000 });
    expect(result.status).toBe("completed");
    expect(other.log()).toMatch(new RegExp(`job ${id} attempt \\d+: completed`));
    // Once the dead worker's heartbeat lapses, the survivor's reaper removes its container and volume.
    while ((await containersOf(holder)).length || (await volumesOf(holder)).length) await sleep(200);
    expect(other.log()).toMatch(/reaped 1 container\b/); // the survivor did it (its volume may go in a later pass)
  });

  it("SIGTERM drains: the active job finishes, no new job is taken, containers are gone, exit 0", async () => {
    // A deadline and a lock that a loaded machine (CI runs files in parallel) cannot outrun: this
    // test is about the drain, not about abandoning or stalls, which the next tests cover.
    await setup(1, { PATCHBAY_DRAIN_MS: "100000", PATCHBAY_LOCK_MS: "20000", PATCHBAY_STALLED_MS: "5000" });
    const [w] = workers;
    const id = await client.enqueue({ task: "slow job sleep=3", repo: { path: CLAMP } });
    await w!.waitFor(new RegExp(`job ${id} attempt 1: started`));
    w!.proc.kill("SIGTERM");
    await w!.waitFor(/draining \(1 active/);
    const later = await client.enqueue({ task: "slow job sleep=1 (after SIGTERM)", repo: { path: CLAMP } });
    expect(await w!.exited).toBe(0);
    expect(w!.log(), "the worker's log").toMatch(new RegExp(`job ${id} attempt 1: completed`));
    expect((await client.waitForResult(id, { timeoutMs: 5000 })).status).toBe("completed");
    expect((await client.status(later)).state).toBe("waiting");
    expect(await containersOf(w!)).toEqual([]);
    expect(await volumesOf(w!)).toEqual([]);
  }, 180_000);

  it("SIGTERM past the drain deadline abandons the job; it completes on another worker", async () => {
    await setup(2, { PATCHBAY_DRAIN_MS: "1000" });
    const id = await client.enqueue({ task: "slow job sleep=8", repo: { path: CLAMP } });
    const holder = await Promise.race(
      workers.map((w) => w.waitFor(new RegExp(`job ${id} attempt \\d+: started`)).then(() => w)),
    );
    const other = workers.find((w) => w !== holder)!;
    await waitForEvent(client, id, "tool_call");
    holder.proc.kill("SIGTERM");
    await holder.waitFor(/abandoning 1 job\b/, 60_000);
    expect(await holder.exited).toBe(0);
    expect(await containersOf(holder)).toEqual([]); // its sandbox went with it, removed by itself
    expect(await volumesOf(holder)).toEqual([]);
    const result = await client.waitForResult(id, { timeoutMs: 60_000 });
    expect(result.status).toBe("completed");
    expect(other.log()).toMatch(new RegExp(`job ${id} attempt \\d+: completed`));
  });

  it("Redis restarted mid-job: the job still completes", async () => {
    await setup(1);
    const id = await client.enqueue({ task: "slow job sleep=5", repo: { path: CLAMP } });
    await workers[0]!.waitFor(new RegExp(`job ${id} attempt 1: started`));
    await waitForEvent(client, id, "tool_call");
    await redis.stop();
    await sleep(1500); // the outage (not a synchronisation)
    await redis.start();
    const result = await client.waitForResult(id, { timeoutMs: 60_000 });
    expect(result.status).toBe("completed");
    expect(result.filesChanged).toEqual(["notes.txt"]);
  });
});
