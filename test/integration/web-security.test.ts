// The dashboard's guards over HTTP (token, host, origin, CSP, bull-board's mutations) and the
// static viewer's escaping, without a browser.
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { RENDER_JS } from "../../src/web/assets/render.js";
import { BATCHES_JS, CAMPAIGN_JS, CAMPAIGNS_JS, JOB_JS, JOBS_JS, VIEW_BOOT_JS } from "../../src/web/assets/pages.js";
import { STYLE_CSS } from "../../src/web/assets/style.js";
import { cspHash, escapeHtml, jsonForScript, parseTranscriptJsonl, prepareEvent } from "../../src/web/escape.js";
import { renderTranscriptHtml } from "../../src/web/html.js";
import { DashboardConfigError, needsToken, startDashboard, type Dashboard } from "../../src/web/server.js";
import { spawn } from "node:child_process";
import { cli, startRedis } from "../support/cluster.js";

const TOKEN = "security-test-token-0123456789";
const QUEUE = "web-security";
/** The token as a Bearer header: every request needs it, reads too (tokenless reads are opt-in). */
const BEARER = { authorization: `Bearer ${TOKEN}` };

/** A raw request, so the Host and Origin headers are exactly what the test says. */
function raw(
  url: string,
  opts: { method?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: opts.method ?? "GET", headers: opts.headers ?? {} }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("dashboard guards", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let dash: Dashboard;
  let client: PatchbayClient;

  beforeAll(async () => {
    redis = await startRedis();
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN });
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
  });
  afterAll(async () => {
    await client?.close();
    await dash?.close();
    await redis?.stop();
  });

  it("binds loopback by default and refuses another bind without a token", async () => {
    expect(new URL(dash.url).hostname).toBe("127.0.0.1");
    const saved = process.env.PATCHBAY_DASHBOARD_TOKEN;
    delete process.env.PATCHBAY_DASHBOARD_TOKEN;
    try {
      await expect(startDashboard({ host: "0.0.0.0", port: 0, redisUrl: redis.url })).rejects.toThrow(
        DashboardConfigError,
      );
      await expect(startDashboard({ host: "127.0.0.1", port: 0, redisUrl: redis.url, token: "short" })).rejects.toThrow(
        /at least 16/,
      );
    } finally {
      if (saved !== undefined) process.env.PATCHBAY_DASHBOARD_TOKEN = saved;
    }
    // needsToken(method, tokenless reads opened for this request)
    expect(needsToken("GET", false)).toBe(true);
    expect(needsToken("HEAD", false)).toBe(true);
    expect(needsToken("GET", true)).toBe(false);
    for (const m of ["POST", "PUT", "DELETE", "PATCH"]) expect(needsToken(m, true)).toBe(true);
    expect((await raw(`${dash.url}/api/jobs`)).status).toBe(401); // loopback, but reads are not opened
  });

  it("a loopback bind without PATCHBAY_DASHBOARD_TOKEN makes up a strong token", async () => {
    const saved = process.env.PATCHBAY_DASHBOARD_TOKEN;
    delete process.env.PATCHBAY_DASHBOARD_TOKEN;
    const d = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE });
    try {
      expect(d.generatedToken).toBe(true);
      expect(d.token.length).toBeGreaterThanOrEqual(32);
      expect((await raw(`${d.url}/api/jobs/x/cancel`, { method: "POST" })).status).toBe(401);
    } finally {
      await d.close();
      if (saved !== undefined) process.env.PATCHBAY_DASHBOARD_TOKEN = saved;
    }
  });

  it("actions need the token: cancel, retry and bull-board's mutations", async () => {
    const id = await client.enqueue({
      task: "t",
      repo: { path: new URL("../../examples/clamp", import.meta.url).pathname },
      jobId: "guarded-1",
    });
    for (const path of [`/api/jobs/${id}/cancel`, `/api/jobs/${id}/retry`]) {
      const r = await raw(dash.url + path, { method: "POST" });
      expect(r.status).toBe(401);
      expect(JSON.parse(r.body).detail).toMatch(/PATCHBAY_DASHBOARD_TOKEN/);
      expect(
        (await raw(dash.url + path, { method: "POST", headers: { authorization: "Bearer wrong-token-wrong-token" } }))
          .status,
      ).toBe(401);
    }
    expect(await client.redis.exists(`patchbay:${QUEUE}:cancel:${id}`)).toBe(0); // nothing happened

    const pause = `${dash.url}/queues/api/queues/${QUEUE}/pause`;
    expect((await raw(pause, { method: "PUT" })).status).toBe(401);
    expect(await client.queue.isPaused()).toBe(false);
    expect((await raw(pause, { method: "PUT", headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    expect(await client.queue.isPaused()).toBe(true);
    await client.queue.resume();

    // a cross-site form post with the cookie is refused by its Origin (the cookie is SameSite=Strict too)
    const cookie = `patchbay_dashboard=${encodeURIComponent(TOKEN)}`;
    expect(
      (
        await raw(`${dash.url}/api/jobs/${id}/cancel`, {
          method: "POST",
          headers: { cookie, origin: "http://evil.example" },
        })
      ).status,
    ).toBe(403);
    const ok = await raw(`${dash.url}/api/jobs/${id}/cancel`, {
      method: "POST",
      headers: { cookie, origin: dash.url },
    });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)).toEqual({ result: "cancelled" });
    expect(await client.redis.exists(`patchbay:${QUEUE}:cancel:${id}`)).toBe(1);
    // a waiting job cancelled is finished at once (issue 25), so it may be retried; one still waiting may not
    const waiting = await client.enqueue({
      task: "t",
      repo: { path: new URL("../../examples/clamp", import.meta.url).pathname },
      jobId: "guarded-2",
    });
    expect((await raw(`${dash.url}/api/jobs/${waiting}/retry`, { method: "POST", headers: { cookie } })).status).toBe(
      409,
    );
    expect((await raw(`${dash.url}/api/jobs/${id}/retry`, { method: "POST", headers: { cookie } })).status).toBe(200);
  });

  it("?token= sets an HttpOnly SameSite=Strict cookie and drops the token from the URL; a wrong one is refused", async () => {
    const r = await raw(`${dash.url}/jobs?state=active&token=${TOKEN}`);
    expect(r.status).toBe(303);
    expect(r.headers.location).toBe("/jobs?state=active");
    expect(String(r.headers["set-cookie"])).toMatch(/^patchbay_dashboard=[^;]+; HttpOnly; SameSite=Strict; Path=\//);
    expect((await raw(`${dash.url}/jobs?token=nope`)).status).toBe(401);
    // never a redirect to another site
    const open = await raw(`${dash.url}//evil.example/x?token=${TOKEN}`);
    expect(open.status).toBe(303);
    expect(open.headers.location).toMatch(/^\/[^/\\]/);
  });

  it("a foreign Host header is refused on loopback (DNS rebinding)", async () => {
    expect((await raw(`${dash.url}/api/jobs`, { headers: { host: "attacker.example" } })).status).toBe(403);
    expect(
      (await raw(`${dash.url}/api/jobs`, { headers: { ...BEARER, host: `localhost:${new URL(dash.url).port}` } }))
        .status,
    ).toBe(200);
  });

  it("pages carry a CSP without inline scripts and load only their own static scripts", async () => {
    // the last three: 404 pages (no such job, batch or campaign), under the same CSP
    for (const [path, status] of [
      ["/jobs", 200],
      ["/batches", 200],
      ["/campaigns", 200],
      ["/jobs/some-job", 404],
      ["/batches/some-batch", 404],
      ["/campaigns/some-campaign", 404],
    ] as const) {
      const r = await raw(dash.url + path, { headers: BEARER });
      expect(r.status, path).toBe(status);
      const csp = String(r.headers["content-security-policy"]);
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("default-src 'none'");
      expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
      expect(r.headers["x-content-type-options"]).toBe("nosniff");
      expect(
        [...r.body.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)].every(
          (m) => /src="\/static\/[a-z]+\.js"/.test(m[1]!) && m[2] === "",
        ),
      ).toBe(true);
      expect(r.body).not.toMatch(/\son[a-z]+=|style=/i); // no inline handlers or styles
    }
    const js = await raw(`${dash.url}/static/job.js`, { headers: BEARER });
    expect(js.headers["content-type"]).toMatch(/^text\/javascript/);
    expect((await raw(`${dash.url}/static/../server.js`, { headers: BEARER })).status).toBe(404);
  });

  it("the scripts never hand untrusted text to innerHTML, outerHTML, insertAdjacentHTML or document.write", () => {
    for (const src of [RENDER_JS, JOBS_JS, JOB_JS, BATCHES_JS, CAMPAIGNS_JS, CAMPAIGN_JS, VIEW_BOOT_JS]) {
      expect(src).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/);
      expect(src).not.toContain("</script");
    }
    expect(STYLE_CSS).not.toContain("</style");
  });
});

