// Traces end to end: an OTLP/HTTP receiver of this test's own (test/support/otlp-receiver.ts), a
// private Redis, worker processes on the local backend (test/support/backend.ts: the queue and the
// job's phases are the subject, not Docker), the real SDK against the scripted server, and the
// `patchbay enqueue` CLI as the client, in a process of its own.
// - one trace per job across the two processes: enqueue (the CLI's) → attempt (the worker's) →
//   sandbox, prepare (sandbox_ready; setup), agent (each model request: tokens, cost, a retry; each
//   tool call: name, time, error flag), patch, verify, result; no task or file text in any attribute;
// - a worker killed mid-job: the attempt that resumes from the checkpoint links to the dead one's span;
// - a batch submitted by the CLI: each line's job is a trace of its own;
// - OTEL off (OTEL_SDK_DISABLED=true beside an endpoint): nothing is exported, nothing carried.
//
// Backend: local (worker processes beside an OTLP receiver of the test's own).
import { Job } from "bullmq";
import { randomUUID } from "node:crypto";
import { cpSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient, type JobData } from "../../src/queue/client.js";
import {
  apiError,
  reply,
  startFakeAnthropic,
  text,
  toolUse,
  type FakeAnthropic,
  type Reply,
} from "../support/fake-anthropic.js";
import {
  cli,
  removeDir,
  removeQueueSandboxes,
  startRedis,
  startWorkerProc,
  type WorkerProc,
} from "../support/cluster.js";
import { LOCAL_WORKER_ENV } from "../support/backend.js";
import { startOtlpReceiver, strings, type OtlpReceiver, type OtlpSpan } from "../support/otlp-receiver.js";
import { byTurn, CLAMP_AMBIGUOUS, CLAMP_FIX, clampScript, taskOf } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const TASK_CANARY = `pb-canary-task-${randomUUID()}`;
const FILE_CANARY = `pb-canary-file-${randomUUID()}`;
const bash = (command: string) => reply(toolUse("bash", { command }));
const KIND = { internal: 1, client: 3, producer: 4, consumer: 5 } as const;

/** The traced job: reads the planted file, a refused edit, the fix, done. */
const TRACED: Reply[] = [
  reply(text("Looking around."), toolUse("bash", { command: "cat /workspace/secret.txt" })),
  reply(toolUse("str_replace_based_edit_tool", CLAMP_AMBIGUOUS)),
  reply(toolUse("str_replace_based_edit_tool", CLAMP_FIX)),
  reply(text("Fixed.")),
];
const RESUMED: Reply[] = [
  bash("echo one > /workspace/log.txt"),
  bash("echo two >> /workspace/log.txt"),
  reply(text("Done.")),
];

