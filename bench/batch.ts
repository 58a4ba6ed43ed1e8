// Batches, on a private redis-server (so Redis counts only what is measured here):
// - submitting 1,000 jobs (parse + validate + enqueue; goal ≤ 2 s), library and CLI;
// - `batch status` of a 10,000-job batch (goal ≤ 200 ms), its index written directly;
// - the worker's Redis commands per job (MONITOR, the worker's connections only), a batch job
//   against a plain one, idle background subtracted.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { BatchClient, parseBatchFile, type JobSummary } from "../src/batch/batches.js";
import { keys } from "../src/queue/keys.js";
import { PatchbayClient } from "../src/queue/client.js";
import { startRedis } from "../test/support/cluster.js";
import { reply, startFakeAnthropic, text, toolUse } from "../test/support/fake-anthropic.js";
import { byTurn } from "../test/support/scripts.js";
import { execFileP, log, round, timeMedian } from "./lib.js";

const CLAMP = new URL("../examples/clamp", import.meta.url).pathname;
// The compiled CLI itself: bin/patchbay.js would run src/ through tsx whenever any src/ file is
// newer than dist/ (others edit src/ all the time), and that would be measured instead.
const BIN = new URL("../dist/cli.js", import.meta.url).pathname;

function batchFile(dir: string, n: number, tag: string): string {
  const file = join(dir, `${tag}.jsonl`);
  writeFileSync(
    file,
    Array.from({ length: n }, (_, i) =>
      JSON.stringify({
        task: `${tag} job ${i}: fix the failing test`,
        repo: { path: CLAMP },
        verify: "python3 -m unittest -q",
      }),
    ).join("\n") + "\n",
  );
  return file;
}

async function benchSubmit(c: PatchbayClient, url: string, dir: string) {
  const b = new BatchClient(c);
  log("batch: submit 1,000 jobs (parse + validate + enqueue), library median of 5, CLI median of 3");
  let run = 0;
  const lib = await timeMedian(
    5,
    async () => {
      const file = batchFile(dir, 1000, `lib${run++}`);
      const { readFileSync } = await import("node:fs");
      const r = await b.submit(parseBatchFile(readFileSync(file, "utf8"), file));
      if (r.added !== 1000) throw new Error(`added ${r.added}`);
    },
    1,
  );
  const again = await timeMedian(
    3,
    async () => {
      const file = batchFile(dir, 1000, "lib0");
      const { readFileSync } = await import("node:fs");
      await b.submit(parseBatchFile(readFileSync(file, "utf8"), file));
    },
    0,
  );
  const cliMs = await timeMedian(
    3,
    async (i) => {
      const file = batchFile(dir, 1000, `cli${i < 0 ? `w${-i}` : i}`);
      await execFileP(process.execPath, [BIN, "batch", "submit", file], {
        env: { ...process.env, REDIS_URL: url, PATCHBAY_QUEUE: c.queueName },
      });
    },
    1,
  );
  await c.queue.obliterate({ force: true });
  return { submit_1000_ms: lib, resubmit_same_1000_ms: again, cli_submit_1000_ms: cliMs, goal_ms_max: 2000 };
}

