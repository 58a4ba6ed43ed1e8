// Metrics: a worker's /metrics and the dashboard's, parsed by a strict Prometheus text parser;
// the counters move by exactly what a scripted batch of real jobs did (read back from their
// transcripts and results). The workers run on the local backend (test/support/backend.ts): what
// is counted is the worker's, whatever runs its sandboxes.
//
// Backend: local (in-process workers: `localWorkerConfig()`).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { MAX_OTHER_MODELS, OTHER, toolLabel, WorkerMetrics } from "../../src/queue/metrics.js";
import { parseListen } from "../../src/core/listen.js";
import { PatchbayClient } from "../../src/queue/client.js";
import type { JobResult, TranscriptEvent } from "../../src/core/spec/spec.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { startWorker, type WorkerHandle } from "../../src/queue/worker.js";
import { freePort, startRedis, startWorkerProc } from "../support/cluster.js";
import { startFakeAnthropic, type FakeAnthropic } from "../support/fake-anthropic.js";
import { metricValue, parsePrometheusText } from "../support/prom-text.js";
import { byTurn, clampScript, taskOf } from "../support/scripts.js";
import { LOCAL_WORKER_ENV, localWorkerConfig } from "../support/backend.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const QUEUE = "metrics-test";
const EDITOR = "str_replace_based_edit_tool";

const DASH_TOKEN = "metrics-test-token-0123";

