// A worker's Prometheus metrics (prom-client), derived from the transcript events it emits: one
// observe(event) where the worker writes each event to its stream. Served at /metrics on
// `patchbay worker --metrics-port [HOST:]PORT` (127.0.0.1 unless a host is given); off by default.
import { createServer, type Server } from "node:http";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { costUsd, pricePrefix } from "../agent/prices.js";
import { parseListen } from "../core/listen.js";
import type { TranscriptEvent } from "../core/spec/spec.js";
import { JOB_STATUSES } from "../core/spec/names.js";
import { EDITOR_TOOL_NAMES } from "../tools/editor-text.js";

export interface WorkerState {
  activeJobs: number;
  concurrency: number;
  redisConnected: boolean;
  draining: boolean;
  /** The warm pool (src/sandbox/pool.ts): sandboxes waiting, made, and takes that found one or none. */
  pool?: { idle: number; made: number; taken: number; missed: number };
  /** Finished jobs' sandboxes being removed in the background (src/sandbox/removals.ts). */
  removals?: { running: number; queued: number; blocked: number; removed: number; failed: number };
}

const SECONDS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const JOB_SECONDS = [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200];
const TOKEN_KINDS = [
  ["inputTokens", "input"],
  ["outputTokens", "output"],
  ["cacheReadTokens", "cache_read"],
  ["cacheWriteTokens", "cache_write"],
] as const;

// Bounded labels: a label value the model or a spec chooses would make one series per value, for
// ever (prom-client keeps them all). Tool names are the tools' own, anything else the model calls is
// "other"; models are those of the price table, plus the first few others seen, then "other".
/** Every name a tool of the worker answers to. */
const TOOL_LABELS: ReadonlySet<string> = new Set(["bash", "edit_file", ...EDITOR_TOOL_NAMES]);
export const OTHER = "other";
export const toolLabel = (name: unknown): string => (typeof name === "string" && TOOL_LABELS.has(name) ? name : OTHER);
const statusLabel = (s: unknown): string =>
  typeof s === "string" && (JOB_STATUSES as readonly string[]).includes(s) ? s : OTHER;
/** Models not in the price table that get a series of their own before the rest are "other". */
export const MAX_OTHER_MODELS = 16;
const MODEL_LABEL = /^[A-Za-z0-9._:@/-]{1,100}$/;

export class WorkerMetrics {
  readonly registry = new Registry();
  private readonly started = new Map<string, number>();
  private readonly sandboxes = new Set<string>();
  private readonly r = [this.registry];
  private readonly otherModels = new Set<string>();

  readonly jobsStarted = new Counter({
    name: "patchbay_jobs_started_total",
    help: "Job attempts started on this worker",
    registers: this.r,
  });
  readonly jobsFinished = new Counter({
    name: "patchbay_jobs_finished_total",
    help: "Job attempts finished on this worker, by result status",
    labelNames: ["status"] as const,
    registers: this.r,
  });
  readonly jobDuration = new Histogram({
    name: "patchbay_job_duration_seconds",
    help: "Job attempt wall time, job_started to job_finished, by status",
    labelNames: ["status"] as const,
    buckets: JOB_SECONDS,
    registers: this.r,
  });
  readonly sandboxReady = new Histogram({
    name: "patchbay_sandbox_ready_seconds",
    help: "Sandbox create to ready (repo loaded)",
    buckets: SECONDS,
    registers: this.r,
  });
  readonly dequeueToReady = new Histogram({
    name: "patchbay_dequeue_to_ready_seconds",
    help: "Job taken from the queue (job_started) to sandbox ready",
    buckets: SECONDS,
    registers: this.r,
  });
  readonly toolCall = new Histogram({
    name: "patchbay_tool_call_seconds",
    help: "Tool call latency by tool",
    labelNames: ["tool"] as const,
    buckets: SECONDS,
    registers: this.r,
  });
  readonly toolErrors = new Counter({
    name: "patchbay_tool_errors_total",
    help: "Tool calls that returned an error, by tool",
    labelNames: ["tool"] as const,
    registers: this.r,
  });
  readonly modelRequest = new Histogram({
    name: "patchbay_model_request_seconds",
    help: "Model request latency (retries included), by model",
    labelNames: ["model"] as const,
    buckets: SECONDS,
    registers: this.r,
  });
  readonly modelRetries = new Counter({
    name: "patchbay_model_retries_total",
    help: "Model calls retried (429, 5xx, overloaded)",
    registers: this.r,
  });
  readonly tokens = new Counter({
    name: "patchbay_tokens_total",
    help: "Tokens by model and kind (input, output, cache_read, cache_write)",
    labelNames: ["model", "kind"] as const,
    registers: this.r,
  });
  readonly cost = new Counter({
    name: "patchbay_cost_usd_total",
    help: "Model spend in USD by model",
    labelNames: ["model"] as const,
    registers: this.r,
  });
  readonly verifies = new Counter({
    name: "patchbay_verify_total",
    help: "Verify runs by outcome",
    labelNames: ["outcome"] as const,
    registers: this.r,
  });
  readonly activeSandboxes = new Gauge({
    name: "patchbay_active_sandboxes",
    help: "Sandboxes ready and not yet finished on this worker",
    registers: this.r,
  });

