// Best-of-N through the real worker: Docker sandboxes, Redis and BullMQ's flows, the scripted
// server. A job with 4 candidates runs setup once (its one setup event; each candidate's verify
// counts setup's line in the workspace), adds 4 candidate jobs as its children, which two workers
// run, each from the seed (setup's exported variable in their shell, no setup of their own), each
// verified in a sandbox of its own; the job's result is the one candidate whose conversation fixed
// the bug, with every candidate's outcome and the cost of all. stopAfterVerified cancels the rest;
// a job that says it is a candidate without being one is refused; a seed over the bound fails the
// job, naming it; a job handed back before it waited for its candidates waits for them again; a
// worker's spend cap that is a job's budget is split among its candidates. A KNOWN GAP: retry of a
// finished job with candidates runs nothing again, and a batch's spent budget does not stop a line's
// candidates.
//
// Backend: Docker (the worker's default).
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Job, Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { loadConfig } from "../../src/core/config/config.js";
import { PatchbayClient, type JobData } from "../../src/queue/client.js";
import { BatchClient } from "../../src/batch/batches.js";
import { startWorker, type WorkerHandle } from "../../src/queue/worker.js";
import type { JobResult, TranscriptEvent } from "../../src/core/spec/spec.js";
import { startRedis } from "../support/cluster.js";
import {
  apiError,
  reply,
  startFakeAnthropic,
  text,
  toolUse,
  type FakeAnthropic,
  type Policy,
} from "../support/fake-anthropic.js";
import { CLAMP_FIX } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;

/**
 * The scripted server for several conversations at once: each new conversation (no assistant turn
 * yet) is the next number, its tool_use ids carry that number, and `right` numbers fix the bug while
 * the others make an edit that does not; `slow` conversations wait `slowMs` before each reply.
 */
function candidatesPolicy(
  right: Set<number>,
  slowMs = 0,
  slow = new Set<number>(),
  failOnce?: { conv: number; step: number },
): Policy {
  let next = 0;
  let failed = false;
  return ({ body }) => {
    const msgs: { role: string; content: unknown }[] = body.messages;
    let conv: number | undefined;
    let step = 0;
    for (const m of msgs) {
      if (m.role !== "assistant" || !Array.isArray(m.content)) continue;
      step++;
      for (const b of m.content as { type: string; id?: string }[]) {
        const at = b.type === "tool_use" ? /^toolu_c(\d+)_/.exec(b.id ?? "") : null;
        if (at) conv = Number(at[1]);
      }
    }
    conv ??= ++next;
    if (failOnce && !failed && conv === failOnce.conv && step === failOnce.step) {
      failed = true;
      return apiError(500, "the scripted server fails once here");
    }
    const id = (s: number) => `toolu_c${conv}_${s}`;
    const steps = [
      reply(toolUse("bash", { command: "echo setup=$PB_SETUP; wc -l < setup-runs.txt" }, id(0))),
      right.has(conv)
        ? reply(toolUse("str_replace_based_edit_tool", CLAMP_FIX, id(1)))
        : reply(
            toolUse(
              "str_replace_based_edit_tool",
              {
                command: "str_replace",
                path: "/workspace/clamp.py",
                old_str: "    return v\n",
                new_str: "    return v  # ok\n",
              },
              id(1),
            ),
          ),
      reply(text(`Candidate conversation ${conv} is done.`)),
    ];
    const r = steps[Math.min(step, steps.length - 1)]!;
    return slow.has(conv) && slowMs ? { ...r, delayMs: slowMs } : r;
  };
}

