// The fleet's ceiling (docs/capacity.md): one private redis-server (AOF on, appendfsync everysec, as a
// deployment would run it), worker processes on the memory backend (src/backend/memory.ts: a
// sandbox costs nothing) and an instant scripted model in this process, so the costs left are the
// workers', Redis's and the model server's, each measured on its own:
// - per slot count (10, 50, 200, 500 concurrent job slots over WORKERS processes): jobs/s, Redis
//   commands per job by name (INFO commandstats deltas, the bench's own polling subtracted),
//   Redis CPU (used_cpu_sys + used_cpu_user) and memory (used_memory) per 10,000 finished jobs,
//   and the CPU of the workers and of this process (the model server and the enqueuer);
// - the batch index and the dashboard under many finished jobs: `batch status` and the summary of
//   a batch, the dashboard's job list and batches pages, at 1,000, 10,000 and 100,000 jobs,
//   loaded the way the workers leave them (see loadFinished).
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { Redis } from "ioredis";
import { BatchClient, type JobSummary } from "../src/batch/batches.js";
import { PatchbayClient } from "../src/queue/client.js";
import { keys } from "../src/queue/keys.js";
import { startDashboard } from "../src/web/server.js";
import { startRedis } from "../test/support/cluster.js";
import { startFakeAnthropic } from "../test/support/fake-anthropic.js";
import { byTurn, tenToolScript } from "../test/support/scripts.js";
import { log, median, round, timeMedian } from "./lib.js";

const BIN = new URL("../bin/patchbay.js", import.meta.url).pathname;
const CLAMP = new URL("../examples/clamp", import.meta.url).pathname;
const WORKERS = Number(process.env.FLEET_WORKERS ?? 4);
const SLOTS = (process.env.FLEET_SLOTS ?? "10,50,200,500").split(",").map(Number);
const TOOL_CALLS = 5;
const TOKEN = "bench-fleet-token-0123456789";

type Info = Map<string, string>;
async function info(r: Redis, section: string): Promise<Info> {
  const m: Info = new Map();
  for (const line of (await r.info(section)).split("\r\n")) {
    const i = line.indexOf(":");
    if (i > 0) m.set(line.slice(0, i), line.slice(i + 1));
  }
  return m;
}
/** Calls by command name (INFO commandstats). */
async function commandCalls(r: Redis): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const [k, v] of await info(r, "commandstats"))
    out.set(k.replace(/^cmdstat_/, ""), Number(/calls=(\d+)/.exec(v)?.[1] ?? 0));
  return out;
}
const redisCpu = async (r: Redis) => {
  const i = await info(r, "cpu");
  return Number(i.get("used_cpu_sys")) + Number(i.get("used_cpu_user"));
};
const usedMemory = async (r: Redis) => Number((await info(r, "memory")).get("used_memory"));

/** utime + stime of a process and its reaped children, in s. */
function procCpu(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100;
  } catch {
    return 0;
  }
}
const selfCpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

