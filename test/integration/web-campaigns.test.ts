// The dashboard's campaign pages in headless Chromium (Debian's package): a private Redis, a
// campaign seeded as publishing and tracking leave it (its batch submitted, no worker needed, $5
// spent; its definition and changesets in the campaign store), the dashboard in this process. The
// page shows the burndown, the cost per merged change and each repository's row; hostile text from a repo, a forge or git is text, a
// non-http(s) URL no link; an unknown id is a 404 page; off loopback the API needs the token. The
// same campaign through `patchbay campaign status` (a CLI process) reaches a terminal without a control,
// and says (as its summary files do) the spend and the cost per merged change.
import Fastify from "fastify";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CampaignStore, type CampaignDef } from "../../src/campaign/store.js";
import type { Changeset } from "../../src/campaign/changeset.js";
import { BatchClient } from "../../src/batch/batches.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { authPlugin } from "../../src/web/auth.js";
import { campaignsRoutes } from "../../src/web/routes-campaigns.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { launchBrowser, recordPage, signedIn } from "../support/browser.js";
import { startRedis } from "../support/cluster.js";
import { ensureBuilt, patchbay } from "../support/cli-helpers.js";
import { keys } from "../../src/queue/keys.js";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const QUEUE = "web-campaigns";
const TOKEN = "campaigns-test-token-0123456789";
const ID = "bump-logging-api";

// Would run if parsed as HTML, or drive a terminal: markup, a javascript: URL, escapes and controls.
const HOSTILE_REPO = 'https://example.com/acme/<img src=x onerror="window.__pwned=1;alert(1)">.git';
const HOSTILE_REASON =
  'rebase failed: <img src=x onerror="window.__pwned=2;alert(2)"> \u001b[31mCONFLICT\u001b[0m \u001b]0;evil-title\u0007 in src/observability/log.ts\u0000';
const HOSTILE_BRANCH = "patchbay/<script>window.__pwned=3;alert(3)</script>";
const JS_URL = "javascript:window.__pwned=4;alert(4)";
const DATA_URL = "data:text/html,<script>alert(5)</script>";

const repo = (line: number) => (line === 7 ? HOSTILE_REPO : `https://github.com/acme/svc-${line}.git`);
const publish: CampaignDef["publish"] = {
  branch: "patchbay/bump-logging-api",
  draft: true,
  title: "Bump the logging API",
  body: "b",
  author: { name: "patchbay", email: "p@example.com" },
  message: "m",
};

