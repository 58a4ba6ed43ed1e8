// The CLI's contract with scripts, against a Redis of this test's own. Jobs are finished by a plain
// BullMQ worker in this process (no Docker, no model): a task starting with "fail" fails, "cancel"
// ends cancelled, anything else completes.
import { UnrecoverableError, Worker } from "bullmq";
import { Redis } from "ioredis";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keys } from "../../src/queue/keys.js";
import { PatchbayClient, type JobData } from "../../src/queue/client.js";
import { BatchClient, batchHooks } from "../../src/batch/batches.js";
import { emptyResult, type JobResult } from "../../src/core/spec/spec.js";
import { ensureBuilt, patchbay, ROOT, spawnPatchbay } from "../support/cli-helpers.js";
import { startRedis } from "../support/cluster.js";

const CLAMP = join(ROOT, "examples/clamp");
const PATCH = "--- a/clamp.py\n+++ b/clamp.py\n";
// A job's error and task carry text from the repo, git or the model: an OSC 52 clipboard write, a
// colour, an 8-bit CSI that clears the screen, a carriage return over the line, a forged line.
const HOSTILE_ERROR = "boom \x1b]52;c;cm0gLXJmIH4=\x07\x1b[31mred\x1b[0m\x9b2J\rover\nforged line";
const HOSTILE_TASK = "hostile \x1b]0;a title\x07task\x1b[2J\u009d0;t\u009c\rdone";
/** What a terminal would act on: C0 but newline and tab, DEL, C1. */
const TERMINAL_CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;

