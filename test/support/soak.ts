// The chaos soak (test/e2e/soak.test.ts, npm run soak): a batch of scripted jobs over several worker
// processes on their own queue, a PRIVATE Redis (AOF on) and a PRIVATE Docker engine, while a chaos
// loop kills workers (SIGKILL, SIGTERM), restarts Redis and restarts the engine at chosen points of
// a job's life (sandbox start, mid-command, the patch). Every process started here is ended here.
import { PatchbayClient } from "../../src/queue/client.js";
import { LABEL } from "../../src/backend/owner.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { startRedis, startWorkerProc, type WorkerProc } from "./cluster.js";
import { startEngine } from "./engine.js";
import { startFakeAnthropic } from "./fake-anthropic.js";
import { resumePolicy } from "./resume-scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface SoakOptions {
  jobs: number;
  turns: number;
  workers: number;
  /** Chaos actions, in a random order: SIGKILL / SIGTERM of the worker holding a job, Redis and engine restarts. */
  kills: number;
  terms: number;
  redisRestarts: number;
  engineRestarts: number;
  engine?: string;
  seed?: number;
  log?: (line: string) => void;
}

export interface SoakReport {
  jobs: number;
  statuses: Record<string, number>;
  /** Jobs whose transcript has other than exactly one job_finished "completed". */
  notOnce: string[];
  kills: number;
  terms: number;
  redisRestarts: number;
  engineRestarts: number;
  workersStarted: number;
  /** Workers alive at the end that did not take a probe job. */
  wedged: number[];
  /** Labelled containers and volumes left on the engine once the reapers ran. */
  leftovers: number;
  requests: number;
  undisturbed: number;
  extraPct: number;
  seconds: number;
}

type Phase = "start" | "command" | "patch";
const PHASE_EVENT: Record<Phase, (e: TranscriptEvent) => boolean> = {
  start: (e) => e.type === "job_started",
  command: (e) => e.type === "tool_call",
  patch: (e) => e.type === "model_response" && e.stopReason === "end_turn",
};