async function benchStatus(c: PatchbayClient, url: string) {
  const n = 10_000;
  const id = "status10k";
  const k = keys(c.queueName);
  const key = (p: string) => k.batch(id, p);
  log(`batch: status of a ${n}-job batch (index written directly)`);
  const statuses = ["completed", "completed", "completed", "verify_failed", "failed", "timeout"] as const;
  const p = c.redis.pipeline();
  const meta: Record<string, string> = {
    createdAt: String(Date.now() - 3_600_000),
    total: String(n),
    hash: "x",
    submitted: "1",
    spent: "0",
    done: "0",
  };
  const counts: Record<string, number> = {};
  let done = 0;
  for (let line = 1; line <= n; line++) {
    const jobId = `${id}-L${line}`;
    p.hset(key("lines"), String(line), jobId);
    p.hset(key("tasks"), String(line), `job ${line}: fix the failing test in module ${line % 97}`);
    if (line <= 9_900) {
      const status = statuses[line % statuses.length]!;
      const s: JobSummary = {
        line,
        status,
        ...(status === "completed" ? { verified: true } : status === "verify_failed" ? { verified: false } : {}),
        costUsd: 0.0123,
        usage: { inputTokens: 12_345, outputTokens: 678, cacheReadTokens: 45_678, cacheWriteTokens: 1234 },
        turns: 6,
        totalMs: 40_000 + (line % 500) * 100,
        attempt: 1,
        ...(status !== "completed" ? { error: `verify failed (exit 1) after 3 rounds: line ${line}` } : {}),
        filesChanged: 1,
        finishedAt: Date.now(),
      };
      p.hset(key("results"), jobId, JSON.stringify(s));
      p.rpush(key("finished"), jobId);
      counts[`n:${status}`] = (counts[`n:${status}`] ?? 0) + 1;
      done++;
    } else if (line <= 9_950) p.hset(key("started"), jobId, String(Date.now()));
  }
  p.hset(key("meta"), {
    ...meta,
    done: String(done),
    spent: String(done * 0.0123),
    ...Object.fromEntries(Object.entries(counts).map(([f, v]) => [f, String(v)])),
  });
  p.zadd(k.batches, Date.now(), id);
  await p.exec();
  const b = new BatchClient(c);
  const st = await b.status(id);
  if (st.done !== 9_900 || st.running !== 50) throw new Error(`unexpected status ${JSON.stringify(st)}`);
  const countsMs = await timeMedian(20, () => b.status(id));
  const jobsMs = await timeMedian(10, () => b.status(id, { jobs: true }));
  const summaryMs = await timeMedian(5, () => b.summary(id));
  const env = { ...process.env, REDIS_URL: url, PATCHBAY_QUEUE: c.queueName };
  const cliMs = await timeMedian(5, () => execFileP(process.execPath, [BIN, "batch", "status", id], { env }));
  const cliJobsMs = await timeMedian(3, () =>
    execFileP(process.execPath, [BIN, "batch", "status", id, "--json", "--jobs"], { env, maxBuffer: 64 << 20 }),
  );
  const nodeMs = await timeMedian(5, () => execFileP(process.execPath, ["-e", "0"]));
  return {
    jobs: n,
    status_ms: countsMs,
    status_with_jobs_ms: jobsMs,
    summary_ms: summaryMs,
    cli_status_ms: cliMs,
    cli_status_jobs_json_ms: cliJobsMs,
    node_e0_ms: nodeMs,
    goal_ms_max: 200,
  };
}

/** Commands the worker's connections sent while `fn` ran (MONITOR; a MULTI…EXEC block counts as one round trip). */
async function workerCommands(url: string, mine: Set<number>, fn: () => Promise<void>) {
  const monitorConn = new Redis(url);
  const mon = await monitorConn.monitor();
  const monPort = (mon as unknown as { stream: { localPort: number } }).stream.localPort;
  let commands = 0;
  let roundTrips = 0;
  let lua = 0;
  const inMulti = new Set<string>();
  const byName = new Map<string, number>();
  mon.on("monitor", (_time: string, args: string[], source: string) => {
    if (source === "lua") return void lua++;
    const port = Number(source.split(":").at(-1));
    if (mine.has(port) || port === monPort) return;
    const name = String(args[0]).toLowerCase();
    commands++;
    byName.set(name, (byName.get(name) ?? 0) + 1);
    if (name === "multi") inMulti.add(source);
    else if (name === "exec") {
      inMulti.delete(source);
      roundTrips++;
    } else if (!inMulti.has(source)) roundTrips++;
  });
  await fn();
  await new Promise((r) => setTimeout(r, 300));
  mon.disconnect();
  monitorConn.disconnect();
  return { commands, roundTrips, lua, byName };
}