describe("patchbay CLI for scripts (a queue of its own)", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let env: Record<string, string>;
  const clients: PatchbayClient[] = [];
  const workers: Worker[] = [];

  /** patchbay on a queue named by the environment (the --queue flag has a test of its own). */
  const pb = (queueName: string, args: string[]) => patchbay(args, { ...env, PATCHBAY_QUEUE: queueName });

  const client = (queueName: string) => {
    const c = new PatchbayClient({ redisUrl: redis.url, queueName });
    clients.push(c);
    return c;
  };

  /** A BullMQ worker that finishes jobs by their task's first word. */
  const finisher = (queueName: string) => {
    const w = new Worker<JobData, JobResult>(
      queueName,
      async (job) => {
        const task = job.data.spec.task;
        if (task.startsWith("fail")) throw new UnrecoverableError("boom: the repo is broken");
        if (task.startsWith("hostile")) throw new UnrecoverableError(HOSTILE_ERROR);
        if (task.startsWith("cancel")) return emptyResult("cancelled", "cancelled by a user", { jobId: job.id! });
        return {
          ...emptyResult("completed", "", { jobId: job.id! }),
          error: undefined,
          patch: PATCH,
          filesChanged: ["clamp.py"],
        };
      },
      { connection: new Redis(redis.url, { maxRetriesPerRequest: null }) },
    );
    workers.push(w);
    return w;
  };

  /** Enqueues one job per task and waits until each has finished. */
  const finished = async (queueName: string, tasks: string[]) => {
    const c = client(queueName);
    finisher(queueName);
    const ids: string[] = [];
    for (const task of tasks) ids.push(await c.enqueue({ task, repo: { path: CLAMP } }));
    await Promise.all(
      ids.map((id) => c.waitForResult(id, { timeoutMs: 20_000, warnIfNoWorker: false }).catch(() => {})),
    );
    return ids;
  };

  beforeAll(async () => {
    await ensureBuilt(); // dist/ runs the commands ~5x faster than src/ through tsx
    redis = await startRedis();
    env = { REDIS_URL: redis.url, PATCHBAY_QUEUE: "not-this-one" };
  });

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.close()));
    await Promise.all(clients.map((c) => c.close()));
    await redis?.stop();
  });

  it("an unknown id fails (exit 1, 'no job <id> in queue <q>') for watch, status, result and cancel", async () => {
    for (const cmd of ["watch", "status", "result", "cancel"]) {
      const r = await pb("q-unknown", [cmd, "no-such-id"]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(1);
      expect(r.stderr, cmd).toContain("no job no-such-id in queue q-unknown");
    }
  });

  it("watch ends with the job's final status; exit 0 only if it completed, 1 failed, 5 cancelled", async () => {
    const [done, failed, cancelled] = await finished("q-watch", ["complete it", "fail it", "cancel it"]);
    const cases = [
      [done, 0, /job \S+ completed/],
      [failed, 1, /job \S+ failed: .*boom: the repo is broken/],
      [cancelled, 5, /job \S+ cancelled: cancelled by a user/],
    ] as const; // exit codes by status: 5 cancelled
    for (const [id, code, re] of cases) {
      const r = await pb("q-watch", ["watch", id!]);
      expect(r.code, `${id}: ${r.stderr}`).toBe(code);
      expect(r.stderr).toMatch(re);
    }
  });

  it("result of a failed job prints the reason on stderr (and exits 1); a completed one prints the patch", async () => {
    const [done, failed] = await finished("q-result", ["complete it", "fail it"]);
    const f = await pb("q-result", ["result", failed!]);
    expect(f.code).toBe(1);
    expect(f.stdout).toBe("");
    expect(f.stderr).toMatch(new RegExp(`job ${failed} failed: .*boom: the repo is broken`));
    const d = await pb("q-result", ["result", done!]);
    expect(d).toMatchObject({ code: 0, stdout: PATCH, stderr: "" });
  });

  it("status takes several ids (an unknown one is named, and the exit is 1)", async () => {
    const [a, b] = await finished("q-status", ["complete it", "fail it"]);
    const r = await pb("q-status", ["status", a!, "nope", b!]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("no job nope in queue q-status");
    expect(r.stdout.trim().split("\n")).toEqual([`${a}\tcompleted`, `${b}\tfailed\tboom: the repo is broken`]);
    const json = await pb("q-status", ["status", a!, b!, "--json"]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout).map((s: { id: string; state: string }) => [s.id, s.state])).toEqual([
      [a, "completed"],
      [b, "failed"],
    ]);
  });

  it("list: a header, newest first, age and duration, --state, --limit; an empty queue says so", async () => {
    const [first] = await finished("q-list", ["complete the first"]);
    await Promise.all(workers.map((w) => w.close()));
    const c = client("q-list");
    const second = await c.enqueue({ task: "the second", repo: { path: CLAMP } });
    await new Promise((r) => setTimeout(r, 20));
    const third = await c.enqueue({ task: "the third", repo: { path: CLAMP } });
    const all = await pb("q-list", ["list"]);
    expect(all.code).toBe(0);
    const lines = all.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^ID\s+STATUS\s+AGE\s+DURATION\s+TASK$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/)[0])).toEqual([third, second, first]);
    expect(lines[3]).toMatch(new RegExp(`^${first}\\s+completed\\s+\\d+(ms|s)\\s+\\d+(ms|s)\\s+complete the first$`));
    expect(lines[1]).toMatch(/waiting\s+\d+(ms|s)\s+-\s+the third$/);
    const done = await pb("q-list", ["list", "--state", "completed"]);
    expect(
      done.stdout
        .trim()
        .split("\n")
        .slice(1)
        .map((l) => l.split(/\s+/)[0]),
    ).toEqual([first]);
    const one = await pb("q-list", ["list", "--limit", "1", "--json"]);
    expect(JSON.parse(one.stdout).map((j: { id: string }) => j.id)).toEqual([third]);
    const empty = await pb("q-empty", ["list"]);
    expect(empty).toMatchObject({ code: 0, stdout: "" });
    expect(empty.stderr).toMatch(/no jobs in queue q-empty/);
  });

  it("list --status filters by the job's status; --state takes queue states only and points a status to --status", async () => {
    const [done, failed, cancelled] = await finished("q-status-filter", ["complete it", "fail it", "cancel it"]);
    const ids = async (args: string[]) => {
      const r = await pb("q-status-filter", ["list", ...args, "--json"]);
      expect(r.code, r.stderr).toBe(0);
      return (JSON.parse(r.stdout) as { id: string }[]).map((j) => j.id).sort();
    };
    expect(await ids(["--status", "completed"])).toEqual([done]);
    expect(await ids(["--status", "cancelled"])).toEqual([cancelled]);
    expect(await ids(["--status", "failed,cancelled"])).toEqual([failed, cancelled].sort());
    // The queue state: every job whose worker returned a result, the cancelled one too (documented).
    expect(await ids(["--state", "completed"])).toEqual([done, cancelled].sort());
    const table = await pb("q-status-filter", ["list", "--status", "cancelled"]);
    expect(table.stdout.trim().split("\n")[1]).toMatch(new RegExp(`^${cancelled}\\s+cancelled\\s`));
    const refused = await pb("q-status-filter", ["list", "--state", "cancelled"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/'cancelled' is a job's status: use --status cancelled/);
    const unknown = await pb("q-status-filter", ["list", "--status", "done"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/--status takes completed, verify_failed, .*not 'done'/);
    const none = await pb("q-status-filter", ["list", "--status", "timeout"]);
    expect(none).toMatchObject({ code: 0, stdout: "" });
    expect(none.stderr).toMatch(/no timeout jobs in queue q-status-filter/);
  });

  it("result --out says every file it wrote", async () => {
    const [done] = await finished("q-result-out", ["complete it"]);
    const dir = join(mkdtempSync(join(tmpdir(), "pb-result-out-")), "out");
    const r = await pb("q-result-out", ["result", done!, "--out", dir]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe(`patchbay: wrote ${dir}/: patch.diff, transcript.jsonl, transcript.html and result.json\n`);
    expect(readdirSync(dir).sort()).toEqual(["patch.diff", "result.json", "transcript.html", "transcript.jsonl"]);
  });

  it("--json on enqueue and cancel; --queue and --redis-url flags beat the environment", async () => {
    const badEnv = { REDIS_URL: "redis://127.0.0.1:9", PATCHBAY_QUEUE: "not-this-one" };
    const e = await patchbay(
      ["enqueue", "--repo", CLAMP, "--task", "t", "--json", "--queue", "q-json", "--redis-url", redis.url],
      badEnv,
    );
    expect(e.code, e.stderr).toBe(0);
    const { queue, ids } = JSON.parse(e.stdout) as { queue: string; ids: string[] };
    expect(queue).toBe("q-json");
    expect(ids).toHaveLength(1);
    expect((await client("q-json").status(ids[0]!)).state).toBe("waiting");
    const cancel = await patchbay(["cancel", ids[0]!, "--json", "--queue", "q-json", "--redis-url", redis.url], badEnv);
    expect(cancel.code).toBe(0);
    expect(JSON.parse(cancel.stdout)).toEqual([{ id: ids[0], outcome: "cancelled" }]);
  });

  it("--job-id: the same spec returns the same id; another spec is an error naming the existing job", async () => {
    const args = ["enqueue", "--repo", CLAMP, "--job-id", "fixed-1"];
    const first = await pb("q-idem", [...args, "--task", "task A"]);
    expect(first).toMatchObject({ code: 0, stdout: "fixed-1\n" });
    const again = await pb("q-idem", [...args, "--task", "task A"]);
    expect(again).toMatchObject({ code: 0, stdout: "fixed-1\n" });
    const other = await pb("q-idem", [...args, "--task", "task B"]);
    expect(other.code).toBe(1);
    expect(other.stdout).toBe("");
    expect(other.stderr).toMatch(/job fixed-1 already exists in queue q-idem with a different spec/);
    expect((await client("q-idem").list()).map((j) => j.task)).toEqual(["task A"]);
  });

  it("--max-turns, --verify-rounds and --budget-usd reach the spec; out of range is named by its flag", async () => {
    const r = await pb("q-knobs", [
      "enqueue",
      "--repo",
      CLAMP,
      "--task",
      "t",
      "--max-turns",
      "7",
      "--verify-rounds",
      "0",
      "--budget-usd",
      "0.25",
    ]);
    expect(r.code, r.stderr).toBe(0);
    const job = await client("q-knobs").queue.getJob(r.stdout.trim());
    expect(job!.data.spec).toMatchObject({ maxTurns: 7, verifyRounds: 0, budget: { usd: 0.25 } });
    const bad = await pb("q-knobs", ["enqueue", "--repo", CLAMP, "--task", "t", "--verify-rounds", "11"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--verify-rounds: must be an integer from 0 to 10 \(got 11\)/);
    expect((await pb("q-knobs", ["enqueue", "--repo", CLAMP, "--task", "t", "--budget-usd", "free"])).stderr).toMatch(
      /--budget-usd takes a positive number \(dollars\), not 'free'/,
    );
  });

  it("a missing local --repo never reaches Redis", async () => {
    const r = await patchbay(["enqueue", "--repo", "/nonexistent/repo", "--task", "t"], {
      ...env,
      PATCHBAY_QUEUE: "q-missing",
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--repo: \/nonexistent\/repo does not exist/);
    const raw = new Redis(redis.url);
    expect(await raw.keys("bull:q-missing:*")).toEqual([]);
    raw.disconnect();
  });

  it("Ctrl-C on run says the job keeps running and how to cancel it; --cancel-on-exit cancels it", async () => {
    for (const cancelOnExit of [false, true]) {
      const p = spawnPatchbay(
        ["run", "--repo", CLAMP, "--task", "wait for ever", ...(cancelOnExit ? ["--cancel-on-exit"] : [])],
        { ...env, PATCHBAY_QUEUE: "q-ctrlc" },
      );
      await p.waitFor(/no worker is running on queue 'q-ctrlc'/);
      await new Promise((r) => setTimeout(r, 300));
      const id = /job (\S+) enqueued/.exec(p.out().stderr)![1]!;
      p.proc.kill("SIGINT");
      expect(await p.exited).toBe(130);
      const { stderr } = p.out();
      if (cancelOnExit) {
        expect(stderr).toMatch(new RegExp(`SIGINT: job ${id} cancelled`));
        expect(await client("q-ctrlc").redis.exists(keys("q-ctrlc").cancel(id))).toBe(1);
      } else {
        expect(stderr).toMatch(new RegExp(`job ${id} keeps running`));
        expect(stderr).toContain(`patchbay cancel ${id}`);
        expect(stderr).toContain("--cancel-on-exit");
        expect(await client("q-ctrlc").redis.exists(keys("q-ctrlc").cancel(id))).toBe(0);
      }
    }
  });

  it("a second Ctrl-C on `run --cancel-on-exit` ends the wait for the cancelled job's result at once", async () => {
    // A worker that takes the job and never answers its cancel: only the second Ctrl-C ends the wait.
    const hung = new Worker<JobData, JobResult>("q-ctrlc2", () => new Promise<JobResult>(() => {}), {
      connection: new Redis(redis.url, { maxRetriesPerRequest: null }),
    });
    // Closed by force below: a plain close waits for its job, which never ends (it hung afterAll).
    try {
      await secondCtrlC();
    } finally {
      await hung.close(true);
    }
  });

  /** The body of the test above: the run, its two Ctrl-C's, and what it says. */
  async function secondCtrlC(): Promise<void> {
    const p = spawnPatchbay(["run", "--repo", CLAMP, "--task", "hang", "--cancel-on-exit"], {
      ...env,
      PATCHBAY_QUEUE: "q-ctrlc2",
    });
    await p.waitFor(/job \S+ enqueued/);
    const id = /job (\S+) enqueued/.exec(p.out().stderr)![1]!;
    const c = client("q-ctrlc2");
    for (let i = 0; (await c.status(id)).state !== "active"; i++) {
      if (i > 200) throw new Error(`job ${id} never became active`);
      await new Promise((r) => setTimeout(r, 50));
    }
    p.proc.kill("SIGINT");
    await p.waitFor(/Ctrl-C again to exit now/);
    const at = Date.now();
    p.proc.kill("SIGINT");
    expect(await p.exited).toBe(130);
    expect(Date.now() - at).toBeLessThan(5000);
    expect(p.out().stderr).toMatch(new RegExp(`job ${id} signalled[\\s\\S]*no result of job ${id} written to`));
  }

  it("a job's hostile error and task reach the terminal from status, result, watch and list without a control", async () => {
    const [id] = await finished("q-hostile", [HOSTILE_TASK]);
    const runs = {
      status: await pb("q-hostile", ["status", id!]),
      result: await pb("q-hostile", ["result", id!]),
      watch: await pb("q-hostile", ["watch", id!]),
      list: await pb("q-hostile", ["list"]),
    };
    for (const [cmd, r] of Object.entries(runs)) {
      expect(r.stdout + r.stderr, cmd).not.toMatch(TERMINAL_CONTROL);
      expect(r.stdout + r.stderr, cmd).not.toMatch(/cm0gLXJmIH4|a title/);
    }
    // The words stay, on one line.
    for (const r of [runs.status.stdout, runs.result.stderr, runs.watch.stderr])
      expect(r).toContain("boom red over forged line");
    expect(runs.list.stdout).toMatch(new RegExp(`${id} .*hostile task done`));
  });

  it("a batch's hostile errors reach the terminal from batch status --jobs and batch wait without a control", async () => {
    // Two lines of a batch finished as a worker records them (its hooks called here, no worker).
    const c = client("q-batch-hostile");
    const { batchId, ids } = await new BatchClient(c).submit(
      [
        { task: "one", repo: { path: CLAMP } },
        { task: "two", repo: { path: CLAMP } },
      ],
      { name: "hostile-batch" },
    );
    const hooks = batchHooks(c.redis, "q-batch-hostile", 3600);
    for (const id of ids) {
      const data = (await c.queue.getJob(id))!.data;
      await hooks.start(data, id, 1);
      await hooks.finish(data, id, 1, { ...emptyResult("failed", HOSTILE_ERROR), jobId: id, attempt: 1 });
    }
    const runs = {
      status: await pb("q-batch-hostile", ["batch", "status", "--jobs", batchId]),
      wait: await pb("q-batch-hostile", ["batch", "wait", batchId]),
    };
    for (const [cmd, r] of Object.entries(runs)) {
      expect(r.stdout + r.stderr, cmd).not.toMatch(TERMINAL_CONTROL);
      expect(r.stdout + r.stderr, cmd).not.toMatch(/cm0gLXJmIH4/);
      // Each line's error, its words on that line.
      for (const id of ids)
        expect(r.stdout + r.stderr, cmd).toMatch(new RegExp(`${id}\\s.*failed.*boom red over forged line`));
    }
  });
});
