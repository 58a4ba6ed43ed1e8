// Attacks on what issue 25 added, each through the real parts: a dashboard with the HTTP API on a
// real Redis (no worker: the jobs stay waiting, which is what these attacks need), the client, and
// raw HTTP requests with the headers exactly as an attacker sends them (test/support/api.ts).
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { Job } from "bullmq";
import Fastify from "fastify";
import { loadConfig } from "../../src/core/config/config.js";
import { tracedAttempt } from "../../src/queue/attempt-trace.js";
import { runJob } from "../../src/job/run.js";
import { PatchbayClient, type JobData } from "../../src/queue/client.js";
import { keys } from "../../src/queue/keys.js";
import { emptyResult, parseJobSpec, type JobResult } from "../../src/core/spec/spec.js";
import { authPlugin } from "../../src/web/auth.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { streamTranscript } from "../../src/web/sse.js";
import { TranscriptHub } from "../../src/web/transcript-hub.js";
import { http, jsonBody, sse } from "../support/api.js";
import { cli, freePort, startRedis } from "../support/cluster.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const BIN = new URL("../../bin/patchbay.js", import.meta.url).pathname;
const QUEUE = "api-attacks";
const TOKEN = "api-attacks-dashboard-token-01";
const WRITE = "api-attacks-write-token-01234";
const READ = "api-attacks-read-token-0123456";