async function startWorkers(n: number, env: Record<string, string>): Promise<ChildProcess[]> {
  const procs = Array.from({ length: n }, () =>
    spawn(process.execPath, [BIN, "worker"], { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"] }),
  );
  await Promise.all(
    procs.map(
      (p) =>
        new Promise<void>((resolve, reject) => {
          let out = "";
          p.stderr.on("data", (d: Buffer) => {
            if (out.length < 65536) out += d.toString();
            if (/ready: queue/.test(out)) resolve();
          });
          p.once("exit", (code) =>
            reject(new Error(`a worker exited (${code}) before it was ready:\n${out.slice(-2000)}`)),
          );
        }),
    ),
  );
  for (const p of procs) p.stderr.resume();
  return procs;
}

async function stopWorkers(procs: ChildProcess[]): Promise<void> {
  await Promise.all(
    procs.map(
      (p) =>
        new Promise<void>((resolve) => {
          if (p.exitCode !== null || p.signalCode !== null) return resolve();
          p.once("exit", () => resolve());
          p.kill("SIGTERM");
        }),
    ),
  );
}

/** One slot count: `jobs` jobs through WORKERS workers of `slots / WORKERS` slots each. */
async function level(url: string, modelUrl: string, slots: number, jobs: number, queueName: string) {
  const per = Math.max(1, Math.round(slots / WORKERS));
  const env = {
    REDIS_URL: url,
    PATCHBAY_QUEUE: queueName,
    PATCHBAY_BACKEND: "memory",
    PATCHBAY_TEST_BACKENDS: "1",
    ANTHROPIC_BASE_URL: modelUrl,
    ANTHROPIC_API_KEY: "bench",
    PATCHBAY_CONCURRENCY: String(per),
    PATCHBAY_LOG_FORMAT: "json",
  };
  const workers = await startWorkers(WORKERS, env);
  const r = new Redis(url);
  const c = new PatchbayClient({ redisUrl: url, queueName });
  try {
    await c.queue.getJobCounts();
    const q = c.queue.keys;
    const before = {
      calls: await commandCalls(r),
      cpu: await redisCpu(r),
      mem: await usedMemory(r),
      workers: workers.map((w) => procCpu(w.pid!)),
      self: selfCpu(),
    };
    const t0 = performance.now();
    for (let i = 0; i < jobs; i += 500)
      await c.enqueueBatch(
        Array.from({ length: Math.min(500, jobs - i) }, (_, k) => ({
          task: `fleet job ${i + k}`,
          repo: { path: CLAMP },
          verify: "python3 -m unittest -q",
        })),
      );
    let polls = 0;
    for (;;) {
      polls++;
      const [[, done], [, failed]] = (await r.pipeline().zcard(q.completed!).zcard(q.failed!).exec()) as [
        [unknown, number],
        [unknown, number],
      ];
      if (done + failed >= jobs) {
        if (failed) log(`fleet: ${failed} jobs failed at ${slots} slots`);
        break;
      }
      await new Promise((res) => setTimeout(res, 200));
    }
    const s = (performance.now() - t0) / 1000;
    const after = {
      calls: await commandCalls(r),
      cpu: await redisCpu(r),
      mem: await usedMemory(r),
      workers: workers.map((w) => procCpu(w.pid!)),
      self: selfCpu(),
    };
    const byName: Record<string, number> = {};
    let total = 0;
    for (const [name, n] of after.calls) {
      let d = n - (before.calls.get(name) ?? 0);
      if (name === "zcard") d -= 2 * polls;
      if (name === "info") d = 0;
      if (d > 0) {
        byName[name] = round(d / jobs, 2);
        total += d;
      }
    }
    const redisCpuS = after.cpu - before.cpu;
    const workerCpuS = after.workers.reduce((a, x, i) => a + x - before.workers[i]!, 0);
    return {
      slots,
      workers: WORKERS,
      slots_per_worker: per,
      jobs,
      seconds: round(s, 1),
      jobs_per_s: round(jobs / s, 1),
      redis_commands_per_job: round(total / jobs, 1),
      top_commands_per_job: Object.fromEntries(
        Object.entries(byName)
          .sort((a, b) => b[1] - a[1])
          .slice(0, 12),
      ),
      redis_cpu_utilisation: round(redisCpuS / s, 3),
      redis_cpu_s_per_10k_jobs: round((redisCpuS / jobs) * 10_000, 1),
      redis_memory_mb_per_10k_jobs: round((((after.mem - before.mem) / jobs) * 10_000) / 2 ** 20, 1),
      workers_cpu_utilisation: round(workerCpuS / s, 2),
      model_server_and_bench_cpu_utilisation: round((after.self - before.self) / s, 2),
    };
  } finally {
    await stopWorkers(workers);
    await c.queue.obliterate({ force: true }).catch(() => {});
    await c.close();
    r.disconnect();
  }
}

/**
 * `n` finished jobs of one batch, as the workers leave them: a completed BullMQ job each (a copy of
 * a real finished job's hash, under its line's id, in the completed set) and the batch's index
 * (lines, tasks, results, finished, meta), written in pipelines of 5,000.
 */
async function loadFinished(
  c: PatchbayClient,
  r: Redis,
  id: string,
  n: number,
  template: Record<string, string>,
): Promise<void> {
  const k = keys(c.queueName);
  const key = (p: string) => k.batch(id, p);
  const q = c.queue.keys;
  const statuses = ["completed", "completed", "completed", "verify_failed", "failed"] as const;
  const counts: Record<string, number> = {};
  const now = Date.now();
  for (let from = 1; from <= n; from += 5000) {
    const p = r.pipeline();
    for (let line = from; line < Math.min(n + 1, from + 5000); line++) {
      const jobId = `${id}-L${line}`;
      const status = statuses[line % statuses.length]!;
      const s: JobSummary = {
        line,
        status,
        ...(status === "completed" ? { verified: true } : status === "verify_failed" ? { verified: false } : {}),
        costUsd: 0.0123,
        usage: { inputTokens: 12_345, outputTokens: 678, cacheReadTokens: 45_678, cacheWriteTokens: 1234 },
        turns: 6,
        totalMs: 40_000,
        attempt: 1,
        filesChanged: 1,
        finishedAt: now - n + line,
      };
      p.hset(`${q.base}:${jobId}`, {
        ...template,
        name: jobId,
        timestamp: String(now - n + line - 60_000),
        finishedOn: String(now - n + line),
      });
      p.zadd(q.completed!, now - n + line, jobId);
      p.hset(key("lines"), String(line), jobId);
      p.hset(key("tasks"), String(line), `job ${line}: fix the failing test in module ${line % 97}`);
      p.hset(key("results"), jobId, JSON.stringify(s));
      p.rpush(key("finished"), jobId);
      counts[`n:${status}`] = (counts[`n:${status}`] ?? 0) + 1;
    }
    await p.exec();
  }
  await r.hset(key("meta"), {
    createdAt: String(now - 3_600_000),
    total: String(n),
    hash: "x",
    submitted: "1",
    spent: String(n * 0.0123),
    done: String(n),
    ...Object.fromEntries(Object.entries(counts).map(([f, v]) => [f, String(v)])),
  });
  await r.zadd(k.batches, now, id);
}

async function scale(url: string, modelUrl: string) {
  const queueName = "fleet-scale";
  // One real finished job through a worker: the template of every loaded one.
  const workers = await startWorkers(1, {
    REDIS_URL: url,
    PATCHBAY_QUEUE: queueName,
    PATCHBAY_BACKEND: "memory",
    PATCHBAY_TEST_BACKENDS: "1",
    ANTHROPIC_BASE_URL: modelUrl,
    ANTHROPIC_API_KEY: "bench",
    PATCHBAY_CONCURRENCY: "1",
  });
  const c = new PatchbayClient({ redisUrl: url, queueName });
  const r = new Redis(url);
  const dash = await startDashboard({ port: 0, redisUrl: url, queueName, token: TOKEN });
  try {
    const real = await c.enqueue({ task: "the template", repo: { path: CLAMP }, verify: "python3 -m unittest -q" });
    await c.waitForResult(real, { timeoutMs: 120_000 });
    const template = await r.hgetall(`${c.queue.keys.base}:${real}`);
    await stopWorkers(workers);
    const b = new BatchClient(c);
    const get = async (path: string) => {
      const res = await fetch(`${dash.url.replace(/\/$/, "")}${path}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      if (!res.ok) throw new Error(`GET ${path}: ${res.status}`);
      await res.arrayBuffer();
    };
    const rows = [];
    let loaded = 0;
    for (const n of [1000, 10_000, 100_000]) {
      const id = `scale${n}`;
      const t = performance.now();
      await loadFinished(c, r, id, n, template);
      loaded += n;
      log(
        `fleet: loaded a ${n}-job batch in ${round((performance.now() - t) / 1000, 1)} s (${loaded} finished jobs in Redis)`,
      );
      rows.push({
        batch_jobs: n,
        finished_jobs_in_redis: loaded,
        batch_status_ms: await timeMedian(7, () => b.status(id)),
        batch_status_with_jobs_ms: await timeMedian(3, () => b.status(id, { jobs: true }), 1),
        batch_summary_ms: await timeMedian(3, () => b.summary(id), 1),
        dashboard_jobs_list_ms: await timeMedian(7, () => get("/api/jobs")),
        dashboard_batch_jobs_list_ms: await timeMedian(5, () => get(`/api/jobs?batch=${id}`)),
        dashboard_batches_ms: await timeMedian(7, () => get("/api/batches")),
        redis_used_memory_mb: round((await usedMemory(r)) / 2 ** 20, 1),
      });
    }
    return {
      loaded_as:
        "one real finished job's BullMQ hash copied per line, plus the batch index the workers write (lines, tasks, results, finished, meta)",
      rows,
    };
  } finally {
    await stopWorkers(workers);
    await dash.close();
    await c.queue.obliterate({ force: true }).catch(() => {});
    await c.close();
    r.disconnect();
  }
}

export async function benchFleet() {
  const redis = await startRedis();
  const r = new Redis(redis.url);
  await r.config("SET", "appendfsync", "everysec");
  const fake = await startFakeAnthropic(byTurn(tenToolScript(TOOL_CALLS)));
  try {
    const levels: Awaited<ReturnType<typeof level>>[] = [];
    for (const slots of SLOTS) {
      const jobs = Number(process.env.FLEET_JOBS ?? Math.min(1500, Math.max(400, slots * 3)));
      log(`fleet: ${slots} slots over ${WORKERS} workers, ${jobs} jobs of ${TOOL_CALLS + 1} turns`);
      levels.push(await level(redis.url, fake.url, slots, jobs, `fleet-${slots}`));
      log(`fleet: ${JSON.stringify(levels.at(-1))}`);
    }
    const best = levels.reduce((a, l) => (l.jobs_per_s > a.jobs_per_s ? l : a), levels[0]!);
    // The knee: the last slot count after which more slots no longer buy 15% more jobs/s.
    const flat = levels.findIndex((l, i) => i > 0 && l.jobs_per_s < levels[i - 1]!.jobs_per_s * 1.15);
    const knee = flat > 0 ? levels[flat - 1]! : best;
    const scaling = process.env.FLEET_SCALE === "0" ? undefined : await scale(redis.url, fake.url);
    return {
      machine_cpus: cpus().length,
      redis: "one redis-server, AOF on, appendfsync everysec, noeviction",
      job: `${TOOL_CALLS + 1} model turns (${TOOL_CALLS} tool calls), verify, on the memory runtime; the model answers at once`,
      levels,
      knee_slots: knee.slots,
      best_jobs_per_s: best.jobs_per_s,
      median_redis_commands_per_job: median(levels.map((l) => l.redis_commands_per_job)),
      scale: scaling,
    };
  } finally {
    r.disconnect();
    await fake.close();
    await redis.stop();
  }
}
