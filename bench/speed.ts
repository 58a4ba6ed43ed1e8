// What a job costs outside the model, each row with and without the warm pool in the same run:
// - phases: one job's phases without a model (create, load, 10 tool calls, patch, destroy), the
//   execs it starts (Docker's exec_create events) and the processes made in its container;
// - overhead: runJob wall time minus model time, scripted 10-tool-call job, 1,000-file repo;
// - cpu: core-ms per job (container, shims, dockerd, containerd, this process).
// The old paths these were measured against (PATCHBAY_FAST_PATHS=0: the archive API load, no stat
// cache, the 4-exec patch, docker exec per command) are gone from src/ (production code has one
// path), and too much of it to keep here: their column is dropped. What to compare with is
// the floor (floor.ts: one job with nothing of patchbay), run beside these (--only=floor,phases,...).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { AnthropicModel } from "../src/agent/model.js";
import { computePatch } from "../src/job/patch.js";
import { loadRepo } from "../src/job/repo/load.js";
import { runJob } from "../src/job/run.js";
import { docker } from "../src/backend/docker.js";
import { SandboxPool } from "../src/sandbox/pool.js";
import { BackgroundRemovals } from "../src/sandbox/removals.js";
import { Sandbox } from "../src/sandbox/sandbox.js";
import { Toolbox } from "../src/tools/index.js";
import { startFakeAnthropic } from "../test/support/fake-anthropic.js";
import { byTurn, tenToolScript } from "../test/support/scripts.js";
import { cpuMeter, machineMs } from "./cpu.js";
import { log, median, round } from "./lib.js";

export const BENCH_LABEL = "patchbay.bench";

/** A repo of `n` small files in directories of 50, made once per row. */
export function makeRepo(n: number): string {
  const dir = mkdtempSync(join(tmpdir(), "pb-bench-speed-"));
  for (let i = 0; i < n; i++) {
    const sub = join(dir, `pkg${Math.floor(i / 50)}`);
    if (i % 50 === 0) mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, `mod${i}.py`), `# module ${i}\n\ndef f${i}(x):\n    return x + ${i}\n`);
  }
  return dir;
}

const until = async (cond: () => boolean) => {
  while (!cond()) await new Promise((r) => setTimeout(r, 20));
};