describe("attacks on the HTTP API and the client", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let dash: Dashboard;
  let client: PatchbayClient;

  beforeAll(async () => {
    redis = await startRedis();
    const config = loadConfig({
      ...process.env,
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: QUEUE,
      PATCHBAY_API_TOKENS: `ci:write:${WRITE}, viewer:read:${READ}`,
      PATCHBAY_API_REPO_ROOTS: dirname(CLAMP),
    });
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN, config });
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE, config });
  });

  afterAll(async () => {
    await client?.close();
    await dash?.close();
    await redis?.stop();
  });

  it("a jobId naming one of BullMQ's own keys is refused: it would write a hash over the queue's wait list and break every later enqueue", async () => {
    for (const name of Object.keys(client.queue.keys)) {
      if (!name) continue; // BullMQ's "" is the prefix itself
      const r = parseJobSpec({ task: "x", repo: { path: CLAMP }, jobId: name });
      expect(r.ok, `jobId ${name}`).toBe(false);
    }
    // on an empty queue, through the API with a write token
    const res = await http(dash.url, "POST", "/api/v1/jobs", {
      ...jsonBody({ task: "poison", repo: { path: CLAMP }, jobId: "wait" }),
      token: WRITE,
    });
    expect(res.status).toBe(400);
    expect(res.json.errors).toEqual([
      `jobId: must not be the name of one of BullMQ's own keys of the queue (got "wait")`,
    ]);
    expect(await client.redis.type(client.queue.toKey("wait"))).toBe("none");
    // the queue still takes jobs
    const ok = await http(dash.url, "POST", "/api/v1/jobs", {
      ...jsonBody({ task: "after", repo: { path: CLAMP } }),
      token: WRITE,
    });
    expect(ok.status).toBe(201);
    expect(await client.queue.getJobState(ok.json.id)).toBe("waiting");
  });

  it("the queue's own keys (meta, a hash; id, a counter; events, a stream) are no job: 404 on every route, and no cancel mark written", async () => {
    await client.enqueue({ task: "makes the keys", repo: { path: CLAMP } }); // BullMQ's id, meta and events exist now
    for (const id of ["meta", "id", "events"]) {
      for (const path of [
        `/api/v1/jobs/${id}`,
        `/api/v1/jobs/${id}/transcript`,
        `/api/v1/jobs/${id}/patch`,
        `/api/jobs/${id}`,
        `/api/jobs/${id}/patch`,
      ]) {
        const r = await http(dash.url, "GET", path, { token: TOKEN }); // reads need a token too; the dashboard's opens /api/jobs as well
        expect(r.status, `GET ${path}: ${r.text}`).toBe(404);
      }
      const api = await http(dash.url, "POST", `/api/v1/jobs/${id}/cancel`, { token: WRITE });
      expect(api.status, api.text).toBe(404);
      expect(api.json.detail).toBe(`no job ${id} in queue ${QUEUE}`);
      const own = await http(dash.url, "POST", `/api/jobs/${id}/cancel`, { token: TOKEN });
      expect(own.status, own.text).toBe(404);
      await expect(client.status(id)).rejects.toThrow(`no job ${id} in queue ${QUEUE}`);
      expect(await client.redis.exists(keys(QUEUE).cancel(id))).toBe(0);
    }
  });

  it("a Redis URL's password is never in a message: the CLI's `cannot reach Redis` and the configuration's errors show *** in its place (in the user part and in ?password=)", async () => {
    const port = await freePort(); // nothing listens there
    for (const url of [
      `redis://:hunter2-pw-0123@127.0.0.1:${port}`,
      `redis://app:hunter2-pw-0123@127.0.0.1:${port}/0`,
      `redis://127.0.0.1:${port}?password=hunter2-pw-0123`,
    ]) {
      const r = await cli(["status", "some-job", "--redis-url", url], {});
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain("cannot reach Redis at redis://");
      expect(r.stderr).toContain(`127.0.0.1:${port}`);
      expect(r.stderr + r.stdout).not.toContain("hunter2");
    }
    // a REDIS_URL of the wrong scheme is refused by the configuration, its password not shown either
    const bad = await cli(["status", "some-job"], { REDIS_URL: `http://:hunter2-pw-0123@127.0.0.1:${port}` });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("not a redis://, rediss://, redis+sentinel:// or redis+cluster:// URL");
    expect(bad.stderr).not.toContain("hunter2");
  });

  it("run --local refuses PATCHBAY_BACKEND=local without PATCHBAY_TEST_BACKENDS=1, as a worker does: the repo would run with no isolation", async () => {
    const out = mkdtempSync(join(tmpdir(), "pb-attacks-out-"));
    try {
      const env = {
        PATCHBAY_BACKEND: "local",
        PATCHBAY_TEST_BACKENDS: "0",
        ANTHROPIC_API_KEY: "test-key",
        ANTHROPIC_BASE_URL: "http://127.0.0.1:9",
      };
      const r = await cli(["run", "--local", "--repo", CLAMP, "--task", "x", "--out", out, "--force"], env);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain("PATCHBAY_BACKEND=local runs repos with no isolation");
      expect(r.stderr).not.toContain("running here");
      expect(readdirSync(out)).toEqual([]); // no job ran
      // the library's runJob on the same configuration: refused before any event
      const events: unknown[] = [];
      const config = loadConfig({ ...process.env, ...env });
      await expect(
        runJob({ task: "x", repo: { path: CLAMP } }, { config, onEvent: (e) => events.push(e) }),
      ).rejects.toThrow("PATCHBAY_BACKEND=local runs repos with no isolation: a job run outside a worker refuses it");
      expect(events).toEqual([]);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it("a live transcript's client that never reads is let go once its socket stalls: its slot of the cap is not held for ever", async () => {
    const key = `${keys(QUEUE).events("stall")}`;
    const big = "x".repeat(64 * 1024);
    for (let i = 0; i < 400; i++)
      await client.redis.xadd(
        key,
        "*",
        "e",
        JSON.stringify({ type: "model_text", text: big, ts: "t", jobId: "stall", attempt: 1 }),
      ); // 25 MiB: more than the sockets' buffers
    const hub = new TranscriptHub(client.redis, "api-attacks-hub");
    let served: Promise<void> | undefined;
    const server = createServer((req, res) => {
      served = streamTranscript(
        { redis: client.redis, hub, streamKey: key, state: async () => "active", stallMs: 200 },
        req,
        res,
        "0",
      );
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const sock = connect((server.address() as AddressInfo).port, "127.0.0.1");
    try {
      sock.pause(); // never reads: the kernel's buffers fill, then the server's write waits for a drain that never comes
      sock.write("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      const closed = new Promise((r) => sock.once("close", r));
      while (!served) await new Promise((r) => setImmediate(r));
      await served; // before: it never returned (the route's slot held for ever)
      sock.resume(); // now read what was sent: the server ended the connection
      await closed;
    } finally {
      sock.destroy();
      server.close();
      await hub.close();
    }
  });

  it("fastify's own refusals of a URL (a parameter over its length, a bad %-escape) echo no URL and are problem+json on the API's paths", async () => {
    const long = `${"<b>".repeat(200)}`;
    for (const [path, status] of [
      [`/api/v1/jobs/${long}`, 414],
      [`/api/v1/jobs/%ZZ${long}`, 400],
      [`/api/jobs/${long}`, 414],
      [`/jobs/%ZZ${long}`, 400],
    ] as const) {
      const r = await http(dash.url, "GET", path);
      expect(r.status, path).toBe(status);
      expect(r.text).not.toContain("<b>");
      expect(r.headers["x-content-type-options"]).toBe("nosniff");
      if (path.startsWith("/api/v1/")) expect(r.headers["content-type"]).toMatch(/^application\/problem\+json/);
    }
  });

  it("no write without a write token, whatever the path's spelling, the method or the token; API tokens open none of the dashboard's own routes; no origin but a listed one reads", async () => {
    const spec = jsonBody({ task: "spelled", repo: { path: CLAMP } });
    const before = await client.queue.getJobCounts();
    const tries: [string, string, Parameters<typeof http>[3]][] = [];
    for (const path of [
      "/api/v1/jobs",
      "/api/v1/jobs/",
      "//api/v1/jobs",
      "/api/v1//jobs",
      "/API/V1/jobs",
      "/api%2Fv1/jobs",
      "/api/%761/jobs",
      "/%61pi/v1/jobs",
      "/api/v1/%6aobs",
      "/api/v1/jobs;x",
      "/api/v1/./jobs",
      "/api/v1/x/../jobs",
    ]) {
      tries.push(
        ["POST", path, spec],
        ["POST", path, { ...spec, token: READ }],
        ["POST", path, { ...spec, headers: { ...spec.headers, "x-http-method-override": "GET" } }],
      );
    }
    tries.push(["POST", "/api/v1/batches", { body: "{}\n", headers: { "content-type": "text/plain" }, token: READ }]);
    for (const t of [WRITE, READ]) {
      tries.push(
        ["POST", "/api/jobs/1/cancel", { token: t }],
        ["POST", "/api/jobs/1/retry", { token: t }],
        ["PUT", `/queues/api/queues/${QUEUE}/pause`, { token: t }],
        ["PUT", "/queues/api/queues/pause", { token: t }],
        ["POST", `/queues/api/queues/${QUEUE}/clean/waiting`, { token: t }],
      );
    }
    for (const [method, path, opts] of tries) {
      const r = await http(dash.url, method, path, opts);
      expect(
        [401, 403, 404],
        `${method} ${path} ${JSON.stringify(opts?.token ?? "")}: ${r.status} ${r.text.slice(0, 200)}`,
      ).toContain(r.status);
    }
    expect(await client.queue.getJobCounts()).toEqual(before);
    expect(await client.queue.isPaused()).toBe(false);
    // CORS: nothing listed here, so no origin (null included) gets Access-Control-Allow-Origin; a preflight is refused
    for (const origin of ["null", "https://evil.example", `http://127.0.0.1:${new URL(dash.url).port}`]) {
      const r = await http(dash.url, "GET", "/api/v1/jobs", { headers: { origin } });
      expect(r.headers["access-control-allow-origin"]).toBeUndefined();
      expect(r.headers["access-control-allow-credentials"]).toBeUndefined();
      expect(
        (
          await http(dash.url, "OPTIONS", "/api/v1/jobs", {
            headers: { origin, "access-control-request-method": "POST" },
          })
        ).status,
      ).toBe(403);
    }
    // DNS rebinding: another name for loopback is refused before any route, the API's too
    for (const host of ["evil.example", "127.0.0.1.evil.example", "localhost.", "evil.example:80"]) {
      expect((await http(dash.url, "GET", "/api/v1/jobs", { headers: { host } })).status).toBe(403);
      expect(
        (await http(dash.url, "POST", "/api/v1/jobs", { ...spec, token: WRITE, headers: { ...spec.headers, host } }))
          .status,
      ).toBe(403);
    }
  });

  it("a hostile trace context in a job's data (huge, malformed, of the wrong types) is no parent and no link, and the attempt runs", async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
    trace.setGlobalTracerProvider(provider);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const hostile: unknown[] = [
      "00-not-a-traceparent",
      [valid],
      { traceparent: `${valid}${"0".repeat(100_000)}`, tracestate: "k=v", attempt: { traceparent: valid } },
      { traceparent: "00-00000000000000000000000000000000-0000000000000000-01", attempt: 42 },
      { traceparent: 7, tracestate: ["x"], attempt: `${valid} ${"x".repeat(1 << 20)}` },
      null,
    ];
    try {
      for (const [i, t] of hostile.entries()) {
        const id = await client.enqueue({ task: `traced ${i}`, repo: { path: CLAMP } });
        const job = (await Job.fromId<JobData, JobResult>(client.queue, id))!;
        await job.updateData({ ...job.data, trace: t as JobData["trace"] });
        exporter.reset();
        const r = await tracedAttempt(job, 1, "w-attacks", async () => emptyResult("completed", ""));
        expect(r.status).toBe("completed");
        const [span] = exporter.getFinishedSpans();
        expect(span!.name).toBe("patchbay.attempt");
        expect(span!.parentSpanContext, `trace ${i}`).toBeUndefined(); // a trace of its own
        expect(span!.spanContext().traceId).not.toBe(valid.split("-")[1]);
        expect(span!.links).toEqual([]);
        expect(Object.keys(span!.attributes).sort()).toEqual(
          [
            "messaging.destination.name",
            "messaging.operation.type",
            "messaging.system",
            "patchbay.attempt",
            "patchbay.job.id",
            "patchbay.status",
            "patchbay.total_ms",
            "patchbay.turns",
            "patchbay.cost_usd",
            "patchbay.files_changed",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "patchbay.worker.id",
          ].sort(),
        );
        const after = (await Job.fromId<JobData, JobResult>(client.queue, id))!.data.trace as { attempt?: string };
        expect(after.attempt).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/); // the next attempt links to this one
      }
    } finally {
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    }
  });

  it("a forged Last-Event-ID or ?after= that Redis cannot read (past 64 bits) starts from the beginning, as any other bad id does, and ends", async () => {
    const id = await client.enqueue({ task: "to cancel, for its events", repo: { path: CLAMP } });
    expect(await client.cancel(id)).toBe("cancelled"); // finished at once, with job_started and job_finished
    for (const headers of [
      { "last-event-id": `${"9".repeat(30)}-0` },
      { "last-event-id": "18446744073709551616-0" },
      {},
    ] as Record<string, string>[]) {
      const r = await sse(dash.url, `/api/v1/jobs/${id}/events`, { ...headers, authorization: `Bearer ${READ}` });
      expect(r.status).toBe(200);
      const events = r.messages.filter((m) => !m.event).flatMap((m) => JSON.parse(m.data) as { type: string }[]);
      expect(
        events.map((e) => e.type),
        JSON.stringify(headers),
      ).toEqual(["job_started", "job_finished"]);
      expect(r.messages.at(-1)?.event).toBe("end");
    }
    const after = await sse(dash.url, `/api/v1/jobs/${id}/events?after=${"1".repeat(25)}-1`, {
      authorization: `Bearer ${READ}`,
    });
    expect(after.messages.at(-1)?.event).toBe("end");
  });

  it("cancel of a waiting job is idempotent, and a batch's job cancelled alone counts in its batch at once", async () => {
    const line = JSON.stringify({ task: "batch line", repo: { path: CLAMP } });
    const sub = await http(dash.url, "POST", "/api/v1/batches?name=attacks-cancel", {
      body: `${line}\n${line.replace("line", "line 2")}\n`,
      headers: { "content-type": "application/x-ndjson" },
      token: WRITE,
    });
    expect(sub.status).toBe(201);
    const [first] = sub.json.ids as string[];
    const once = await http(dash.url, "POST", `/api/v1/jobs/${first}/cancel`, { token: WRITE });
    expect(once.json).toEqual({ id: first, result: "cancelled" });
    const twice = await http(dash.url, "POST", `/api/v1/jobs/${first}/cancel`, { token: WRITE });
    expect(twice.json).toEqual({ id: first, result: "finished" });
    const job = await http(dash.url, "GET", `/api/v1/jobs/${first}`, { token: READ });
    expect(job.json).toMatchObject({ state: "completed", status: "cancelled", attemptsMade: 0 });
    const batch = await http(dash.url, "GET", "/api/v1/batches/attacks-cancel", { token: READ });
    expect(batch.json).toMatchObject({ total: 2, done: 1, waiting: 1, counts: { cancelled: 1 } });
    const transcript = await http(dash.url, "GET", `/api/v1/jobs/${first}/transcript`, { token: READ });
    expect((transcript.json as { type: string }[]).map((e) => e.type)).toEqual(["job_started", "job_finished"]);
  });

  it("run's and batch run's default output directories (./patchbay-out, in the repo being fixed) and view's page are not written through a symbolic link the repo planted", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "pb-attacks-cwd-"));
    try {
      const victim = join(cwd, "victim.txt");
      const outside = join(cwd, "outside");
      mkdirSync(outside);
      writeFileSync(victim, "precious\n");
      mkdirSync(join(cwd, "patchbay-out", QUEUE, "pinned-x"), { recursive: true });
      symlinkSync(victim, join(cwd, "patchbay-out", QUEUE, "pinned-x", "patch.diff"));
      symlinkSync(victim, join(cwd, "patchbay-out", QUEUE, "pinned-x", "transcript.html"));
      symlinkSync(outside, join(cwd, "patchbay-out", QUEUE, "pinned-y"));
      const env = { REDIS_URL: redis.url, PATCHBAY_QUEUE: QUEUE };
      for (const id of ["pinned-x", "pinned-y"]) {
        const flags = ["--task", "T", "--repo", CLAMP, "--job-id", id];
        expect((await cliIn(cwd, ["enqueue", ...flags], env)).code).toBe(0);
        expect((await cliIn(cwd, ["cancel", id], env)).code).toBe(0); // finished at once: run finds its result
        const r = await cliIn(cwd, ["run", ...flags], env);
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr).toContain("symbolic link");
      }
      // batch run's default ./patchbay-out/<batch>/ (its id a hash of the file's jobs: a repo shipping tasks.jsonl knows it)
      writeFileSync(
        join(cwd, "tasks.jsonl"),
        `${JSON.stringify({ task: "batch in a hostile repo", repo: { path: CLAMP } })}\n`,
      );
      const sub = await cliIn(cwd, ["batch", "submit", "tasks.jsonl", "--json"], env);
      const batchId = JSON.parse(sub.stdout).batchId as string;
      expect(await client.cancel(`${batchId}-L1`)).toBe("cancelled"); // finished at once: batch run writes at once
      mkdirSync(join(cwd, "patchbay-out", batchId, `${batchId}-L1`), { recursive: true });
      symlinkSync(victim, join(cwd, "patchbay-out", batchId, `${batchId}-L1`, "patch.diff"));
      const run = await cliIn(cwd, ["batch", "run", "tasks.jsonl"], env);
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toContain("symbolic link");
      expect(readFileSync(victim, "utf8")).toBe("precious\n");
      expect(readdirSync(outside)).toEqual([]);
      // view writes transcript.html beside the transcript: a link planted there is not written through
      const dir = join(cwd, "patchbay-out", QUEUE, "pinned-z");
      mkdirSync(dir);
      writeFileSync(
        join(dir, "transcript.jsonl"),
        `${JSON.stringify({ type: "job_started", ts: "2026-01-01T00:00:00.000Z", jobId: "pinned-z", attempt: 1, spec: { task: "t", repo: { path: CLAMP } } })}\n`,
      );
      symlinkSync(victim, join(dir, "transcript.html"));
      const view = await cliIn(cwd, ["view", join(dir, "transcript.jsonl")], env);
      expect(view.code, view.stderr).toBe(1);
      expect(view.stderr).toContain("symbolic link");
      expect(readFileSync(victim, "utf8")).toBe("precious\n");
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  it("off loopback, an API token (read or write) opens only /api/v1: not the pages, bull-board, /metrics or the dashboard's own /api", async () => {
    const app = Fastify({ logger: false });
    await app.register(authPlugin, {
      token: TOKEN,
      loopback: false,
      api: {
        tokens: [
          { name: "ci", scope: "write", token: WRITE },
          { name: "viewer", scope: "read", token: READ },
        ],
        corsOrigins: [],
      },
    });
    await app.register(async (child) => {
      for (const path of [
        "/jobs",
        "/queues",
        "/queues/api/queues",
        "/metrics",
        "/api/jobs",
        "/api/v1/jobs",
        "/api/openapi.json",
      ])
        child.get(path, async () => ({ ok: true }));
    });
    try {
      for (const t of [WRITE, READ]) {
        const get = (url: string) =>
          app.inject({ method: "GET", url, headers: { host: "dash.example", authorization: `Bearer ${t}` } });
        for (const path of ["/jobs", "/queues", "/queues/api/queues", "/metrics", "/api/jobs"])
          expect((await get(path)).statusCode, `${path} with ${t}`).toBe(401);
        for (const path of ["/api/v1/jobs", "/api/openapi.json"])
          expect((await get(path)).statusCode, `${path} with ${t}`).toBe(200);
      }
      expect(
        (await app.inject({ method: "GET", url: "/api/v1/jobs", headers: { host: "dash.example" } })).statusCode,
      ).toBe(401); // no token off loopback
    } finally {
      await app.close();
    }
  });

  it("with PATCHBAY_API_REPO_ROOTS, the API takes a local repo only under them: not /proc/self, /root or a link out, and it does not tell which paths exist", async () => {
    expect(() => loadConfig({ PATCHBAY_API_REPO_ROOTS: "relative/dir" })).toThrow(
      /PATCHBAY_API_REPO_ROOTS: each must be an absolute directory/,
    );
    const root = mkdtempSync(join(tmpdir(), "pb-attacks-roots-"));
    const queueName = "api-attacks-roots";
    const config = loadConfig({
      ...process.env,
      REDIS_URL: redis.url,
      PATCHBAY_API_TOKENS: `ci:write:${WRITE}`,
      PATCHBAY_API_REPO_ROOTS: ` ${root} `,
    });
    const d = await startDashboard({ port: 0, redisUrl: redis.url, queueName, token: TOKEN, config });
    const c = new PatchbayClient({ redisUrl: redis.url, queueName, config });
    try {
      cpSync(CLAMP, join(root, "clamp"), { recursive: true });
      symlinkSync("/etc", join(root, "escape"));
      const refusal = `repo.path: the HTTP API takes a local repo only under PATCHBAY_API_REPO_ROOTS (${root}); send { "git": URL } for another`;
      for (const repo of [
        { path: "/proc/self" },
        { path: "/root" },
        { path: "/no/such/dir" },
        { path: join(root, "escape") },
        { path: `${root}/../${root.split("/").at(-1)}-x` },
      ]) {
        const r = await http(d.url, "POST", "/api/v1/jobs", { ...jsonBody({ task: "outside", repo }), token: WRITE });
        expect(r.status, JSON.stringify(repo)).toBe(400);
        expect(r.json.errors).toEqual([refusal]); // the same words whether the path exists or not
      }
      const archive = await http(d.url, "POST", "/api/v1/jobs", {
        ...jsonBody({ task: "outside", repo: { archive: "/proc/self/environ" } }),
        token: WRITE,
      });
      expect(archive.json.errors).toEqual([refusal.replace("repo.path", "repo.archive")]);
      const batch = await http(d.url, "POST", "/api/v1/batches", {
        body: `${JSON.stringify({ task: "in", repo: { path: join(root, "clamp") } })}\n${JSON.stringify({ task: "out", repo: { path: "/etc" } })}\n`,
        headers: { "content-type": "application/x-ndjson" },
        token: WRITE,
      });
      expect(batch.status).toBe(400);
      expect(batch.json.errors).toEqual([`body:2: invalid JobSpec: ${refusal}`]);
      expect(Object.values(await c.queue.getJobCounts()).reduce((a, b) => a + b, 0)).toBe(0); // nothing enqueued
      const inside = await http(d.url, "POST", "/api/v1/jobs", {
        ...jsonBody({ task: "inside", repo: { path: join(root, "clamp") } }),
        token: WRITE,
      });
      expect(inside.status, inside.text).toBe(201);
    } finally {
      await c.close();
      await d.close();
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("a spec naming the workers' egress credentials is refused by the API (a job and a batch's line) before Redis", async () => {
    const queueName = "api-attacks-credentials";
    const config = loadConfig({ ...process.env, REDIS_URL: redis.url, PATCHBAY_API_TOKENS: `ci:write:${WRITE}` });
    const d = await startDashboard({ port: 0, redisUrl: redis.url, queueName, token: TOKEN, config });
    const c = new PatchbayClient({ redisUrl: redis.url, queueName, config });
    try {
      const spec = {
        task: "fetch a private package",
        repo: { git: "https://github.com/acme/r.git" },
        setup: ["npm ci"],
        network: { setup: { allow: ["registry.example.org"], credentials: ["npm-private"] } },
      };
      const refusal = `network.setup.credentials: the HTTP API takes no job that names the workers' egress credentials; the operator's own client (the CLI, the library) enqueues those`;
      const job = await http(d.url, "POST", "/api/v1/jobs", { ...jsonBody(spec), token: WRITE });
      expect(job.status, job.text).toBe(400);
      expect(job.json.errors).toEqual([refusal]);
      const batch = await http(d.url, "POST", "/api/v1/batches", {
        body: `${JSON.stringify({ ...spec, network: { setup: { allow: ["registry.example.org"] } } })}\n${JSON.stringify(spec)}\n`,
        headers: { "content-type": "application/x-ndjson" },
        token: WRITE,
      });
      expect(batch.status, batch.text).toBe(400);
      expect(batch.json.errors).toEqual([`body:2: invalid JobSpec: ${refusal}`]);
      expect(Object.values(await c.queue.getJobCounts()).reduce((a, b) => a + b, 0)).toBe(0); // nothing enqueued
    } finally {
      await c.close();
      await d.close();
    }
  });

  it("without PATCHBAY_API_REPO_ROOTS, the API takes no local repo at all (a git URL still), in one message", async () => {
    const queueName = "api-attacks-no-roots";
    const config = loadConfig({ ...process.env, REDIS_URL: redis.url, PATCHBAY_API_TOKENS: `ci:write:${WRITE}` });
    const d = await startDashboard({ port: 0, redisUrl: redis.url, queueName, token: TOKEN, config });
    try {
      const refusal = `the HTTP API takes a local repo only under PATCHBAY_API_REPO_ROOTS, which this dashboard does not set; send { "git": URL }, or set it to the directories scripts may name`;
      for (const repo of [{ path: CLAMP }, { path: "/root" }, { path: "/no/such/dir" }]) {
        const r = await http(d.url, "POST", "/api/v1/jobs", { ...jsonBody({ task: "local", repo }), token: TOKEN }); // even the dashboard's own token
        expect(r.status, JSON.stringify(repo)).toBe(400);
        expect(r.json.errors).toEqual([`repo.path: ${refusal}`]);
      }
      const git = await http(d.url, "POST", "/api/v1/jobs", {
        ...jsonBody({ task: "remote", repo: { git: "https://github.com/acme/r.git" } }),
        token: WRITE,
      }); // a forge's host (PATCHBAY_API_GIT_HOSTS' default)
      expect(git.status, git.text).toBe(201);
    } finally {
      await d.close();
    }
  });
});

/** The CLI in a working directory of the test's choosing. */
function cliIn(
  cwd: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d) => (stdout += d));
    p.stderr.on("data", (d) => (stderr += d));
    p.on("error", reject);
    p.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}
