// Guards `eval run --candidates K` where a verify judges (src/eval/run.ts, task.ts, run-grade.ts,
// run-summary.ts): an instance with a verify command is ONE job `{ verify, candidates: K }`, one
// without keeps K independent jobs; every candidate `<job>-C<n>` of a judged job is graded from its
// own result, and the one the job picked is recorded; the summary has pass@1 (resolved / K),
// best-of-K (the pick resolved) and the oracle pass@K side by side; the files put each candidate
// under candidate-<n>/ and the pick's SWE-bench report.json at the instance's top; a second run
// grades nothing again. Backend: a private redis-server and a stand-in worker (BullMQ's own Worker
// on the queue) that writes each job's result the way the queue's worker does (recordResult, the
// batch's hooks); no agent runs, and grading is a stub that resolves a patch saying "fix".
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker, type Job } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchClient, batchHooks } from "../../src/batch/batches.js";
import { candidateJobId } from "../../src/core/candidate-id.js";
import { emptyResult, finishedEvent, stamped, type JobResult, type JobSpec } from "../../src/core/spec/spec.js";
import { instanceReport } from "../../src/eval/report.js";
import { runEval, type EvalProgress } from "../../src/eval/run.js";
import type { EvalInstance, Graded, Prediction } from "../../src/eval/types.js";
import { PatchbayClient, type JobData } from "../../src/queue/client.js";
import { keys } from "../../src/queue/keys.js";
import { recordResult } from "../../src/queue/result-record.js";
import { startRedis } from "../support/cluster.js";

const QUEUE = "eval-judged";
/** How long the stand-in worker waits between the batch's record of a job and its return. */
let lingerMs = 0;
const tmp = mkdtempSync(join(tmpdir(), "pb-eval-judged-"));

const instance = (id: string, verify?: string): EvalInstance => ({
  instance_id: id,
  repo: "acme/app",
  base_commit: "abcdef1",
  problem_statement: `issue of ${id}`,
  test_patch: "diff --git a/t.py b/t.py\n",
  FAIL_TO_PASS: ["t1"],
  PASS_TO_PASS: [],
  patchbay: {
    repo: "/nowhere",
    ...(verify !== undefined ? { verify } : {}),
    test: { command: "true", format: "unittest" },
  },
});
const SET = [
  instance("acme__judged-1", "npm test"),
  instance("acme__plain-2"),
  instance("acme__nopick-3", "make check"),
  instance("acme__badpick-4", "make check"),
];

/** Each instance's candidates (1-based) as the stand-in worker ends them: patch, cost, verified. */
const PLAN: Record<string, { patch: string; costUsd: number; verified?: boolean; status?: "failed" }[]> = {
  "acme__judged-1": [
    { patch: "diff --git a/x b/x\n+bad\n", costUsd: 0.1, verified: false },
    { patch: "diff --git a/x b/x\n+fix\n", costUsd: 0.2, verified: true },
    { patch: "diff --git a/x b/x\n+fix, a bigger one\n", costUsd: 0.3, verified: true },
  ],
  "acme__plain-2": [
    { patch: "diff --git a/y b/y\n+fix\n", costUsd: 0.1 },
    { patch: "diff --git a/y b/y\n+bad\n", costUsd: 0.1 },
    { patch: "diff --git a/y b/y\n+bad\n", costUsd: 0.1 },
  ],
  "acme__nopick-3": [1, 2, 3].map(() => ({ patch: "", costUsd: 0.05, status: "failed" as const })),
  "acme__badpick-4": [1, 2, 3].map(() => ({ patch: "diff --git a/z b/z\n+fix\n", costUsd: 0.05 })),
};
/** The candidate each judged job picks (undefined: none, as a job whose candidates all failed). */
const PICKS: Record<string, number | undefined> = {
  "acme__judged-1": 2,
  "acme__nopick-3": undefined,
  "acme__badpick-4": 7, // names no candidate of 3, as Redis content could
};

const idOf = (spec: JobSpec) => /issue of (\S+)\n/.exec(spec.task)![1]!;

