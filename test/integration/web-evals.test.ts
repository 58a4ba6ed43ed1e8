// The dashboard's eval pages in headless Chromium (Debian's package): a private Redis, two eval runs
// seeded in the eval store (src/eval/store.ts) as `patchbay eval run` leaves them, the dashboard in
// this process. The list shows each run's numbers newest first; a run's page its summary (resolved
// of total, outcomes, cost per resolved, pass@1, best-of-K and pass@K, tokens, harness time; the
// pick of each instance a verify judged) and a row per instance with links to its jobs; a hostile instance id (markup, terminal escapes, controls) is
// inert text; both fit a phone's width; an unknown or invalid name is a 404 page and a 404 problem; the HTTP API's
// /api/v1/evals gives the same, in the shapes its OpenAPI document says; off loopback the pages and
// their API need the token.
import Fastify from "fastify";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EvalStore } from "../../src/eval/store.js";
import { safeText } from "../../src/core/term.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { authPlugin } from "../../src/web/auth.js";
import { evalsRoutes } from "../../src/web/routes-evals.js";
import { EvalBody, EvalRowBody } from "../../src/web/api/evals.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { launchBrowser, recordPage, signedIn } from "../support/browser.js";
import { startRedis } from "../support/cluster.js";
import { account, runSummary } from "../support/eval-summary.js";

const QUEUE = "web-evals";
const TOKEN = "evals-test-token-0123456789abcdef";
const RUN = "sonnet-k3";
// Would run if parsed as HTML, or drive a terminal: markup, escapes and controls.
const HOSTILE_ID =
  'acme__app-7<img src=x onerror="window.__pwned=1;alert(1)">\u001b[31mred\u001b[0m\u001b]0;evil-title\u0007\u0000';

