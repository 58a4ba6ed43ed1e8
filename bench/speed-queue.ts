// The queue's rows, through real worker processes (the compiled CLI, so build first):
// - jobs: jobs/min of scripted 10-tool-call jobs on a 1,000-file repo, 1 worker × 2 and × 4 slots;
// - ready: dequeue → sandbox ready (repo loaded), one job at a time, at 1k, 10k and 50k files.
// Each without the warm pool (PATCHBAY_POOL=0) and with it, in the same run. The old paths' column
// ("legacy", PATCHBAY_FAST_PATHS=0) is dropped: production code has one path now. The
// floor section (floor.ts) gives the ceiling these rows are under.
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { PatchbayClient } from "../src/queue/client.js";
import { startFakeAnthropic } from "../test/support/fake-anthropic.js";
import { byTurn, tenToolScript } from "../test/support/scripts.js";
import { log, median, round } from "./lib.js";
import { makeRepo } from "./speed.js";
import { podmanHost } from "../test/support/engine-kind.js";
import { machineMs, procMs } from "./cpu.js";

const CLI = new URL("../dist/cli.js", import.meta.url).pathname;
const MODES = { no_pool: { PATCHBAY_POOL: "0" }, pool: {} } as const;
type Mode = keyof typeof MODES;

/** `warmup`: how many first jobs are left out of dequeue → ready's median (a new worker's code is not yet optimized by V8). */
async function run(
  mode: Mode,
  concurrency: number,
  jobs: number,
  repo: string,
  fakeUrl: string,
  oneAtATime = false,
  engineEnv: Record<string, string> = {},
  warmup = 0,
) {
  const queueName = `bench-speed-${mode}-${concurrency}-${Date.now()}`;
  const env = {
    ...process.env,
    ...engineEnv,
    ...MODES[mode],
    PATCHBAY_QUEUE: queueName,
    ANTHROPIC_BASE_URL: fakeUrl,
    ANTHROPIC_API_KEY: "bench",
    PATCHBAY_CONCURRENCY: String(concurrency),
  };
  const proc = spawn(process.execPath, [CLI, "worker", "--metrics-port", "0"], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let buf = "";
  await new Promise<void>((resolve, reject) => {
    proc.stderr.on("data", (d: Buffer) => {
      buf += d.toString();
      if (/ready: queue/.test(buf)) resolve();
    });
    proc.once("exit", (c) => reject(new Error(`worker exited ${c}: ${buf}`)));
  });
  const metricsUrl = /metrics: (http\S+)/.exec(buf)?.[1];
  if (!metricsUrl) throw new Error(`the worker printed no metrics address: ${buf}`);
  const pool = async () => {
    const text = await (await fetch(metricsUrl)).text();
    const value = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
    return {
      idle: value(/^patchbay_pool_idle_sandboxes (\S+)$/m),
      missed: value(/^patchbay_pool_takes_total\{outcome="miss"\} (\S+)$/m),
    };
  };
  const client = new PatchbayClient({ queueName });
  try {
    // The pool fills before the first job (a worker that has been up a while has it warm): its
    // sandboxes counted once ready to hand out (shell and file agent attached), not once created.
    const warm = async () => {
      for (let i = 0; i < 600 && mode === "pool"; i++) {
        if ((await pool()).idle >= concurrency) return;
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    await warm();
    const specs = Array.from({ length: jobs }, (_, i) => ({ task: `speed job ${i}`, repo: { path: repo } }));
    const t0 = Date.now();
    const cpu0 = machineMs(); // the whole machine's busy time: worker, engine, runtime, sandboxes, Redis
    // Of it, the worker process's own and this process's (the scripted model and the client's waits).
    const [worker0, self0] = [procMs(String(proc.pid), false) ?? 0, process.cpuUsage()];
    const ids: string[] = [];
    if (oneAtATime) {
      for (const s of specs) {
        const [id] = await client.enqueueBatch([s]);
        await client.waitForResult(id!, { timeoutMs: 600_000 });
        ids.push(id!);
        await warm(); // refilled, as between real jobs
      }
    } else {
      ids.push(...(await client.enqueueBatch(specs)));
      await Promise.all(ids.map((id) => client.waitForResult(id, { timeoutMs: 600_000 })));
    }
    const cpuPerJob = (machineMs() - cpu0) / jobs;
    const workerPerJob = ((procMs(String(proc.pid), false) ?? 0) - worker0) / jobs;
    const self = process.cpuUsage(self0);
    const benchPerJob = (self.user + self.system) / 1000 / jobs;
    const ready: number[] = [];
    // Until the last job finished, by the worker's own clock (this host's): waitForResult polls
    // (every 1 s at most), and over a few seconds of jobs its lag was a quarter of the figure.
    let end = t0;
    for (const id of ids) {
      const job = await client.queue.getJob(id);
      end = Math.max(end, job?.finishedOn ?? Date.now());
      const r = await client.result(id);
      if (r?.status !== "completed") throw new Error(`bench job ${id} ended ${r?.status}: ${r?.error}`);
      for await (const e of client.watch(id, { follow: false }))
        if (e.type === "sandbox_ready") ready.push(Date.parse(e.ts) - job!.processedOn!);
    }
    // Jobs that found no warm sandbox (and made their own) are in these figures too: say how many.
    const minutes = (end - t0) / 60_000;
    return {
      jobs_per_min: round(jobs / minutes, 1),
      dequeue_to_ready_ms: round(median(ready.slice(warmup)), 1),
      ...(oneAtATime ? { first_job_ready_ms: ready[0] } : {}),
      cpu_core_ms_per_job: Math.round(cpuPerJob),
      cpu_core_ms_per_job_of: { worker: Math.round(workerPerJob), bench_model_and_client: Math.round(benchPerJob) },
      ...(mode === "pool" ? { pool_misses: (await pool()).missed } : {}),
    };
  } finally {
    await client.queue.obliterate({ force: true }).catch(() => {});
    await client.close();
    proc.kill("SIGTERM");
    await new Promise((r) => (proc.exitCode !== null ? r(null) : proc.once("exit", r)));
  }
}

/** Jobs per row: four waves at 1 × 4 (two made the ramp up and down half the run). */
const JOBS = 16;

export async function benchJobs() {
  const fake = await startFakeAnthropic(byTurn(tenToolScript()));
  const repo = makeRepo(1000);
  try {
    const out: Record<string, unknown> = {};
    for (const c of [2, 4]) {
      for (const mode of ["no_pool", "pool"] as const) {
        log(`jobs (${mode}): ${JOBS} scripted 10-tool-call jobs, 1,000 files, 1 worker × ${c}`);
        out[`1x${c}_${mode}`] = await run(mode, c, JOBS, repo, fake.url);
      }
    }
    return { repo_files: 1000, ...out };
  } finally {
    rmSync(repo, { recursive: true, force: true });
    await fake.close();
  }
}

export async function benchReady() {
  const fake = await startFakeAnthropic(byTurn(tenToolScript(1)));
  try {
    const out: Record<string, unknown> = {};
    // --files=1000,10000 picks the sizes (default 1k, 10k and 50k).
    const arg = process.argv.find((a) => a.startsWith("--files="));
    for (const files of arg ? arg.slice(8).split(",").map(Number) : [1000, 10_000, 50_000]) {
      const repo = makeRepo(files);
      try {
        for (const mode of ["no_pool", "pool"] as const) {
          log(`ready (${mode}): dequeue → ready, ${files} files, one job at a time`);
          // The median of 5 after 2 (a new worker's first jobs run its code before V8 optimized
          // it: at 1,000 files the load took 205, 193, 136, 129, 113 ms in its first five); the very
          // first job's is reported beside it.
          const r = await run(mode, 1, 7, repo, fake.url, true, {}, 2);
          out[`${files}_${mode}`] = r.dequeue_to_ready_ms;
          out[`${files}_${mode}_first_job`] = r.first_job_ready_ms;
          if (r.pool_misses !== undefined) out[`${files}_${mode}_pool_misses`] = r.pool_misses;
        }
      } finally {
        rmSync(repo, { recursive: true, force: true });
      }
    }
    return { dequeue_to_ready_ms: out };
  } finally {
    await fake.close();
  }
}

/**
 * Dequeue → ready (1k files, one job at a time) and jobs/min (1 worker × 4) under the
 * Docker engine and under the rootless Podman one (`scripts/services.sh --engine podman`), in the
 * same run, each without and with the warm pool.
 */
export async function benchEngines() {
  const ready = await startFakeAnthropic(byTurn(tenToolScript(1)));
  const ten = await startFakeAnthropic(byTurn(tenToolScript()));
  const repo = makeRepo(1000);
  try {
    const out: Record<string, Record<string, unknown>> = { docker: {}, podman: {} };
    // Engine beside engine for each mode (not one engine's rows after the other's): this machine's
    // speed drifts over a minute, and the ratio is the figure.
    for (const mode of ["no_pool", "pool"] as const) {
      for (const [engine, env] of [
        ["docker", {}],
        ["podman", { DOCKER_HOST: podmanHost() }],
      ] as const) {
        log(`engines (${engine}, ${mode}): dequeue → ready at 1,000 files, then 16 ten-tool jobs at 1 × 4`);
        const row = out[engine]!;
        row[`ready_1000_${mode}_ms`] = (await run(mode, 1, 5, repo, ready.url, true, env)).dequeue_to_ready_ms;
        const jobs = await run(mode, 4, 16, repo, ten.url, false, env);
        row[`jobs_per_min_1x4_${mode}`] = jobs.jobs_per_min;
        row[`cpu_core_ms_per_job_${mode}`] = jobs.cpu_core_ms_per_job;
      }
    }
    const ratio = (k: string) => round(Number(out.podman![k]) / Number(out.docker![k]), 2);
    return {
      repo_files: 1000,
      ...out,
      podman_over_docker: Object.fromEntries(Object.keys(out.docker!).map((k) => [k, ratio(k)])),
    };
  } finally {
    rmSync(repo, { recursive: true, force: true });
    await Promise.all([ready.close(), ten.close()]);
  }
}
