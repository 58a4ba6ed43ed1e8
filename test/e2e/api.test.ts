// The HTTP API (/api/v1) on a real dashboard, with a real Redis and a worker process on the local
// backend (test/support/backend.ts) running jobs against the scripted model: auth by scope, CORS,
// problem+json in the CLI's words, body limits, idempotent jobIds, a job's life (the SSE stream
// resumed from Last-Event-ID, the transcript, the patch), the list and batches. Every response
// a test reads is held against the OpenAPI document the server serves (test/support/api.ts).
//
// Backend: local (a worker process: `LOCAL_WORKER_ENV`; the HTTP API and its examples are the
// subject).
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/core/config/config.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { keys } from "../../src/queue/keys.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { expectDocumented, fetchDocument, http, jsonBody, sse, type ApiDocument, type Res } from "../support/api.js";
import { LOCAL_WORKER_ENV } from "../support/backend.js";
import { cli, removeDir, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { startFakeAnthropic, type FakeAnthropic } from "../support/fake-anthropic.js";
import { byTurn, clampScript } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
/** Where the API may take local repos from: the examples and the test's own copies. */
const ROOTS = `${dirname(CLAMP)},${tmpdir()}`;
const MISSING = join(tmpdir(), "pb-api-no-such-repo");
const QUEUE = "api-test";
const TOKEN = "api-test-dashboard-token-0123";
const WRITE = "api-test-write-token-0123456";
const READ = "api-test-read-token-01234567";
const ORIGIN = "https://app.example";
const PROBLEM = "application/problem+json";

describe("the HTTP API", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let worker: WorkerProc;
  let dash: Dashboard;
  let client: PatchbayClient;
  let doc: ApiDocument;
  let env: Record<string, string>;

  /** A request whose response must be the document's. */
  const api = async (method: string, path: string, opts: Parameters<typeof http>[3] = {}): Promise<Res> => {
    const r = await http(dash.url, method, path, opts);
    expectDocumented(doc, r);
    return r;
  };
  /** Events of an SSE stream's messages, and the `end`. */
  const eventsOf = (messages: { event?: string; data: string }[]) =>
    messages.filter((m) => !m.event).flatMap((m) => JSON.parse(m.data) as { type: string }[]);

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeAnthropic(byTurn(clampScript()));
    env = {
      ...LOCAL_WORKER_ENV,
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: QUEUE,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
    };
    worker = startWorkerProc({ ...env, PATCHBAY_CONCURRENCY: "2", PATCHBAY_LOCAL_REPO_ROOTS: ROOTS }); // the API's jobs read a local repo only under the worker's roots
    await worker.waitFor(new RegExp(`ready: queue ${QUEUE}`));
    const config = loadConfig({
      ...process.env,
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: QUEUE,
      PATCHBAY_API_TOKENS: `ci:write:${WRITE}, viewer:read:${READ}`,
      PATCHBAY_API_CORS_ORIGINS: ORIGIN,
      PATCHBAY_API_REPO_ROOTS: ROOTS,
    });
    // tokenless reads opened (as `patchbay dashboard --loopback-reads`): a local script reads without a token
    dash = await startDashboard({
      port: 0,
      redisUrl: redis.url,
      queueName: QUEUE,
      token: TOKEN,
      config,
      loopbackReads: true,
    });
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    doc = await fetchDocument(dash.url);
  });

  afterAll(async () => {
    await client?.close();
    await dash?.close();
    await worker?.stop("SIGTERM");
    await fake?.close();
    await redis?.stop();
  });

  it("writes need a write token even on loopback; reads need none where loopback reads are opened, unless proxied; a read token cannot write; a wrong token is refused", async () => {
    const spec = (task: string) => jsonBody({ task, repo: { path: CLAMP } });
    const counts = await client.queue.getJobCounts();
    const none = await api("POST", "/api/v1/jobs", spec("no token"));
    expect(none.status).toBe(401);
    expect(none.headers["content-type"]).toMatch(PROBLEM);
    expect(none.headers["www-authenticate"]).toBe("Bearer");
    expect(none.json).toMatchObject({ type: "about:blank", title: "Unauthorized", status: 401 });
    expect(none.json.detail).toMatch(/Authorization: Bearer .*PATCHBAY_API_TOKENS/);
    const readOnly = await api("POST", "/api/v1/jobs", { ...spec("read token"), token: READ });
    expect(readOnly.status).toBe(403);
    expect(readOnly.json.detail).toBe('API token "viewer" has scope read: this needs a token of scope write');
    expect(await client.queue.getJobCounts()).toEqual(counts); // nothing was enqueued

    expect((await api("GET", "/api/v1/jobs")).status).toBe(200);
    const proxied = await api("GET", "/api/v1/jobs", { headers: { "x-forwarded-for": "203.0.113.7" } });
    expect(proxied.status).toBe(401);
    expect(proxied.headers["www-authenticate"]).toBe("Bearer");
    expect((await api("GET", "/api/v1/jobs", { token: READ })).status).toBe(200);
    expect((await api("GET", "/api/v1/jobs", { token: "wrong-token-wrong-token" })).status).toBe(401);

    const byApiToken = await api("POST", "/api/v1/jobs", { ...spec("Fix clamp (write token)."), token: WRITE });
    expect(byApiToken.status).toBe(201);
    expect(byApiToken.json).toEqual({ id: expect.any(String), queue: QUEUE });
    expect(byApiToken.headers.location).toBe(`/api/v1/jobs/${byApiToken.json.id}`);
    expect((await api("POST", "/api/v1/jobs", { ...spec("Fix clamp (dashboard token)."), token: TOKEN })).status).toBe(
      201,
    );

    // the dashboard's own rules stand: an API token is not its token, a cross-site post with its cookie is refused
    expect((await http(dash.url, "POST", `/api/jobs/${byApiToken.json.id}/cancel`, { token: WRITE })).status).toBe(401);
    const cookie = `patchbay_dashboard=${encodeURIComponent(TOKEN)}`;
    const crossSite = await api("POST", `/api/v1/jobs/${byApiToken.json.id}/cancel`, {
      headers: { cookie, origin: "http://evil.example" },
    });
    expect(crossSite.status).toBe(403);
    expect(crossSite.json.detail).toMatch(/^cross-origin request refused: /);
    // and the Host check (DNS rebinding) covers the API too
    expect((await http(dash.url, "GET", "/api/v1/jobs", { headers: { host: "attacker.example" } })).status).toBe(403);
  });

  it("CORS: only the configured origins, and a cross-origin write only with a Bearer token", async () => {
    const pre = await http(dash.url, "OPTIONS", "/api/v1/jobs", {
      headers: {
        origin: ORIGIN,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
      },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers["access-control-allow-origin"]).toBe(ORIGIN);
    expect(String(pre.headers["access-control-allow-headers"])).toMatch(/Authorization/);
    const other = await http(dash.url, "OPTIONS", "/api/v1/jobs", {
      headers: { origin: "https://other.example", "access-control-request-method": "POST" },
    });
    expect(other.status).toBe(403);
    expect(other.headers["access-control-allow-origin"]).toBeUndefined();
    expect(
      (await api("GET", "/api/v1/jobs", { headers: { origin: "https://other.example" } })).headers[
        "access-control-allow-origin"
      ],
    ).toBeUndefined();

    const fromApp = await api("POST", "/api/v1/jobs", {
      ...jsonBody({ task: "Fix clamp (from the app).", repo: { path: CLAMP } }),
      token: WRITE,
      headers: { origin: ORIGIN, "content-type": "application/json" },
    });
    expect(fromApp.status).toBe(201);
    expect(fromApp.headers["access-control-allow-origin"]).toBe(ORIGIN);
    const withCookie = await api("POST", `/api/v1/jobs/${fromApp.json.id}/cancel`, {
      headers: { origin: ORIGIN, cookie: `patchbay_dashboard=${encodeURIComponent(TOKEN)}` },
    });
    expect(withCookie.status).toBe(403);
  });

  it("a bad spec is a problem whose errors name each field, in the CLI's words", async () => {
    const bad = { repo: { path: CLAMP }, budget: { usd: -1 }, verfiy: "python3 -m unittest" };
    const r = await api("POST", "/api/v1/jobs", { ...jsonBody(bad), token: WRITE });
    expect(r.status).toBe(400);
    expect(r.headers["content-type"]).toMatch(PROBLEM);
    expect(r.json.type).toBe("urn:patchbay:problem:spec");
    expect(r.json.errors).toEqual(
      expect.arrayContaining([
        "task: required",
        "budget.usd: must be a positive number (got -1)",
        'verfiy: unknown key (did you mean "verify"?)',
      ]),
    );
    expect(r.json.errors).toHaveLength(3);
    const dir = mkdtempSync(join(tmpdir(), "pb-api-"));
    writeFileSync(join(dir, "tasks.jsonl"), JSON.stringify(bad));
    const c = await cli(["enqueue", "--batch", join(dir, "tasks.jsonl")], env);
    expect(c.code).toBe(2);
    expect(c.stderr).toContain(`tasks.jsonl:1: ${r.json.detail}`); // the same message, word for word
    removeDir(dir);

    const missing = await api("POST", "/api/v1/jobs", {
      ...jsonBody({ task: "t", repo: { path: MISSING } }),
      token: WRITE,
    });
    expect(missing.json.errors).toEqual([`repo.path: ${MISSING} does not exist`]);
    const notJson = await api("POST", "/api/v1/jobs", {
      body: "{not json",
      headers: { "content-type": "application/json" },
      token: WRITE,
    });
    expect(notJson.status).toBe(400);
    expect(notJson.headers["content-type"]).toMatch(PROBLEM);
  });

  it("bodies over the limit are a 413 problem: 1 MiB for a job, more for a batch", async () => {
    const big = JSON.stringify({ task: "x".repeat(1024 * 1024), repo: { path: CLAMP } });
    const r = await api("POST", "/api/v1/jobs", {
      body: big,
      headers: { "content-type": "application/json" },
      token: WRITE,
    });
    expect(r.status).toBe(413);
    expect(r.json).toMatchObject({
      status: 413,
      title: "Content Too Large",
      detail: "the request body is over this route's limit of 1048576 bytes",
    });
    // 2 MiB of blank lines and one bad line: read whole (its line named), not refused for its size
    const batch = `${"\n".repeat(2 * 1024 * 1024)}{"task": "no repo"}\n`;
    const b = await api("POST", "/api/v1/batches", {
      body: batch,
      headers: { "content-type": "application/x-ndjson" },
      token: WRITE,
    });
    expect(b.status).toBe(400);
    expect(b.json.errors).toEqual([`body:${2 * 1024 * 1024 + 1}: invalid JobSpec: repo: required`]);
    const huge = await api("POST", "/api/v1/batches", {
      body: "\n".repeat(9 * 1024 * 1024),
      headers: { "content-type": "application/x-ndjson" },
      token: WRITE,
    });
    expect(huge.status).toBe(413);
  });

  it("a jobId makes enqueueing idempotent: the same spec 200 with the same id, another spec 409", async () => {
    const spec = { task: "Fix clamp (idempotent).", repo: { path: CLAMP }, jobId: "api-idem-1" };
    const first = await api("POST", "/api/v1/jobs", { ...jsonBody(spec), token: WRITE });
    expect([first.status, first.json.id]).toEqual([201, "api-idem-1"]);
    const again = await api("POST", "/api/v1/jobs", { ...jsonBody(spec), token: WRITE });
    expect([again.status, again.json.id]).toEqual([200, "api-idem-1"]);
    const other = await api("POST", "/api/v1/jobs", { ...jsonBody({ ...spec, task: "Another task." }), token: WRITE });
    expect(other.status).toBe(409);
    expect(other.json).toMatchObject({
      type: "urn:patchbay:problem:conflict",
      detail: `job api-idem-1 already exists in queue ${QUEUE} with a different spec (patchbay status api-idem-1); use another --job-id`,
    });
  });

  it("a job's life: the live events (resumed from Last-Event-ID), status and result, transcript, a patch that applies", async () => {
    const created = await api("POST", "/api/v1/jobs", {
      ...jsonBody({ task: "Fix clamp (life).", repo: { path: CLAMP }, verify: "python3 -m unittest -q" }),
      token: WRITE,
    });
    const id = created.json.id as string;
    const live = await sse(dash.url, `/api/v1/jobs/${id}/events`);
    expect(live.status).toBe(200);
    expect(live.type).toMatch(/^text\/event-stream/);
    expect(live.messages.at(-1)).toMatchObject({ event: "end", data: JSON.stringify({ state: "completed" }) });
    const all = eventsOf(live.messages);
    expect(all[0]!.type).toBe("job_started");
    expect(all.at(-1)).toMatchObject({ type: "job_finished", status: "completed" });
    // each message's id is the stream id of its last event; resumed from one, exactly the rest
    // (by the header and by ?after=), whatever the messages' sizes were
    const streamIds = (await client.redis.xrange(keys(QUEUE).events(id), "-", "+")).map(([sid]) => sid);
    expect(streamIds).toHaveLength(all.length);
    for (const m of live.messages.filter((x) => !x.event)) expect(streamIds).toContain(m.id);
    const resumed = await sse(dash.url, `/api/v1/jobs/${id}/events`, { "last-event-id": streamIds[2]! });
    expect(eventsOf(resumed.messages)).toEqual(all.slice(3));
    expect(resumed.messages.at(-1)?.event).toBe("end");
    expect(eventsOf((await sse(dash.url, `/api/v1/jobs/${id}/events?after=${streamIds[5]}`)).messages)).toEqual(
      all.slice(6),
    );

    const job = await api("GET", `/api/v1/jobs/${id}`);
    expect(job.json).toMatchObject({
      id,
      state: "completed",
      status: "completed",
      result: { status: "completed", verify: { exitCode: 0 }, filesChanged: ["clamp.py"] },
    });
    const transcript = await api("GET", `/api/v1/jobs/${id}/transcript`);
    expect(transcript.json.map((e: { type: string }) => e.type)).toEqual(all.map((e) => e.type));
    const ndjson = await api("GET", `/api/v1/jobs/${id}/transcript`, { headers: { accept: "application/x-ndjson" } });
    expect(ndjson.headers["content-type"]).toMatch(/^application\/x-ndjson/);
    expect(
      ndjson.text
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l)),
    ).toEqual(transcript.json);
    expect((await api("GET", `/api/v1/jobs/${id}/transcript?format=xml`)).status).toBe(400);

    const patch = await api("GET", `/api/v1/jobs/${id}/patch`);
    expect(patch.headers["content-type"]).toMatch(/^text\/x-diff/);
    const copy = mkdtempSync(join(tmpdir(), "pb-api-"));
    cpSync(CLAMP, copy, { recursive: true });
    writeFileSync(join(copy, "fix.diff"), patch.text);
    execFileSync("git", ["apply", "fix.diff"], { cwd: copy });
    expect(
      execFileSync("python3", ["-m", "unittest", "-q"], {
        cwd: copy,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      }),
    ).toBe("");
    removeDir(copy);

    expect((await api("POST", `/api/v1/jobs/${id}/cancel`, { token: WRITE })).json).toEqual({ id, result: "finished" });
  });

  it("an unknown job is a 404 problem on every route, in the CLI's words", async () => {
    for (const [method, path] of [
      ["GET", "/api/v1/jobs/nope"],
      ["GET", "/api/v1/jobs/nope/patch"],
      ["GET", "/api/v1/jobs/nope/transcript"],
      ["GET", "/api/v1/jobs/nope/events"],
      ["POST", "/api/v1/jobs/nope/cancel"],
    ] as const) {
      const r = await api(method, path, { token: WRITE });
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.json).toMatchObject({ type: "urn:patchbay:problem:not-found", detail: `no job nope in queue ${QUEUE}` });
    }
    const route = await http(dash.url, "GET", "/api/v1/nothing-here");
    expect([route.status, route.headers["content-type"]]).toEqual([404, expect.stringContaining(PROBLEM)]);
  });

  it("the list comes in pages with a cursor; a bad query is a 400 problem", async () => {
    const first = await api("GET", "/api/v1/jobs?limit=1");
    expect(first.json.jobs).toHaveLength(1);
    expect(first.json.next).toEqual(expect.any(String));
    const second = await api("GET", `/api/v1/jobs?limit=1&cursor=${first.json.next}`);
    expect(second.json.jobs).toHaveLength(1);
    expect(second.json.jobs[0].id).not.toBe(first.json.jobs[0].id);
    const bad = await api("GET", "/api/v1/jobs?limit=9999");
    expect(bad.status).toBe(400);
    expect(bad.json.detail).toBe('bad limit "9999": 1 to 200');
  });

  it("batches: submit (idempotent by name), a bad line named, status, summary, retry, cancel, list", async () => {
    const lines =
      [1, 2].map((n) => JSON.stringify({ task: `Fix clamp (batch line ${n}).`, repo: { path: CLAMP } })).join("\n") +
      "\n";
    const ndjson = { "content-type": "application/x-ndjson" };
    const sub = await api("POST", "/api/v1/batches?name=api-b1", { body: lines, headers: ndjson, token: WRITE });
    expect(sub.status).toBe(201);
    expect(sub.json).toEqual({ batchId: "api-b1", ids: ["api-b1-L1", "api-b1-L2"], added: 2 });
    const again = await api("POST", "/api/v1/batches?name=api-b1", { body: lines, headers: ndjson, token: WRITE });
    expect([again.status, again.json.added]).toEqual([200, 0]);
    const taken = await api("POST", "/api/v1/batches?name=api-b1", {
      body: lines.replace("line 1", "line one"),
      headers: ndjson,
      token: WRITE,
    });
    expect(taken.status).toBe(409);
    const badLine = await api("POST", "/api/v1/batches", {
      body: `${JSON.stringify({ task: "ok", repo: { path: CLAMP } })}\n{"repo": {"path": "${CLAMP}"}, "maxTurns": 0}\n`,
      headers: ndjson,
      token: WRITE,
    });
    expect(badLine.status).toBe(400);
    expect(badLine.json.errors).toEqual([
      "body:2: invalid JobSpec: task: required; maxTurns: must be a positive integer (got 0)",
    ]);
    expect((await api("POST", "/api/v1/batches", { body: lines, headers: ndjson, token: READ })).status).toBe(403);

    for (const id of sub.json.ids) await sse(dash.url, `/api/v1/jobs/${id}/events`); // each ends when its job does
    const st = await api("GET", "/api/v1/batches/api-b1?jobs=1");
    expect(st.json).toMatchObject({ batchId: "api-b1", total: 2, counts: { completed: 2 } });
    expect(st.json.jobs.map((j: { jobId: string }) => j.jobId)).toEqual(["api-b1-L1", "api-b1-L2"]);
    const summary = await api("GET", "/api/v1/batches/api-b1/summary");
    expect(summary.json).toMatchObject({ batchId: "api-b1", total: 2, counts: { completed: 2 } });
    const md = await api("GET", "/api/v1/batches/api-b1/summary", { headers: { accept: "text/markdown" } });
    expect(md.text).toMatch(/^# Batch api-b1/);

    const badRetry = await api("POST", "/api/v1/batches/api-b1/retry", {
      ...jsonBody({ statuses: ["bogus"] }),
      token: WRITE,
    });
    expect(badRetry.status).toBe(400);
    expect(badRetry.json.detail).toMatch(/^statuses takes completed, .*not 'bogus'$/);
    expect(
      (await api("POST", "/api/v1/batches/api-b1/retry", { ...jsonBody({ statuses: ["failed"] }), token: WRITE })).json,
    ).toEqual({ batchId: "api-b1", ids: [], missing: [] });
    expect((await api("POST", "/api/v1/batches/api-b1/cancel", { token: WRITE })).json).toMatchObject({
      batchId: "api-b1",
      signalled: 0,
      waiting: 0,
      finished: expect.stringMatching(/^finished: /),
    });
    expect((await api("GET", "/api/v1/batches")).json.batches.map((b: { batchId: string }) => b.batchId)).toContain(
      "api-b1",
    );
    expect((await api("GET", "/api/v1/batches/nope")).json).toMatchObject({
      status: 404,
      detail: `no batch nope in queue ${QUEUE}`,
    });
  });
});