describe("patchbay dashboard", () => {
  const BIN = new URL("../../bin/patchbay.js", import.meta.url).pathname;

  it("serves on loopback with a made-up token in the printed URL, every read needing it, and stops on SIGTERM", async () => {
    const redis = await startRedis();
    const env: NodeJS.ProcessEnv = { ...process.env, REDIS_URL: redis.url, PATCHBAY_QUEUE: "dash-cli" };
    delete env.PATCHBAY_DASHBOARD_TOKEN;
    const p = spawn(process.execPath, [BIN, "dashboard", "--port", "0"], { env, stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    p.stderr.on("data", (d) => (err += d));
    const exited = new Promise<number | null>((r) => p.once("exit", (c) => r(c)));
    try {
      while (!/\[dashboard\] \S+/.test(err) && p.exitCode === null) await new Promise((r) => setTimeout(r, 50));
      const m = /\[dashboard\] (http:\/\/127\.0\.0\.1:\d+)\/\?token=([\w-]{32,}) /.exec(err);
      expect(m, err).not.toBeNull();
      const [, url, token] = m!;
      expect((await raw(`${url}/jobs`)).status).toBe(401);
      const opened = await raw(`${url}/jobs?token=${token}`);
      expect(opened.status).toBe(303);
      const cookie = String(opened.headers["set-cookie"]).split(";")[0]!;
      expect((await raw(`${url}/jobs`, { headers: { cookie } })).status).toBe(200);
      expect((await raw(`${url}/api/jobs/x/cancel`, { method: "POST" })).status).toBe(401);
      expect(
        (await raw(`${url}/api/jobs/x/cancel`, { method: "POST", headers: { authorization: `Bearer ${token}` } }))
          .status,
      ).toBe(404);
    } finally {
      p.kill("SIGTERM");
      expect(await exited).toBe(0);
      await redis.stop();
    }
  }, 120_000);

  it("--loopback-reads: reads without a token from loopback, not with a proxy's header; writes still need it", async () => {
    const redis = await startRedis();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: "dash-cli",
      PATCHBAY_DASHBOARD_TOKEN: TOKEN,
    };
    const p = spawn(process.execPath, [BIN, "dashboard", "--port", "0", "--loopback-reads"], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let err = "";
    p.stderr.on("data", (d) => (err += d));
    const exited = new Promise<number | null>((r) => p.once("exit", (c) => r(c)));
    try {
      while (!/--loopback-reads\)\n/.test(err) && p.exitCode === null) await new Promise((r) => setTimeout(r, 50));
      const url = /\[dashboard\] (http:\/\/127\.0\.0\.1:\d+)\//.exec(err)?.[1];
      expect(url, err).toBeDefined();
      expect(err).not.toContain(TOKEN); // the operator's own token is never echoed
      expect((await raw(`${url}/jobs`)).status).toBe(200);
      expect((await raw(`${url}/jobs`, { headers: { "x-forwarded-for": "203.0.113.7" } })).status).toBe(401);
      expect((await raw(`${url}/api/jobs/x/cancel`, { method: "POST" })).status).toBe(401);
      const off = await cli(["dashboard", "--host", "0.0.0.0", "--port", "0", "--loopback-reads"], {
        REDIS_URL: redis.url,
        PATCHBAY_DASHBOARD_TOKEN: TOKEN,
      });
      expect(off.code).toBe(2);
      expect(off.stderr).toMatch(/tokenless reads \(--loopback-reads\) need a loopback bind, not 0\.0\.0\.0/);
    } finally {
      p.kill("SIGTERM");
      expect(await exited).toBe(0);
      await redis.stop();
    }
  }, 120_000);

  it("refuses a non-loopback bind without PATCHBAY_DASHBOARD_TOKEN (exit 2, nothing bound)", async () => {
    const redis = await startRedis();
    try {
      const r = await cli(["dashboard", "--host", "0.0.0.0", "--port", "0"], {
        REDIS_URL: redis.url,
        PATCHBAY_DASHBOARD_TOKEN: "",
      });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/binding 0\.0\.0\.0 \(not loopback\) needs a token: set PATCHBAY_DASHBOARD_TOKEN/);
    } finally {
      await redis.stop();
    }
  }, 120_000);
});

