// The dashboard behind a reverse proxy on the same host (issue 41): the proxy reaches the dashboard
// over loopback, so being a loopback peer says nothing about who asks. A plain node proxy here
// forwards like nginx without any proxy_set_header does (Host rewritten to the upstream's, no
// X-Forwarded-*), and the client is Chromium and fetch: without the token, no read goes through.
// Tokenless reads are opt-in (loopbackReads), and even then a request carrying a proxy's header
// needs the token.
import { createServer, request, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keys } from "../../src/queue/keys.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { DashboardConfigError, startDashboard, type Dashboard } from "../../src/web/server.js";
import { launchBrowser } from "../support/browser.js";
import { startRedis } from "../support/cluster.js";

const TOKEN = "reverse-proxy-test-token-0123456789";
const QUEUE = "web-reverse-proxy";
const SECRET = "transcript-secret-3b1f9c";

/**
 * A reverse proxy on loopback in front of `upstream`: every request forwarded with its headers,
 * Host set to the upstream's (nginx's default `proxy_set_header Host $proxy_host`), and `add` on
 * top (none: nginx with no proxy_set_header at all).
 */
async function startProxy(
  upstream: string,
  add: Record<string, string> = {},
): Promise<{ url: string; close(): Promise<void> }> {
  const up = new URL(upstream);
  const server: Server = createServer((req, res) => {
    const headers: IncomingHttpHeaders = { ...req.headers, host: up.host, ...add };
    const out = request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    out.on("error", () => res.writeHead(502).end());
    req.pipe(out);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))) };
}

/** Every kind of read the dashboard serves: pages, the job's JSON and transcript, the API, bull-board, metrics, its scripts. */
const reads = (id: string) => [
  "/jobs",
  `/jobs/${id}`,
  "/api/jobs",
  `/api/jobs/${id}`,
  `/api/jobs/${id}/events`,
  "/api/v1/jobs",
  `/api/v1/jobs/${id}/transcript`,
  "/api/openapi.json",
  "/queues",
  "/metrics",
  "/static/job.js",
];

describe("the dashboard behind a same-host reverse proxy", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let client: PatchbayClient;
  let dash: Dashboard;
  let open: Dashboard;
  let bare: Awaited<ReturnType<typeof startProxy>>;
  let openBare: Awaited<ReturnType<typeof startProxy>>;
  let openForwarding: Awaited<ReturnType<typeof startProxy>>;
  let browser: Browser;
  let id: string;

  beforeAll(async () => {
    redis = await startRedis();
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    id = await client.enqueue({
      task: `the task ${SECRET}`,
      repo: { path: new URL("../../examples/clamp", import.meta.url).pathname },
      jobId: "proxied-1",
    });
    const event = {
      ts: new Date().toISOString(),
      jobId: id,
      attempt: 1,
      type: "model_response",
      turn: 1,
      content: [{ type: "text", text: SECRET }],
      stopReason: "end_turn",
      usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 },
      ms: 1,
      model: "claude-haiku-4-5",
    };
    await client.redis.xadd(keys(QUEUE).events(id), "*", "e", JSON.stringify(event));
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN });
    open = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN, loopbackReads: true });
    bare = await startProxy(dash.url);
    openBare = await startProxy(open.url);
    openForwarding = await startProxy(open.url, { "x-forwarded-for": "203.0.113.7", "x-forwarded-proto": "http" });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    for (const p of [bare, openBare, openForwarding]) await p?.close();
    await dash?.close();
    await open?.close();
    await client?.close();
    await redis?.stop();
  });

  it("a proxy that sends no header: every read without the token is refused, with it served", async () => {
    for (const path of reads(id)) {
      const r = await fetch(bare.url + path, { redirect: "manual" });
      const body = await r.text();
      expect(r.status, path).toBe(401);
      expect(body, path).not.toContain(SECRET);
    }
    for (const path of reads(id).filter((p) => !p.endsWith("/events"))) {
      const r = await fetch(bare.url + path, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(r.status, path).toBe(200);
    }
  });

  it("Chromium through the proxy sees no job and no transcript until it opens the URL with the token", async () => {
    const page = await browser.newPage();
    try {
      const first = await page.goto(`${bare.url}/jobs/${id}`);
      expect(first?.status()).toBe(401);
      expect(await page.content()).not.toContain(SECRET);
      const transcript = await page.evaluate(async (u) => {
        const r = await fetch(u);
        return { status: r.status, body: await r.text() };
      }, `${bare.url}/api/v1/jobs/${id}/transcript`);
      expect(transcript.status).toBe(401);
      expect(transcript.body).not.toContain(SECRET);
      // the token once: a cookie, and the page renders the transcript
      await page.goto(`${bare.url}/jobs/${id}?token=${TOKEN}`);
      expect(new URL(page.url()).search).toBe("");
      await page.getByText(SECRET).first().waitFor();
    } finally {
      await page.close();
    }
  });

  it("tokenless reads opened on loopback: a proxy's header takes them away; a proxy that sends none is why they are opt-in", async () => {
    for (const path of reads(id)) {
      const r = await fetch(openForwarding.url + path, { redirect: "manual" });
      expect(r.status, path).toBe(401);
      expect(await r.text(), path).not.toContain(SECRET);
    }
    for (const h of ["forwarded", "x-forwarded-host", "x-real-ip", "via"]) {
      expect((await fetch(`${open.url}/api/jobs/${id}`, { headers: { [h]: "x" } })).status, h).toBe(401);
    }
    // direct, and through a proxy that says nothing: served; the dashboard cannot tell them apart
    expect((await fetch(`${open.url}/api/jobs/${id}`)).status).toBe(200);
    expect((await fetch(`${openBare.url}/api/jobs/${id}`)).status).toBe(200);
    // writes need the token whatever was opened
    expect((await fetch(`${open.url}/api/jobs/${id}/cancel`, { method: "POST" })).status).toBe(401);
    await expect(
      startDashboard({ host: "0.0.0.0", port: 0, redisUrl: redis.url, token: TOKEN, loopbackReads: true }),
    ).rejects.toThrow(DashboardConfigError);
  });
});
