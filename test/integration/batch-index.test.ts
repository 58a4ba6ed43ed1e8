// The batch index without workers or Docker: a private redis-server, the client's side of
// src/batch/batches.ts, and the worker's hooks called directly with made-up results.
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BatchClient,
  BatchConflictError,
  BatchFileError,
  BatchNotFoundError,
  batchHooks,
  mdCell,
  parseBatchFile,
  summarizeBatch,
  summaryMarkdown,
  type BatchStatus,
} from "../../src/batch/batches.js";
import { exitCodeFor, worstExitCode } from "../../src/cli/exit.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { emptyResult, type JobResult, type JobStatus } from "../../src/core/spec/spec.js";
import { startRedis } from "../support/cluster.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const spec = (task: string) => ({ task, repo: { path: CLAMP } });

describe("batch index", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  const clients: PatchbayClient[] = [];
  let raw: Redis;

  beforeAll(async () => {
    redis = await startRedis();
    raw = new Redis(redis.url, { maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    raw?.disconnect();
    await Promise.all(clients.map((c) => c.close()));
    await redis?.stop();
  });
  const batches = (queueName: string) => {
    const c = new PatchbayClient({ redisUrl: redis.url, queueName });
    clients.push(c);
    return new BatchClient(c);
  };
  /** What a worker does for one job: start, then finish with this result. */
  const run = async (
    queueName: string,
    jobId: string,
    result: Partial<JobResult> & { status: JobStatus },
    attempt = 1,
  ) => {
    const c = clients.find((x) => x.queueName === queueName)!;
    const job = await c.queue.getJob(jobId);
    const hooks = batchHooks(raw, queueName, 3600);
    const early = await hooks.start(job!.data, jobId, attempt);
    const r = early ?? { ...emptyResult(result.status, result.error ?? ""), ...result, jobId, attempt };
    if (!result.error && !early) delete r.error;
    await hooks.finish(job!.data, jobId, attempt, r);
    return r;
  };

  it("parseBatchFile names every bad line as file:line and skips blank lines", () => {
    const text = [
      JSON.stringify(spec("a")),
      "",
      "{nope",
      JSON.stringify({ repo: { path: CLAMP } }),
      JSON.stringify(spec("b")),
    ].join("\n");
    let err: BatchFileError | undefined;
    try {
      parseBatchFile(text, "t.jsonl");
    } catch (e) {
      err = e as BatchFileError;
    }
    expect(err).toBeInstanceOf(BatchFileError);
    expect(err!.errors).toEqual([
      expect.stringMatching(/^t\.jsonl:3: not valid JSON/),
      expect.stringMatching(/^t\.jsonl:4: invalid JobSpec: task: required/),
    ]);
    const ok = parseBatchFile([JSON.stringify(spec("a")), "", JSON.stringify(spec("b"))].join("\n"));
    expect(ok.map((l) => [l.line, l.spec.task])).toEqual([
      [1, "a"],
      [3, "b"],
    ]);
  });

  it("submit: job ids <batch>-L<line>; the same specs again add nothing; a name reused for other specs is refused", async () => {
    const b = batches("q-submit");
    const lines = parseBatchFile([JSON.stringify(spec("one")), "", JSON.stringify(spec("two"))].join("\n"));
    const first = await b.submit(lines);
    expect(first.batchId).toMatch(/^b-[0-9a-f]{16}$/);
    expect(first.ids).toEqual([`${first.batchId}-L1`, `${first.batchId}-L3`]);
    expect(first.added).toBe(2);
    const again = await b.submit(
      parseBatchFile([JSON.stringify(spec("one")), "", JSON.stringify(spec("two"))].join("\n")),
    );
    expect(again).toEqual({ ...first, added: 0 });
    expect(await b.c.queue.getJobCounts("waiting")).toEqual({ waiting: 2 });
    const named = await b.submit(lines, { name: "nightly" });
    expect(named.ids).toEqual(["nightly-L1", "nightly-L3"]);
    await expect(b.submit([spec("other")], { name: "nightly" })).rejects.toBeInstanceOf(BatchConflictError);
    const job = await b.c.queue.getJob("nightly-L3");
    expect(job!.data).toMatchObject({ batch: { id: "nightly", line: 3 }, spec: { task: "two" } });
    const st = await b.status("nightly");
    expect(st).toMatchObject({
      batchId: "nightly",
      name: "nightly",
      total: 2,
      done: 0,
      waiting: 2,
      running: 0,
      spentUsd: 0,
    });
    await expect(b.status("nope")).rejects.toBeInstanceOf(BatchNotFoundError);
    expect((await b.list()).map((x) => x.batchId).sort()).toEqual([first.batchId, "nightly"].sort());
  });

  it("counts by status and verify come from the workers' records; status --jobs shows each line", async () => {
    const q = "q-counts";
    const b = batches(q);
    const { batchId, ids } = await b.submit(["a", "b", "c", "d"].map(spec), { name: "counts" });
    await run(q, ids[0]!, { status: "completed", verified: true, costUsd: 0.5 });
    await run(q, ids[1]!, {
      status: "verify_failed",
      verified: false,
      costUsd: 0.25,
      error: "verify failed (exit 1) after 2 rounds",
    });
    await run(q, ids[2]!, { status: "failed", costUsd: 0, error: "repo.archive: not a valid tar" });
    const mid = await b.status(batchId, { jobs: true });
    expect(mid).toMatchObject({
      total: 4,
      done: 3,
      running: 0,
      waiting: 1,
      verified: 1,
      unverified: 1,
      spentUsd: 0.75,
    });
    expect(mid.counts).toMatchObject({ completed: 1, verify_failed: 1, failed: 1, timeout: 0 });
    expect(mid.finishedAt).toBeUndefined();
    expect(mid.jobs!.map((j) => [j.line, j.state, j.result?.status])).toEqual([
      [1, "finished", "completed"],
      [2, "finished", "verify_failed"],
      [3, "finished", "failed"],
      [4, "waiting", undefined],
    ]);
    // A re-record of the same job (a stalled job run again) replaces, not adds.
    await run(q, ids[2]!, { status: "timeout", costUsd: 0.1, error: "timed out" }, 2);
    await run(q, ids[3]!, { status: "completed", costUsd: 0.1 });
    const end = await b.status(batchId);
    expect(end.counts).toMatchObject({ completed: 2, verify_failed: 1, failed: 0, timeout: 1 });
    expect(end).toMatchObject({ done: 4, waiting: 0 });
    expect(end.spentUsd).toBeCloseTo(0.95, 6);
    expect(end.finishedAt).toBeGreaterThan(0);
  });

  it("retry: new ids for the chosen lines only; the summary counts their latest attempt; the spend keeps both", async () => {
    const q = "q-retry";
    const b = batches(q);
    const { batchId, ids } = await b.submit(["a", "b", "c"].map(spec), { name: "retry" });
    await run(q, ids[0]!, { status: "completed", costUsd: 1 });
    await run(q, ids[1]!, { status: "verify_failed", verified: false, costUsd: 1 });
    await run(q, ids[2]!, { status: "timeout", costUsd: 1 });
    const r = await b.retry(batchId, { statuses: ["verify_failed"] });
    expect(r.ids).toEqual(["retry-L2-r1"]);
    const mid = await b.status(batchId);
    expect(mid).toMatchObject({ done: 2, waiting: 1, unverified: 0 });
    expect(mid.finishedAt).toBeUndefined();
    await run(q, "retry-L2-r1", { status: "completed", verified: true, costUsd: 1 });
    const end = await b.status(batchId, { jobs: true });
    expect(end.counts).toMatchObject({ completed: 2, verify_failed: 0, timeout: 1 });
    expect(end).toMatchObject({ done: 3, verified: 1, unverified: 0, spentUsd: 4 });
    expect(end.jobs!.map((j) => j.jobId)).toEqual(["retry-L1", "retry-L2-r1", "retry-L3"]);
    // Retry again: the new job's id counts up; submitting the file again does not undo the retry.
    expect((await b.retry(batchId, { statuses: ["timeout"] })).ids).toEqual(["retry-L3-r1"]);
    expect((await b.submit(["a", "b", "c"].map(spec), { name: "retry" })).ids).toEqual([
      "retry-L1",
      "retry-L2-r1",
      "retry-L3-r1",
    ]);
  });

  it("a retried job that ends before its line is switched is still counted", async () => {
    const q = "q-race";
    const b = batches(q);
    const { batchId, ids } = await b.submit([spec("a")], { name: "race" });
    await run(q, ids[0]!, { status: "failed", error: "x" });
    // What retry does, with a worker finishing the new job in between: add, finish, switch.
    await b.c.queue.add("fix", { ...(await b.c.queue.getJob(ids[0]!))!.data }, { jobId: "race-L1-r1" });
    await run(q, "race-L1-r1", { status: "completed" });
    expect((await b.status(batchId)).counts.completed).toBe(0); // not the line's latest yet
    expect((await b.retry(batchId)).ids).toEqual(["race-L1-r1"]);
    expect((await b.status(batchId)).counts).toMatchObject({ completed: 1, failed: 0 });
  });

  it("budget: a small budget and spend are shown with the digits that make them true, never $0.00", async () => {
    const q = "q-budget-small";
    const b = batches(q);
    const { ids } = await b.submit([spec("a")], { name: "small", budgetUsd: 0.001 });
    const job = await b.c.queue.getJob(ids[0]!);
    const hooks = batchHooks(raw, q, 3600);
    expect(await hooks.start(job!.data, ids[0]!, 1)).toBeUndefined();
    const note = await hooks.stopAfterTurn(job!.data, ids[0]!, 1)!(0.0016);
    expect(note).toMatch(/the batch's budget of \$0\.001 is spent \(\$0\.0016\)/);
    expect(note).not.toContain("$0.00 ");
  });

  it("budget: once spent, jobs not started end budget_exceeded at once; a running one stops after its turn", async () => {
    const q = "q-budget";
    const b = batches(q);
    const { batchId, ids } = await b.submit(["a", "b", "c"].map(spec), { name: "budget", budgetUsd: 1 });
    const job = await b.c.queue.getJob(ids[0]!);
    const hooks = batchHooks(raw, q, 3600);
    expect(await hooks.start(job!.data, ids[0]!, 1)).toBeUndefined();
    expect((await b.status(batchId)).running).toBe(1);
    const turn = hooks.stopAfterTurn(job!.data, ids[0]!, 1)!;
    expect(await turn(0.4)).toBeUndefined();
    expect(await turn(0.7)).toBeUndefined(); // a running total: 0.7, not 1.1
    expect(await turn(1.2)).toMatch(/budget of \$1\.00 is spent \(\$1\.20\)/);
    await hooks.finish(job!.data, ids[0]!, 1, { ...emptyResult("budget_exceeded", "spent"), costUsd: 1.2 });
    const r = await run(q, ids[1]!, { status: "completed" });
    expect(r).toMatchObject({
      status: "budget_exceeded",
      turns: 0,
      costUsd: 0,
      error: expect.stringMatching(/did not start/),
    });
    const st = await b.status(batchId);
    expect(st).toMatchObject({ spentUsd: 1.2, budgetUsd: 1, running: 0 });
    expect(st.counts.budget_exceeded).toBe(2);
    // A job of no batch is left alone.
    expect(await hooks.start({ spec: spec("x"), enqueuedAt: 0 }, "plain", 1)).toBeUndefined();
    expect(hooks.stopAfterTurn({ spec: spec("x"), enqueuedAt: 0 }, "plain", 1)).toBeUndefined();
  });

  it("a USD budget over a model whose price is unknown is refused, naming the line; enqueues nothing", async () => {
    const b = batches("q-unpriced");
    const specs = [spec("a"), { ...spec("b"), model: "my-own-model" }];
    await expect(b.submit(specs, { name: "unpriced", budgetUsd: 1 })).rejects.toThrow(
      /^line 2: the batch's USD budget: the price of model 'my-own-model' is unknown/,
    );
    expect(await b.c.queue.getJobCounts()).toMatchObject({ waiting: 0 });
    expect((await b.submit(specs, { name: "unpriced" })).ids).toHaveLength(2); // no USD budget: fine
  });

  it("cancel: a finished batch is left as it is, saying how its jobs ended, and keeps its label", async () => {
    const q = "q-cancel-finished";
    const b = batches(q);
    const { batchId, ids } = await b.submit(["a", "b"].map(spec), { name: "finished" });
    await run(q, ids[0]!, { status: "completed" });
    await run(q, ids[1]!, { status: "failed", error: "x" });
    expect(await b.cancel(batchId)).toEqual({ signalled: 0, waiting: 0, finished: "finished: 1 completed, 1 failed" });
    const st = await b.status(batchId);
    expect(st.cancelled).toBe(false);
    expect(st.counts).toMatchObject({ completed: 1, failed: 1, cancelled: 0 });
    expect((await b.list()).find((x) => x.batchId === batchId)?.cancelled).toBe(false);
  });

  it("cancel: jobs not started end cancelled without running; retry lifts it", async () => {
    const q = "q-cancel";
    const b = batches(q);
    const { batchId, ids } = await b.submit(["a", "b"].map(spec), { name: "cancel" });
    await b.cancel(batchId);
    expect((await run(q, ids[0]!, { status: "completed" })).status).toBe("cancelled");
    expect((await b.status(batchId)).cancelled).toBe(true);
    await b.retry(batchId, { statuses: ["cancelled"] });
    expect((await b.status(batchId)).cancelled).toBe(false);
  });

  it("reconcile: a job BullMQ failed without a record is recorded as failed with its reason", async () => {
    const q = "q-reconcile";
    const b = batches(q);
    const { batchId, ids } = await b.submit([spec("a")], { name: "rec" });
    const job = (await b.c.queue.getJob(ids[0]!))!;
    await raw.hset(b.c.queue.toKey(ids[0]!), "failedReason", "job stalled more than allowable limit");
    await raw.lrem(b.c.queue.toKey("wait"), 0, ids[0]!);
    await raw.zadd(b.c.queue.toKey("failed"), Date.now(), job.id!);
    expect(await b.reconcile(batchId)).toBe(1);
    const st = await b.status(batchId, { jobs: true });
    expect(st.counts.failed).toBe(1);
    expect(st.jobs![0]!.result!.error).toBe("job stalled more than allowable limit");
    expect(await b.reconcile(batchId)).toBe(0);
  });

  it("wait reports each finished job once and returns every line's latest job", async () => {
    const q = "q-wait";
    const b = batches(q);
    const { batchId, ids } = await b.submit(["a", "b", "c"].map(spec), { name: "wait" });
    const seen: string[] = [];
    const waiting = b.wait(batchId, {
      pollMs: 50,
      onProgress: (p) => seen.push(...p.finished.map((f) => `${f.jobId}:${f.result.status}`)),
    });
    for (const [i, id] of ids.entries()) await run(q, id, { status: i === 1 ? "max_turns" : "completed" });
    const st = await waiting;
    expect(seen).toEqual([`${ids[0]}:completed`, `${ids[1]}:max_turns`, `${ids[2]}:completed`]);
    expect(st.jobs!.map((j) => j.result?.status)).toEqual(["completed", "max_turns", "completed"]);
  });

  it("summary.md escapes table pipes, newlines, markup and terminal escapes in tasks and errors", () => {
    expect(mdCell("a | b\nc\x1b]52;c;AAAA\x07 <script> `x`")).toBe("a \\| b c \\<script\\> \\`x\\`");
    const st: BatchStatus = {
      batchId: "b",
      createdAt: 0,
      total: 1,
      done: 1,
      running: 0,
      waiting: 0,
      verified: 0,
      unverified: 1,
      spentUsd: 0.1,
      cancelled: false,
      counts: { completed: 0, verify_failed: 1, failed: 0, timeout: 0, budget_exceeded: 0, cancelled: 0, max_turns: 0 },
      jobs: [
        {
          line: 1,
          jobId: "b-L1",
          state: "finished",
          result: {
            line: 1,
            status: "verify_failed",
            verified: false,
            costUsd: 0.1,
            usage: { inputTokens: 1, outputTokens: 2, cacheReadTokens: 3, cacheWriteTokens: 4 },
            turns: 1,
            totalMs: 1000,
            error: "x | y\n| z |",
            filesChanged: 0,
            finishedAt: 0,
          },
        },
      ],
    };
    const md = summaryMarkdown(summarizeBatch(st, { 1: "task with | pipe" }));
    const row = md.split("\n").find((l) => l.startsWith("| 1 | b-L1 |"))!;
    expect(row).toContain("task with \\| pipe");
    expect(row.split(/(?<!\\)\|/).length).toBe(11); // 9 cells: no pipe of the error splits it
    expect(md).not.toMatch(/\n\| z/);
  });

  it("exit codes: by status, and for a batch the worst one (failed > verify_failed > limits > cancelled)", () => {
    expect(
      ["completed", "verify_failed", "budget_exceeded", "max_turns", "timeout", "cancelled", "failed"].map(exitCodeFor),
    ).toEqual([0, 3, 4, 4, 4, 5, 1]);
    expect(worstExitCode([])).toBe(0);
    expect(worstExitCode(["completed", "cancelled"])).toBe(5);
    expect(worstExitCode(["cancelled", "timeout", "completed"])).toBe(4);
    expect(worstExitCode(["timeout", "verify_failed"])).toBe(3);
    expect(worstExitCode(["verify_failed", "failed", "completed"])).toBe(1);
  });
});