async function scrape(url: string, token?: string) {
  const r = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  expect(r.status).toBe(200);
  expect(r.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePrometheusText(await r.text());
}

describe("worker /metrics", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let worker: WorkerHandle;
  let client: PatchbayClient;
  let dash: Dashboard;
  let metricsUrl = "";
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeAnthropic(async (req) => {
      const turn = (req.body.messages as { role: string }[]).filter((m) => m.role === "assistant").length;
      if (/held/.test(taskOf(req.body)) && turn === 1) await released;
      return byTurn(clampScript())(req);
    });
    const logs: string[] = [];
    worker = await startWorker({
      redisUrl: redis.url,
      queueName: QUEUE,
      concurrency: 2,
      metricsPort: 0,
      model: () => new AnthropicModel({ apiKey: "test-key", baseURL: fake.url }),
      log: (l) => logs.push(l),
      config: localWorkerConfig(),
    });
    metricsUrl = /metrics: (\S+)/.exec(logs.join("\n"))![1]!;
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: DASH_TOKEN });
  });

  afterAll(async () => {
    await dash?.close();
    await client?.close();
    await worker?.shutdown(5000);
    await fake?.close();
    await redis?.stop();
  });

  async function eventsOf(id: string): Promise<TranscriptEvent[]> {
    const out: TranscriptEvent[] = [];
    for await (const e of client.watch(id, { follow: false })) out.push(e);
    return out;
  }

  it("counts a scripted batch of jobs exactly: jobs by status, durations, tools, tokens, USD, sandboxes", async () => {
    const before = await scrape(metricsUrl);
    expect(metricValue(before, "patchbay_jobs_started_total")).toBe(0);
    expect(metricValue(before, "patchbay_worker_concurrency")).toBe(2);
    expect(metricValue(before, "patchbay_worker_redis_connected")).toBe(1);

    // One job held at its second model call: a sandbox is up, a job active.
    const held = await client.enqueue({ task: "A held job.", repo: { path: CLAMP }, maxTurns: 2, jobId: "held-1" });
    for (let i = 0; (await eventsOf(held)).filter((e) => e.type === "model_request").length < 2; i++)
      await new Promise((r) => setTimeout(r, 100));
    const during = await scrape(metricsUrl);
    expect(metricValue(during, "patchbay_active_sandboxes")).toBe(1);
    expect(metricValue(during, "patchbay_worker_active_jobs")).toBe(1);
    expect(metricValue(during, "patchbay_jobs_started_total")).toBe(1);
    expect(metricValue(during, "patchbay_jobs_finished_total")).toBe(0);
    release();
    const heldResult = await client.waitForResult(held, { timeoutMs: 120_000 });
    expect(heldResult.status).toBe("max_turns");

    const ids = await client.enqueueBatch(
      [1, 2, 3].map((i) => ({
        task: `Fix the failing test (${i}).`,
        repo: { path: CLAMP },
        verify: "python3 -m unittest -q",
      })),
    );
    const results: JobResult[] = await Promise.all(ids.map((id) => client.waitForResult(id, { timeoutMs: 180_000 })));
    expect(results.map((r) => r.status)).toEqual(["completed", "completed", "completed"]);
    const after = await scrape(metricsUrl);
    const all = [heldResult, ...results];
    const events = (await Promise.all([held, ...ids].map(eventsOf))).flat();

    expect(metricValue(after, "patchbay_jobs_started_total")).toBe(4);
    expect(metricValue(after, "patchbay_jobs_finished_total", { status: "completed" })).toBe(3);
    expect(metricValue(after, "patchbay_jobs_finished_total", { status: "max_turns" })).toBe(1);
    expect(metricValue(after, "patchbay_jobs_finished_total")).toBe(4);
    expect(metricValue(after, "patchbay_job_duration_seconds_count", { status: "completed" })).toBe(3);
    expect(metricValue(after, "patchbay_job_duration_seconds_count", { status: "max_turns" })).toBe(1);
    expect(metricValue(after, "patchbay_sandbox_ready_seconds_count")).toBe(4);
    expect(metricValue(after, "patchbay_sandbox_ready_seconds_sum")).toBeCloseTo(
      events.filter((e) => e.type === "sandbox_ready").reduce((s, e) => s + (e as { ms: number }).ms / 1000, 0),
      6,
    );
    expect(metricValue(after, "patchbay_dequeue_to_ready_seconds_count")).toBe(4);
    // the Clamp script: bash twice, the editor three times (one refused edit); the held job stopped after bash and a view
    expect(metricValue(after, "patchbay_tool_call_seconds_count", { tool: "bash" })).toBe(3 * 2 + 1);
    expect(metricValue(after, "patchbay_tool_call_seconds_count", { tool: EDITOR })).toBe(3 * 3 + 1);
    expect(metricValue(after, "patchbay_tool_errors_total", { tool: EDITOR })).toBe(3);
    expect(metricValue(after, "patchbay_tool_errors_total", { tool: "bash" })).toBe(0);
    expect(metricValue(after, "patchbay_verify_total", { outcome: "passed" })).toBe(3);
    expect(metricValue(after, "patchbay_model_request_seconds_count")).toBe(3 * 6 + 2);
    // tokens and USD by model: what the transcripts and results say
    const responses = events.filter(
      (e): e is Extract<TranscriptEvent, { type: "model_response" }> => e.type === "model_response",
    );
    const models = [...new Set(responses.map((e) => e.model))];
    expect(models).toHaveLength(1);
    const sum = (f: keyof JobResult["usage"]) => responses.reduce((s, e) => s + e.usage[f], 0);
    expect(metricValue(after, "patchbay_tokens_total", { model: models[0]!, kind: "input" })).toBe(sum("inputTokens"));
    expect(metricValue(after, "patchbay_tokens_total", { model: models[0]!, kind: "output" })).toBe(
      sum("outputTokens"),
    );
    expect(metricValue(after, "patchbay_tokens_total", { model: models[0]!, kind: "cache_read" })).toBe(
      sum("cacheReadTokens"),
    );
    expect(metricValue(after, "patchbay_tokens_total", { model: models[0]!, kind: "cache_write" })).toBe(
      sum("cacheWriteTokens"),
    );
    expect(sum("outputTokens")).toBeGreaterThan(0);
    expect(metricValue(after, "patchbay_cost_usd_total", { model: models[0]! })).toBeCloseTo(
      all.reduce((s, r) => s + r.costUsd, 0),
      9,
    );
    expect(metricValue(after, "patchbay_active_sandboxes")).toBe(0);
    expect(metricValue(after, "patchbay_worker_active_jobs")).toBe(0);
    // The warm pool (2, the concurrency): every job asked it once, and each verify round once more
    // (verify runs in a sandbox of its own), and found a sandbox or made its own.
    const hits = metricValue(after, "patchbay_pool_takes_total", { outcome: "hit" });
    expect(hits + metricValue(after, "patchbay_pool_takes_total", { outcome: "miss" })).toBe(4 + 3);
    expect(metricValue(after, "patchbay_pool_sandboxes_made_total")).toBeGreaterThanOrEqual(hits);
    expect(metricValue(after, "patchbay_pool_idle_sandboxes")).toBeLessThanOrEqual(2);
    expect(metricValue(after, "patchbay_pool_sandboxes_made_total") - hits).toBeGreaterThanOrEqual(
      metricValue(after, "patchbay_pool_idle_sandboxes"),
    );

    // the dashboard's queue-level metrics, from BullMQ
    const q = await scrape(`${dash.url}/metrics`, DASH_TOKEN); // as Prometheus does: bearer_token
    expect(metricValue(q, "bullmq_job_count", { queue: QUEUE, state: "completed" })).toBe(4);
    expect(metricValue(q, "bullmq_job_count", { queue: QUEUE, state: "active" })).toBe(0);
    expect(metricValue(q, "bullmq_job_count", { queue: QUEUE, state: "failed" })).toBe(0);
  }, 300_000);
});