describe("traces of a job, end to end", { timeout: 300_000 }, () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let receiver: OtlpReceiver;
  let repo: string;
  const workers: WorkerProc[] = [];
  const clients: PatchbayClient[] = [];
  const queues: string[] = [];
  // The resumed job's third request waits here until its first worker is dead.
  let releaseGate!: () => void;
  const gate = new Promise<void>((r) => (releaseGate = r));
  let gateReached!: () => void;
  const reachedGate = new Promise<void>((r) => (gateReached = r));

  beforeAll(async () => {
    redis = await startRedis();
    receiver = await startOtlpReceiver();
    repo = mkdtempSync(join(tmpdir(), "pb-otel-repo-"));
    cpSync(CLAMP, repo, { recursive: true });
    writeFileSync(join(repo, "secret.txt"), `${FILE_CANARY}\n`);
    const asked = new Map<string, number>();
    fake = await startFakeAnthropic(({ body }) => {
      const task = taskOf(body);
      const turn = (body.messages as { role: string }[]).filter((m) => m.role === "assistant").length;
      const n = (asked.get(`${task}#${turn}`) ?? 0) + 1;
      asked.set(`${task}#${turn}`, n);
      if (task.includes("traced job"))
        return turn === 1 && n === 1
          ? apiError(500, "overloaded for a moment")
          : (TRACED[turn] ?? apiError(400, "no such turn"));
      if (task.includes("resumed job") && turn === 2 && n === 1)
        return (gateReached(), gate.then(() => reply(text("Done."))));
      if (task.includes("resumed job")) return RESUMED[turn] ?? apiError(400, "no such turn");
      return byTurn(clampScript())({ body });
    });
  });

  afterAll(async () => {
    releaseGate();
    for (const c of clients) await c.close();
    await Promise.all(workers.map((w) => w.stop("SIGKILL")));
    for (const q of queues) await removeQueueSandboxes(q);
    await fake?.close();
    await receiver?.close();
    await redis?.stop();
    if (repo) removeDir(repo);
  });

  const otel = (service: string, extra: Record<string, string> = {}) => ({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SERVICE_NAME: service,
    OTEL_BSP_SCHEDULE_DELAY: "50",
    ...extra,
  });
  /** A queue of its own, a worker process on it (more with spawn()), and a client without traces. */
  const cluster = async (name: string, extra: Record<string, string> = {}) => {
    const queue = `otel-${name}-${process.pid}`;
    queues.push(queue);
    const env = {
      ...LOCAL_WORKER_ENV,
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: queue,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_LOCK_MS: "2000",
      PATCHBAY_STALLED_MS: "1000",
      ...extra,
    };
    let i = 0;
    const spawn = async () => {
      // An owner "elsewhere": other files' reapers leave these sandboxes to this file's workers.
      const w = startWorkerProc({ ...env, PATCHBAY_WORKER_ID: `pb-test-otel-elsewhere:${queue}-${i++}:w` });
      workers.push(w);
      await w.waitFor(new RegExp(`ready: queue ${queue}`), 120_000);
      return w;
    };
    const client = new PatchbayClient({ redisUrl: redis.url, queueName: queue });
    clients.push(client);
    return { queue, spawn, client, worker: await spawn() };
  };
  /** `patchbay enqueue` in a process of its own, with the given OTEL_* environment; the job's id. */
  const enqueue = async (queue: string, task: string, env: Record<string, string>, more: string[] = []) => {
    const r = await cli(
      ["enqueue", "--repo", repo, "--task", task, "--queue", queue, "--redis-url", redis.url, ...more],
      env,
    );
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim();
  };
  const named = (spans: OtlpSpan[], name: string) => spans.filter((s) => s.name === name);
  /** A job's enqueue span (ids start at 1 in every queue: the queue tells them apart), its attempt span once ended, and its trace's spans. */
  const jobTrace = (all: OtlpSpan[], queue: string, id: string) => {
    const enq = named(all, "patchbay.enqueue").find(
      (s) => s.attributes["patchbay.job.id"] === id && s.attributes["messaging.destination.name"] === queue,
    );
    const spans = enq ? all.filter((s) => s.traceId === enq.traceId) : [];
    const attempt = named(spans, "patchbay.attempt").find((s) => s.attributes["patchbay.job.id"] === id);
    return enq && { enq, attempt, spans };
  };
  const childrenOf = (spans: OtlpSpan[], parent: OtlpSpan) =>
    spans.filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);

  it("one trace across the client's process and the worker's: the phases nest, the attributes hold names, counts and times, never the task's or a file's text", async () => {
    const { queue, client } = await cluster("one", otel("pb-worker"));
    const id = await enqueue(queue, `The traced job: fix clamp. ${TASK_CANARY}`, otel("pb-client"), [
      "--setup",
      "true",
      "--verify",
      "python3 -m unittest -q",
    ]);
    const result = await client.waitForResult(id, { timeoutMs: 240_000 });
    expect(result).toMatchObject({ status: "completed", verified: true, turns: 4 });
    // The attempt span ends last, after every phase's: once it is in, the job's spans are.
    const { enq, attempt, spans } = await receiver.until((all) => {
      const t = jobTrace(all, queue, id);
      return t?.attempt && { ...t, attempt: t.attempt };
    });

    // The client's span is the root, from the CLI's process; the worker's attempt is its child.
    expect(enq).toMatchObject({
      parentSpanId: "",
      kind: KIND.producer,
      scope: "patchbay",
      resource: { "service.name": "pb-client" },
    });
    expect(enq.attributes).toMatchObject({
      "messaging.system": "bullmq",
      "messaging.destination.name": queue,
      "messaging.operation.type": "send",
    });
    expect(attempt).toMatchObject({
      parentSpanId: enq.spanId,
      traceId: enq.traceId,
      kind: KIND.consumer,
      links: [],
      resource: { "service.name": "pb-worker" },
    });
    expect(attempt.attributes).toMatchObject({
      "patchbay.attempt": 1,
      "messaging.destination.name": queue,
      "patchbay.status": "completed",
      "patchbay.turns": 4,
      "patchbay.verified": true,
      "patchbay.files_changed": 1,
    });
    expect(attempt.attributes["patchbay.cost_usd"]).toBeGreaterThan(0);
    // Every span of the job is in this one trace, under the attempt, in the order of the job's life.
    const phases = childrenOf(spans, attempt)
      .sort((a, b) => Number(a.startNs - b.startNs))
      .map((s) => s.name);
    expect(phases).toEqual([
      "patchbay.sandbox.acquire",
      "patchbay.prepare",
      "patchbay.agent",
      "patchbay.patch",
      "patchbay.verify",
      "patchbay.result",
    ]);
    const [prepare] = named(spans, "patchbay.prepare");
    expect(prepare!.events.map((e) => e.name)).toEqual(["sandbox_ready"]);
    expect(prepare!.events[0]!.attributes["patchbay.sandbox.ready_ms"]).toEqual(expect.any(Number));
    expect(childrenOf(spans, prepare!).map((s) => [s.name, s.attributes["patchbay.setup.commands"]])).toEqual([
      ["patchbay.setup", 1],
    ]);

    const model = fake.requests.find((r) => taskOf(r.body).includes("traced job"))!.body.model as string;
    const [agent] = named(spans, "patchbay.agent");
    expect(agent!.attributes).toMatchObject({
      "gen_ai.request.model": model,
      "patchbay.checkpoint.restored": false,
      "patchbay.round": 1,
    });
    const underAgent = childrenOf(spans, agent!).sort((a, b) => Number(a.startNs - b.startNs));
    const requests = underAgent.filter((s) => s.name === "patchbay.model.request");
    expect(requests.map((s) => s.attributes["patchbay.turn"])).toEqual([1, 2, 3, 4]);
    for (const r of requests) {
      expect(r.kind).toBe(KIND.client);
      expect(r.attributes).toMatchObject({
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        "gen_ai.system": "anthropic",
      });
      const input = [
        "gen_ai.usage.input_tokens",
        "patchbay.usage.cache_read_tokens",
        "patchbay.usage.cache_write_tokens",
      ].map((k) => r.attributes[k] as number);
      expect(input.reduce((a, b) => a + b)).toBeGreaterThan(0); // the scripted server caches too: a request may be read from the cache whole
      expect(r.attributes["gen_ai.usage.output_tokens"]).toBeGreaterThan(0);
      expect(r.attributes["patchbay.cost_usd"]).toBeGreaterThan(0);
    }
    // The 500 on turn 2 was retried by the SDK inside the one request.
    expect(requests.map((s) => s.attributes["patchbay.model.retries"])).toEqual([undefined, 1, undefined, undefined]);
    expect(requests.at(-1)!.attributes["gen_ai.response.finish_reasons"]).toEqual(["end_turn"]);
    const tools = underAgent.filter((s) => s.name === "patchbay.tool");
    expect(
      tools.map((s) => [
        s.attributes["gen_ai.tool.name"],
        s.attributes["patchbay.tool.error"],
        s.attributes["patchbay.turn"],
      ]),
    ).toEqual([
      ["bash", false, 1],
      ["str_replace_based_edit_tool", true, 2],
      ["str_replace_based_edit_tool", false, 3],
    ]);
    for (const t of tools) expect(t.attributes["patchbay.tool.ms"]).toEqual(expect.any(Number));
    expect(tools[0]!.attributes["patchbay.tool.output_chars"]).toBeGreaterThanOrEqual(FILE_CANARY.length); // its size, not its text
    expect(named(spans, "patchbay.patch")[0]!.attributes).toMatchObject({
      "patchbay.round": 1,
      "patchbay.files_changed": 1,
    });
    expect(named(spans, "patchbay.verify")[0]!.attributes).toMatchObject({
      "patchbay.round": 1,
      "patchbay.verify.exit_code": 0,
    });
    expect(named(spans, "patchbay.result")[0]!.attributes).toMatchObject({
      "patchbay.status": "completed",
      "patchbay.verified": true,
    });
    expect(spans.filter((s) => s.status.code === 2)).toEqual([]);

    // The canaries went through the job (the task to the model, the file's text back to it) and into no span.
    expect(JSON.stringify(fake.requests.map((r) => r.body))).toContain(TASK_CANARY);
    expect(JSON.stringify(fake.requests.map((r) => r.body))).toContain(FILE_CANARY);
    const leaks = receiver.spans.flatMap((s) =>
      strings(s)
        .filter((x) => x.includes("pb-canary"))
        .map((x) => `${s.name}: ${x}`),
    );
    expect(leaks).toEqual([]);
  });

  it("a worker killed mid-job: the attempt that resumes from the checkpoint is linked to the dead attempt's span, in the same trace", async () => {
    const { queue, client, worker, spawn } = await cluster("resume", otel("pb-worker"));
    const id = await enqueue(queue, `The resumed job. ${TASK_CANARY}`, otel("pb-client"));
    await reachedGate; // its third model request is out (two turns checkpointed)
    // The first attempt's span never ends (its process dies): its sandbox span, which ended, names it as parent.
    const first = await receiver.until(
      (all) => named(jobTrace(all, queue, id)?.spans ?? [], "patchbay.sandbox.acquire")[0],
    );
    worker.proc.kill("SIGKILL");
    await worker.exited;
    releaseGate();
    await spawn();
    const result = await client.waitForResult(id, { timeoutMs: 240_000 });
    expect(result.status).toBe("completed");
    const { enq, attempt, spans } = await receiver.until((all) => {
      const t = jobTrace(all, queue, id);
      return t?.attempt && { ...t, attempt: t.attempt };
    });
    expect(named(spans, "patchbay.attempt")).toHaveLength(1); // the dead one never ended
    expect(attempt.parentSpanId).toBe(enq.spanId);
    expect(attempt.attributes["patchbay.job.id"]).toBe(id);
    expect(attempt.links).toEqual([
      { traceId: enq.traceId, spanId: first.parentSpanId, attributes: { "patchbay.link": "previous_attempt" } },
    ]);
    expect(first.parentSpanId).not.toBe(attempt.spanId);
    const agent = childrenOf(spans, attempt).find((s) => s.name === "patchbay.agent")!;
    expect(agent.attributes["patchbay.checkpoint.restored"]).toBe(true);
    // Only the request the dead attempt never got an answer to was asked again.
    expect(
      childrenOf(spans, agent)
        .filter((s) => s.name === "patchbay.model.request")
        .map((s) => s.attributes["patchbay.turn"]),
    ).toEqual([3]);
    // The job's data carries the trace: the enqueue span's context and the newest attempt's.
    const job = await Job.fromId<JobData>(client.queue, id);
    expect(job!.data.trace).toEqual({
      traceparent: `00-${enq.traceId}-${enq.spanId}-01`,
      attempt: `00-${enq.traceId}-${attempt.spanId}-01`,
    });
    expect(receiver.spans.flatMap((s) => strings(s).filter((x) => x.includes("pb-canary")))).toEqual([]);
  });

  it("`patchbay batch submit` with traces: each line's job carries the context of an enqueue span of its own, one trace per job", async () => {
    const queue = `otel-batch-${process.pid}`;
    const client = new PatchbayClient({ redisUrl: redis.url, queueName: queue });
    clients.push(client);
    const file = join(repo, "..", `pb-otel-tasks-${process.pid}.jsonl`);
    writeFileSync(
      file,
      [1, 2].map((n) => JSON.stringify({ task: `Batch line ${n}. ${TASK_CANARY}`, repo: { path: repo } })).join("\n") +
        "\n",
    );
    const r = await cli(
      ["batch", "submit", file, "--name", "traced", "--queue", queue, "--redis-url", redis.url],
      otel("pb-client"),
    );
    removeDir(file);
    expect(r.code, r.stderr).toBe(0);
    const jobs = await client.queue.getJobs(["waiting"]);
    expect(jobs).toHaveLength(2);
    const spans = await receiver.until((all) => {
      const mine = named(all, "patchbay.enqueue").filter((s) => s.attributes["messaging.destination.name"] === queue);
      return mine.length === 2 && mine;
    });
    for (const job of jobs) {
      const span = spans.find((s) => s.attributes["patchbay.job.id"] === job.id)!;
      expect(span).toMatchObject({ parentSpanId: "", kind: KIND.producer, resource: { "service.name": "pb-client" } });
      expect(job.data.trace).toEqual({ traceparent: `00-${span.traceId}-${span.spanId}-01` });
    }
    expect(new Set(spans.map((s) => s.traceId)).size).toBe(2);
  });

  it("OTEL_SDK_DISABLED=true beside an endpoint: the client and the worker export nothing, and the job carries no trace context", async () => {
    const off = await startOtlpReceiver();
    try {
      const env = { OTEL_EXPORTER_OTLP_ENDPOINT: off.url, OTEL_SDK_DISABLED: "true", OTEL_BSP_SCHEDULE_DELAY: "50" };
      const { queue, client, worker } = await cluster("off", env);
      const id = await enqueue(queue, "An untraced job: fix clamp.", env);
      expect((await client.waitForResult(id, { timeoutMs: 240_000 })).status).toBe("completed");
      expect((await Job.fromId<JobData>(client.queue, id))!.data.trace).toBeUndefined();
      // A worker with traces on flushes as it stops: once this one has exited, nothing more can come.
      await worker.stop("SIGTERM");
      expect(off.requests).toBe(0);
    } finally {
      await off.close();
    }
  });
});
