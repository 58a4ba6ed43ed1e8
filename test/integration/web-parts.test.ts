// The dashboard's parts on their own (src/web/auth.ts, settings.ts): the guard is a plugin whose
// hook covers every route registered after it, in any plugin (bull-board's, the route modules');
// the token, TLS files and stream cap come from the Config the caller passes, not from process.env.
// No Redis here but in the last test; the rules themselves are web-security's and web-bounds' tests.
import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/core/config/config.js";
import { authPlugin } from "../../src/web/auth.js";
import { startDashboard } from "../../src/web/server.js";
import { DashboardConfigError, dashboardSettings } from "../../src/web/settings.js";
import { startRedis } from "../support/cluster.js";

const TOKEN = "parts-test-token-0123456789";

/** The plugin, then routes in a plugin of their own (encapsulated, as the route modules are). */
async function guarded(loopback: boolean, openReads = false): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  await app.register(authPlugin, { token: TOKEN, loopback, openReads });
  await app.register(async (child) => {
    child.get("/r", async () => ({ ok: true }));
    child.post("/r", async () => ({ ok: true }));
  });
  await app.ready();
  return app;
}

describe("the auth plugin", () => {
  const apps: FastifyInstance[] = [];
  afterAll(async () => {
    for (const a of apps) await a.close();
  });

  it("guards routes registered in other plugins after it (it is not encapsulated)", async () => {
    const app = await guarded(true);
    apps.push(app);
    const host = { host: "127.0.0.1:7474" };
    expect((await app.inject({ method: "GET", url: "/r", headers: host })).statusCode).toBe(401); // reads too, on loopback
    expect(
      (await app.inject({ method: "GET", url: "/r", headers: { ...host, authorization: `Bearer ${TOKEN}` } }))
        .statusCode,
    ).toBe(200);
    const post = await app.inject({ method: "POST", url: "/r", headers: host });
    expect(post.statusCode).toBe(401);
    expect(post.json().detail).toMatch(/PATCHBAY_DASHBOARD_TOKEN/);
    expect(post.headers["x-frame-options"]).toBe("DENY");
    expect(
      (await app.inject({ method: "POST", url: "/r", headers: { ...host, authorization: `Bearer ${TOKEN}` } }))
        .statusCode,
    ).toBe(200);
    expect(
      (
        await app.inject({
          method: "POST",
          url: "/r",
          headers: { ...host, cookie: `patchbay_dashboard=${TOKEN}`, origin: "http://evil.example" },
        })
      ).statusCode,
    ).toBe(403);
    expect((await app.inject({ method: "GET", url: "/r", headers: { host: "evil.example" } })).statusCode).toBe(403);
    expect((await app.inject({ method: "GET", url: "/nowhere", headers: { host: "evil.example" } })).statusCode).toBe(
      403,
    ); // the 404 too
  });

  it("tokenless reads only when opened, on a loopback bind, and never for a request a proxy's header marks", async () => {
    const open = await guarded(true, true);
    const offLoopback = await guarded(false, true);
    apps.push(open, offLoopback);
    const host = { host: "127.0.0.1:7474" };
    expect((await open.inject({ method: "GET", url: "/r", headers: host })).statusCode).toBe(200);
    expect((await open.inject({ method: "HEAD", url: "/r", headers: host })).statusCode).toBe(200);
    expect((await open.inject({ method: "POST", url: "/r", headers: host })).statusCode).toBe(401);
    for (const h of [
      "forwarded",
      "x-forwarded-for",
      "x-forwarded-host",
      "x-forwarded-proto",
      "x-forwarded-port",
      "x-real-ip",
      "via",
    ]) {
      expect((await open.inject({ method: "GET", url: "/r", headers: { ...host, [h]: "x" } })).statusCode, h).toBe(401);
      expect(
        (
          await open.inject({
            method: "GET",
            url: "/r",
            headers: { ...host, [h]: "x", authorization: `Bearer ${TOKEN}` },
          })
        ).statusCode,
        h,
      ).toBe(200);
    }
    expect((await offLoopback.inject({ method: "GET", url: "/r", headers: { host: "dash.example" } })).statusCode).toBe(
      401,
    );
  });

  it("?token= sets the cookie and redirects to the same path on this origin; off loopback every request needs it", async () => {
    const app = await guarded(false);
    apps.push(app);
    expect((await app.inject({ method: "GET", url: "/r", headers: { host: "dash.example" } })).statusCode).toBe(401);
    expect(
      (await app.inject({ method: "GET", url: "/r?token=wrong-token-0123456789", headers: { host: "dash.example" } }))
        .statusCode,
    ).toBe(401);
    const r = await app.inject({
      method: "GET",
      url: `//evil.example/r?a=1&token=${TOKEN}`,
      headers: { host: "dash.example" },
    });
    expect(r.statusCode).toBe(303);
    expect(r.headers.location).toBe("/r?a=1"); // a path, never another origin
    expect(r.headers["set-cookie"]).toBe(`patchbay_dashboard=${TOKEN}; HttpOnly; SameSite=Strict; Path=/`);
    expect(
      (
        await app.inject({
          method: "GET",
          url: "/r",
          headers: { host: "dash.example", cookie: `patchbay_dashboard=${TOKEN}` },
        })
      ).statusCode,
    ).toBe(200);
  });
});