  constructor(state?: () => WorkerState) {
    collectDefaultMetrics({ register: this.registry, prefix: "patchbay_worker_process_" });
    if (!state) return;
    const gauge = (name: string, help: string, read: (s: WorkerState) => number) =>
      new Gauge({
        name,
        help,
        registers: this.r,
        collect() {
          this.set(read(state()));
        },
      });
    // A counter by outcome whose counts the worker's parts keep themselves: read at each scrape.
    const outcomes = (name: string, help: string, read: (s: WorkerState) => Record<string, number>) =>
      new Counter({
        name,
        help,
        labelNames: ["outcome"] as const,
        registers: this.r,
        collect() {
          this.reset();
          for (const [outcome, n] of Object.entries(read(state()))) this.inc({ outcome }, n);
        },
      });
    gauge("patchbay_worker_active_jobs", "Jobs running on this worker", (s) => s.activeJobs);
    gauge("patchbay_worker_concurrency", "Jobs this worker runs at once", (s) => s.concurrency);
    gauge("patchbay_worker_redis_connected", "1 while the worker's Redis connection is up", (s) =>
      s.redisConnected ? 1 : 0,
    );
    gauge("patchbay_worker_draining", "1 once the worker drains (takes no new job)", (s) => (s.draining ? 1 : 0));
    gauge("patchbay_pool_idle_sandboxes", "Warm sandboxes waiting for a job", (s) => s.pool?.idle ?? 0);
    gauge(
      "patchbay_sandbox_removals_running",
      "Finished jobs' sandboxes being removed now, in the background after their results",
      (s) => s.removals?.running ?? 0,
    );
    gauge(
      "patchbay_sandbox_removals_queued",
      "Finished jobs' sandboxes waiting for a removal slot",
      (s) => s.removals?.queued ?? 0,
    );
    gauge(
      "patchbay_sandbox_removals_blocked",
      "Finished jobs waiting for room in the removal queue before their results are handed back",
      (s) => s.removals?.blocked ?? 0,
    );
    outcomes(
      "patchbay_sandbox_removals_total",
      "Background sandbox removals by outcome (a failed one is retried by the reaper loop)",
      (s) => ({ removed: s.removals?.removed ?? 0, failed: s.removals?.failed ?? 0 }),
    );
    // Counts kept by the pool itself, read at each scrape.
    new Counter({
      name: "patchbay_pool_sandboxes_made_total",
      help: "Warm sandboxes made by the pool",
      registers: this.r,
      collect() {
        this.reset();
        this.inc(state().pool?.made ?? 0);
      },
    });
    outcomes(
      "patchbay_pool_takes_total",
      "Jobs that asked the pool for a sandbox, by outcome: hit (a warm one) or miss (created its own)",
      (s) => ({ hit: s.pool?.taken ?? 0, miss: s.pool?.missed ?? 0 }),
    );
  }