describe("best-of-N candidates through the worker, Docker and BullMQ's flows", { timeout: 300_000 }, () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  const workers: WorkerHandle[] = [];
  let client: PatchbayClient;
  let fake: FakeAnthropic;
  let policy: Policy = () => reply(text("unused"));
  const repo = mkdtempSync(join(tmpdir(), "pb-candidates-"));
  const queueName = `cand-${process.pid}`;

  beforeAll(async () => {
    cpSync(CLAMP, repo, { recursive: true });
    fake = await startFakeAnthropic((req) => policy(req));
    redis = await startRedis();
    for (let i = 0; i < 2; i++)
      workers.push(
        await startWorker({
          redisUrl: redis.url,
          queueName,
          concurrency: 3,
          model: () => new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 }),
          log: () => {},
          config: loadConfig({
            ...process.env,
            PATCHBAY_WORKER_ID: `cand-test-${process.pid}-${i}`,
            PATCHBAY_POOL_SIZE: "0",
          }),
        }),
      );
    client = new PatchbayClient({ redisUrl: redis.url, queueName });
  });
  afterAll(async () => {
    await client?.close();
    for (const w of workers) await w.shutdown(5000);
    await redis?.stop();
    await fake?.close();
    rmSync(repo, { recursive: true, force: true });
  });

  const events = async (id: string) => {
    const out: TranscriptEvent[] = [];
    for await (const e of client.watch(id, { follow: false })) out.push(e);
    return out;
  };
  const spec = (extra: object = {}) => ({
    task: "Make the failing tests pass.",
    repo: { path: repo },
    setup: "echo ran >> setup-runs.txt && export PB_SETUP=yes",
    verify: 'test "$(wc -l < setup-runs.txt)" -eq 1 && python3 -m unittest -q',
    verifyRounds: 0,
    ...extra,
  });

  it("runs setup once, 4 candidates from its seed on the workers, and returns the one verify passed", async () => {
    policy = candidatesPolicy(new Set([3]));
    const id = await client.enqueue(spec({ candidates: 4, budget: { usd: 2 } }));
    const result: JobResult = await client.waitForResult(id, { timeoutMs: 240_000 });
    const mine = await events(id);
    expect(mine.filter((e) => e.type === "setup")).toHaveLength(1);
    const started = mine.find((e) => e.type === "candidates_started");
    expect(started).toMatchObject({ jobIds: [1, 2, 3, 4].map((n) => `${id}-C${n}`) });
    // Which candidate had conversation 3 (the one that fixes the bug): its transcript's tool ids say.
    let right = 0;
    let spent = 0;
    for (let n = 1; n <= 4; n++) {
      const cid = `${id}-C${n}`;
      const evs = await events(cid);
      expect(evs.filter((e) => e.type === "setup")).toHaveLength(0); // setup ran once, in the job
      const started = evs.find((e) => e.type === "job_started");
      expect(started && started.type === "job_started" && started.spec.budget).toEqual({ usd: 0.5 });
      const out = evs.find((e) => e.type === "tool_result");
      expect(out && out.type === "tool_result" && out.output).toMatch(/^setup=yes\n1\n?$/); // setup's state, its one line
      if (evs.some((e) => e.type === "tool_call" && e.toolUseId.startsWith("toolu_c3_"))) right = n;
      spent += (await client.result(cid))!.costUsd;
    }
    expect(right).toBeGreaterThan(0);
    expect(result).toMatchObject({ status: "completed", verified: true, picked: right, filesChanged: ["clamp.py"] });
    expect(result.patch).toMatch(/- {8}return lo\n\+ {8}return hi/);
    expect(result.candidates).toHaveLength(4);
    expect(result.candidates!.filter((c) => c.verified).map((c) => c.n)).toEqual([right]);
    expect(result.candidates!.filter((c) => !c.verified).every((c) => c.status === "verify_failed")).toBe(true);
    expect(result.costUsd).toBeCloseTo(spent, 9);
    const picked = mine.find((e) => e.type === "candidate_picked");
    expect(picked).toMatchObject({ picked: right, why: `candidate ${right} is the only one verify passed` });
  });

  it("stopAfterVerified 1: the others are cancelled once one verified", async () => {
    policy = candidatesPolicy(new Set([1]), 4000, new Set([2, 3]));
    const id = await client.enqueue(spec({ candidates: 3, stopAfterVerified: 1 }));
    const result = await client.waitForResult(id, { timeoutMs: 240_000 });
    expect(result).toMatchObject({ status: "completed", verified: true });
    const others = result.candidates!.filter((c) => c.n !== result.picked);
    expect(others.map((c) => c.status)).toEqual(["cancelled", "cancelled"]);
  });

  it("a job's cancel reaches its candidates, waiting or running, and the job ends cancelled with their outcomes", async () => {
    policy = candidatesPolicy(new Set(), 3000, new Set([1, 2, 3, 4, 5, 6]));
    const id = await client.enqueue(spec({ candidates: 2 }));
    for await (const e of client.watch(id)) if (e.type === "candidates_started") break;
    expect(await client.cancel(id)).toBe("signalled"); // it waits for its children: a worker ends it
    const result = await client.waitForResult(id, { timeoutMs: 120_000 });
    expect(result.status).toBe("cancelled");
    expect(result.candidates!.map((c) => c.status)).toEqual(["cancelled", "cancelled"]);
  });

  it("a waiting candidate's own cancel ends it through a worker, so its job still finishes", async () => {
    policy = candidatesPolicy(new Set([1, 2, 3]), 2000, new Set([1, 2, 3]));
    const id = await client.enqueue(spec({ candidates: 3 }));
    for await (const e of client.watch(id)) if (e.type === "candidates_started") break;
    await client.cancel(`${id}-C3`);
    const result = await client.waitForResult(id, { timeoutMs: 120_000 });
    expect(result.candidates!.find((c) => c.n === 3)?.status).toBe("cancelled");
    expect(result.verified).toBe(true);
  });

  it("a candidate whose attempt fails goes on from its own checkpoint, and the job still picks among all", async () => {
    policy = candidatesPolicy(new Set([1, 2]), 0, new Set(), { conv: 1, step: 1 });
    const id = await client.enqueue(spec({ candidates: 2 }));
    const result = await client.waitForResult(id, { timeoutMs: 180_000 });
    expect(result.candidates!.map((c) => c.status)).toEqual(["completed", "completed"]);
    let resumed = 0;
    for (let n = 1; n <= 2; n++) {
      const evs = await events(`${id}-C${n}`);
      const r = evs.find((e) => e.type === "resume");
      if (r && r.type === "resume" && r.restored) {
        resumed++;
        expect(r.turns).toBe(1);
        expect(evs.filter((e) => e.type === "job_started").length).toBe(2); // its second attempt
      }
    }
    expect(resumed).toBe(1);
  });

  it("a job handed back between adding its candidates and waiting for them waits again, not reading them early", async () => {
    // The Redis connection fails just as the job would move to wait for its children: the attempt
    // goes back to the queue uncounted, with its candidates added and running (slowly).
    policy = candidatesPolicy(new Set([1, 2]), 2500, new Set([1, 2]));
    const blip = Object.assign(new Error("Reached the max retries per request limit"), {
      name: "MaxRetriesPerRequestError",
    });
    const spy = vi.spyOn(Job.prototype, "moveToWaitingChildren").mockRejectedValueOnce(blip);
    try {
      const id = await client.enqueue(spec({ candidates: 2 }));
      const result = await client.waitForResult(id, { timeoutMs: 180_000 });
      expect(spy).toHaveBeenCalled();
      expect(result.candidates!.map((c) => c.status)).toEqual(["completed", "completed"]);
      expect(result).toMatchObject({ status: "completed", verified: true });
    } finally {
      spy.mockRestore();
    }
  });

  it.fails("KNOWN GAP: retry of a finished job with candidates runs setup and its candidates again", async () => {
    // Today the retried job keeps `step: "candidates"` in its data and its old children under the
    // same ids: it re-reads their old results and runs nothing (no setup, no candidates_started).
    policy = candidatesPolicy(new Set([1]));
    const id = await client.enqueue(spec({ candidates: 2 }));
    await client.waitForResult(id, { timeoutMs: 120_000 });
    expect(await client.retry(id)).toEqual({ retried: true });
    await client.waitForResult(id, { timeoutMs: 120_000 });
    const mine = await events(id);
    expect(mine.filter((e) => e.type === "candidates_started")).toHaveLength(2);
  });

  it.fails("KNOWN GAP: a batch's spent budget stops its line's candidates after their turn", async () => {
    // Today a candidate carries no `batch`: its turns are not added to the batch's spend as they
    // happen and the batch's stop does not reach it; the line's spend counts only when its job ends.
    let calls = 0;
    policy = ({ body }) => {
      const turn = (body.messages as { role: string }[]).filter((m) => m.role === "assistant").length;
      calls++;
      return turn < 5 ? reply(toolUse("bash", { command: "true" }, `toolu_b${calls}`)) : reply(text("done"));
    };
    const { ids } = await new BatchClient(client).submit([spec({ candidates: 2 })], { budgetUsd: 0.000001 });
    const result = await client.waitForResult(ids[0]!, { timeoutMs: 180_000 });
    // A job of the batch alone stops after its first turn (budget_exceeded); so should each candidate.
    expect(result.candidates!.map((c) => [c.status, c.turns])).toEqual([
      ["budget_exceeded", 1],
      ["budget_exceeded", 1],
    ]);
  });

  it("refuses a job that says it is a candidate where no job added it", async () => {
    const q = new Queue<JobData>(queueName, { connection: { url: redis.url } });
    try {
      const parsed = spec();
      await q.add("candidate", { spec: parsed, enqueuedAt: Date.now(), candidate: { n: 1 } }, { jobId: "forged-C1" });
      await expect(client.waitForResult("forged-C1", { timeoutMs: 60_000 })).rejects.toThrow(
        /not run: it says it is candidate 1 of job forged, but that job did not add it/,
      );
    } finally {
      await q.close();
    }
  });
});

