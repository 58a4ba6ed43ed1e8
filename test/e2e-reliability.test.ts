// Reliability end to end: a worker killed with SIGKILL, SIGTERM drain, Redis restarted mid-job.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { docker, LABEL } from "../src/sandbox/docker.js";
import { PatchbayClient } from "../src/queue.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic } from "./support/fake-anthropic.js";
import { startRedis, startWorkerProc, type WorkerProc } from "./support/cluster.js";
import { byTurn, taskOf } from "./support/scripts.js";

const CLAMP = new URL("../examples/clamp", import.meta.url).pathname;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// A job that takes a few seconds inside the sandbox, then fixes nothing and ends.
const slowScript = (sec: number) => [
  reply(toolUse("bash", { command: `echo slow >> /workspace/notes.txt; sleep ${sec}; echo done` })),
  reply(text("Done.")),
];

async function containersOf(workerPid: number): Promise<string[]> {
  const list = await docker().listContainers({ all: true, filters: { label: [LABEL.managed] } });
  return list.filter((c) => c.Labels[LABEL.worker]?.split(":")[1] === String(workerPid)).map((c) => c.Id);
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
    env = { REDIS_URL: redis.url, PATCHBAY_QUEUE: name, ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "test-key", PATCHBAY_LOCK_MS: "3000", PATCHBAY_STALLED_MS: "1000", PATCHBAY_REAP_MS: "1000", PATCHBAY_DRAIN_MS: "20000", ...extra };
    workers = Array.from({ length: n }, () => startWorkerProc({ ...env, PATCHBAY_CONCURRENCY: "1" }));
    await Promise.all(workers.map((w) => w.waitFor(new RegExp(`ready: queue ${name}`))));
    client = new PatchbayClient({ redisUrl: redis.url, queueName: name });
  };

  it("kill -9 of the worker holding a job: the job completes on the other, and the reaper removes the dead one's container", async () => {
    await setup(2);
    const id = await client.enqueue({ task: "slow job sleep=6", repo: { path: CLAMP } });
    const holder = await Promise.race(workers.map((w) => w.waitFor(new RegExp(`job ${id} attempt \\d+: started`)).then(() => w)));
    const other = workers.find((w) => w !== holder)!;
    await sleep(1500); // inside the slow command, its sandbox running
    expect((await containersOf(holder.pid)).length).toBe(1);
    holder.proc.kill("SIGKILL");
    await holder.exited;
    const result = await client.waitForResult(id, { timeoutMs: 60_000 });
    expect(result.status).toBe("completed");
    expect(other.log()).toMatch(new RegExp(`job ${id} attempt \\d+: completed`));
    // The survivor's reaper runs every second: the dead worker's container and volume go.
    for (let i = 0; i < 50 && (await containersOf(holder.pid)).length; i++) await sleep(200);
    expect(await containersOf(holder.pid)).toEqual([]);
    const vols = await docker().listVolumes({ filters: { label: [`${LABEL.worker}`] } });
    expect((vols.Volumes ?? []).filter((v) => v.Labels?.[LABEL.worker]?.split(":")[1] === String(holder.pid))).toEqual([]);
  });

  it("SIGTERM drains: the active job finishes, no new job is taken, containers are gone, exit 0", async () => {
    await setup(1);
    const [w] = workers;
    const id = await client.enqueue({ task: "slow job sleep=3", repo: { path: CLAMP } });
    await w!.waitFor(new RegExp(`job ${id} attempt 1: started`));
    w!.proc.kill("SIGTERM");
    await w!.waitFor(/draining \(1 active/);
    const later = await client.enqueue({ task: "slow job sleep=1 (after SIGTERM)", repo: { path: CLAMP } });
    expect(await w!.exited).toBe(0);
    expect((await client.waitForResult(id, { timeoutMs: 5000 })).status).toBe("completed");
    expect((await client.status(later)).state).toBe("waiting");
    expect(await containersOf(w!.pid)).toEqual([]);
  });

  it("SIGTERM past the drain deadline abandons the job; it completes on another worker", async () => {
    await setup(2, { PATCHBAY_DRAIN_MS: "1000" });
    const id = await client.enqueue({ task: "slow job sleep=8", repo: { path: CLAMP } });
    const holder = await Promise.race(workers.map((w) => w.waitFor(new RegExp(`job ${id} attempt \\d+: started`)).then(() => w)));
    const other = workers.find((w) => w !== holder)!;
    await sleep(1000);
    holder.proc.kill("SIGTERM");
    await holder.waitFor(/abandoning 1 jobs/, 10_000);
    expect(await holder.exited).toBe(0);
    expect(await containersOf(holder.pid)).toEqual([]); // its sandbox went with it
    const result = await client.waitForResult(id, { timeoutMs: 60_000 });
    expect(result.status).toBe("completed");
    expect(other.log()).toMatch(new RegExp(`job ${id} attempt \\d+: completed`));
  });

  it("Redis restarted mid-job: the job still completes", async () => {
    await setup(1);
    const id = await client.enqueue({ task: "slow job sleep=5", repo: { path: CLAMP } });
    await workers[0]!.waitFor(new RegExp(`job ${id} attempt 1: started`));
    await sleep(1000);
    await redis.stop();
    await sleep(1500);
    await redis.start();
    const result = await client.waitForResult(id, { timeoutMs: 60_000 });
    expect(result.status).toBe("completed");
    expect(result.filesChanged).toEqual(["notes.txt"]);
  });
});
