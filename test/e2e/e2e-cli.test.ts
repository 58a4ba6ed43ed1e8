// End to end through the CLI: a real Redis of this test's own, worker processes on the local
// backend (test/support/backend.ts: the CLI and the queue are the subject, not Docker), the real
// SDK against the scripted server.
//
// Backend: local (worker processes: `LOCAL_WORKER_ENV`).
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import { apiError, startFakeAnthropic, reply, toolUse, type FakeAnthropic } from "../support/fake-anthropic.js";
import { cli, removeDir, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { spawnPatchbay } from "../support/cli-helpers.js";
import { jobSandbox, LOCAL_WORKER_ENV, untilInSandbox } from "../support/backend.js";
import { byTurn, clampScript, taskOf } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const tmp = () => mkdtempSync(join(tmpdir(), "pb-e2e-"));

describe("patchbay CLI end to end", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let env: Record<string, string>;
  let workers: WorkerProc[] = [];
  let client: PatchbayClient;

  beforeAll(async () => {
    redis = await startRedis();
    // Conversations by task: "sleep" tasks run a long command, everything else is the Clamp fix.
    fake = await startFakeAnthropic((req) =>
      /broken API/.test(taskOf(req.body))
        ? apiError(500, "Internal server error")
        : byTurn((body) =>
            /long-running/.test(taskOf(body))
              ? [reply(toolUse("bash", { command: "echo x >> /workspace/clamp.py; sleep 300" }))]
              : clampScript(),
          )(req),
    );
    env = {
      ...LOCAL_WORKER_ENV,
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: "e2e-cli",
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_LOCK_MS: "5000",
      PATCHBAY_STALLED_MS: "2000",
      PATCHBAY_REAP_MS: "2000",
    };
    workers = [
      startWorkerProc({ ...env, PATCHBAY_CONCURRENCY: "2" }),
      startWorkerProc({ ...env, PATCHBAY_CONCURRENCY: "2" }),
    ];
    await Promise.all(workers.map((w) => w.waitFor(/ready: queue e2e-cli/)));
    client = new PatchbayClient({ redisUrl: redis.url, queueName: "e2e-cli" });
  });

  afterAll(async () => {
    await client?.close();
    await Promise.all(workers.map((w) => w.stop("SIGTERM")));
    await fake?.close();
    await redis?.stop();
  });

  it("`patchbay run` on the example repo exits 0 with a patch that applies", async () => {
    const out = tmp();
    const r = await cli(
      [
        "run",
        "--repo",
        CLAMP,
        "--task",
        "Make the failing tests pass.",
        "--verify",
        "python3 -m unittest -q",
        "--out",
        out,
      ],
      env,
    );
    expect(r.stderr).toMatch(/job \S+ enqueued/);
    expect(r.stderr).toMatch(/turn 1: 1 tool call/);
    expect(r.stderr).toMatch(/str_replace_based_edit_tool: str_replace \/workspace\/clamp.py/);
    expect(r.stderr).toMatch(/✗ No replacement was performed. Multiple occurrences/);
    expect(r.stderr).toMatch(/job \S+ completed; 1 file changed; patch: .*patch.diff/);
    expect(r.code).toBe(0);
    const result = JSON.parse(readFileSync(join(out, "result.json"), "utf8"));
    expect(result).toMatchObject({ status: "completed", verify: { exitCode: 0 }, filesChanged: ["clamp.py"] });
    const transcript = readFileSync(join(out, "transcript.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(transcript[0].type).toBe("job_started");
    expect(transcript.at(-1)).toMatchObject({ type: "job_finished", status: "completed" });
    const copy = tmp();
    cpSync(CLAMP, copy, { recursive: true });
    execFileSync("git", ["apply", join(out, "patch.diff")], { cwd: copy });
    expect(
      execFileSync("python3", ["-m", "unittest", "-q"], {
        cwd: copy,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      }),
    ).toBe("");
    removeDir(out);
    removeDir(copy);
  });

  it("a batch of 20 jobs over 2 worker processes: all complete, each ran exactly once", async () => {
    const dir = tmp();
    const file = join(dir, "tasks.jsonl");
    writeFileSync(
      file,
      Array.from({ length: 20 }, (_, i) =>
        JSON.stringify({ task: `Fix the failing test (batch job ${i}).`, repo: { path: CLAMP } }),
      ).join("\n") + "\n",
    );
    const before = fake.requests.length;
    const r = await cli(["enqueue", "--batch", file], env);
    expect(r.code).toBe(0);
    const ids = r.stdout.trim().split("\n");
    expect(ids).toHaveLength(20);
    const results = await Promise.all(ids.map((id) => client.waitForResult(id, { timeoutMs: 240_000 }))).catch(
      async (err) => {
        // What was still running, and where each job's transcript stopped: a hang is then found from the CI log.
        for (const j of await client.queue.getActive()) {
          const types = [];
          for await (const e of client.watch(j.id!, { follow: false })) types.push(e.type);
          console.log(
            `still active: job ${j.id} since ${j.processedOn ? Date.now() - j.processedOn : "?"} ms; events: ${types.join(" ")}`,
          );
        }
        for (const w of workers) console.log(`worker ${w.pid}:\n${w.log().split("\n").slice(-60).join("\n")}`);
        throw err;
      },
    );
    expect(results.every((x) => x.status === "completed" && x.filesChanged.join() === "clamp.py")).toBe(true);
    // Exactly once: six model requests per job's conversation, one job_started per job.
    const perTask = new Map<string, number>();
    for (const req of fake.requests.slice(before))
      perTask.set(taskOf(req.body), (perTask.get(taskOf(req.body)) ?? 0) + 1);
    expect(perTask.size).toBe(20);
    expect([...perTask.values()].every((n) => n === 6)).toBe(true);
    for (const id of ids) {
      const events = [];
      for await (const e of client.watch(id, { follow: false })) events.push(e);
      expect(events.filter((e) => e.type === "job_started")).toHaveLength(1);
      expect(events.filter((e) => e.type === "job_finished")).toHaveLength(1);
    }
    // Both workers took part in this batch (each job's completion is in exactly one worker's log).
    const ranBy = ids.map((id) => workers.filter((w) => new RegExp(`job ${id} attempt 1: completed`).test(w.log())));
    expect(ranBy.every((ws) => ws.length === 1)).toBe(true);
    for (const w of workers)
      expect(ranBy.filter((ws) => ws[0] === w).length, `jobs of worker ${w.pid}`).toBeGreaterThan(0);
    removeDir(dir);
  }, 600_000);

  it("a bad line in a batch enqueues nothing and names the line", async () => {
    const dir = tmp();
    const file = join(dir, "tasks.jsonl");
    writeFileSync(
      file,
      [
        JSON.stringify({ task: "ok", repo: { path: CLAMP } }),
        JSON.stringify({ task: "ok too", repo: { path: CLAMP } }),
        JSON.stringify({ repo: { path: CLAMP }, budget: { usd: -1 } }),
      ].join("\n"),
    );
    const counts = await client.queue.getJobCounts();
    const r = await cli(["enqueue", "--batch", file], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/nothing enqueued/);
    expect(r.stderr).toMatch(/tasks\.jsonl:3: invalid JobSpec: .*task: required.*budget\.usd/);
    expect(r.stdout).toBe("");
    expect(await client.queue.getJobCounts()).toEqual(counts);
    removeDir(dir);
  });

  it("`patchbay cancel` from another process stops a running job with status cancelled", async () => {
    // The job's own timeout is far off and its command sleeps 300 s: only the cancel ends it.
    const id = await client.enqueue({ task: "long-running job to cancel", repo: { path: CLAMP } });
    await waitForEvent(client, id, "tool_call");
    await untilInSandbox("local", await jobSandbox(id, client), "grep -qx x /workspace/clamp.py"); // its command runs
    const r = await cli(["cancel", id], env);
    expect(r.stdout).toMatch(new RegExp(`${id} signalled`));
    const result = await client.waitForResult(id, { timeoutMs: 120_000 });
    expect(result.status).toBe("cancelled");
    expect(result.filesChanged).toEqual(["clamp.py"]); // the patch of what was done is kept
    const st = await cli(["status", id, "--json"], env);
    expect(JSON.parse(st.stdout)).toMatchObject([{ id, state: "completed", outcome: "cancelled" }]);
  });

  it("Ctrl-C on `run --cancel-on-exit` waits for the cancelled job and writes its patch so far to --out", async () => {
    const out = join(tmp(), "out");
    const p = spawnPatchbay(
      ["run", "--repo", CLAMP, "--task", "long-running job for Ctrl-C", "--cancel-on-exit", "--out", out],
      env,
    );
    await p.waitFor(/job \S+ enqueued/);
    const id = /job (\S+) enqueued/.exec(p.out().stderr)![1]!;
    await waitForEvent(client, id, "tool_call");
    await untilInSandbox("local", await jobSandbox(id, client), "grep -qx x /workspace/clamp.py"); // its command runs
    p.proc.kill("SIGINT");
    expect(await p.exited).toBe(130);
    const { stderr } = p.out();
    expect(stderr).toMatch(new RegExp(`SIGINT: job ${id} signalled`));
    expect(stderr).toMatch(/waiting up to 30 s for job \S+'s result \(its patch so far\); Ctrl-C again to exit now/);
    expect(stderr).toMatch(new RegExp(`job ${id} cancelled.*1 file changed; patch: ${join(out, "patch.diff")}`));
    expect(readFileSync(join(out, "patch.diff"), "utf8")).toMatch(/^\+x$/m);
    expect(JSON.parse(readFileSync(join(out, "result.json"), "utf8"))).toMatchObject({ status: "cancelled" });
  });

  it("`patchbay run` on a job that fails for good exits 1 and still writes the transcript and result", async () => {
    const dir = tmp();
    const specFile = join(dir, "spec.json");
    // A 500 after the SDK's retries fails the attempt (a 429/529 would throttle the queue instead).
    writeFileSync(specFile, JSON.stringify({ task: "broken API", repo: { path: CLAMP }, attempts: 2 }));
    const r = await cli(["run", "--spec", specFile, "--out", join(dir, "out")], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/failed: Anthropic API error 500: Internal server error/);
    expect(JSON.parse(readFileSync(join(dir, "out", "result.json"), "utf8"))).toMatchObject({
      status: "failed",
      error: expect.stringMatching(/500/),
    });
    const events = readFileSync(join(dir, "out", "transcript.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(events.map((e) => e.type)).toContain("model_retry");
    // Two attempts, each ending with its own job_finished; the first says the queue retries it.
    const finished = events.filter((e) => e.type === "job_finished");
    expect(finished.map((e) => [e.attempt, e.status])).toEqual([
      [1, "failed"],
      [2, "failed"],
    ]);
    expect(finished[0].error).toMatch(/attempt 1 of 2; the queue runs it again/);
    expect(finished[1].error).not.toMatch(/runs it again/);
    removeDir(dir);
  });

  it("a job over its timeout ends with status timeout", async () => {
    const id = await client.enqueue({ task: "long-running job to time out", repo: { path: CLAMP }, timeoutSec: 4 });
    const result = await client.waitForResult(id, { timeoutMs: 30_000 });
    expect(result.status).toBe("timeout");
    expect(result.timings.totalMs).toBeGreaterThanOrEqual(4000); // it ran until its timeout
  });

  it("a bad JobSpec that reaches the queue fails without retry", async () => {
    // Bypass the client's validation, as a foreign producer might.
    const job = await client.queue.add(
      "fix",
      { spec: { task: "", repo: { nope: 1 } } as never, enqueuedAt: Date.now() },
      { attempts: 3 },
    );
    await expect(client.waitForResult(job.id!, { timeoutMs: 20_000 })).rejects.toThrow(/invalid JobSpec: task: .*repo/);
    expect((await client.status(job.id!)).attemptsMade).toBe(1);
  });

  it("--help works for every command and errors are clear", async () => {
    for (const c of [
      "worker",
      "run",
      "enqueue",
      "status",
      "result",
      "watch",
      "cancel",
      "list",
      "doctor",
      "image build",
    ]) {
      const r = await cli([...c.split(" "), "--help"], env);
      expect(r.code, c).toBe(0);
      expect(r.stdout, c).toMatch(new RegExp(`^patchbay ${c}`));
    }
    const bad = await cli(["run", "--repo", CLAMP], env);
    expect(bad.code).toBe(2); // a usage error
    expect(bad.stderr).toMatch(/missing --task|task: required/);
    expect(bad.stderr).not.toMatch(/at .*\.ts:\d+/);
    const noRedis = await cli(["status", "1"], { ...env, REDIS_URL: "redis://127.0.0.1:1" });
    expect(noRedis.code).toBe(1);
    expect(noRedis.stderr).toMatch(/cannot reach Redis at redis:\/\/127.0.0.1:1/);
  });
});

async function waitForEvent(client: PatchbayClient, id: string, type: string) {
  for await (const e of client.watch(id)) if (e.type === type) return;
  throw new Error(`job ${id} ended without a ${type} event`);
}
