// Job overhead (runJob wall time minus model time, scripted 10-tool-call job), jobs per minute
// with 1 and 2 worker processes, and dequeue→sandbox-ready with a ~1,000-file repo.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AnthropicModel } from "../src/agent/model.js";
import { loadConfig } from "../src/core/config/config.js";
import { runJob } from "../src/job/run.js";
import { PatchbayClient } from "../src/queue/client.js";
import { startFakeAnthropic } from "../test/support/fake-anthropic.js";
import { byTurn, tenToolScript } from "../test/support/scripts.js";
import { log, median, round } from "./lib.js";

const CLAMP = new URL("../examples/clamp", import.meta.url).pathname;
const BIN = new URL("../bin/patchbay.js", import.meta.url).pathname;

/** A repo of `n` small files in a few directories, made once per bench run. */
function makeRepo(n: number): string {
  const dir = mkdtempSync(join(tmpdir(), "pb-bench-repo-"));
  for (let i = 0; i < n; i++) {
    const sub = join(dir, `pkg${i % 20}`);
    mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, `mod${i}.py`), `# module ${i}\n\ndef f${i}(x):\n    return x + ${i}\n`);
  }
  return dir;
}

export async function benchJob() {
  const fake = await startFakeAnthropic(byTurn(tenToolScript()));
  try {
    const model = new AnthropicModel({ apiKey: "bench", baseURL: fake.url });
    const overheads: number[] = [];
    const totals: number[] = [];
    log("job overhead: runJob of a scripted 10-tool-call job, minus model time");
    for (let i = 0; i < 7; i++) {
      let modelMs = 0;
      const t0 = performance.now();
      const r = await runJob(
        { task: `bench job ${i}`, repo: { path: CLAMP } },
        { model, onEvent: (e) => e.type === "model_response" && (modelMs += e.ms) },
      );
      const total = performance.now() - t0;
      if (r.status !== "completed") throw new Error(`bench job ended ${r.status}: ${r.error}`);
      if (i > 0) {
        // the first run warms up
        overheads.push(total - modelMs);
        totals.push(total);
      }
    }
    return { job_overhead_ms: round(median(overheads), 1), job_total_ms: round(median(totals), 1), tool_calls: 10 };
  } finally {
    await fake.close();
  }
}

async function throughput(workers: number, jobs: number, repo: string, fakeUrl: string, concurrency = 2) {
  const queueName = `bench-${workers}w-${Date.now()}`;
  const env = {
    ...process.env,
    PATCHBAY_QUEUE: queueName,
    ANTHROPIC_BASE_URL: fakeUrl,
    ANTHROPIC_API_KEY: "bench",
    PATCHBAY_CONCURRENCY: String(concurrency),
  };
  const procs = Array.from({ length: workers }, () =>
    spawn(process.execPath, [BIN, "worker"], { env, stdio: ["ignore", "ignore", "pipe"] }),
  );
  await Promise.all(
    procs.map(
      (p) =>
        new Promise<void>((resolve, reject) => {
          let buf = "";
          p.stderr.on("data", (d: Buffer) => {
            buf += d.toString();
            if (/ready: queue/.test(buf)) resolve();
          });
          p.once("exit", (c) => reject(new Error(`worker exited ${c}: ${buf}`)));
        }),
    ),
  );
  const client = new PatchbayClient({ queueName });
  try {
    const t0 = performance.now();
    const ids = await client.enqueueBatch(
      Array.from({ length: jobs }, (_, i) => ({ task: `throughput job ${i}`, repo: { path: repo } })),
    );
    const results = await Promise.all(ids.map((id) => client.waitForResult(id, { timeoutMs: 600_000 })));
    const minutes = (performance.now() - t0) / 60_000;
    if (results.some((r) => r.status !== "completed")) throw new Error("a throughput job did not complete");
    // dequeue (BullMQ's processedOn) → sandbox ready with the repo loaded (the sandbox_ready event).
    const ready: number[] = [];
    for (const id of ids) {
      const job = await client.queue.getJob(id);
      for await (const e of client.watch(id, { follow: false })) {
        if (e.type === "sandbox_ready") ready.push(Date.parse(e.ts) - job!.processedOn!);
      }
    }
    return { jobs_per_min: round(jobs / minutes, 1), dequeue_to_ready_ms: round(median(ready), 1) };
  } finally {
    await client.queue.obliterate({ force: true }).catch(() => {});
    await client.close();
    for (const p of procs) p.kill("SIGTERM");
    await Promise.all(procs.map((p) => new Promise((r) => (p.exitCode !== null ? r(null) : p.once("exit", r)))));
  }
}

export async function benchQueue() {
  const fake = await startFakeAnthropic(byTurn(tenToolScript()));
  const repo = makeRepo(1000);
  try {
    log(
      `queue: 24 scripted 10-tool-call jobs on a 1,000-file repo, 1 then 2 worker processes (concurrency 2 each), queue ${loadConfig().redisUrl}`,
    );
    const one = await throughput(1, 24, repo, fake.url);
    const two = await throughput(2, 24, repo, fake.url);
    // Latency without contention: one worker, one job at a time.
    const idle = await throughput(1, 8, repo, fake.url, 1);
    return {
      jobs: 24,
      repo_files: 1000,
      one_worker: one,
      two_workers: two,
      dequeue_to_ready_ms_one_at_a_time: idle.dequeue_to_ready_ms,
    };
  } finally {
    rmSync(repo, { recursive: true, force: true });
    await fake.close();
  }
}