describe("a seed over the worker's bound", { timeout: 180_000 }, () => {
  it("fails the job, naming the bound and its knob, and adds no candidate", async () => {
    const redis = await startRedis();
    const fake = await startFakeAnthropic(() => reply(text("unused")));
    const queueName = `cand-small-${process.pid}`;
    const worker = await startWorker({
      redisUrl: redis.url,
      queueName,
      concurrency: 1,
      model: () => new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 }),
      log: () => {},
      config: loadConfig({ ...process.env, PATCHBAY_SEED_MAX_BYTES: "1000", PATCHBAY_POOL_SIZE: "0" }),
    });
    const client = new PatchbayClient({ redisUrl: redis.url, queueName });
    try {
      const id = await client.enqueue({
        task: "t",
        repo: { path: CLAMP },
        setup: "true",
        verify: "true",
        candidates: 2,
      });
      const r = await client.waitForResult(id, { timeoutMs: 120_000 });
      expect(r.status).toBe("failed");
      expect(r.error).toMatch(/over this worker's bound of 1000 for the candidates' seed \(PATCHBAY_SEED_MAX_BYTES/);
      expect(await client.result(`${id}-C1`).catch(() => undefined)).toBeUndefined();
    } finally {
      await client.close();
      await worker.shutdown(5000);
      await redis.stop();
      await fake.close();
    }
  });
});