describe("escaping and the static viewer", () => {
  const ev = (e: Record<string, unknown>) =>
    ({
      ts: "2026-01-01T00:00:00.000Z",
      jobId: "j</title><script>alert(1)</script>",
      attempt: 1,
      ...e,
    }) as TranscriptEvent;
  const events = [
    ev({ type: "job_started", spec: { task: "</script><script>alert(1)</script>", repo: { path: "/x" } } }),
    ev({ type: "model_request", turn: 1, messagesCount: 1 }),
    ev({
      type: "model_response",
      turn: 1,
      content: [{ type: "text", text: "<!-- \u2028 </SCRIPT > & \u001b]52;c;ZXZpbA==\u0007 \u202e" }],
      stopReason: "end_turn",
      usage: { inputTokens: 1000, outputTokens: 100, cacheReadTokens: 0, cacheWriteTokens: 0 },
      ms: 5,
      model: "claude-haiku-4-5",
    }),
    ev({ type: "tool_call", turn: 1, toolUseId: "t1", name: "bash", input: { "\u001b[31mkey": "\u001b[2Jv" } }),
  ];

  it("escapeHtml and jsonForScript", () => {
    expect(escapeHtml(`<a href="x" onclick='y'>&</a>`)).toBe(
      "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;",
    );
    const v = { s: "</script><!-- & \u2028\u2029 <b>" };
    const j = jsonForScript(v);
    expect(j).not.toMatch(/[<>&\u2028\u2029]/);
    expect(JSON.parse(j)).toEqual(v);
  });

  it("prepareEvent removes terminal escapes everywhere (keys too) and prices each model response", () => {
    const [, , resp, call] = events.map(prepareEvent);
    expect(JSON.stringify(call)).not.toContain("\u001b");
    expect((call as { input: unknown }).input).toEqual({ key: "v" });
    expect((resp as { content: { text: string }[] }).content[0]!.text).toBe("<!-- \n </SCRIPT > &  \uFFFD"); // U+2028 is a line break; the OSC 52 write is gone, whole
    expect(resp!.costUsd).toBe(0.0015); // haiku 4.5: 1000 in × $1/M + 100 out × $5/M
  });

  it("renderTranscriptHtml: one data block that nothing breaks out of, scripts and style allowed by hash only", () => {
    const html = renderTranscriptHtml(events, { patch: "diff --git a/x b/x\n+</script><script>alert(2)</script>\n" });
    const scripts = [...html.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/gi)];
    expect(scripts).toHaveLength(2);
    expect(scripts[0]![1]).toBe(' type="application/json" id="pb-data"');
    const data = JSON.parse(scripts[0]![2]!);
    expect(data.events).toEqual(events.map(prepareEvent).map((e) => JSON.parse(JSON.stringify(e))));
    expect(data.patch).toContain("</script><script>alert(2)</script>");
    const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]+)">/.exec(html)![1]!.replace(/&#39;/g, "'");
    expect(csp).toContain(`script-src ${cspHash(scripts[1]![2]!)};`);
    expect(csp).toContain(`style-src ${cspHash(/<style>([\s\S]*?)<\/style>/.exec(html)![1]!)};`);
    expect(csp).toMatch(/default-src 'none'.*connect-src 'none'/);
    expect(html).not.toMatch(/unsafe-inline/);
    expect(html).toContain("<title>patchbay · j&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;</title>");
  });

  it("parseTranscriptJsonl keeps a bad line visible instead of dropping it", () => {
    const evs = parseTranscriptJsonl('{"type":"budget","limit":"usd","max":1,"used":2}\nnot json\n\n');
    expect(evs).toHaveLength(2);
    expect(evs[1]).toEqual({ type: "unparsed", line: "not json" });
  });
});