describe("patchbay worker --metrics-port", () => {
  it("a worker process serves /metrics on loopback; its counters follow the job it ran", async () => {
    const redis = await startRedis();
    const fake = await startFakeAnthropic(byTurn(clampScript()));
    const port = await freePort();
    const w = startWorkerProc(
      {
        ...LOCAL_WORKER_ENV,
        REDIS_URL: redis.url,
        PATCHBAY_QUEUE: "metrics-cli",
        ANTHROPIC_BASE_URL: fake.url,
        ANTHROPIC_API_KEY: "test-key",
      },
      ["--metrics-port", String(port)],
    );
    const client = new PatchbayClient({ redisUrl: redis.url, queueName: "metrics-cli" });
    try {
      await w.waitFor(/ready: queue metrics-cli/);
      expect(w.log()).toContain(`metrics: http://127.0.0.1:${port}/metrics`);
      const url = `http://127.0.0.1:${port}/metrics`;
      expect(metricValue(await scrape(url), "patchbay_jobs_finished_total")).toBe(0);
      const id = await client.enqueue({ task: "Fix the failing test (cli).", repo: { path: CLAMP } });
      const r = await client.waitForResult(id, { timeoutMs: 120_000 });
      expect(r.status).toBe("completed");
      const after = await scrape(url);
      expect(metricValue(after, "patchbay_jobs_finished_total", { status: "completed" })).toBe(1);
      expect(metricValue(after, "patchbay_model_request_seconds_count")).toBe(6);
      expect(metricValue(after, "patchbay_cost_usd_total")).toBeCloseTo(r.costUsd, 9);
      expect(metricValue(after, "patchbay_worker_process_process_cpu_seconds_total")).toBeGreaterThan(0);
      expect((await fetch(`http://127.0.0.1:${port}/other`)).status).toBe(404);
    } finally {
      await client.close();
      expect(await w.stop("SIGTERM")).toBe(0);
      await fake.close();
      await redis.stop();
    }
  }, 180_000);
});

