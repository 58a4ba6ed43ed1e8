// Batches end to end: a private Redis, worker processes on the local backend
// (test/support/backend.ts: batches are the queue's logic, not Docker's), the real SDK against the
// scripted server, and `patchbay batch ...` run as a user runs it (a TTY one under tmux).
//
// Backend: local (worker processes: `LOCAL_WORKER_ENV`).
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchClient } from "../../src/batch/batches.js";
import { PatchbayClient } from "../../src/queue/client.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic, type Reply } from "../support/fake-anthropic.js";
import { cli, removeDir, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { ensureBuilt, ROOT } from "../support/cli-helpers.js";
import { byTurn, taskOf } from "../support/scripts.js";
import { LOCAL_WORKER_ENV } from "../support/backend.js";

/** The task as written in the spec (the first user message wraps it in <task> tags). */
const taskText = (body: unknown) =>
  taskOf(body)
    .replace(/^<task>\n/, "")
    .replace(/\n<\/task>$/, "");

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const QUEUE = "batch-e2e";
const DONE = reply(text("Done."));
const create = (path: string) =>
  reply(toolUse("str_replace_based_edit_tool", { command: "create", path, file_text: "ok\n" }));
/** $3 a turn at the default model's price ($2 per million input tokens). */
const costly = (r: Reply): Reply => ({ ...r, usage: { input_tokens: 1_500_000 } }) as Reply;

describe("patchbay batch end to end", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let env: Record<string, string>;
  let workers: WorkerProc[] = [];
  let client: PatchbayClient;
  let batches: BatchClient;
  let repo: string;
  let dir: string;
  /** After `batch retry`: the "hard" tasks are done right. */
  let secondTry = false;
  /** Line 7's task: its first attempt waits on the model until its worker is killed. */
  const HELD = "ok 6";
  let heldCalls = 0;

  beforeAll(async () => {
    await ensureBuilt();
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), "pb-batch-e2e-"));
    repo = join(dir, "repo");
    execFileSync("mkdir", ["-p", repo]);
    writeFileSync(join(repo, "README"), "a tiny repo\n");
    writeFileSync(join(dir, "broken.tar"), "this is not a tar archive at all\n".repeat(40));
    fake = await startFakeAnthropic(
      byTurn((body): Reply[] => {
        const task = taskText(body);
        if (/^fix later/.test(task)) return [DONE, create("/workspace/fixed"), DONE];
        if (/^hard/.test(task)) return secondTry ? [create("/workspace/fixed"), DONE] : [DONE, DONE];
        if (/^slow/.test(task)) return [reply(toolUse("bash", { command: "sleep 60" })), DONE];
        if (/^costly/.test(task)) return [costly(reply(toolUse("bash", { command: "true" }))), costly(DONE)];
        if (/^paced/.test(task)) return [{ ...DONE, delayMs: 1500 } as Reply];
        // The job the test kills a worker under: its first model call hangs, so it is surely in flight.
        if (task === HELD && heldCalls++ === 0) return [{ ...DONE, delayMs: 120_000 } as Reply];
        return [DONE];
      }),
    );
    env = {
      ...LOCAL_WORKER_ENV,
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: QUEUE,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_LOCK_MS: "5000",
      PATCHBAY_STALLED_MS: "2000",
      PATCHBAY_REAP_MS: "3000",
      PATCHBAY_CONCURRENCY: "2",
    };
    workers = [startWorkerProc(env), startWorkerProc(env)];
    await Promise.all(workers.map((w) => w.waitFor(new RegExp(`ready: queue ${QUEUE}`), 180_000)));
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    batches = new BatchClient(client);
  }, 600_000); // a build of dist/ on a loaded machine, and two workers starting

  afterAll(async () => {
    await client?.close();
    await Promise.all(workers.map((w) => w.stop("SIGTERM")));
    await fake?.close();
    await redis?.stop();
    if (dir) removeDir(dir);
  });

  const writeJsonl = (name: string, specs: object[]) => {
    const file = join(dir, name);
    writeFileSync(file, specs.map((s) => JSON.stringify(s)).join("\n") + "\n");
    return file;
  };
  const readJson = (p: string) => JSON.parse(readFileSync(p, "utf8"));
  const events = async (id: string) => {
    const out: TranscriptEvent[] = [];
    for await (const e of client.watch(id, { follow: false })) out.push(e);
    return out;
  };

  it("30 jobs over 2 workers, one killed -9 during wait: exact counts in summary.json; retry --status verify_failed re-runs only those", async () => {
    const specs: object[] = [];
    for (let i = 0; i < 14; i++)
      specs.push({ task: `ok ${i}`, repo: { path: repo }, ...(i % 2 ? { verify: "true" } : {}) });
    for (let i = 0; i < 8; i++)
      specs.push({ task: `fix later ${i}`, repo: { path: repo }, verify: "test -f /workspace/fixed", verifyRounds: 2 });
    for (let i = 0; i < 6; i++)
      specs.push({ task: `hard ${i}`, repo: { path: repo }, verify: "test -f /workspace/fixed", verifyRounds: 1 });
    specs.push({ task: "broken repo", repo: { archive: join(dir, "broken.tar") } });
    specs.push({ task: "slow job", repo: { path: repo }, timeoutSec: 6 });
    const file = writeJsonl("thirty.jsonl", specs);

    const sub = await cli(["batch", "submit", file, "--name", "thirty"], env);
    expect(sub.code, sub.stderr).toBe(0);
    expect(sub.stdout.trim()).toBe("thirty");
    expect(sub.stderr).toMatch(/batch thirty: 30 jobs enqueued/);

    const out = join(dir, "out1");
    const waiting = cli(["batch", "wait", "thirty", "--out", out], env, { timeoutMs: 900_000 });
    // Once a few jobs are done, the worker running line 7 (held at the model) dies with every job
    // it runs; a new one takes its place.
    let victim: WorkerProc | undefined;
    while (!victim) {
      const st = await batches.status("thirty");
      if (st.done >= 6 && heldCalls > 0) victim = workers.find((w) => /job thirty-L7 attempt 1: started/.test(w.log()));
      await sleep(50);
    }
    victim.proc.kill("SIGKILL");
    await victim.exited;
    // The jobs it had started and not logged as finished. One may have finished just before the
    // kill (its result recorded, the log line not yet written): that result stands.
    const vlog = victim.log();
    const lost = [...vlog.matchAll(/job (thirty-L\d+) attempt \d+: started/g)]
      .map((m) => m[1]!)
      .filter((id) => !new RegExp(`job ${id} attempt \\d+: (?!started)`).test(vlog));
    expect(lost).toContain("thirty-L7");
    const fresh = startWorkerProc(env);
    workers[workers.indexOf(victim)] = fresh;
    await fresh.waitFor(new RegExp(`ready: queue ${QUEUE}`), 180_000);
    const w = await waiting;

    expect(w.code, w.stderr).toBe(1); // a failed job is the worst
    const summary = readJson(join(out, "summary.json"));
    expect(summary.total).toBe(30);
    expect(summary.counts).toEqual({
      completed: 22,
      verify_failed: 6,
      failed: 1,
      timeout: 1,
      budget_exceeded: 0,
      cancelled: 0,
      max_turns: 0,
    });
    expect(summary.verify).toEqual({ verified: 15, unverified: 6, none: 9 });
    expect(summary.jobs).toHaveLength(30);
    expect(summary.errors.map((e: { error: string }) => e.error)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/verify failed \(exit 1\) after 2 rounds/),
        expect.stringMatching(/broken\.tar/),
      ]),
    );
    expect(summary.errors[0]).toMatchObject({ count: 6 });
    expect(summary.tokens.inputTokens + summary.tokens.cacheWriteTokens).toBeGreaterThan(0); // the fake caches whole prompts
    expect(summary.jobMs.p95).toBeGreaterThanOrEqual(summary.jobMs.p50);
    const byLine = new Map(
      summary.jobs.map((j: { line: number; result: { status: string } }) => [j.line, j.result.status]),
    );
    expect(byLine.get(29)).toBe("failed");
    expect(byLine.get(30)).toBe("timeout");
    // The files of each job, and the table.
    for (const j of summary.jobs) {
      expect(readJson(join(out, j.jobId, "result.json")).status).toBe(j.result.status);
      expect(existsSync(join(out, j.jobId, "patch.diff"))).toBe(true);
      expect(readFileSync(join(out, j.jobId, "transcript.jsonl"), "utf8")).toMatch(/"job_finished"/);
      // The dashboard's renderer is found (a dynamic import by path: a move of src/ must not lose it).
      expect(readFileSync(join(out, j.jobId, "transcript.html"), "utf8")).toMatch(/^<!doctype html>/i);
    }
    // Token totals (cache reads and writes too) are the sums over the jobs' results.
    const sum = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
    for (const j of summary.jobs)
      for (const [k, v] of Object.entries(readJson(join(out, j.jobId, "result.json")).usage))
        sum[k as keyof typeof sum] += v as number;
    expect(summary.tokens).toEqual(sum);
    expect(readJson(join(out, "thirty-L15", "result.json"))).toMatchObject({
      status: "completed",
      verified: true,
      filesChanged: ["fixed"],
    });
    const md = readFileSync(join(out, "summary.md"), "utf8");
    expect(md).toMatch(/- Jobs: 30 \(completed 22, verify_failed 6, failed 1, timeout 1\)/);
    expect(md.split("\n").filter((l) => /^\| \d+ \| thirty-L\d+ \|/.test(l))).toHaveLength(30);
    // Not a TTY: one line per finished job (at least; a job re-run after the kill may say so twice).
    const lines = w.stderr.split("\n").filter((l) => /^\[\d+\/30\] line \d+ thirty-L\d+ /.test(l));
    expect(new Set(lines.map((l) => /line (\d+)/.exec(l)![1])).size).toBe(30);
    expect(w.stderr).toMatch(/batch thirty done: completed 22 · verify_failed 6 · failed 1 · timeout 1/);
    // The jobs the killed worker was running ran again elsewhere, and count once.
    expect(readJson(join(out, "thirty-L7", "result.json")).attempt).toBeGreaterThanOrEqual(2);
    const logs = workers.map((x) => x.log()).join("\n") + vlog;
    for (const id of lost) {
      const stood = new RegExp(`job ${id} attempt \\d+: an earlier attempt finished`).test(logs);
      if (!stood) expect(readJson(join(out, id, "result.json")).attempt, id).toBeGreaterThanOrEqual(2);
    }

    // Retry only the verify_failed lines: new job ids, and only their tasks reach the model.
    secondTry = true;
    const before = fake.requests.length;
    const retry = await cli(["batch", "retry", "thirty", "--status", "verify_failed"], env);
    expect(retry.code, retry.stderr).toBe(0);
    expect(retry.stdout.trim().split("\n").sort()).toEqual(
      Array.from({ length: 6 }, (_, i) => `thirty-L${23 + i}-r1`).sort(),
    );
    const out2 = join(dir, "out2");
    const w2 = await cli(["batch", "wait", "thirty", "--out", out2], env, { timeoutMs: 600_000 });
    expect(w2.code, w2.stderr).toBe(1); // the broken repo is still there
    // Progress lists each line's latest job once: the six new ones, not the attempts they replaced.
    const latest = Array.from({ length: 30 }, (_, i) => `thirty-L${i + 1}${i + 1 >= 23 && i + 1 <= 28 ? "-r1" : ""}`);
    expect(
      w2.stderr
        .split("\n")
        .filter((l) => /^\[\d+\/30\] line/.test(l))
        .map((l) => /thirty-L\d+(-r1)?/.exec(l)![0])
        .sort(),
    ).toEqual(latest.sort());
    const s2 = readJson(join(out2, "summary.json"));
    expect(s2.counts).toEqual({
      completed: 28,
      verify_failed: 0,
      failed: 1,
      timeout: 1,
      budget_exceeded: 0,
      cancelled: 0,
      max_turns: 0,
    });
    expect(
      s2.jobs.filter((j: { jobId: string }) => j.jobId.endsWith("-r1")).map((j: { line: number }) => j.line),
    ).toEqual([23, 24, 25, 26, 27, 28]);
    const tasks = new Set(fake.requests.slice(before).map((r) => taskText(r.body)));
    expect([...tasks].sort()).toEqual(Array.from({ length: 6 }, (_, i) => `hard ${i}`));
    expect(s2.costUsd.all).toBeGreaterThanOrEqual(s2.costUsd.latest);
  }, 900_000);

  it("the same file submitted twice (no --name) is one batch: each line runs once", async () => {
    const file = writeJsonl(
      "twice.jsonl",
      [0, 1, 2].map((i) => ({ task: `twice ${i}`, repo: { path: repo } })),
    );
    const a = await cli(["batch", "submit", file, "--json"], env);
    const b = await cli(["batch", "submit", file, "--json"], env);
    expect(a.code, a.stderr).toBe(0);
    const [ja, jb] = [JSON.parse(a.stdout), JSON.parse(b.stdout)];
    expect(jb.batchId).toBe(ja.batchId);
    expect(ja.batchId).toMatch(/^b-[0-9a-f]{16}$/);
    expect([ja.added, jb.added]).toEqual([3, 0]);
    expect(b.stderr).toMatch(/0 jobs enqueued .*\(3 were already there\)/);
    const w = await cli(["batch", "wait", ja.batchId], env, { timeoutMs: 280_000 });
    expect(w.code, w.stderr).toBe(0);
    const perTask = fake.requests.map((r) => taskText(r.body)).filter((t) => t.startsWith("twice"));
    expect(perTask.sort()).toEqual(["twice 0", "twice 1", "twice 2"]);
    const st = await cli(["batch", "status", ja.batchId, "--json"], env);
    expect(JSON.parse(st.stdout)).toMatchObject({ total: 3, done: 3, counts: { completed: 3 } });
    const list = await cli(["batch", "list"], env);
    expect(list.stdout).toMatch(new RegExp(`${ja.batchId}\\s+-\\s+3/3 .* done`));
  }, 300_000);

  it("--budget-usd: once spent, jobs not started end budget_exceeded without a sandbox, running ones after their turn", async () => {
    const file = writeJsonl(
      "costly.jsonl",
      Array.from({ length: 10 }, (_, i) => ({ task: `costly ${i}`, repo: { path: repo } })),
    );
    const r = await cli(
      ["batch", "run", file, "--name", "costly", "--budget-usd", "5", "--out", join(dir, "costly")],
      env,
      { timeoutMs: 300_000 },
    );
    expect(r.code, r.stderr).toBe(4);
    const s = readJson(join(dir, "costly", "summary.json"));
    // Two turns at $3 are more than $5: no job completes.
    expect(s.counts.budget_exceeded).toBe(10);
    expect(s.costUsd.all).toBeGreaterThanOrEqual(5);
    const ran = s.jobs.filter((j: { result: { turns: number } }) => j.result.turns > 0);
    const stopped = s.jobs.filter((j: { result: { turns: number } }) => j.result.turns === 0);
    // At most one job per worker slot (2 workers × 2) was running when the budget ran out.
    expect(ran.length).toBeGreaterThan(0);
    expect(ran.length).toBeLessThanOrEqual(4);
    for (const j of stopped) {
      expect(j.result.error).toMatch(/budget of \$5\.00 is spent .*did not start/);
      const types = (await events(j.jobId)).map((e) => e.type);
      expect(types).not.toContain("sandbox_ready");
      expect(types).toContain("job_finished");
    }
    for (const j of ran) expect((await events(j.jobId)).some((e) => e.type === "budget")).toBe(false); // the batch's budget, not the job's
    const requests = fake.requests.filter((q) => /^costly/.test(taskText(q.body)));
    expect(new Set(requests.map((q) => taskText(q.body))).size).toBe(ran.length);
  }, 300_000);

  it("batch wait on a terminal (tmux): a bar with done/total and counts, redrawn in place; the final state", async () => {
    const file = writeJsonl(
      "paced.jsonl",
      Array.from({ length: 6 }, (_, i) => ({ task: `paced ${i}`, repo: { path: repo } })),
    );
    const sub = await cli(["batch", "submit", file, "--name", "paced"], env);
    expect(sub.code, sub.stderr).toBe(0);
    const sock = `pb-batch-${process.pid}`;
    const tmux = (...args: string[]) => execFileSync("tmux", ["-L", sock, ...args], { encoding: "utf8" });
    const envArgs = Object.entries({ ...env, TERM: "xterm-256color" }).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
    tmux(
      "new-session",
      "-d",
      "-s",
      "pb",
      "-x",
      "110",
      "-y",
      "20",
      ...envArgs,
      `${process.execPath} ${join(ROOT, "bin/patchbay.js")} batch wait paced; echo EXIT=$?; sleep 600`,
    );
    try {
      const bar = /\[[#-]{30}\] (\d)\/6 /;
      const seen = new Set<string>();
      let pane = "";
      for (const t0 = Date.now(); !/EXIT=\d/.test(pane);) {
        if (Date.now() - t0 > 180_000) throw new Error(`no end in 180 s:\n${pane}`);
        pane = tmux("capture-pane", "-p", "-t", "pb");
        const m = bar.exec(pane);
        if (m) seen.add(m[1]!);
        await sleep(150);
      }
      expect(
        [...seen].some((n) => Number(n) < 6),
        `bars seen: ${[...seen].join(",")}`,
      ).toBe(true); // seen while it ran
      expect(pane).toMatch(/\[#{30}\] 6\/6 +completed 6/);
      expect(pane).toMatch(/(<)?\$0\.\d{2,4} spent · \S+ elapsed · done/);
      expect(pane.split("\n").filter((l) => bar.test(l))).toHaveLength(1); // redrawn in place, not appended
      expect(pane).toMatch(/batch paced done: completed 6/);
      expect(pane).toMatch(/EXIT=0/);
    } finally {
      tmux("kill-server");
    }
  }, 300_000);
});
