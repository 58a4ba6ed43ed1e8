// The density row (issue 47): how many jobs one host holds in flight while the model thinks. Real
// jobs spend most of their life waiting for the model (2–30 s a turn), so what bounds a host is
// whether its worker, engine and memory keep up with many jobs at once, not a job's CPU alone.
//
// For each engine (DENSITY_ENGINES, default docker; also runsc: Docker with gVisor, and podman:
// the rootless Podman), one worker process (the compiled CLI, so build first) per step, at
// concurrency C (DENSITY_STEPS, default 25,50,100,200,400), on a private queue of the shared Redis.
// The scripted server answers each of a job's 16 turns after D ms (DENSITY_DELAY_MS, default 3,000);
// each job makes 15 tool calls (bash and the editor's view and str_replace) on the 1,000-file repo
// and has a cheap verify. C jobs are enqueued at once and the step ends when all have a result.
// The ideal wall time is D × 16 plus the floor: one job alone at D = 0 through a worker of
// concurrency 1 in the same run (its ready, tools, patch and verify). Stepping stops once
// wall/ideal passes 1.5 or a job fails.
//
// Sampled every 500 ms: the jobs in flight (BullMQ's active count), the memory of the step's
// containers (their memory cgroups: usage less inactive file pages, the working set; raw usage
// beside it), the PSS of their containerd shims (or, under Podman, their conmons and the Podman
// service; RSS beside it), the worker's RSS. Under runsc the Sentry and gofer run inside the
// container's cgroup, so the cgroup counts them; their own PSS is reported beside. CPU per turn by
// process from /proc and the containers' cpuacct cgroups, and what other users' processes took
// meanwhile (the machine is shared: without it the rest of the machine's busy time is a mystery);
// the worker's event-loop delay from its /metrics (prom-client's default metrics, in windows of
// 5 s); where a job's time goes from its own transcript events and the scripted server's arrival
// times. DENSITY_POOL sets the worker's warm pool (default: its concurrency, as a worker's is);
// DENSITY_CPU_PROF=DIR has each worker write a V8 CPU profile there.
import { spawn, type ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import Docker from "dockerode";
import { PatchbayClient } from "../src/queue/client.js";
import { startFakeAnthropic, reply, text, toolUse, type Reply } from "../test/support/fake-anthropic.js";
import { taskOf } from "../test/support/scripts.js";
import { podmanHost } from "../test/support/engine-kind.js";
import { log, median, round } from "./lib.js";
import { makeRepo } from "./speed.js";
import { hostSampler, watchContainers, type Sample } from "./density-sample.js";

const CLI = new URL("../dist/cli.js", import.meta.url).pathname;
const TURNS = 16;
const MB = 1024 * 1024;

/** 15 tool calls, one a turn (bash, the editor's view and two str_replace), then the final answer. */
export function densityScript(): Reply[] {
  const ed = "str_replace_based_edit_tool";
  const bash = (command: string) => reply(toolUse("bash", { command }));
  const edit = (input: object) => reply(toolUse(ed, input));
  return [
    reply(
      text("Let me look around."),
      toolUse("bash", { command: "cd /workspace && ls | head -5 && git status -s | head" }),
    ),
    bash("grep -rn 'def f1(' /workspace/pkg0 | head -3"),
    edit({ command: "view", path: "/workspace/pkg0/mod0.py" }),
    bash("wc -l /workspace/pkg0/*.py | tail -1"),
    bash("find /workspace -name 'mod10*.py' | head -5"),
    edit({ command: "view", path: "/workspace/pkg1/mod50.py" }),
    edit({ command: "str_replace", path: "/workspace/pkg0/mod0.py", old_str: "return x + 0", new_str: "return x + 1" }),
    bash("cat /workspace/pkg0/mod0.py"),
    bash("python3 -c 'import sys; sys.path.insert(0, \"/workspace/pkg0\"); import mod0; print(mod0.f0(1))'"),
    bash("grep -c return /workspace/pkg1/*.py | head -3"),
    edit({
      command: "str_replace",
      path: "/workspace/pkg1/mod50.py",
      old_str: "return x + 50",
      new_str: "return x - 50",
    }),
    edit({ command: "view", path: "/workspace/pkg1/mod50.py" }),
    bash("cd /workspace && git diff --stat | tail -1"),
    bash("ls /workspace/pkg2 | wc -l"),
    bash("echo done && date +%s"),
    reply(text("Done: f0 adds one, f50 subtracts 50.")),
  ];
}
const VERIFY = "grep -q 'x + 1' pkg0/mod0.py && test -f pkg1/mod50.py";
const TOOL_CALLS = TURNS - 1;
/** Each job's task carries a tag of its own (the worker's prompt wraps the task), by which the server knows its requests. */
const TAG = /\bdensity-[a-z]+-[a-z0-9]+-\d+-\d+\b/;

/** What each engine row runs its worker with. */
function engineEnv(engine: string): Record<string, string> {
  if (engine === "docker") return {};
  if (engine === "runsc") return { PATCHBAY_RUNTIME: "runsc" };
  if (engine === "podman") return { DOCKER_HOST: podmanHost() };
  throw new Error(`unknown DENSITY_ENGINES entry ${engine}; known: docker, runsc, podman`);
}

/** The scripted server for one row: every reply after `delay()` ms; each request's arrival kept by job and turn. */
async function scriptedServer() {
  const script = densityScript();
  const state = { delayMs: 0 };
  const arrivals = new Map<string, number>();
  const fake = await startFakeAnthropic(({ body }) => {
    const turn = (body as { messages: { role: string }[] }).messages.filter((m) => m.role === "assistant").length;
    const tag = TAG.exec(taskOf(body))?.[0];
    if (tag) arrivals.set(`${tag}\0${turn}`, Date.now());
    const r = script[turn];
    if (!r) return { kind: "error", status: 400, message: `script has no turn ${turn}` };
    return r.kind === "message" && state.delayMs ? { ...r, delayMs: state.delayMs } : r;
  });
  return { fake, state, arrivals };
}

interface Worker {
  proc: ChildProcess;
  metrics: () => Promise<Record<string, number>>;
  stop(): Promise<void>;
}

async function startWorker(env: Record<string, string>): Promise<Worker> {
  // DENSITY_CPU_PROF=DIR: each worker writes a V8 CPU profile there when it exits (where its time goes).
  const prof = process.env.DENSITY_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.DENSITY_CPU_PROF}`] : [];
  const proc = spawn(process.execPath, [...prof, CLI, "worker", "--metrics-port", "0"], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let buf = "";
  await new Promise<void>((resolve, reject) => {
    proc.stderr.on("data", (d: Buffer) => {
      if (buf.length < 65536) buf += d.toString();
      if (/ready: queue/.test(buf)) resolve();
    });
    proc.once("exit", (c) => reject(new Error(`worker exited ${c}: ${buf}`)));
  });
  const url = /metrics: (http\S+)/.exec(buf)?.[1];
  if (!url) throw new Error(`the worker printed no metrics address: ${buf}`);
  return {
    proc,
    // Every unlabelled sample of the exposition, by name (prom-client resets its event-loop
    // histogram at each scrape, so the lag figures are those of the time since the last one).
    async metrics() {
      const out: Record<string, number> = {};
      for (const m of (await (await fetch(url)).text()).matchAll(/^([a-zA-Z0-9_:]+) (\S+)$/gm))
        out[m[1]!] = Number(m[2]);
      return out;
    },
    async stop() {
      if (proc.exitCode === null) {
        proc.kill("SIGTERM");
        await new Promise((r) => (proc.exitCode !== null ? r(null) : proc.once("exit", r)));
      }
    },
  };
}

// ------------------------------------------------------------------------------ host sampling

// ------------------------------------------------------------------------------- the worker

interface Ctx {
  engine: string;
  docker: Docker;
  repo: string;
  server: Awaited<ReturnType<typeof scriptedServer>>;
}

/**
 * Starts a worker of `concurrency` slots on a queue of its own, waits for its warm pool, runs `fn`,
 * then stops it and counts the step's containers still there a minute later (removing them).
 */
async function withWorker<T>(
  ctx: Ctx,
  concurrency: number,
  fn: (w: { worker: Worker; client: PatchbayClient; queueName: string; ids: Set<string>; pool: number }) => Promise<T>,
): Promise<T & { pool_warm_s: number; leftover_containers: number }> {
  const queueName = `bench-density-${ctx.engine}-${concurrency}-${Date.now()}`;
  const pool = process.env.DENSITY_POOL ? Number(process.env.DENSITY_POOL) : concurrency;
  const watch = await watchContainers(ctx.docker, queueName);
  const worker = await startWorker({
    ...engineEnv(ctx.engine),
    PATCHBAY_QUEUE: queueName,
    ANTHROPIC_BASE_URL: ctx.server.fake.url,
    ANTHROPIC_API_KEY: "bench",
    PATCHBAY_CONCURRENCY: String(concurrency),
    ...(process.env.DENSITY_POOL ? { PATCHBAY_POOL: process.env.DENSITY_POOL } : {}),
  });
  const client = new PatchbayClient({ queueName });
  let out: T;
  const w0 = Date.now();
  let warm: number | undefined;
  try {
    // The pool fills before the first job, as a worker that has been up a while has it.
    const limit = 30_000 + pool * 1500;
    while (pool > 0 && Date.now() - w0 < limit && ((await worker.metrics()).patchbay_pool_idle_sandboxes ?? 0) < pool)
      await new Promise((r) => setTimeout(r, 250));
    warm = Date.now() - w0;
    out = await fn({ worker, client, queueName, ids: watch.ids, pool });
  } finally {
    await client.queue.obliterate({ force: true }).catch(() => {});
    await client.close();
    await worker.stop();
  }
  // The worker's drain removes its pool and its jobs' sandboxes: whatever is left after a minute is a leak.
  const list = () =>
    ctx.docker.listContainers({ all: true, filters: { label: [`patchbay.queue=${queueName}`] } }).catch(() => []);
  let left = await list();
  for (let i = 0; i < 60 && left.length; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    left = await list();
  }
  watch.close();
  for (const c of left)
    await ctx.docker
      .getContainer(c.Id)
      .remove({ force: true, v: true })
      .catch(() => {});
  return { ...out, pool_warm_s: round((warm ?? NaN) / 1000, 1), leftover_containers: left.length };
}

// ------------------------------------------------------------------------------ the rows

const spec = (task: string, repo: string) => ({ task, repo: { path: repo }, verify: VERIFY, verifyRounds: 0 });
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]! : NaN;
};

/** One job alone at D = 0, four times (the first a warm-up): enqueue → the job's own finish. */
async function floor(ctx: Ctx) {
  ctx.server.state.delayMs = 0;
  return withWorker(ctx, 1, async ({ worker, client }) => {
    const ms: number[] = [];
    const times: Awaited<ReturnType<typeof jobTimes>>[] = [];
    for (let i = 0; i < 4; i++) {
      const task = `Bench job density-${ctx.engine}-floor-${Date.now()}-${i}.`;
      const [id] = await client.enqueueBatch([spec(task, ctx.repo)]);
      const r = await client.waitForResult(id!, { timeoutMs: 300_000 });
      if (r.status !== "completed") throw new Error(`density floor job ended ${r.status}: ${r.error}`);
      const job = await client.queue.getJob(id!);
      ms.push(job!.finishedOn! - job!.timestamp);
      if (i > 0) times.push(await jobTimes(client, id!, task, ctx.server.arrivals, 0));
      for (let j = 0; j < 100 && ((await worker.metrics()).patchbay_pool_idle_sandboxes ?? 1) < 1; j++)
        await new Promise((r) => setTimeout(r, 100)); // refilled, as between real jobs
    }
    // Where the time of a job alone goes, the medians of the three after the warm-up (ms per job).
    const where = Object.fromEntries(
      Object.keys(times[0]!).map((k) => [k, Math.round(median(times.map((t) => t[k as keyof (typeof times)[0]])))]),
    );
    return { floor_ms: median(ms.slice(1)), floor_runs_ms: ms, floor_where_time_goes_per_job_ms: where };
  });
}

/** Where one job's time went, from its transcript events and the scripted server's arrival times (ms). */
async function jobTimes(
  client: PatchbayClient,
  id: string,
  task: string,
  arrivals: Map<string, number>,
  delay: number,
) {
  const job = (await client.queue.getJob(id))!;
  const ev: { type: string; ts: string; turn?: number; ms?: number }[] = [];
  for await (const e of client.watch(id, { follow: false })) ev.push(e);
  const at = (e: { ts: string }) => Date.parse(e.ts);
  const reqs = ev.filter((e) => e.type === "model_request");
  const resps = ev.filter((e) => e.type === "model_response");
  const tools = ev.filter((e) => e.type === "tool_result");
  const ready = ev.find((e) => e.type === "sandbox_ready");
  const verify = ev.find((e) => e.type === "verify");
  const turn0 = Math.min(...reqs.map((e) => e.turn ?? 0));
  let arrivalLag = 0;
  let between = 0;
  reqs.forEach((q, i) => {
    const arrived = arrivals.get(`${TAG.exec(task)?.[0]}\0${(q.turn ?? 0) - turn0}`);
    if (arrived !== undefined) arrivalLag += arrived - at(q);
    const prev = resps[i - 1];
    if (prev) between += at(q) - at(prev);
  });
  const toolMs = tools.reduce((a, e) => a + (e.ms ?? 0), 0);
  const last = resps.at(-1);
  return {
    total: job.finishedOn! - job.timestamp,
    queue_wait: job.processedOn! - job.timestamp,
    to_ready: ready ? at(ready) - job.processedOn! : NaN,
    ready_to_first_request: ready && reqs[0] ? at(reqs[0]) - at(ready) : NaN,
    model_scripted: delay * resps.length,
    model_over_scripted: resps.reduce((a, e) => a + (e.ms ?? 0), 0) - delay * resps.length,
    of_it_request_to_server: arrivalLag,
    tools: toolMs,
    between_turns_not_tools: between - toolMs,
    verify: verify?.ms ?? 0,
    last_response_to_finish_not_verify: last ? job.finishedOn! - at(last) - (verify?.ms ?? 0) : NaN,
  };
}

/** One step: `c` jobs enqueued at once into a worker of `c` slots, each turn answered after `delay` ms. */
async function densityStep(ctx: Ctx, c: number, delay: number, floorMs: number) {
  ctx.server.state.delayMs = delay;
  const ideal = delay * TURNS + floorMs;
  return withWorker(ctx, c, async ({ worker, client, ids, pool }) => {
    const sampler = hostSampler({ ids, workerPid: String(worker.proc.pid), client, jobs: c });
    const load0 = loadavg()[0]!;
    await worker.metrics(); // resets the event-loop histogram
    const idle0 = (await worker.metrics()).patchbay_pool_idle_sandboxes ?? 0;
    const lag: { p99: number; max: number; idle: number }[] = [];
    let sampling = true;
    const scrapes = (async () => {
      while (sampling) {
        await new Promise((r) => setTimeout(r, 5000));
        const m = await worker.metrics().catch((): Record<string, number> => ({}));
        const p = "patchbay_worker_process_nodejs_eventloop_lag_";
        if (m[`${p}p99_seconds`] !== undefined)
          lag.push({
            p99: m[`${p}p99_seconds`]! * 1000,
            max: m[`${p}max_seconds`]! * 1000,
            idle: m.patchbay_pool_idle_sandboxes ?? 0,
          });
      }
    })();
    const tasks = Array.from({ length: c }, (_, i) => `Bench job density-${ctx.engine}-c${c}-${Date.now()}-${i}.`);
    const t0 = Date.now();
    const jobIds = await client.enqueueBatch(tasks.map((t) => spec(t, ctx.repo)));
    const end = await sampler.run(Math.max(600_000, ideal * 8));
    sampling = false;
    const cpu = sampler.cpu();
    await scrapes;
    const load1 = loadavg()[0]!;
    let failed = 0;
    let retried = 0;
    let last = t0;
    const times: Awaited<ReturnType<typeof jobTimes>>[] = [];
    for (const [i, id] of jobIds.entries()) {
      const job = await client.queue.getJob(id);
      const r = await client.result(id);
      if (r?.status !== "completed" || r.turns !== TURNS) failed++;
      if ((job?.attemptsMade ?? 0) > 1 || (r?.attempt ?? 1) > 1) retried++;
      if (job?.finishedOn) last = Math.max(last, job.finishedOn);
      if (job?.finishedOn) times.push(await jobTimes(client, id, tasks[i]!, ctx.server.arrivals, delay));
    }
    const wall = last - t0;
    const turns = c * TURNS;
    const ours = [
      "worker",
      "containers",
      "shims",
      "conmon_and_podman_service",
      "engine_dockerd_containerd",
      "bench_model_client_sampler",
      "redis",
    ].reduce((a, k) => a + (cpu[k as keyof typeof cpu] ?? 0), 0);
    const parts = Object.entries(cpu).filter(([k]) => k !== "machine" && k !== "init_reaped");
    const rest = cpu.machine - parts.reduce((a, [, v]) => a + (v ?? 0), 0);
    const perTurn = Object.fromEntries(
      [
        ...parts,
        ["rest_of_machine", rest] as const,
        ["machine", cpu.machine] as const,
        ["init_reaped_not_a_part", cpu.init_reaped] as const,
      ].map(([k, v]) => [k, v === null ? null : round(v / turns, 1)]),
    );
    // Memory: the sample whose total was highest, and the highest with every job in flight.
    const peak = sampler.series.reduce((a, s) => (s.total > a.total ? s : a));
    const full = sampler.series.filter((s) => s.inFlight >= c);
    const fullPeak = full.length ? full.reduce((a, s) => (s.total > a.total ? s : a)) : undefined;
    const mb = (x: number) => round(x / MB, 1);
    const breakdown = (s: Sample) => ({
      containers_ws_mb: mb(s.mem.containers),
      containers_raw_mb: mb(s.mem.containers_raw),
      shims_pss_mb: mb(s.mem.shim),
      ...(ctx.engine === "runsc"
        ? { runsc_sentry_gofer_pss_mb_in_containers: mb(s.mem.runsc), runsc_rss_mb: mb(s.rss.runsc) }
        : {}),
      ...(ctx.engine === "podman"
        ? { conmon_pss_mb: mb(s.mem.conmon), podman_service_pss_mb: mb(s.mem.podman_service) }
        : {}),
      worker_rss_mb: mb(s.worker),
      // With every process counted by RSS instead (shared pages counted once per process).
      total_by_rss_mb: mb(s.mem.containers + s.rss.shim + s.rss.conmon + s.rss.podman_service + s.worker),
    });
    const med = (k: keyof (typeof times)[number]) => round(median(times.map((t) => t[k]).filter(Number.isFinite)), 0);
    const where = Object.fromEntries(
      Object.keys(times[0] ?? {}).map((k) => [k, med(k as keyof (typeof times)[number])]),
    );
    return {
      jobs: c,
      wall_s: round(wall / 1000, 1),
      ideal_s: round(ideal / 1000, 1),
      wall_over_ideal: round(wall / ideal, 2),
      job_ms_p50: Math.round(
        pct(
          times.map((t) => t.total),
          50,
        ),
      ),
      job_ms_p95: Math.round(
        pct(
          times.map((t) => t.total),
          95,
        ),
      ),
      failed,
      retried,
      unfinished: c - end.done,
      memory_peak: {
        total_mb: mb(peak.total),
        in_flight: peak.inFlight,
        per_in_flight_job_mb: peak.inFlight ? mb(peak.total / peak.inFlight) : null,
        containers: peak.containers,
        ...breakdown(peak),
      },
      ...(fullPeak
        ? {
            memory_all_in_flight: {
              total_mb: mb(fullPeak.total),
              per_job_mb: mb(fullPeak.total / c),
              containers: fullPeak.containers,
            },
          }
        : {}),
      worker_rss_peak_mb: mb(Math.max(...sampler.series.map((s) => s.worker))),
      eventloop_ms: lag.length
        ? {
            p99_median_of_5s_windows: round(median(lag.map((l) => l.p99)), 1),
            p99_worst_5s_window: round(Math.max(...lag.map((l) => l.p99)), 1),
            max: round(Math.max(...lag.map((l) => l.max)), 1),
          }
        : "not exposed",
      cpu_core_ms_per_turn: perTurn,
      containers_made: sampler.containersByLife((delay * TURNS) / 2),
      machine_busy_of_cores: round(cpu.machine / (wall * cpus().length), 2),
      // This row's own CPU per turn (the worker, the containers, their shims, the engine, the
      // scripted server and client, Redis), and the C at which it alone would fill the cores at D.
      ours_core_ms_per_turn: round(ours / turns, 1),
      c_that_fills_the_cores: Math.round((cpus().length * delay) / (ours / turns)),
      load_average: [round(load0, 1), round(load1, 1)],
      pool: {
        size: pool,
        idle_at_start: idle0,
        idle_median_during: lag.length ? median(lag.map((l) => l.idle)) : null,
      },
      // Medians over the jobs, ms per job: enqueue → finish is the sum of the parts (roughly: each is its own median).
      where_time_goes_per_job_ms: where,
      where_time_goes_per_turn_ms: {
        model_over_scripted: round(Number(where.model_over_scripted) / TURNS, 1),
        of_it_request_to_server: round(Number(where.of_it_request_to_server) / TURNS, 1),
        tools: round(Number(where.tools) / TOOL_CALLS, 1),
        between_turns_not_tools: round(Number(where.between_turns_not_tools) / TOOL_CALLS, 1),
        worker_cpu: perTurn.worker,
        containers_cpu: perTurn.containers,
      },
    };
  });
}

export async function benchDensity() {
  const delay = Number(process.env.DENSITY_DELAY_MS ?? 3000);
  const steps = (process.env.DENSITY_STEPS ?? "25,50,100,200,400").split(",").map(Number);
  const engines = (process.env.DENSITY_ENGINES ?? "docker").split(",");
  const server = await scriptedServer();
  const repo = makeRepo(1000);
  try {
    const out: Record<string, unknown> = {
      delay_ms: delay,
      turns: TURNS,
      tool_calls: TOOL_CALLS,
      repo_files: 1000,
      verify: VERIFY,
    };
    for (const engine of engines) {
      const host = engineEnv(engine).DOCKER_HOST;
      const ctx: Ctx = {
        engine,
        docker: host ? new Docker({ socketPath: host.replace(/^unix:\/\//, "") }) : new Docker(),
        repo,
        server,
      };
      log(`density (${engine}): the floor, one job alone at D = 0`);
      const f = await floor(ctx);
      const row: Record<string, unknown> = { ...f };
      let within: number | null = null;
      for (const c of steps) {
        log(`density (${engine}): ${c} jobs at once, ${TURNS} turns at ${delay} ms`);
        const s = await densityStep(ctx, c, delay, f.floor_ms);
        row[`c${c}`] = s;
        log(`density (${engine}) c${c}: ${JSON.stringify(s)}`);
        if (s.wall_over_ideal <= 1.2 && !s.failed && !s.leftover_containers) within = c;
        if (s.wall_over_ideal > 1.5 || s.failed || s.unfinished) break;
      }
      row.largest_c_within_1_2 = within;
      out[engine] = row;
    }
    return out;
  } finally {
    server.state.delayMs = 0;
    rmSync(repo, { recursive: true, force: true });
    await server.fake.close();
  }
}