export async function soak(o: SoakOptions): Promise<SoakReport> {
  const log = o.log ?? (() => {});
  let seed = o.seed ?? Date.now() % 2 ** 31;
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const pick = <T>(xs: T[]) => xs[Math.floor(rand() * xs.length)]!;
  const t0 = Date.now();
  const engine = await startEngine(o.engine ?? "pb-soak");
  await engine.loadImage();
  const redis = await startRedis();
  const policy = resumePolicy(o.turns, 2);
  const fake = await startFakeAnthropic(policy.policy);
  const queue = `soak-${process.pid}-${Date.now().toString(36)}`;
  const env = {
    REDIS_URL: redis.url,
    PATCHBAY_QUEUE: queue,
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: "test-key",
    DOCKER_HOST: engine.host,
    PATCHBAY_CONCURRENCY: "1",
    PATCHBAY_POOL: "0",
    PATCHBAY_LOCK_MS: "6000",
    PATCHBAY_STALLED_MS: "2000",
    PATCHBAY_REAP_MS: "2000",
    PATCHBAY_HEARTBEAT_MS: "1000",
    PATCHBAY_DRAIN_MS: "3000",
    PATCHBAY_HEALTH_MAX_MS: "2000",
  };
  const live = new Set<WorkerProc>();
  let started = 0;
  const spawn = () => {
    const w = startWorkerProc({ ...env, PATCHBAY_WORKER_ID: `soak-${queue}-${++started}` });
    live.add(w);
    void w.exited.then(() => live.delete(w));
    return w;
  };
  // The live worker running a job: it logged the job's start and not its end.
  const holderOf = (id: string) =>
    [...live].find(
      (w) =>
        new RegExp(`job ${id} attempt \\d+: started`).test(w.log()) &&
        !new RegExp(`job ${id} attempt \\d+: (completed|error)`).test(w.log()),
    );
  const ready = (w: WorkerProc) => w.waitFor(new RegExp(`ready: queue ${queue}`), 180_000);
  const client = new PatchbayClient({ redisUrl: redis.url, queueName: queue });
  const counts = { kills: 0, terms: 0, redisRestarts: 0, engineRestarts: 0 };
  try {
    await Promise.all(Array.from({ length: o.workers }, () => ready(spawn())));
    // Every command takes a second, and one of each job's 2 s (the first time it runs), as real
    // commands take time: the chaos finds jobs mid-command, and a fast machine does not end the
    // batch before the chaos is done.
    const tasks = Array.from(
      { length: o.jobs },
      (_, i) => `soak job #${String(i).padStart(4, "0")} slow=${[2, 4, 5, 6][i % 4]} pace=1;`,
    ); // bash turns of the script
    const ids = await client.enqueueBatch(tasks.map((task) => ({ task, repo: { path: CLAMP }, attempts: 10 })));
    const results = ids.map((id) =>
      client.waitForResult(id, { timeoutMs: 30 * 60_000 }).then(
        (r) => r.status,
        (e: Error) => `error: ${e.message}`,
      ),
    );
    let finished = false;
    const all = Promise.all(results).finally(() => (finished = true));

    // One worker action, then the Redis and engine restarts, then the other worker actions (each
    // list in a random order): a short run on a fast machine, whose batch may end before the last
    // action, still has every kind.
    const infra = [
      ...Array<string>(o.redisRestarts).fill("redis"),
      ...Array<string>(o.engineRestarts).fill("engine"),
    ].sort(() => rand() - 0.5);
    const [first, ...rest] = [...Array<string>(o.kills).fill("kill"), ...Array<string>(o.terms).fill("term")].sort(
      () => rand() - 0.5,
    );
    const actions = [...(first ? [first] : []), ...infra, ...rest];
    let retries = 0;
    for (const [k, action] of actions.entries()) {
      if (finished) break;
      // An action whose job ended before the chosen point is tried again with another job (40 retries in all).
      const retry = () => void (++retries <= 40 && actions.splice(k + 1, 0, action));
      // A point of a job's life and a job that has it ahead (the start: a waiting job; else a
      // running one); the action happens when the job gets there.
      let phase = pick<Phase>(["start", "command", "command", "patch"]);
      const waiting = phase === "start" ? (await client.queue.getWaiting()).map((j) => j.id!).filter(Boolean) : [];
      if (!waiting.length && phase === "start") phase = "command";
      // A running job, held by a live worker (one whose worker was just killed stays "active" until the stall check).
      const candidates = waiting.length
        ? waiting
        : (await client.queue.getActive()).map((j) => j.id!).filter((id) => id && holderOf(id));
      if (!candidates.length) {
        await sleep(500);
        retry();
        continue;
      }
      const id = pick(candidates);
      const since = Date.now();
      // A job whose worker was just killed shows no event until it runs again: give up on it sooner.
      const signal = AbortSignal.timeout(15_000);
      let reached = false;
      for await (const e of client.watch(id, { signal })) {
        if (Date.parse(e.ts) >= since - 50 && PHASE_EVENT[phase](e)) {
          reached = true;
          break;
        }
      }
      if (!reached || finished) {
        retry();
        continue;
      }
      if (action === "kill" || action === "term") {
        const holder = holderOf(id);
        if (!holder) {
          retry();
          continue;
        }
        holder.proc.kill(action === "kill" ? "SIGKILL" : "SIGTERM");
        counts[action === "kill" ? "kills" : "terms"]++;
        log(`chaos: ${action === "kill" ? "SIGKILL" : "SIGTERM"} to the worker running ${id} (${phase})`);
        void ready(spawn()).catch(() => {});
      } else if (action === "redis") {
        await redis.stop();
        await sleep(1000);
        await redis.start();
        counts.redisRestarts++;
        log(`chaos: Redis restarted (${id} at ${phase})`);
      } else {
        await engine.restart();
        counts.engineRestarts++;
        log(`chaos: Docker engine restarted (${id} at ${phase})`);
      }
      await sleep(500 + rand() * 1500);
    }
    const statuses = await all;

    // No worker wedged: every live worker takes a probe job (concurrency 1: one each at most).
    const workers = [...live];
    await Promise.all(workers.map((w) => ready(w).catch(() => {})));
    const probes = await client.enqueueBatch(
      workers.map((_, i) => ({ task: `probe ${i} turns=1 slow=1`, repo: { path: CLAMP } })),
    );
    await Promise.all(probes.map((id) => client.waitForResult(id, { timeoutMs: 10 * 60_000 })));
    const wedged = workers
      .map((w, i) => (probes.some((id) => new RegExp(`job ${id} attempt \\d+: completed`).test(w.log())) ? -1 : i))
      .filter((i) => i >= 0);

    const notOnce: string[] = [];
    for (const id of ids) {
      const done: TranscriptEvent[] = [];
      for await (const e of client.watch(id)) if (e.type === "job_finished" && e.status === "completed") done.push(e);
      if (done.length !== 1) notOnce.push(`${id}: ${done.length}`);
    }
    // Nothing left on the engine once the reapers ran (SIGTERM the workers: they drain and remove theirs).
    await Promise.all([...live].map((w) => w.stop("SIGTERM")));
    const labelled = async () => {
      const c = await engine.docker.listContainers({ all: true, filters: { label: [LABEL.managed] } });
      const { Volumes } = await engine.docker.listVolumes({ filters: { label: [LABEL.managed] } });
      return c.length + (Volumes ?? []).length;
    };
    // The last reaper pass: one worker started once everyone else is gone reaps the dead owners' leftovers.
    const reaper = spawn();
    await ready(reaper);
    for (const t = Date.now(); (await labelled()) > 0 && Date.now() - t < 60_000;) await sleep(1000);
    const leftovers = await labelled();

    const requests = tasks.reduce((s, t) => s + policy.count(t), 0);
    const undisturbed = o.jobs * (o.turns + 1);
    const report: SoakReport = {
      jobs: o.jobs,
      statuses: statuses.reduce<Record<string, number>>((m, s) => ((m[s] = (m[s] ?? 0) + 1), m), {}),
      notOnce,
      ...counts,
      workersStarted: started,
      wedged,
      leftovers,
      requests,
      undisturbed,
      extraPct: Math.round(((requests - undisturbed) / undisturbed) * 1000) / 10,
      seconds: Math.round((Date.now() - t0) / 100) / 10,
    };
    log(summaryLine(report));
    return report;
  } finally {
    await Promise.all([...live].map((w) => w.stop("SIGKILL")));
    await client.close().catch(() => {});
    await fake.close();
    await redis.stop();
    await engine.stop().catch(() => {});
  }
}

export function summaryLine(r: SoakReport): string {
  const st = Object.entries(r.statuses)
    .map(([s, n]) => `${n} ${s}`)
    .join(", ");
  return `soak: ${r.jobs} jobs (${st}) in ${r.seconds} s; chaos: ${r.kills} SIGKILL, ${r.terms} SIGTERM, ${r.redisRestarts} Redis restarts, ${r.engineRestarts} engine restarts, ${r.workersStarted} workers started; model requests ${r.requests} vs ${r.undisturbed} undisturbed (+${r.extraPct}%); leftovers ${r.leftovers}; wedged workers ${r.wedged.length}; jobs not finished exactly once ${r.notOnce.length}`;
}