describe("the dashboard's settings come from the Config passed in", () => {
  it("token, stream cap, queue and model from the Config; PATCHBAY_DASHBOARD_TOKEN in process.env is not read", () => {
    const saved = process.env.PATCHBAY_DASHBOARD_TOKEN;
    process.env.PATCHBAY_DASHBOARD_TOKEN = "from-process-env-0123456789";
    try {
      const config = loadConfig({
        PATCHBAY_DASHBOARD_TOKEN: TOKEN,
        PATCHBAY_DASHBOARD_MAX_STREAMS: "3",
        PATCHBAY_QUEUE: "q-from-config",
        PATCHBAY_MODEL: "m-from-config",
      });
      const s = dashboardSettings({ host: "0.0.0.0" }, config);
      expect(s).toMatchObject({
        token: TOKEN,
        generatedToken: false,
        loopback: false,
        maxStreams: 3,
        queueName: "q-from-config",
        defaultModel: "m-from-config",
        port: 7474,
      });
      expect(() => dashboardSettings({ host: "0.0.0.0" }, loadConfig({}))).toThrow(DashboardConfigError);
      expect(s.openReads).toBe(false);
      expect(dashboardSettings({ loopbackReads: true }, config).openReads).toBe(true);
      expect(() => dashboardSettings({ host: "0.0.0.0", loopbackReads: true }, config)).toThrow(
        /tokenless reads \(--loopback-reads\) need a loopback bind, not 0\.0\.0\.0/,
      );
    } finally {
      if (saved === undefined) delete process.env.PATCHBAY_DASHBOARD_TOKEN;
      else process.env.PATCHBAY_DASHBOARD_TOKEN = saved;
    }
  });

  it("an empty PATCHBAY_DASHBOARD_TOKEN is unset (on loopback a strong one is made up); a short one is refused by the dashboard alone", () => {
    expect(loadConfig({ PATCHBAY_DASHBOARD_TOKEN: "" }).dashboardToken).toBeUndefined();
    const s = dashboardSettings({}, loadConfig({ PATCHBAY_DASHBOARD_TOKEN: "" }));
    expect(s.generatedToken).toBe(true);
    expect(s.token.length).toBeGreaterThanOrEqual(32);
    const short = loadConfig({ PATCHBAY_DASHBOARD_TOKEN: "short" }); // other commands do not fail on it
    expect(() => dashboardSettings({}, short)).toThrow(/PATCHBAY_DASHBOARD_TOKEN must be at least 16 characters/);
    expect(() => dashboardSettings({}, loadConfig({ PATCHBAY_DASHBOARD_TLS_KEY: "/k.pem" }))).toThrow(
      /needs both PATCHBAY_DASHBOARD_TLS_CERT and PATCHBAY_DASHBOARD_TLS_KEY/,
    );
  });

  describe("startDashboard", () => {
    let redis: Awaited<ReturnType<typeof startRedis>>;
    beforeAll(async () => {
      redis = await startRedis();
    });
    afterAll(async () => {
      await redis?.stop();
    });

    it("serves with the Config's token and Redis", async () => {
      const d = await startDashboard({
        port: 0,
        config: loadConfig({ REDIS_URL: redis.url, PATCHBAY_QUEUE: "web-parts", PATCHBAY_DASHBOARD_TOKEN: TOKEN }),
      });
      try {
        expect(d.token).toBe(TOKEN);
        expect(d.generatedToken).toBe(false);
        const r = await fetch(`${d.url}/api/jobs`, { headers: { authorization: `Bearer ${TOKEN}` } });
        expect(r.status).toBe(200);
        expect((await r.json()).jobs).toEqual([]);
      } finally {
        await d.close();
      }
    });
  });
});