describe("a worker's spend cap with a spec that sets no budget", { timeout: 180_000 }, () => {
  it("splits the cap among the candidates: together they spend at most what the job may", async () => {
    const redis = await startRedis();
    const fake = await startFakeAnthropic(() => reply(text("nothing to do")));
    const queueName = `cand-cap-${process.pid}`;
    const worker = await startWorker({
      redisUrl: redis.url,
      queueName,
      concurrency: 2,
      model: () => new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 }),
      log: () => {},
      config: loadConfig({ ...process.env, PATCHBAY_MAX_BUDGET_USD: "1", PATCHBAY_POOL_SIZE: "0" }),
    });
    const client = new PatchbayClient({ redisUrl: redis.url, queueName });
    try {
      const id = await client.enqueue({ task: "t", repo: { path: CLAMP }, verify: "true", candidates: 2 });
      await client.waitForResult(id, { timeoutMs: 150_000 });
      for (const n of [1, 2]) {
        const evs: TranscriptEvent[] = [];
        for await (const e of client.watch(`${id}-C${n}`, { follow: false })) evs.push(e);
        const started = evs.find((e) => e.type === "job_started");
        // The cap (PATCHBAY_MAX_BUDGET_USD) is the job's budget where its spec sets none; each of 2 gets half.
        expect(started && started.type === "job_started" && started.spec.budget).toEqual({ usd: 0.5 });
      }
    } finally {
      await client.close();
      await worker.shutdown(5000);
      await redis.stop();
      await fake.close();
    }
  });
});