describe("WorkerMetrics.observe", () => {
  const base = { jobId: "j", attempt: 1 };
  it("counts a job once even when its end is reported twice (hard deadline, then runJob)", async () => {
    const m = new WorkerMetrics();
    m.observe({
      ...base,
      ts: "2026-01-01T00:00:00.000Z",
      type: "job_started",
      spec: { task: "t", repo: { path: "/x" } },
    });
    m.observe({ ...base, ts: "2026-01-01T00:00:02.000Z", type: "sandbox_ready", container: "c", ms: 1500 });
    m.observe({
      ...base,
      ts: "2026-01-01T00:00:10.000Z",
      type: "job_finished",
      status: "timeout",
      costUsd: 0,
      turns: 0,
    });
    m.observe({
      ...base,
      ts: "2026-01-01T00:00:11.000Z",
      type: "job_finished",
      status: "cancelled",
      costUsd: 0,
      turns: 0,
    });
    const f = parsePrometheusText(await m.text());
    expect(metricValue(f, "patchbay_jobs_finished_total")).toBe(1);
    expect(metricValue(f, "patchbay_jobs_finished_total", { status: "timeout" })).toBe(1);
    expect(metricValue(f, "patchbay_job_duration_seconds_sum", { status: "timeout" })).toBe(10);
    expect(metricValue(f, "patchbay_dequeue_to_ready_seconds_sum")).toBe(2);
    expect(metricValue(f, "patchbay_sandbox_ready_seconds_sum")).toBe(1.5);
    expect(metricValue(f, "patchbay_active_sandboxes")).toBe(0);
  });

  it("labels stay bounded: tool names the model makes up count as `other`, unknown models past the first few too", async () => {
    const m = new WorkerMetrics();
    const ts = "2026-01-01T00:00:00.000Z";
    for (let i = 0; i < 1000; i++)
      m.observe({
        ...base,
        ts,
        type: "tool_result",
        turn: 1,
        toolUseId: `t${i}`,
        name: `made_up_tool_${i}`,
        output: "Unknown tool",
        isError: true,
        ms: 1,
      });
    m.observe({
      ...base,
      ts,
      type: "tool_result",
      turn: 1,
      toolUseId: "b",
      name: "bash",
      output: "",
      isError: false,
      ms: 1,
    });
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 };
    for (let i = 0; i < 100; i++)
      m.observe({
        ...base,
        ts,
        type: "model_response",
        turn: 1,
        content: [],
        stopReason: "end_turn",
        usage,
        ms: 1,
        model: `custom-model-${i}`,
      });
    m.observe({
      ...base,
      ts,
      type: "model_response",
      turn: 1,
      content: [],
      stopReason: "end_turn",
      usage,
      ms: 1,
      model: "claude-sonnet-5-5",
    });
    const f = parsePrometheusText(await m.text());
    const series = (name: string, label: string) => new Set(f.get(name)!.samples.map((s) => s.labels[label]));
    expect([...series("patchbay_tool_errors_total", "tool")]).toEqual([OTHER]);
    expect(metricValue(f, "patchbay_tool_errors_total", { tool: OTHER })).toBe(1000);
    expect(series("patchbay_tool_call_seconds", "tool")).toEqual(new Set([OTHER, "bash"]));
    expect(metricValue(f, "patchbay_tool_call_seconds_count", { tool: OTHER })).toBe(1000);
    for (const name of ["str_replace_based_edit_tool", "str_replace_editor", "edit_file", "bash"])
      expect(toolLabel(name)).toBe(name);
    const models = series("patchbay_model_request_seconds", "model");
    expect(models.size).toBe(MAX_OTHER_MODELS + 2); // the first 16 unknown ones, "other", and the known one
    expect(models.has("claude-sonnet-5-5") && models.has(OTHER)).toBe(true);
    expect(metricValue(f, "patchbay_model_request_seconds_count", { model: OTHER })).toBe(100 - MAX_OTHER_MODELS);
    expect(metricValue(f, "patchbay_tokens_total", { kind: "input" })).toBe(101);
  });

  it("survives a malformed event", async () => {
    const m = new WorkerMetrics();
    m.observe({ type: "model_response" } as unknown as TranscriptEvent);
    expect(parsePrometheusText(await m.text()).size).toBeGreaterThan(5);
  });

  it("parses --metrics-port values", () => {
    expect(parseListen("9464")).toEqual({ host: "127.0.0.1", port: 9464 });
    expect(parseListen("0.0.0.0:9464")).toEqual({ host: "0.0.0.0", port: 9464 });
    expect(parseListen("[::1]:9464")).toEqual({ host: "::1", port: 9464 });
    expect(() => parseListen("x")).toThrow(/PORT or HOST:PORT/);
    expect(() => parseListen("70000")).toThrow();
  });
});

describe("the strict Prometheus text parser", () => {
  it("refuses what Prometheus would refuse", () => {
    expect(() => parsePrometheusText("x 1\n")).toThrow(/undeclared/);
    expect(() => parsePrometheusText("# TYPE x counter\nx{a=b} 1\n")).toThrow(/unquoted/);
    expect(() => parsePrometheusText("# TYPE x counter\nx 1\nx 2\n")).toThrow(/duplicate/);
    expect(() => parsePrometheusText("# TYPE x counter\nx one\n")).toThrow(/bad value/);
    expect(() =>
      parsePrometheusText('# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_count 1\nh_sum 1\n'),
    ).toThrow(/cumulative/);
    expect(() => parsePrometheusText('# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_count 1\nh_sum 1\n')).toThrow(
      /count/,
    );
    expect(parsePrometheusText('# TYPE x gauge\nx{a="q\\"\\n", b="c"} 1.5e3\n').get("x")!.samples[0]).toEqual({
      name: "x",
      labels: { a: 'q"\n', b: "c" },
      value: 1500,
    });
  });
});