async function benchRoundTrips(url: string) {
  const fake = await startFakeAnthropic(byTurn([reply(toolUse("bash", { command: "echo hi" })), reply(text("Done."))]));
  const queueName = "bench-rt";
  const env = {
    ...process.env,
    REDIS_URL: url,
    PATCHBAY_QUEUE: queueName,
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: "bench",
    PATCHBAY_CONCURRENCY: "2",
  };
  const worker = spawn(process.execPath, [BIN, "worker"], { env, stdio: ["ignore", "ignore", "pipe"] });
  let wlog = "";
  worker.stderr.on("data", (d: Buffer) => (wlog += d.toString()));
  const until = async (re: RegExp, n = 1) => {
    for (const t0 = Date.now(); (wlog.match(new RegExp(re, "g")) ?? []).length < n;) {
      if (Date.now() - t0 > 300_000) throw new Error(`worker: no ${re} ×${n}:\n${wlog}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await until(/ready: queue/);
  const c = new PatchbayClient({ redisUrl: url, queueName });
  const b = new BatchClient(c);
  await c.redis.ping();
  await c.queue.getJobCounts();
  // The client's one connection (the queue shares it): everything else but MONITOR is the worker.
  const ports = () => new Set([(c.redis as unknown as { stream: { localPort: number } }).stream.localPort]);
  const n = 6;
  try {
    log(`batch: worker Redis commands per job (${n} two-turn jobs, plain then as a batch; idle background subtracted)`);
    const t0 = performance.now();
    const idle = await workerCommands(url, ports(), () => new Promise((r) => setTimeout(r, 4000)));
    const idleMs = performance.now() - t0;
    let done = 0;
    const measure = async (submit: () => Promise<unknown>) => {
      const t = performance.now();
      const r = await workerCommands(url, ports(), async () => {
        await submit();
        done += n;
        await until(/attempt 1: completed/, done);
      });
      const ms = performance.now() - t;
      const background = (idle.roundTrips / idleMs) * ms;
      return {
        perJob: round((r.roundTrips - background) / n, 1),
        commandsPerJob: round((r.commands - (idle.commands / idleMs) * ms) / n, 1),
        byName: r.byName,
      };
    };
    const plain = await measure(() =>
      c.enqueueBatch(Array.from({ length: n }, (_, i) => ({ task: `plain ${i}`, repo: { path: CLAMP } }))),
    );
    const batch = await measure(() =>
      b.submit(
        Array.from({ length: n }, (_, i) => ({ task: `batch ${i}`, repo: { path: CLAMP } })),
        { name: "rt", budgetUsd: 100 },
      ),
    );
    const evalsha = (m: Map<string, number>) => (m.get("evalsha") ?? 0) + (m.get("eval") ?? 0);
    return {
      jobs: n,
      turns_per_job: 2,
      plain_round_trips_per_job: plain.perJob,
      batch_round_trips_per_job: batch.perJob,
      plain_commands_per_job: plain.commandsPerJob,
      batch_commands_per_job: batch.commandsPerJob,
      batch_hook_calls_per_job_expected: "start 1 + one per turn + finish 1",
      evalsha_per_job: { plain: round(evalsha(plain.byName) / n, 1), batch: round(evalsha(batch.byName) / n, 1) },
      idle_round_trips_per_s: round((idle.roundTrips / idleMs) * 1000, 2),
    };
  } finally {
    await c.close();
    worker.kill("SIGTERM");
    await new Promise((r) => (worker.exitCode !== null ? r(null) : worker.once("exit", r)));
    await fake.close();
  }
}

export async function benchBatch() {
  const redis = await startRedis();
  const dir = mkdtempSync(join(tmpdir(), "pb-bench-batch-"));
  const c = new PatchbayClient({ redisUrl: redis.url, queueName: "bench-batch" });
  try {
    const submit = await benchSubmit(c, redis.url, dir);
    const status = await benchStatus(c, redis.url);
    const worker = await benchRoundTrips(redis.url);
    return { submit, status, worker };
  } finally {
    await c.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
