// `patchbay result <job> --candidates`, against a Redis of this test's own: a job with candidates
// shows its patch on stdout and, on stderr, a row per candidate (the picked one marked) and why it
// was picked (its transcript's candidate_picked); with --json the JSON carries them as stored; a job
// without candidates says so and exits as it would without the flag. The results are handed back
// by a plain BullMQ worker in this process, as a worker stores them (no Docker, no model); a
// candidate's hostile error reaches the terminal without a control.
import { Worker } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keys } from "../../src/queue/keys.js";
import { PatchbayClient, type JobData } from "../../src/queue/client.js";
import { emptyResult, type CandidateOutcome, type JobResult } from "../../src/core/spec/spec.js";
import { ensureBuilt, patchbay, ROOT } from "../support/cli-helpers.js";
import { startRedis } from "../support/cluster.js";

const QUEUE = "q-candidates";
const PATCH = "--- a/clamp.py\n+++ b/clamp.py\n";
const HOSTILE_ERROR = "boom \x1b]52;c;cm0gLXJmIH4=\x07\x1b[31mred\x1b[0m\x9b2J\rover\nforged line";
/** What a terminal would act on: C0 but newline and tab, DEL, C1. */
const TERMINAL_CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;
const WHY = "verify passed 2 candidates; candidate 2 has the smallest patch, then the lowest cost";

const outcomes = (id: string): CandidateOutcome[] => [
  {
    n: 1,
    jobId: `${id}-C1`,
    status: "completed",
    verified: true,
    costUsd: 0.03,
    turns: 7,
    patchBytes: 900,
    filesChanged: 2,
  },
  {
    n: 2,
    jobId: `${id}-C2`,
    status: "completed",
    verified: true,
    costUsd: 0.02,
    turns: 5,
    patchBytes: 31,
    filesChanged: 1,
  },
  {
    n: 3,
    jobId: `${id}-C3`,
    status: "failed",
    costUsd: 0,
    turns: 0,
    patchBytes: 0,
    filesChanged: 0,
    error: HOSTILE_ERROR,
  },
];

describe("patchbay result --candidates", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let client: PatchbayClient;
  let worker: Worker<JobData, JobResult>;
  const ids: Record<string, string> = {};
  const pb = (args: string[]) => patchbay(args, { REDIS_URL: redis.url, PATCHBAY_QUEUE: QUEUE });

  beforeAll(async () => {
    await ensureBuilt(); // dist/ runs the commands ~5x faster than src/ through tsx
    redis = await startRedis();
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    // A stand-in worker: "best of 3" ends as a job with candidates does (its picked candidate's
    // patch, every outcome, the candidate_picked event in its transcript); "one" as a plain job.
    worker = new Worker<JobData, JobResult>(
      QUEUE,
      async (job) => {
        const done = { ...emptyResult("completed", "", { jobId: job.id! }), error: undefined, patch: PATCH };
        if (job.data.spec.task !== "best of 3") return { ...done, filesChanged: ["clamp.py"] };
        const candidates = outcomes(job.id!);
        const event = { ts: new Date().toISOString(), jobId: job.id, attempt: 1, type: "candidate_picked" };
        await client.redis.xadd(
          keys(QUEUE).events(job.id!),
          "*",
          "e",
          JSON.stringify({ ...event, picked: 2, why: WHY, candidates }),
        );
        return { ...done, filesChanged: ["clamp.py"], costUsd: 0.05, candidates, picked: 2 };
      },
      { connection: new Redis(redis.url, { maxRetriesPerRequest: null }), prefix: client.queue.opts.prefix },
    );
    const repo = { path: `${ROOT}/examples/clamp` };
    for (const task of ["best of 3", "one"]) {
      const id = (ids[task] = await client.enqueue({ task, repo }));
      await client.waitForResult(id, { timeoutMs: 20_000, warnIfNoWorker: false });
    }
  }, 120_000);

  afterAll(async () => {
    await worker?.close();
    await client?.close();
    await redis?.stop();
  });

  it("prints the patch on stdout, then each candidate and why one was picked on stderr", async () => {
    const id = ids["best of 3"]!;
    const r = await pb(["result", id, "--candidates"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(PATCH); // stdout stays the patch
    const lines = r.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(/^ +N +JOB +STATUS +VERIFIED +COST +TURNS +PATCH BYTES +FILES +ERROR$/);
    expect(lines[1]!.split(/ {2,}/)).toEqual(["", "1", `${id}-C1`, "completed", "yes", "$0.03", "7", "900", "2"]);
    expect(lines[2]!.split(/ {2,}/)).toEqual(["*", "2", `${id}-C2`, "completed", "yes", "$0.02", "5", "31", "1"]);
    expect(lines[3]).toMatch(new RegExp(`^ +3 +${id}-C3 +failed +- +\\$0\\.00 +0 +0 +0 +boom red over forged line$`));
    expect(lines[4]).toBe(`picked: candidate 2 (*): ${WHY}`);
    expect(r.stderr).not.toMatch(TERMINAL_CONTROL);
    expect(r.stderr).not.toContain("cm0gLXJmIH4");
  });

  it("with --json, the JSON carries the candidates and the pick as stored, and no table is printed", async () => {
    const id = ids["best of 3"]!;
    const r = await pb(["result", id, "--candidates", "--json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe("");
    const json: JobResult = JSON.parse(r.stdout);
    expect(json.candidates).toEqual(outcomes(id));
    expect(json.picked).toBe(2);
  });

  it("a job without candidates says so on stderr, its patch on stdout, and exits as without the flag", async () => {
    const id = ids["one"]!;
    const r = await pb(["result", id, "--candidates"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(PATCH);
    expect(r.stderr).toBe(
      `patchbay: job ${id} has no candidates (it ran as one; a spec's candidates: N runs N, docs/jobspec.md#candidates)\n`,
    );
  });
});