  /** A model id as a label: a known family's id, or one of the first MAX_OTHER_MODELS others, else "other". */
  modelLabel(model: unknown): string {
    if (typeof model !== "string" || !MODEL_LABEL.test(model)) return OTHER;
    if (pricePrefix(model) !== null || this.otherModels.has(model)) return model;
    if (this.otherModels.size >= MAX_OTHER_MODELS) return OTHER;
    this.otherModels.add(model);
    return model;
  }

  /** Updates the metrics from one transcript event. Never throws. */
  observe(e: TranscriptEvent): void {
    try {
      this.apply(e);
    } catch {
      // a malformed event must not break the worker
    }
  }

  private apply(e: TranscriptEvent): void {
    const key = `${e.jobId}\u0000${e.attempt}`;
    const at = Date.parse(e.ts);
    switch (e.type) {
      case "job_started":
        this.started.set(key, at);
        this.jobsStarted.inc();
        break;
      case "sandbox_ready": {
        this.sandboxReady.observe(e.ms / 1000);
        const t0 = this.started.get(key);
        if (t0 !== undefined && at >= t0) this.dequeueToReady.observe((at - t0) / 1000);
        this.sandboxes.add(key);
        this.activeSandboxes.set(this.sandboxes.size);
        break;
      }
      case "tool_result":
        this.toolCall.observe({ tool: toolLabel(e.name) }, e.ms / 1000);
        if (e.isError) this.toolErrors.inc({ tool: toolLabel(e.name) });
        break;
      case "model_response": {
        const model = this.modelLabel(e.model);
        this.modelRequest.observe({ model }, e.ms / 1000);
        for (const [field, kind] of TOKEN_KINDS)
          if (e.usage[field] > 0) this.tokens.inc({ model, kind }, e.usage[field]);
        const usd = costUsd(e.model, e.usage);
        if (usd > 0) this.cost.inc({ model }, usd);
        break;
      }
      case "model_retry":
        this.modelRetries.inc();
        break;
      case "verify":
        this.verifies.inc({ outcome: e.exitCode === 0 ? "passed" : "failed" });
        break;
      case "job_finished": {
        // Once per attempt: a hard deadline's job_finished and runJob's own late one count once.
        const t0 = this.started.get(key);
        if (t0 === undefined) break;
        this.started.delete(key);
        this.jobsFinished.inc({ status: statusLabel(e.status) });
        this.jobDuration.observe({ status: statusLabel(e.status) }, Math.max(0, at - t0) / 1000);
        this.sandboxes.delete(key);
        this.activeSandboxes.set(this.sandboxes.size);
        break;
      }
      default:
        break;
    }
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}

interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

/** Serves the registry at GET /metrics in the Prometheus text format. */
async function serveMetrics(registry: Registry, listen: { host?: string; port: number }): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") return void res.writeHead(405, { Allow: "GET, HEAD" }).end();
    if (path !== "/metrics") return void res.writeHead(404, { "Content-Type": "text/plain" }).end("try /metrics\n");
    registry.metrics().then(
      (text) =>
        res
          .writeHead(200, { "Content-Type": registry.contentType, "Cache-Control": "no-store" })
          .end(req.method === "HEAD" ? undefined : text),
      (err: Error) => res.writeHead(500, { "Content-Type": "text/plain" }).end(`${err.message}\n`),
    );
  });
  const host = listen.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(listen.port, host, () => (server.off("error", reject), resolve()));
  });
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : listen.port;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}/metrics`,
    close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

/**
 * The worker's hook: metrics always observed (cheap), served only when `listen` is given.
 * `state` is read at each scrape.
 */
export async function workerMetrics(
  listen: string | number | undefined,
  state: () => WorkerState,
): Promise<{ observe(e: TranscriptEvent): void; url?: string; close(): Promise<void> }> {
  const m = new WorkerMetrics(state);
  if (listen === undefined) return { observe: (e) => m.observe(e), close: async () => {} };
  const server = await serveMetrics(m.registry, typeof listen === "number" ? { port: listen } : parseListen(listen));
  return { observe: (e) => m.observe(e), url: server.url, close: () => server.close() };
}