/** Counts exec_create events per container name while it runs. */
async function execCounter(label: string) {
  const counts = new Map<string, number>();
  const ev = (await docker().getEvents({
    filters: { type: ["container"], event: ["exec_create"], label: [label] },
  })) as unknown as Readable;
  let rest = ""; // an event (its command line included) can span chunks
  ev.on("data", (d: Buffer) => {
    const lines = (rest + d.toString()).split("\n");
    rest = lines.pop()!;
    for (const line of lines.filter(Boolean)) {
      const name = (JSON.parse(line) as { Actor: { Attributes: { name: string } } }).Actor.Attributes.name;
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
  });
  return { counts, close: () => ev.destroy() };
}

const TOOL_CALLS = tenToolScript()
  .flatMap((r) => ("content" in r ? (r.content as { type: string; name?: string; input?: unknown }[]) : []))
  .filter((b) => b.type === "tool_use");

async function phasesOnce(repo: string, pool?: SandboxPool) {
  const t: Record<string, number> = {};
  const cpu: Record<string, number> = {};
  const mark = async <T>(k: string, fn: () => Promise<T>) => {
    const [t0, c0] = [performance.now(), machineMs()];
    const v = await fn();
    [t[k], cpu[k]] = [performance.now() - t0, machineMs() - c0];
    return v;
  };
  const setupDone = pool?.setupStarted(); // as runJob does: no refill while the job is set up
  const sb = await mark(
    "create",
    async () => pool?.take({}, 3600) ?? Sandbox.create({ labels: { [BENCH_LABEL]: "speed" } }),
  );
  try {
    const { baseline } = await mark("load_and_baseline", () => loadRepo(sb, { path: repo }));
    setupDone?.();
    const box = new Toolbox(sb);
    await mark("tools", async () => {
      for (const [i, b] of TOOL_CALLS.entries()) await box.run({ id: `t${i}`, name: b.name!, input: b.input });
    });
    await mark("patch", async () => (await sb.killAgentProcesses(), computePatch(sb, baseline)));
    const lastPid = Number((await sb.files.read("/proc/loadavg")).toString().trim().split(" ").pop());
    await mark("destroy", () => sb.destroy());
    return { t, cpu, name: sb.name, lastPid };
  } finally {
    await sb.destroy();
  }
}

const PHASES = ["create", "load_and_baseline", "tools", "patch", "destroy"];

export async function benchPhases() {
  const repo = makeRepo(1000);
  const ex = await execCounter(`${BENCH_LABEL}=speed`);
  const pool = new SandboxPool({ size: 1, labels: { [BENCH_LABEL]: "speed" } });
  try {
    const out: Record<string, unknown> = {};
    for (const [name, p] of [
      ["no_pool", undefined],
      ["pool", pool],
    ] as const) {
      log(`phases (${name}): one job at a time, 1,000 files, 10 tool calls, no model`);
      const runs: Awaited<ReturnType<typeof phasesOnce>>[] = [];
      for (let i = 0; i < 6; i++) {
        if (p) await until(() => p.size === 1);
        runs.push(await phasesOnce(repo, p));
      }
      runs.shift(); // warm-up
      await new Promise((r) => setTimeout(r, 500)); // the last exec events arrive
      const med = (k: string) => round(median(runs.map((r) => r.t[k]!)), 1);
      out[name] = {
        ms: Object.fromEntries(PHASES.map((k) => [k, med(k)])),
        // The machine's busy core-ms in each phase (everything on it: the engine, the sandbox, this
        // process). Without the pool only: with it, the pool's refill runs during the job's tools.
        ...(p ? {} : { cpu_core_ms: Object.fromEntries(PHASES.map((k) => [k, median(runs.map((r) => r.cpu[k]!))])) }),
        execs_per_job: median(runs.map((r) => ex.counts.get(r.name) ?? 0)),
        container_processes_per_job: median(runs.map((r) => r.lastPid)),
      };
    }
    return { repo_files: 1000, ...out };
  } finally {
    ex.close();
    await pool.close();
    rmSync(repo, { recursive: true, force: true });
  }
}

/**
 * Job overhead (runJob wall minus model time) and CPU per job, without and with the warm pool, and
 * with the pool and the sandbox removed in the background as a worker does (runJob returns before
 * the removal; the removal is awaited before the next job, outside the timed span).
 */
export async function benchOverhead(opts: { cpu?: boolean } = {}) {
  const fake = await startFakeAnthropic(byTurn(tenToolScript()));
  const repo = makeRepo(1000);
  const label = { [BENCH_LABEL]: "speed-overhead" };
  try {
    const model = new AnthropicModel({ apiKey: "bench", baseURL: fake.url });
    const out: Record<string, unknown> = {};
    for (const name of ["no_pool", "pool", "pool_background_removal"] as const) {
      const pool = name === "no_pool" ? undefined : new SandboxPool({ size: 1, labels: label });
      const removals =
        name === "pool_background_removal" ? new BackgroundRemovals({ concurrency: 2, maxQueued: 2 }) : undefined;
      const retire = removals && ((sb: Sandbox) => removals.hand(() => sb.destroy()));
      log(`overhead (${name}): runJob, scripted 10-tool-call job, 1,000 files, one at a time`);
      const overheads: number[] = [];
      let meter: Awaited<ReturnType<typeof cpuMeter>> | undefined;
      const n = 4;
      try {
        for (let i = 0; i < n; i++) {
          if (pool) await until(() => pool.size === 1);
          if (i === 1 && opts.cpu !== false) meter = await cpuMeter(`${BENCH_LABEL}=speed-overhead`);
          let modelMs = 0;
          const t0 = performance.now();
          const r = await runJob(
            { task: `bench ${i}`, repo: { path: repo } },
            { model, pool, labels: label, retire, onEvent: (e) => e.type === "model_response" && (modelMs += e.ms) },
          );
          if (r.status !== "completed") throw new Error(`bench job ended ${r.status}: ${r.error}`);
          if (i > 0) overheads.push(performance.now() - t0 - modelMs); // the first run warms up
          await removals?.idle(); // one job at a time: the removal's CPU is still the job's
        }
        if (pool) await until(() => pool.size === 1); // the refill's CPU belongs to the jobs
      } finally {
        await pool?.close();
      }
      out[name] = {
        job_overhead_ms: round(median(overheads), 1),
        ...(meter ? { cpu_core_ms_per_job: meter.stop(n - 1) } : {}),
      };
    }
    return { repo_files: 1000, tool_calls: 10, ...out };
  } finally {
    rmSync(repo, { recursive: true, force: true });
    await fake.close();
  }
}
