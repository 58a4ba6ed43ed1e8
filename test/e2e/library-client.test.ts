// The library's queue client as a script uses it: it exits by itself when done, waitForResult
// honours its timeout (Redis down too) and warns when no worker listens; and the worker's logs.
import { Worker } from "bullmq";
import { Redis } from "ioredis";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workerLogger } from "../../src/observability/log.js";
import { BatchClient } from "../../src/batch/batches.js";
import { PatchbayClient, WaitTimeoutError, type JobData } from "../../src/queue/client.js";
import { emptyResult, type JobResult } from "../../src/core/spec/spec.js";
import { ensureBuilt, patchbay, REFUSED_REDIS, ROOT, spawnPatchbay } from "../support/cli-helpers.js";
import { startRedis } from "../support/cluster.js";

const CLAMP = join(ROOT, "examples/clamp");

describe("library client", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  const closers: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    redis = await startRedis();
  });

  afterAll(async () => {
    for (const close of closers) await close();
    await redis?.stop();
  });

  it("a script that enqueues and waits for the result exits by itself, with no close call", async () => {
    const w = new Worker<JobData, JobResult>(
      "lib-exit",
      async (job) => emptyResult("completed", "", { jobId: job.id! }),
      { connection: new Redis(redis.url, { maxRetriesPerRequest: null }) },
    );
    closers.push(() => w.close());
    const dir = mkdtempSync(join(tmpdir(), "pb-lib-"));
    const script = join(dir, "script.mjs");
    writeFileSync(
      script,
      `import { enqueue, waitForResult } from ${JSON.stringify(join(ROOT, "dist/index.js"))};
const id = await enqueue({ task: "a library job", repo: { path: ${JSON.stringify(CLAMP)} } });
const r = await waitForResult(id, { timeoutMs: 20000, warnIfNoWorker: false }); // this test's worker has no heartbeat
console.log("done", r.status);
`,
    );
    const r = await patchbay([], { REDIS_URL: redis.url, PATCHBAY_QUEUE: "lib-exit" }, { script, timeoutMs: 25_000 });
    expect(r.stderr).toBe("");
    expect(r).toMatchObject({ code: 0, stdout: "done completed\n" });
  });

  it("a job that fails while it is being polled always reports its reason (job read after its state)", async () => {
    // The CI race this guards: the job was read before it failed and its state after, giving
    // "unknown reason". Tight polling while a real worker fails jobs lands in that window often.
    const w = new Worker<JobData, JobResult>(
      "lib-race",
      async (job) => {
        await new Promise((r) => setTimeout(r, Math.random() * 20));
        throw new Error(`boom ${job.id}`);
      },
      { connection: new Redis(redis.url, { maxRetriesPerRequest: null }), concurrency: 4 },
    );
    closers.push(() => w.close());
    const c = new PatchbayClient({ redisUrl: redis.url, queueName: "lib-race" });
    closers.push(() => c.close());
    const ids = await c.enqueueBatch(
      Array.from({ length: 40 }, (_, i) => ({ task: `race ${i}`, repo: { path: CLAMP }, attempts: 1 })),
    );
    const reasons = await Promise.all(
      ids.map(async (id) => {
        for (;;) {
          try {
            if (await c.result(id)) return "completed?";
          } catch (err) {
            return (err as Error).message;
          }
        }
      }),
    );
    expect(reasons).toEqual(ids.map((id) => `job ${id} failed: boom ${id}`));
    expect((await c.status(ids[0]!)).error).toBe(`boom ${ids[0]}`);
  });

  it("waitForResult gives up after timeoutMs, and warns when no worker listens on the queue", async () => {
    const c = new PatchbayClient({ redisUrl: redis.url, queueName: "lib-timeout" });
    closers.push(() => c.close());
    const id = await c.enqueue({ task: "nobody takes this", repo: { path: CLAMP } });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    try {
      const t0 = Date.now();
      await expect(c.waitForResult(id, { timeoutMs: 800 })).rejects.toBeInstanceOf(WaitTimeoutError);
      expect(Date.now() - t0).toBeLessThan(3000);
      await new Promise((r) => setTimeout(r, 50));
      expect(warnings.map((w) => (w as Error & { code?: string }).code)).toContain("PATCHBAY_NO_WORKER");
      expect(warnings.find((w) => /no worker is listening on queue 'lib-timeout'/.test(w.message))).toBeDefined();
    } finally {
      process.off("warning", onWarning);
    }
  });

  it("waitForResult keeps its timeout while Redis refuses connections", async () => {
    const c = new PatchbayClient({ redisUrl: REFUSED_REDIS, queueName: "lib-down" });
    closers.push(() => c.close());
    const t0 = Date.now();
    await expect(c.waitForResult("any", { timeoutMs: 1000, warnIfNoWorker: false })).rejects.toBeInstanceOf(
      WaitTimeoutError,
    );
    expect(Date.now() - t0).toBeLessThan(4000);
  });

  it("worker logs: an ISO timestamp, the worker id and the job id on each line", () => {
    const text: string[] = [];
    workerLogger("host:1", { write: (l) => text.push(l) })("job 7 attempt 1: started", { job: "7", attempt: 1 });
    workerLogger("host:1", { write: (l) => text.push(l) })("something about a job", { job: "8", level: "warn" });
    expect(text[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[worker host:1\] job 7 attempt 1: started\n$/);
    expect(text[1]).toMatch(/Z \[worker host:1\] WARN job 8: something about a job\n$/);
    const json: string[] = [];
    workerLogger("host:1", { format: "json", write: (l) => json.push(l) })("job 7 attempt 1: started", {
      job: "7",
      attempt: 1,
    });
    expect(JSON.parse(json[0]!)).toMatchObject({
      level: 30,
      worker: "host:1",
      job: "7",
      attempt: 1,
      msg: "job 7 attempt 1: started",
      time: expect.stringMatching(/^\d{4}-.*Z$/),
    });
  });

  it("`patchbay worker --log-format json`: one JSON object per line, job lines carry the job id", async () => {
    const c = new PatchbayClient({ redisUrl: redis.url, queueName: "lib-logs" });
    closers.push(() => c.close());
    // Its batch cancelled before it starts: the worker ends it at once, with no sandbox and no model
    // (a job cancelled on its own while it waits never reaches a worker: it is cancelled at once).
    const batch = await new BatchClient(c).submit([{ task: "cancelled before it starts", repo: { path: CLAMP } }]);
    const id = batch.ids[0]!;
    await new BatchClient(c).cancel(batch.batchId);
    const w = spawnPatchbay(["worker", "--log-format", "json", "--queue", "lib-logs"], {
      REDIS_URL: redis.url,
      PATCHBAY_REAP_MS: "600000",
      ANTHROPIC_API_KEY: "test-key",
    });
    closers.push(async () => (w.proc.exitCode === null ? (w.proc.kill("SIGTERM"), w.exited) : undefined));
    await w.waitFor(/"msg":"job \S+ attempt 1: cancelled/, 60_000);
    w.proc.kill("SIGTERM");
    expect(await w.exited).toBe(0);
    const lines = w.out().stderr.trim().split("\n");
    const records = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const r of records)
      expect(r).toMatchObject({
        time: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
        worker: expect.any(String),
        msg: expect.any(String),
      });
    expect(records.find((r) => /ready: queue lib-logs/.test(String(r.msg)))).toBeDefined();
    const jobLines = records.filter((r) => String(r.msg).startsWith(`job ${id} `));
    expect(jobLines.length).toBeGreaterThanOrEqual(2);
    for (const r of jobLines) expect(r).toMatchObject({ job: id, attempt: 1 });
    expect(records.find((r) => /SIGTERM: shutting down/.test(String(r.msg)))).toBeDefined();
  });
});