describe("campaign pages in headless Chromium", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let client: PatchbayClient;
  let dash: Dashboard;
  let browser: Browser;
  let ids: string[];

  beforeAll(async () => {
    redis = await startRedis();
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN });
    browser = await launchBrowser();
    const lines = [1, 2, 3, 4, 5, 6, 7, 8];
    ({ ids } = await new BatchClient(client).submit(
      lines.map((l) => ({
        task: `Bump the logging API in svc-${l}.`,
        repo: { git: `https://github.com/acme/svc-${l}.git` },
      })),
      { name: ID, lines, budgetUsd: 20 },
    ));
    const store = new CampaignStore(client.redis, QUEUE, client.retentionSec);
    await store.saveDef({
      name: ID,
      createdAt: Date.now(),
      budgetUsd: 20,
      publish,
      repos: lines.map((line) => ({ line, git: repo(line), vars: {} })),
    });
    const gh = (line: number, n: number): Partial<Changeset> => ({
      forge: "github",
      number: n,
      url: `https://github.com/acme/svc-${line}/pull/${n}`,
      branch: publish.branch,
      verified: true,
    });
    const records: Changeset[] = [
      { line: 1, state: "merged", checks: "passing", review: "approved", ...gh(1, 11) },
      { line: 2, state: "merged", checks: "passing", review: "approved", ...gh(2, 12) },
      { line: 3, state: "open", checks: "failing", review: "changes_requested", ...gh(3, 13) },
      { line: 4, state: "draft", checks: "pending", review: "review_required", ...gh(4, 14), verified: false },
      { line: 5, state: "closed", checks: "none", ...gh(5, 15), reason: "closed by campaign close" },
      { line: 6, state: "conflict", reason: HOSTILE_REASON, branch: HOSTILE_BRANCH, url: JS_URL, forge: "github" },
      // line 7: no record (its job never ran): unpublished, from the job's state
      { line: 8, state: "open", checks: "passing", forge: "gitlab", number: 5, url: DATA_URL, branch: publish.branch },
    ].map((c) => ({ repo: repo(c.line), jobId: ids[c.line - 1]!, updatedAt: Date.now(), ...c }) as Changeset);
    for (const c of records) await store.saveChangeset(ID, c);
    // what the workers would have added up as the jobs ran (src/queue/batch-index.ts)
    await client.redis.hset(keys(QUEUE).batch(ID, "meta"), "spent", "5");
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

  it("the campaign page shows the burndown (merged of total, counts by state, checks of the open ones) and each repository's row", async () => {
    const { page, rec } = await open(`/campaigns/${ID}`);
    try {
      await page.locator("#rows tr").nth(7).waitFor();
      expect(await page.locator("#title").textContent()).toBe(`Campaign ${ID}`);
      expect(await page.locator("#merged").textContent()).toBe("2 of 8 repositories merged");
      expect(await page.locator("#mergedbar").evaluate((e) => (e as HTMLElement).style.width)).toBe("25%");
      const badges = await page
        .locator("#states .badge")
        .evaluateAll((bs) => bs.map((b) => [b.getAttribute("data-state"), b.textContent]));
      expect(Object.fromEntries(badges)).toEqual({
        merged: "merged 2",
        open: "open 2",
        draft: "draft 1",
        unpublished: "unpublished 1",
        conflict: "conflict 1",
        closed: "closed 1",
      });
      expect(await page.locator("#checks").textContent()).toBe(
        "checks of the 3 open ones: 1 passing · 1 failing · 1 pending",
      );
      expect(await page.locator("#jobs").textContent()).toMatch(
        /^jobs 0 \/ 8 done · 0 running · 8 waiting · spent \$5\.00 of \$20\.00 · submitted /,
      );
      expect(await page.locator("#cost").textContent()).toBe("spent $5.00 · $2.50 per merged change (2 merged)");
      expect(await page.locator("nav.top a.here").textContent()).toBe("Campaigns");

      const rows = await page.locator("#rows tr").evaluateAll((trs) =>
        trs.map((tr) => {
          const c = (n: string) => tr.querySelector(`td.c-${n}`)!;
          const link = (n: string) => c(n).querySelector("a")?.getAttribute("href") ?? null;
          return {
            line: c("line").textContent,
            repo: [c("repo").textContent, c("repo").getAttribute("title")],
            state: c("state").textContent,
            checks: c("checks").textContent,
            review: c("review").textContent,
            pr: c("pr").querySelector(".pr")?.textContent ?? "",
            prHref: link("pr"),
            branch: c("pr").querySelector(".branch")?.textContent ?? "",
            job: link("job"),
            reason: c("reason").textContent,
          };
        }),
      );
      const job = (l: number) => `/jobs/${ids[l - 1]}`;
      // shown without scheme and .git, whole in the title
      const shown = (l: number) => [`github.com/acme/svc-${l}`, repo(l)];
      const pr = (l: number, n: number) => ({
        pr: `#${n}`,
        prHref: `https://github.com/acme/svc-${l}/pull/${n}`,
        branch: publish.branch,
      });
      expect(rows).toEqual([
        {
          line: "1",
          repo: shown(1),
          state: "merged",
          checks: "passing",
          review: "approved",
          ...pr(1, 11),
          job: job(1),
          reason: "",
        },
        {
          line: "2",
          repo: shown(2),
          state: "merged",
          checks: "passing",
          review: "approved",
          ...pr(2, 12),
          job: job(2),
          reason: "",
        },
        {
          line: "3",
          repo: shown(3),
          state: "open",
          checks: "failing",
          review: "changes requested",
          ...pr(3, 13),
          job: job(3),
          reason: "",
        },
        {
          line: "4",
          repo: shown(4),
          state: "draft unverified",
          checks: "pending",
          review: "review required",
          ...pr(4, 14),
          job: job(4),
          reason: "",
        },
        {
          line: "5",
          repo: shown(5),
          state: "closed",
          checks: "",
          review: "",
          ...pr(5, 15),
          job: job(5),
          reason: "closed by campaign close",
        },
        {
          line: "6",
          repo: shown(6),
          state: "conflict",
          checks: "",
          review: "",
          pr: JS_URL,
          prHref: null,
          branch: HOSTILE_BRANCH,
          job: job(6),
          reason:
            'rebase failed: <img src=x onerror="window.__pwned=2;alert(2)"> CONFLICT  in src/observability/log.ts',
        },
        {
          line: "7",
          repo: [HOSTILE_REPO.slice("https://".length, -".git".length), HOSTILE_REPO],
          state: "unpublished",
          checks: "",
          review: "",
          pr: "",
          prHref: null,
          branch: "",
          job: job(7),
          reason: "its job is waiting",
        },
        {
          line: "8",
          repo: shown(8),
          state: "open",
          checks: "passing",
          review: "",
          pr: "!5",
          prHref: null,
          branch: publish.branch,
          job: job(8),
          reason: "",
        },
      ]);
      // the hostile text stayed text: no element made of it, nothing ran, no request left for x
      expect(await page.locator("main img, main script").count()).toBe(0);
      expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
      expect(
        await page.locator("main").evaluate((m) => /[\u0000-\u0008\u000b-\u001f\u007f]/.test(m.textContent ?? "")),
      ).toBe(false);
      expect(await page.title()).toBe(`patchbay · campaign ${ID}`);
      expect(rec.dialogs).toEqual([]);
      expect(rec.pageErrors).toEqual([]);
      expect(rec.requests.filter((u) => !u.startsWith(dash.url))).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it("the campaigns list shows merged of total, the counts by state, jobs and spend, and links to the page", async () => {
    const { page } = await open("/campaigns");
    try {
      const row = page.locator(`tr[data-campaign-id="${ID}"]`);
      await row.waitFor();
      expect(await row.locator("td.c-merged .meta").textContent()).toBe("2 / 8 merged");
      expect(await row.locator("td.c-counts .badge").allTextContents()).toEqual([
        "merged 2",
        "open 2",
        "draft 1",
        "unpublished 1",
        "conflict 1",
        "closed 1",
      ]);
      expect(await row.locator("td.c-jobs").textContent()).toBe("0 / 8 done");
      expect(await row.locator("td.c-spend").textContent()).toBe("$5.00 of $20.00");
      expect(await row.locator("td.c-campaign a").getAttribute("href")).toBe(`/campaigns/${ID}`);
      expect(await page.locator("#note").textContent()).toBe("1 campaign");
    } finally {
      await page.close();
    }
  });

  it("fits 390 px: each repository a card, no sideways scroll", async () => {
    const { page } = await open(`/campaigns/${ID}`, 390);
    try {
      await page.locator("#rows tr").nth(7).waitFor();
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      const card = await page
        .locator("#rows tr")
        .nth(0)
        .evaluate((tr) => {
          const shown = [...tr.children].filter((td) => getComputedStyle(td).display !== "none");
          const width = (n: string) => Math.round(tr.querySelector(`td.c-${n}`)!.getBoundingClientRect().width);
          return {
            display: getComputedStyle(tr).display,
            first: shown.sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)[0]!.className,
            row: Math.round(tr.getBoundingClientRect().width),
            repo: width("repo"),
            state: width("state"),
            pr: width("pr"),
          };
        });
      expect(card).toMatchObject({ display: "grid", first: "c-repo" });
      // the repository across the card, the other fields each half of it (not the table's column widths)
      expect(card.repo).toBeGreaterThan(card.row * 0.8);
      for (const half of [card.state, card.pr]) expect(half).toBeGreaterThan(card.row * 0.35);
    } finally {
      await page.close();
    }
  });

  it("an unknown or invalid id is a 404 page saying so; the API answers 404", async () => {
    for (const [id, shown] of [
      ["no-such-campaign", "no-such-campaign"],
      ["bad%20name%3Cb%3E", "bad name<b>"],
    ] as const) {
      const { page } = await open(`/campaigns/${id}`);
      try {
        const r = await page.request.get(`${dash.url}/campaigns/${id}`);
        expect(r.status()).toBe(404);
        expect(await page.locator('[data-not-found="campaign"] h1').textContent()).toBe(`No campaign ${shown}`);
        expect(await page.locator("main b").count()).toBe(0);
        expect(await page.locator('a[href="/campaigns"]').last().textContent()).toBe("All campaigns");
      } finally {
        await page.close();
      }
      const api = await fetch(`${dash.url}/api/campaigns/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(api.status).toBe(404);
    }
  });

  it("off loopback, the campaign pages and their API need the dashboard token", async () => {
    const app = Fastify({ logger: false });
    await app.register(authPlugin, { token: TOKEN, loopback: false });
    await app.register(campaignsRoutes, { client });
    try {
      const get = (url: string, headers: Record<string, string> = {}) =>
        app.inject({ method: "GET", url, headers: { host: "dash.example", ...headers } });
      for (const path of [`/api/campaigns/${ID}`, "/api/campaigns", `/campaigns/${ID}`, "/campaigns"]) {
        const r = await get(path);
        expect(r.statusCode, path).toBe(401);
        expect(r.body).not.toContain("svc-1");
      }
      const ok = await get(`/api/campaigns/${ID}`, { authorization: `Bearer ${TOKEN}` });
      expect(ok.statusCode).toBe(200);
      const body = ok.json<{
        total: number;
        counts: Record<string, number>;
        costPerMergedUsd: number | null;
        changesets: { repo: string; reason?: string; branch?: string }[];
      }>();
      expect(body.total).toBe(8);
      expect(body.counts.merged).toBe(2);
      expect(body.costPerMergedUsd).toBe(2.5);
      // what the page needs, inert: no escape or control character, no batch internals
      expect(body.changesets[5]!.reason).toBe(
        'rebase failed: <img src=x onerror="window.__pwned=2;alert(2)"> CONFLICT  in src/observability/log.ts',
      );
      expect(Object.keys(body).sort()).toEqual([
        "budgetUsd",
        "changesets",
        "checks",
        "costPerMergedUsd",
        "counts",
        "createdAt",
        "id",
        "jobs",
        "spentUsd",
        "total",
      ]);
      expect((await get(`/api/campaigns/${ID}`, { cookie: `patchbay_dashboard=${TOKEN}` })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });

  it("patchbay campaign status shows the same hostile text on a terminal without a control", async () => {
    await ensureBuilt();
    const r = await patchbay(["campaign", "status", ID], { REDIS_URL: redis.url, PATCHBAY_QUEUE: QUEUE });
    expect(r.code, r.stderr).toBe(0);
    // C0 but newline and tab, DEL, C1: what a terminal would act on.
    expect(r.stdout + r.stderr).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/);
    expect(r.stdout).not.toContain("evil-title");
    const line6 = r.stdout.split("\n").find((l) => /^\s*6\s+conflict\s/.test(l));
    expect(line6).toContain(
      'rebase failed: <img src=x onerror="window.__pwned=2;alert(2)"> CONFLICT  in src/observability/log.ts',
    );
    expect(r.stdout).toContain(HOSTILE_REPO);
    expect(r.stdout.split("\n")).toContain("cost: $5.00 spent, $2.50 per merged change (2 merged)");
  }, 180_000);

  it("campaign status --json and its summary files carry the cost per merged change", async () => {
    await ensureBuilt();
    const out = mkdtempSync(join(tmpdir(), "pb-campaign-cost-"));
    try {
      const env = { REDIS_URL: redis.url, PATCHBAY_QUEUE: QUEUE };
      const r = await patchbay(["campaign", "status", ID, "--json", "--out", out], env);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ costPerMergedUsd: 2.5, batch: { spentUsd: 5 } });
      expect(JSON.parse(readFileSync(join(out, "summary.json"), "utf8"))).toMatchObject({
        campaignId: ID,
        costUsd: { all: 5 },
        costPerMergedUsd: 2.5,
      });
      expect(readFileSync(join(out, "summary.md"), "utf8")).toContain(
        "\nCost: $5.00 spent, $2.50 per merged change (2 merged).\n",
      );
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 180_000);
});