describe("eval pages in headless Chromium", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let client: PatchbayClient;
  let dash: Dashboard;
  let browser: Browser;
  const accounts = [
    account("acme__app-1", "resolved", 0, 3),
    account("acme__app-2", "unresolved", 1, 3),
    account(HOSTILE_ID, "empty_patch", 2, 3),
    account("acme__app-4", "resolved", 3, 3),
  ];
  accounts[3]!.resolvedCandidates = 2;
  accounts[3]!.picked = 2; // a verify judged this one's candidates and picked the second

  beforeAll(async () => {
    redis = await startRedis();
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN });
    browser = await launchBrowser();
    const store = new EvalStore(client.redis, QUEUE, client.retentionSec);
    const summary = runSummary(RUN, accounts, "claude-sonnet-4-5");
    // As report.ts keys them: pass@K under K itself ("3"), best-of-K beside them.
    summary.patchbay.passAtK = { "1": 0.5, "3": 0.75 };
    summary.patchbay.bestOfK = 0.5;
    await store.save(runSummary("haiku-k1", [account("acme__app-1", "unresolved", 0)], "claude-haiku"), {
      set: "sets/js.jsonl",
      startedAt: Date.now() - 60_000,
      batchId: "eval-haiku-k1",
    });
    await store.save(summary, { set: "sets/py.jsonl", startedAt: Date.now(), batchId: "eval-sonnet-k3" });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await dash?.close();
    await client?.close();
    await redis?.stop();
  });

  async function open(path: string, width = 1280): Promise<{ page: Page; rec: ReturnType<typeof recordPage> }> {
    const page = await browser.newPage({ viewport: { width, height: 900 }, ...signedIn(dash.url, TOKEN) });
    const rec = recordPage(page);
    await page.goto(dash.url + path);
    return { page, rec };
  }

  it("the list shows each run newest first: resolved of total, cost, cost per resolved, pass@1, best-of-K and pass@K", async () => {
    const { page, rec } = await open("/evals");
    try {
      await page.locator("#rows tr").nth(1).waitFor();
      const rows = await page.locator("#rows tr").evaluateAll((trs) =>
        trs.map((tr) => {
          const c = (n: string) => tr.querySelector(`td.c-${n}`)!.textContent;
          return {
            run: c("run"),
            href: tr.querySelector("td.c-run a")!.getAttribute("href"),
            model: c("model"),
            resolved: c("resolved"),
            cost: c("cost"),
            per: c("per-resolved"),
            pass1: c("pass1"),
            bestk: c("bestk"),
            bestkLabel: tr.querySelector("td.c-bestk")!.getAttribute("data-label"),
            passk: c("passk"),
            passkLabel: tr.querySelector("td.c-passk")!.getAttribute("data-label"),
          };
        }),
      );
      expect(rows).toEqual([
        {
          run: RUN,
          href: `/evals/${RUN}`,
          model: "claude-sonnet-4-5",
          resolved: "2 / 4",
          cost: "$2.50",
          per: "$1.25",
          pass1: "50%",
          bestk: "50%",
          bestkLabel: "best-of-3",
          passk: "75%",
          passkLabel: "pass@3",
        },
        {
          run: "haiku-k1",
          href: "/evals/haiku-k1",
          model: "claude-haiku",
          resolved: "0 / 1",
          cost: "$0.25",
          per: "n/a",
          pass1: "0%",
          bestk: "n/a",
          bestkLabel: "best-of-1",
          passk: "0%",
          passkLabel: "pass@1",
        },
      ]);
      expect(await page.locator("#note").textContent()).toBe("2 eval runs");
      expect(await page.locator("nav.top a.here").textContent()).toBe("Evals");
      expect(rec.pageErrors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it("a run's page shows its summary and each instance, the hostile id as inert text", async () => {
    const { page, rec } = await open(`/evals/${RUN}`);
    try {
      await page.locator("#rows tr").nth(3).waitFor();
      expect(await page.locator("#title").textContent()).toBe(`Eval ${RUN}`);
      expect(await page.locator("#resolved").textContent()).toBe("2 of 4 instances resolved");
      expect(await page.locator("#resolvedbar").evaluate((e) => (e as HTMLElement).style.width)).toBe("50%");
      expect(await page.locator("#outcomes .badge").allTextContents()).toEqual([
        "resolved 2",
        "unresolved 1",
        "empty patch 1",
        "error 0",
      ]);
      expect(await page.locator("#cost").textContent()).toBe("cost $2.50 · $1.25 per resolved instance");
      expect(await page.locator("#pass").textContent()).toBe(
        "pass@1 50% · best-of-3 50% (judged by verify) · pass@3 75%",
      );
      expect(await page.locator("#totals").textContent()).toBe(
        "tokens 10,000 in / 1,000 out · wall 1m00s · harness 800 ms median, 3.2 s in all",
      );
      expect(await page.locator("#run").textContent()).toMatch(
        /^model claude-sonnet-4-5 · set sets\/py\.jsonl · batch eval-sonnet-k3 · started /,
      );
      const rows = await page.locator("#rows tr").evaluateAll((trs) =>
        trs.map((tr) => {
          const c = (n: string) => tr.querySelector(`td.c-${n}`)!.textContent;
          return {
            instance: c("instance"),
            outcome: c("outcome"),
            candidates: c("candidates"),
            cost: c("cost"),
            tokens: c("tokens"),
            harness: c("harness"),
            jobs: [...tr.querySelectorAll("td.c-jobs a")].map((a) => a.getAttribute("href")),
          };
        }),
      );
      const shownId = safeText(HOSTILE_ID, { oneLine: true });
      const jobs = (id: string) => [0, 1, 2].map((c) => `/jobs/${encodeURIComponent(`${id.slice(0, 40)}-job-${c}`)}`);
      expect(rows).toEqual([
        {
          instance: "acme__app-1",
          outcome: "resolved",
          candidates: "3 / 3",
          cost: "$0.25",
          tokens: "1,000 / 100",
          harness: "800 ms",
          jobs: jobs("acme__app-1"),
        },
        {
          instance: "acme__app-2",
          outcome: "unresolved",
          candidates: "0 / 3",
          cost: "$0.50",
          tokens: "2,000 / 200",
          harness: "801 ms",
          jobs: jobs("acme__app-2"),
        },
        {
          instance: shownId,
          outcome: "empty patch",
          candidates: "0 / 3",
          cost: "$0.75",
          tokens: "3,000 / 300",
          harness: "802 ms",
          jobs: jobs(safeText(HOSTILE_ID.slice(0, 40), { oneLine: true })),
        },
        {
          instance: "acme__app-4",
          outcome: "resolved",
          candidates: "2 / 3 (picked 2)",
          cost: "$1.00",
          tokens: "4,000 / 400",
          harness: "803 ms",
          jobs: jobs("acme__app-4"),
        },
      ]);
      expect(shownId).toContain('<img src=x onerror="window.__pwned=1;alert(1)">');
      expect(shownId).not.toContain("evil-title");
      // the hostile text stayed text: no element made of it, nothing ran, no request left for x
      expect(await page.locator("main img, main script").count()).toBe(0);
      expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
      expect(
        await page.locator("main").evaluate((m) => /[\u0000-\u0008\u000b-\u001f\u007f]/.test(m.textContent ?? "")),
      ).toBe(false);
      expect(await page.title()).toBe(`patchbay · eval ${RUN}`);
      expect(rec.dialogs).toEqual([]);
      expect(rec.pageErrors).toEqual([]);
      expect(rec.requests.filter((u) => !u.startsWith(dash.url))).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it("fits 390 px: the list and a run's page, no sideways scroll", async () => {
    for (const path of ["/evals", `/evals/${RUN}`]) {
      const { page } = await open(path, 390);
      try {
        await page.locator("#rows tr").nth(1).waitFor();
        expect(await page.evaluate(() => document.documentElement.scrollWidth), path).toBeLessThanOrEqual(390);
      } finally {
        await page.close();
      }
    }
  });

  it("an unknown or invalid name is a 404 page saying so; the API answers a 404 problem", async () => {
    for (const [name, shown] of [
      ["no-such-run", "no-such-run"],
      ["bad%20name%3Cb%3E", "bad name<b>"],
    ] as const) {
      const { page } = await open(`/evals/${name}`);
      try {
        const r = await page.request.get(`${dash.url}/evals/${name}`);
        expect(r.status()).toBe(404);
        expect(await page.locator('[data-not-found="eval"] h1').textContent()).toBe(`No eval ${shown}`);
        expect(await page.locator("main b").count()).toBe(0);
        expect(await page.locator('a[href="/evals"]').last().textContent()).toBe("All evals");
      } finally {
        await page.close();
      }
      const api = await fetch(`${dash.url}/api/evals/${name}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(api.status).toBe(404);
      expect(api.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    }
  });

  it("the HTTP API's /api/v1/evals lists the runs and gives one, held against its OpenAPI document; errors are problems", async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const doc = (await (await fetch(`${dash.url}/api/openapi.json`, { headers: auth })).json()) as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
    };
    expect(Object.keys(doc.paths["/api/v1/evals/{name}"]!.get!.responses).sort()).toEqual(["200", "401", "404"]);
    const list = await fetch(`${dash.url}/api/v1/evals?limit=1`, { headers: auth });
    expect(list.status).toBe(200);
    const rows = EvalRowBody.array().parse(((await list.json()) as { evals: unknown[] }).evals);
    expect(rows.map((r) => [r.name, r.resolved, r.total, r.costPerResolvedUsd, r.passAtK, r.bestOfK])).toEqual([
      [RUN, 2, 4, 1.25, 0.75, 0.5],
    ]);
    const one = await fetch(`${dash.url}/api/v1/evals/${RUN}`, { headers: auth });
    expect(one.status).toBe(200);
    const body = EvalBody.strict().parse(await one.json());
    expect(body.instances.map((i) => i.outcome)).toEqual(["resolved", "unresolved", "empty_patch", "resolved"]);
    expect(body.instances[2]!.id).toBe(safeText(HOSTILE_ID, { oneLine: true }));
    expect(body.instances.map((i) => i.picked)).toEqual([null, null, null, 2]);
    expect([body.passAt1, body.passAtK, body.bestOfK]).toEqual([0.5, 0.75, 0.5]);
    for (const [path, status] of [
      ["/api/v1/evals/no-such-run", 404],
      ["/api/v1/evals/bad%20name", 404],
      ["/api/v1/evals?limit=1001", 400],
    ] as const) {
      const r = await fetch(dash.url + path, { headers: auth });
      expect(r.status, path).toBe(status);
      expect(r.headers.get("content-type"), path).toMatch(/^application\/problem\+json/);
      expect(((await r.json()) as { detail: string }).detail, path).toMatch(/no eval run|1 to 1000/);
    }
  });

  it("off loopback, the eval pages and their API need the dashboard token", async () => {
    const app = Fastify({ logger: false });
    await app.register(authPlugin, { token: TOKEN, loopback: false });
    await app.register(evalsRoutes, { client });
    try {
      const get = (url: string, headers: Record<string, string> = {}) =>
        app.inject({ method: "GET", url, headers: { host: "dash.example", ...headers } });
      for (const path of [`/api/evals/${RUN}`, "/api/evals", `/evals/${RUN}`, "/evals"]) {
        const r = await get(path);
        expect(r.statusCode, path).toBe(401);
        expect(r.body).not.toContain("acme__app");
      }
      const ok = await get(`/api/evals/${RUN}`, { authorization: `Bearer ${TOKEN}` });
      expect(ok.statusCode).toBe(200);
      const body = ok.json<{ instances: { id: string }[]; costPerResolvedUsd: number }>();
      expect(body.costPerResolvedUsd).toBe(1.25);
      expect(body.instances[2]!.id).toBe(safeText(HOSTILE_ID, { oneLine: true }));
    } finally {
      await app.close();
    }
  });
});
