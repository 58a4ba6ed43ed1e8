// Resume and stalls end to end: worker processes, a private Redis, the scripted server; the local
// backend (test/support/backend.ts) where the subject is the worker's and the checkpoint's logic,
// Docker for the full load (its engine and its streams are what loads the worker there).
// - kill -9 of the worker at turn 5 of a 10-turn job: the job completes on the other worker with at
//   most 2 more model requests than an uninterrupted run, and the same patch;
// - a poison job that kills every worker that takes it ends failed after its attempts, with a
//   clear reason, and the replacement workers take other jobs;
// - 1 worker x concurrency 8 on this 2-core machine, default lock timings: no job stalls.
//
// Backend: local, but on Docker the full load (1 worker × 8: the engine and its streams load the
// worker).
import { Job } from "bullmq";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import { emptyResult, type TranscriptEvent } from "../../src/core/spec/spec.js";
import { startFakeAnthropic, type FakeAnthropic } from "../support/fake-anthropic.js";
import { removeQueueSandboxes, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { resumePolicy } from "../support/resume-scripts.js";
import { LOCAL_WORKER_ENV } from "../support/backend.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
// An owner "elsewhere": other files' reapers leave these sandboxes to this file's workers.
const workerId = (queue: string, i: number) => `pb-test-resume-elsewhere:${queue}-${i}:w`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function eventsOf(client: PatchbayClient, id: string): Promise<TranscriptEvent[]> {
  const out: TranscriptEvent[] = [];
  for await (const e of client.watch(id)) out.push(e);
  return out;
}
async function untilEvent(client: PatchbayClient, id: string, match: (e: TranscriptEvent) => boolean) {
  for await (const e of client.watch(id)) if (match(e)) return e;
  throw new Error(`job ${id} ended without the event`);
}

describe("resume and stalls, end to end", { timeout: 600_000 }, () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let policy: ReturnType<typeof resumePolicy>;
  let client: PatchbayClient | undefined;
  let workers: WorkerProc[] = [];
  let n = 0;

  beforeAll(async () => {
    redis = await startRedis();
    policy = resumePolicy(10, 8); // the slow command sleeps 8 s (again, when a resumed attempt runs it again)
    fake = await startFakeAnthropic(policy.policy);
  });
  const queues: string[] = [];
  afterEach(async () => {
    await Promise.all(workers.map((w) => w.stop("SIGKILL")));
    workers = [];
    for (const q of queues.splice(0)) await removeQueueSandboxes(q); // their warm pools
    await client?.close();
    client = undefined;
  });
  afterAll(async () => {
    await fake?.close();
    await redis?.stop();
  });

  /** `count` worker processes of a queue of their own, on the local backend unless `docker`. */
  const cluster = (count: number, extra: Record<string, string> = {}, backend: "local" | "docker" = "local") => {
    const queue = `resume-${process.pid}-${++n}`;
    queues.push(queue);
    const env = {
      ...(backend === "local" ? LOCAL_WORKER_ENV : {}),
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: queue,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_REAP_MS: "2000",
      PATCHBAY_HEARTBEAT_MS: "1000",
      PATCHBAY_CONCURRENCY: "1",
      ...extra,
    };
    let i = 0;
    const spawn = () => {
      const w = startWorkerProc({ ...env, PATCHBAY_WORKER_ID: workerId(queue, i++) });
      workers.push(w);
      return w;
    };
    for (let k = 0; k < count; k++) spawn();
    client = new PatchbayClient({ redisUrl: redis.url, queueName: queue });
    return { queue, spawn, client };
  };
  const ready = (ws: WorkerProc[], queue: string) =>
    Promise.all(ws.map((w) => w.waitFor(new RegExp(`ready: queue ${queue}`), 120_000)));

  it("kill -9 at turn 5 of 10: completes on the other worker, no model request paid twice, the same patch", async () => {
    // Default lock and stall timings: the kill is noticed within 30 s.
    const { queue, client } = cluster(2);
    await ready(workers, queue);
    const plainTask = "ten turns of edits (uninterrupted)";
    const plain = await client.waitForResult(await client.enqueue({ task: plainTask, repo: { path: CLAMP } }), {
      timeoutMs: 300_000,
    });
    expect(plain.status).toBe("completed");
    const base = policy.count(plainTask);
    expect(base).toBe(11);

    const task = "ten turns of edits, killed in slow=5";
    const id = await client.enqueue({ task, repo: { path: CLAMP } });
    await untilEvent(client, id, (e) => e.type === "tool_call" && e.turn === 5);
    const holder = workers.find((w) => new RegExp(`job ${id} attempt 1: started`).test(w.log()))!;
    const other = workers.find((w) => w !== holder)!;
    holder.proc.kill("SIGKILL");
    await holder.exited;
    const killedAt = Date.now();
    const result = await client.waitForResult(id, { timeoutMs: 300_000 });
    console.log(
      `kill -9 at turn 5: completed ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill; ${policy.count(task)} model requests (uninterrupted: ${base})`,
    );
    expect(result.status).toBe("completed");
    expect(other.log()).toMatch(new RegExp(`job ${id} attempt \\d+: completed`));
    // Killed while turn 5's command ran: the answer of turn 5 was kept before it ran, so the
    // resumed attempt runs that command again and pays no request twice (the issue allows 2 more).
    expect(policy.count(task)).toBe(base);
    expect(result.patch).toBe(plain.patch);
    expect(result.turns).toBe(11);
    const events = await eventsOf(client, id);
    expect(events.find((e) => e.type === "resume")).toMatchObject({ restored: true, fromAttempt: 1, turns: 5 });
    expect(events.filter((e) => e.type === "job_finished")).toMatchObject([{ status: "completed" }]);
    // The checkpoint went with the job.
    expect(await client.redis.exists(`patchbay:${queue}:checkpoint:${id}`)).toBe(0);
  });

  it("a job whose earlier attempt recorded its result (its worker died before BullMQ had it completed) returns that result, runs nothing, finishes once", async () => {
    const { queue, client } = cluster(1);
    await ready(workers, queue);
    // A normal job: its result record goes once BullMQ has the job completed.
    const plain = await client.enqueue({ task: "recorded plain turns=6", repo: { path: CLAMP } });
    expect((await client.waitForResult(plain, { timeoutMs: 300_000 })).status).toBe("completed");
    for (let i = 0; i < 50 && (await client.redis.exists(`patchbay:${queue}:result:${plain}`)); i++) await sleep(100);
    expect(await client.redis.exists(`patchbay:${queue}:result:${plain}`)).toBe(0);

    // What a worker killed between recording and completing leaves: the record and its job_finished.
    const jobId = `recorded-${process.pid}`;
    const task = "recorded: never asked";
    const { error: _none, ...base } = emptyResult("completed", "", { jobId, attempt: 1 });
    const recorded = { ...base, patch: "diff --git a/x b/x\n", filesChanged: ["x"], turns: 3 };
    await client.redis.set(`patchbay:${queue}:result:${jobId}`, JSON.stringify(recorded));
    await client.redis.xadd(
      `patchbay:${queue}:events:${jobId}`,
      "*",
      "e",
      JSON.stringify({
        ts: new Date().toISOString(),
        jobId,
        attempt: 1,
        type: "job_finished",
        status: "completed",
        costUsd: 0,
        turns: 3,
      }),
    );
    await client.enqueue({ task, repo: { path: CLAMP }, jobId });
    const result = await client.waitForResult(jobId, { timeoutMs: 120_000 });
    expect(result).toMatchObject({ status: "completed", patch: recorded.patch, filesChanged: ["x"], turns: 3 });
    expect(policy.count(task)).toBe(0);
    expect(workers[0]!.log()).toMatch(
      new RegExp(
        `job ${jobId} attempt 1: an earlier attempt finished \\(completed\\) before its worker stopped; its recorded result stands`,
      ),
    );
    const finished = (await eventsOf(client, jobId)).filter((e) => e.type === "job_finished");
    expect(finished).toHaveLength(1);
  });

  it("a poison job that kills every worker taking it ends failed after its attempts, with the reason; the replacements take other jobs", async () => {
    const { queue, spawn, client } = cluster(1, { PATCHBAY_LOCK_MS: "3000", PATCHBAY_STALLED_MS: "1000" });
    await ready(workers, queue);
    const id = await client.enqueue({ task: "poison slow=1", repo: { path: CLAMP }, attempts: 2 });
    let kills = 0;
    // Each worker that gets as far as the job's first command dies, and a new one takes its place.
    const killer = (async () => {
      for (;;) {
        const w = workers.at(-1)!;
        const started = await Promise.race([
          w.waitFor(new RegExp(`job ${id} attempt \\d+: started`), 300_000).then(() => true),
          client.waitForResult(id).then(
            () => false,
            () => false,
          ),
        ]);
        if (!started) return;
        const attempt = Number([...w.log().matchAll(new RegExp(`job ${id} attempt (\\d+): started`, "g"))].at(-1)![1]);
        await untilEvent(client, id, (e) => e.type === "tool_call" && e.attempt === attempt);
        w.proc.kill("SIGKILL");
        await w.exited;
        kills++;
        const next = spawn();
        await ready([next], queue);
      }
    })();
    const err = await client.waitForResult(id, { timeoutMs: 300_000 }).then(
      () => undefined,
      (e: Error) => e,
    );
    await killer;
    expect(kills).toBe(2);
    expect(err?.message).toMatch(
      /the worker running this job stopped under it 2 times \(killed, or it lost its lock\): no attempts left \(2 of 2 used\)/,
    );
    expect((await client.status(id)).state).toBe("failed");
    const events = await eventsOf(client, id);
    expect(events.at(-1)).toMatchObject({ type: "job_finished", status: "failed" });
    // The last replacement is not wedged: it takes and completes another job.
    const other = await client.waitForResult(
      await client.enqueue({ task: "after the poison", repo: { path: CLAMP } }),
      { timeoutMs: 300_000 },
    );
    expect(other.status).toBe("completed");
  });

  it("1 worker x concurrency 8 on 2 cores, default lock timings: no job stalls", async () => {
    const { queue, client } = cluster(1, { PATCHBAY_CONCURRENCY: "8" }, "docker");
    await ready(workers, queue);
    const ids = await client.enqueueBatch(
      Array.from({ length: 8 }, (_, i) => ({ task: `full load ${i}`, repo: { path: CLAMP } })),
    );
    const results = await Promise.all(ids.map((id) => client.waitForResult(id, { timeoutMs: 600_000 })));
    expect(results.map((r) => r.status)).toEqual(ids.map(() => "completed"));
    for (const id of ids) {
      const job = await Job.fromId(client.queue, id);
      expect(job?.stalledCounter, id).toBe(0);
      expect(job?.attemptsStarted, id).toBe(1);
    }
    expect(workers[0]!.log()).not.toMatch(/stalled/);
  });
});