/** A grader that resolves a patch saying "fix", and counts its calls. */
function grader() {
  const calls: string[] = [];
  const grade = (inst: EvalInstance, p: Prediction): Promise<Graded> => {
    calls.push(`${inst.instance_id}:${p.model_patch}`);
    const statuses = { t1: p.model_patch?.includes("fix") ? ("PASSED" as const) : ("FAILED" as const) };
    const report = instanceReport(inst, statuses, { patch: p.model_patch, applied: true });
    return Promise.resolve({
      instance_id: inst.instance_id,
      outcome: report.resolved ? "resolved" : "unresolved",
      report,
      statuses,
      testOutput: "",
      ms: 1,
    });
  };
  return { calls, grade };
}

describe("eval run: K candidates judged by verify in one job", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let client: PatchbayClient;
  let raw: Redis;
  let worker: Worker;

  /** Records a job's result as the queue's worker does (result key, job_finished event), and returns it stored. */
  const record = async (jobId: string, r: JobResult) => {
    const { stored, written } = recordResult(raw, keys(QUEUE), jobId, stamped(finishedEvent(r), jobId, 1), r, {
      retentionSec: 3600,
      maxLen: 1000,
    });
    await written;
    return stored;
  };

  /** Candidate n's planned result for its instance (the spec's task names it). */
  const planned = (jobId: string, spec: JobSpec, n: number): JobResult => {
    const c = PLAN[idOf(spec)]![n - 1]!;
    const r = emptyResult(c.status ?? "completed", "the agent failed", {
      patch: c.patch,
      costUsd: c.costUsd,
      usage: { inputTokens: 100, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 },
      timings: { queuedMs: 0, sandboxMs: 10, agentMs: 50, totalMs: 100 },
      ...(c.verified !== undefined ? { verified: c.verified } : {}),
      jobId,
    });
    if (!c.status) delete r.error;
    return r;
  };

  /** A judged job: its candidates added as jobs of their own, awaited, then the pick (as the contract says). */
  const judged = async (job: Job<JobData>) => {
    const spec = job.data.spec;
    const K = spec.candidates!;
    const ids = Array.from({ length: K }, (_, i) => candidateJobId(job.id!, i + 1));
    const { candidates: _k, ...childSpec } = spec;
    for (const id of ids) await client.queue.add("job", { spec: childSpec, enqueuedAt: Date.now() }, { jobId: id });
    const results: JobResult[] = [];
    for (const id of ids) {
      for (let r = await client.result(id); ; r = await client.result(id)) {
        if (r) {
          results.push(r);
          break;
        }
        await new Promise((res) => setTimeout(res, 50));
      }
    }
    const picked = PICKS[idOf(spec)];
    const p = picked ? results[picked - 1] : undefined;
    const r = emptyResult(p ? "completed" : "failed", "none of the candidates finished without failing", {
      ...(p ? { patch: p.patch, ...(p.verified !== undefined ? { verified: p.verified } : {}) } : {}),
      costUsd: results.reduce((s, r) => s + r.costUsd, 0),
      usage: { inputTokens: 100 * K, outputTokens: 10 * K, cacheReadTokens: 0, cacheWriteTokens: 0 },
      candidates: results.map((r, i) => ({
        n: i + 1,
        jobId: ids[i]!,
        status: r.status,
        ...(r.verified !== undefined ? { verified: r.verified } : {}),
        costUsd: r.costUsd,
        turns: 0,
        patchBytes: r.patch.length,
        filesChanged: 0,
      })),
      ...(picked ? { picked } : {}),
      jobId: job.id!,
    });
    if (p) delete r.error;
    return r;
  };

  beforeAll(async () => {
    redis = await startRedis();
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    raw = new Redis(redis.url, { maxRetriesPerRequest: null });
    const hooks = batchHooks(raw, QUEUE, 3600);
    worker = new Worker<JobData, JobResult>(
      QUEUE,
      async (job) => {
        const m = /-C(\d+)$/.exec(job.id!);
        if (m) return record(job.id!, planned(job.id!, job.data.spec, Number(m[1])));
        await hooks.start(job.data, job.id!, 1);
        // An independent candidate is line L's: the instance's first line is its candidate 1.
        const line = job.data.batch!.line;
        const r = job.data.spec.candidates ? await judged(job) : planned(job.id!, job.data.spec, ((line - 2) % 3) + 1);
        const stored = await record(job.id!, { ...r, jobId: job.id! });
        await hooks.finish(job.data, job.id!, 1, stored);
        // A loaded worker's gap between the batch's record and BullMQ's completed state.
        await new Promise((resolve) => setTimeout(resolve, lingerMs));
        return stored;
      },
      {
        connection: new Redis(redis.url, { maxRetriesPerRequest: null }),
        prefix: client.queue.opts.prefix,
        concurrency: 8,
      },
    );
  }, 60_000);

  afterAll(async () => {
    await worker?.close();
    raw?.disconnect();
    await client?.close();
    await redis?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it("enqueues one job per judged instance and K for the other, grades every candidate, and reports the pick", async () => {
    const out = join(tmp, "k3");
    const g = grader();
    const progress: EvalProgress[] = [];
    const submitted: number[] = [];
    const s = await runEval(new BatchClient(client), {
      name: "k3",
      instances: SET,
      out,
      candidates: 3,
      grade: g.grade,
      onSubmitted: (x) => submitted.push(x.added, x.total),
      onProgress: (p) => progress.push(p),
    });
    // The batch: judged-1 one job with its verify and K; plain-2 three plain jobs; nopick-3 one job.
    expect(submitted).toEqual([6, 6]);
    const specs = await Promise.all(
      [1, 2, 3, 4, 5, 6].map(async (l) => (await client.queue.getJob(`eval-k3-L${l}`))!.data.spec),
    );
    expect(specs.map((x) => [idOf(x), x.verify, x.candidates])).toEqual([
      ["acme__judged-1", "npm test", 3],
      ["acme__plain-2", undefined, undefined],
      ["acme__plain-2", undefined, undefined],
      ["acme__plain-2", undefined, undefined],
      ["acme__nopick-3", "make check", 3],
      ["acme__badpick-4", "make check", 3],
    ]);
    // Every candidate graded once, from its own job's result.
    expect(g.calls).toHaveLength(12);
    expect(progress.filter((p) => p.picked).map((p) => [p.instance_id, p.candidate, p.jobId])).toEqual([
      ["acme__judged-1", 1, "eval-k3-L1-C2"],
    ]);
    const [judged1, plain2, nopick3, badpick4] = s.patchbay.instances;
    expect(judged1).toMatchObject({ outcome: "resolved", candidates: 3, resolvedCandidates: 2, picked: 2 });
    expect(judged1!.jobIds).toEqual(["eval-k3-L1-C1", "eval-k3-L1-C2", "eval-k3-L1-C3"]);
    expect(judged1!.costUsd).toBeCloseTo(0.6, 9);
    expect(plain2).toMatchObject({ outcome: "resolved", candidates: 3, resolvedCandidates: 1 });
    expect(plain2!.picked).toBeUndefined();
    expect(nopick3).toMatchObject({ outcome: "empty_patch", candidates: 3, resolvedCandidates: 0, picked: null });
    // A pick naming none of the K candidates is no pick: its resolving candidates do not make it one.
    expect(badpick4).toMatchObject({ outcome: "empty_patch", candidates: 3, resolvedCandidates: 3, picked: null });
    // pass@1 = mean of resolved / K; best-of-K over the judged; pass@K the oracle's.
    expect(s.patchbay.passAtK["1"]).toBeCloseTo((2 / 3 + 1 / 3 + 0 + 1) / 4, 9);
    expect(s.patchbay.passAtK["3"]).toBeCloseTo(3 / 4, 9);
    expect(s.patchbay.bestOfK).toBeCloseTo(1 / 3, 9);
    expect(s.patchbay.judged).toBe(3);
    expect([s.resolved_ids, s.empty_patch_ids]).toEqual([
      ["acme__judged-1", "acme__plain-2"],
      ["acme__badpick-4", "acme__nopick-3"],
    ]);

    // The files: a judged instance's top is its job's and its pick's; each candidate under candidate-<n>/.
    const file = (...p: string[]) => readFileSync(join(out, ...p), "utf8");
    expect(JSON.parse(file("acme__judged-1", "result.json"))).toMatchObject({ picked: 2, jobId: "eval-k3-L1" });
    expect(JSON.parse(file("acme__judged-1", "report.json"))).toEqual({
      "acme__judged-1": expect.objectContaining({ resolved: true }),
    });
    expect(file("acme__judged-1", "patch.diff")).toBe(PLAN["acme__judged-1"]![1]!.patch);
    for (const n of [1, 2, 3]) {
      const grade = JSON.parse(file("acme__judged-1", `candidate-${n}`, "grade.json")) as {
        jobId: string;
        outcome: string;
      };
      expect([grade.jobId, grade.outcome]).toEqual([`eval-k3-L1-C${n}`, n === 1 ? "unresolved" : "resolved"]);
    }
    expect(existsSync(join(out, "acme__nopick-3", "report.json"))).toBe(false);
    expect(existsSync(join(out, "acme__nopick-3", "candidate-3", "grade.json"))).toBe(true);
    expect(JSON.parse(file("acme__plain-2", "grade.json"))).toMatchObject({ jobId: "eval-k3-L2", outcome: "resolved" });
    expect(existsSync(join(out, "acme__plain-2", "candidate-1"))).toBe(false);
    const preds = file("preds.jsonl")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Prediction);
    expect(preds.map((p) => [p.instance_id, p.model_patch])).toEqual([
      ["acme__judged-1", PLAN["acme__judged-1"]![1]!.patch],
      ["acme__plain-2", PLAN["acme__plain-2"]![0]!.patch],
      ["acme__nopick-3", ""],
      ["acme__badpick-4", ""],
    ]);

    // Again: nothing enqueued, nothing graded, the same figures.
    const again = await runEval(new BatchClient(client), {
      name: "k3",
      instances: SET,
      out,
      candidates: 3,
      grade: g.grade,
      onSubmitted: (x) => submitted.push(x.added),
    });
    expect(submitted.at(-1)).toBe(0);
    expect(g.calls).toHaveLength(12);
    expect({ ...again.patchbay, wallMs: 0 }).toEqual({ ...s.patchbay, wallMs: 0 });
  }, 120_000);

  it("--verify judges every instance without its own; an instance's own verify wins", async () => {
    const g = grader();
    const s = await runEval(new BatchClient(client), {
      name: "k3-all",
      instances: SET,
      out: join(tmp, "k3-all"),
      candidates: 3,
      verify: "npm run check",
      grade: g.grade,
    });
    const specs = await Promise.all(
      [1, 2, 3, 4].map(async (l) => (await client.queue.getJob(`eval-k3-all-L${l}`))!.data.spec),
    );
    expect(specs.map((x) => [idOf(x), x.verify, x.candidates])).toEqual([
      ["acme__judged-1", "npm test", 3],
      ["acme__plain-2", "npm run check", 3],
      ["acme__nopick-3", "make check", 3],
      ["acme__badpick-4", "make check", 3],
    ]);
    expect(await client.queue.getJob("eval-k3-all-L5")).toBeUndefined();
    expect(s.patchbay.judged).toBe(4);
  }, 120_000);
  it("grades a job its batch says ended even while BullMQ has not yet moved it to completed", async () => {
    const g = grader();
    lingerMs = 1500;
    try {
      const s = await runEval(new BatchClient(client), {
        name: "k3-linger",
        instances: SET,
        out: join(tmp, "k3-linger"),
        candidates: 3,
        grade: g.grade,
      });
      expect(s.error_ids).toEqual([]);
      expect(s.patchbay.instances.map((a) => a.outcome)).not.toContain("error");
      expect(g.calls).toHaveLength(12); // every candidate graded: none read as "no result" too early
    } finally {
      lingerMs = 0;
    }
  }, 120_000);

  it("grades again, seconds later, where the host failed under a grade: the run reports the real outcome", async () => {
    const g = grader();
    let failed = 0;
    const flaky = (inst: EvalInstance, p: Prediction) =>
      failed++ === 0 ? Promise.reject(new Error("the engine did not answer")) : g.grade(inst, p);
    const s = await runEval(new BatchClient(client), {
      name: "k3-flaky",
      instances: SET,
      out: join(tmp, "k3-flaky"),
      candidates: 3,
      grade: flaky,
    });
    expect(failed).toBe(13); // the failure, the same grade again, and the other 11
    expect(g.calls).toHaveLength(12);
    expect(s.patchbay.instances.map((a) => a.outcome)).not.toContain("error");
    expect(s.error_ids).toEqual([]);
  }, 120_000);
});
