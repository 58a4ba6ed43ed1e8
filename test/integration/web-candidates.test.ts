// Guards a job's candidates on the dashboard and the HTTP API, with results made by hand (no
// sandbox, no model): a stand-in BullMQ worker hands back a job's result with three candidates as a
// worker stores it, and writes its transcript's candidate_picked. The job page (headless Chromium)
// shows them side by side: a card each with status, verified, cost, turns, patch size, files changed
// and a link to the candidate's own page, the picked one marked, and why it was picked; a
// candidate's hostile error renders as text, never as HTML. A job without candidates shows none.
// GET /api/v1/jobs/:id hands the candidates and the pick back as stored, as its OpenAPI document says.
import { Worker } from "bullmq";
import { Redis } from "ioredis";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emptyResult, type CandidateOutcome, type JobResult } from "../../src/core/spec/spec.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { keys } from "../../src/queue/keys.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { expectDocumented, fetchDocument, http } from "../support/api.js";
import { launchBrowser, recordPage, signedIn } from "../support/browser.js";
import { startRedis } from "../support/cluster.js";

const QUEUE = "web-candidates";
const TOKEN = "candidates-test-token-0123456789";
const HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';
const WHY = "verify passed 2 candidates; candidate 2 has the smallest patch, then the lowest cost";
const CANDIDATES: CandidateOutcome[] = [
  {
    n: 1,
    jobId: "best-1-C1",
    status: "completed",
    verified: true,
    costUsd: 0.03,
    turns: 7,
    patchBytes: 900,
    filesChanged: 2,
  },
  {
    n: 2,
    jobId: "best-1-C2",
    status: "completed",
    verified: true,
    costUsd: 0.02,
    turns: 5,
    patchBytes: 31,
    filesChanged: 1,
  },
  {
    n: 3,
    jobId: "best-1-C3",
    status: "failed",
    costUsd: 0,
    turns: 0,
    patchBytes: 0,
    filesChanged: 0,
    error: `boom ${HOSTILE}\u001b[31m red`,
  },
];

describe("a job's candidates on the dashboard and the API", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let client: PatchbayClient;
  let conn: Redis;
  let worker: Worker;
  let dash: Dashboard;
  let browser: Browser;

  beforeAll(async () => {
    redis = await startRedis();
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    worker = new Worker(
      QUEUE,
      async (job): Promise<JobResult> => {
        const done = { ...emptyResult("completed", "", { jobId: job.id! }), error: undefined, patch: "" };
        if (job.id !== "best-1") return done;
        const event = { ts: new Date().toISOString(), jobId: job.id, attempt: 1, type: "candidate_picked" };
        const picked = { ...event, picked: 2, why: WHY, candidates: CANDIDATES };
        await client.redis.xadd(keys(QUEUE).events(job.id), "*", "e", JSON.stringify(picked));
        return { ...done, costUsd: 0.05, turns: 5, candidates: CANDIDATES, picked: 2 };
      },
      { connection: conn, prefix: client.queue.opts.prefix },
    );
    for (const jobId of ["best-1", "plain-1"]) {
      await client.enqueue({ task: `fix ${jobId}`, repo: { git: "https://example.org/a.git" }, jobId });
      await client.waitForResult(jobId, { timeoutMs: 20_000, warnIfNoWorker: false });
    }
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN });
    browser = await launchBrowser();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await dash?.close();
    await worker?.close(true);
    conn?.disconnect();
    await client?.close();
    await redis?.stop();
  });

  it("the job page shows the candidates side by side, the picked one marked, the hostile error as text", async () => {
    const ctx = await browser.newContext({ ...signedIn(dash.url, TOKEN), viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      const rec = recordPage(page);
      await page.goto(`${dash.url}/jobs/best-1`);
      await page.locator("#candidates .why").waitFor();
      const cards = page.locator("#candidates .cand");
      expect(await cards.count()).toBe(3);
      expect(await page.locator("#candidates h2").textContent()).toBe("Candidates (3 candidates)");
      // side by side: one row of cards on a wide page
      const boxes = await Promise.all([0, 1, 2].map(async (i) => (await cards.nth(i).boundingBox())!));
      expect(new Set(boxes.map((b) => Math.round(b.y))).size).toBe(1);
      expect(boxes[0]!.x).toBeLessThan(boxes[1]!.x);
      expect(boxes[1]!.x).toBeLessThan(boxes[2]!.x);

      const fields = async (n: number) => {
        const card = page.locator(`#candidates .cand[data-n="${n}"]`);
        const names = await card.locator("dt").allTextContents();
        const values = await card.locator("dd").allTextContents();
        return Object.fromEntries(names.map((k, i) => [k, values[i]]));
      };
      expect(await fields(1)).toEqual({
        status: "completed",
        verified: "yes",
        cost: "$0.03",
        turns: "7",
        patch: "900 bytes",
        files: "2 files",
      });
      expect(await fields(2)).toEqual({
        status: "completed",
        verified: "yes",
        cost: "$0.02",
        turns: "5",
        patch: "31 bytes",
        files: "1 file",
      });
      expect(await fields(3)).toMatchObject({ status: "failed", verified: "—", patch: "0 bytes" });
      expect(await page.locator("#candidates .cand.picked").getAttribute("data-n")).toBe("2");
      expect(await page.locator("#candidates .cand.picked .badge.picked").textContent()).toBe("picked");
      for (const n of [1, 2, 3])
        expect(await page.locator(`#candidates .cand[data-n="${n}"] a.job`).getAttribute("href")).toBe(
          `/jobs/best-1-C${n}`,
        );
      expect(await page.locator("#candidates .why").textContent()).toBe(`Why: ${WHY}`);

      // The hostile error: its markup is the card's text, no element made of it, no script run.
      expect(await page.locator('#candidates .cand[data-n="3"] pre.out').textContent()).toBe(`boom ${HOSTILE} red`);
      expect(await page.locator("#candidates img, #candidates script").count()).toBe(0);
      expect(await page.evaluate(() => (window as { __pwned?: number }).__pwned)).toBeUndefined();
      expect(rec.dialogs).toEqual([]);
      expect(rec.pageErrors).toEqual([]);
    } finally {
      await ctx.close();
    }
  });

  it("a job without candidates shows no candidates section", async () => {
    const ctx = await browser.newContext(signedIn(dash.url, TOKEN));
    try {
      const page = await ctx.newPage();
      await page.goto(`${dash.url}/jobs/plain-1`);
      await page.locator("#head[data-status=completed]").waitFor();
      expect(await page.locator("#candidates").textContent()).toBe("");
    } finally {
      await ctx.close();
    }
  });

  it("GET /api/v1/jobs/:id hands back the candidates and the pick as stored, as documented", async () => {
    const doc = await fetchDocument(dash.url, TOKEN);
    const res = await http(dash.url, "GET", "/api/v1/jobs/best-1", { token: TOKEN });
    expect(res.status).toBe(200);
    expect(res.json.result.candidates).toEqual(CANDIDATES);
    expect(res.json.result.picked).toBe(2);
    expectDocumented(doc, res);
    const result = doc.deref.components.schemas.JobResult;
    expect(result.properties.candidates.items.properties.jobId).toBeDefined();
    expect(result.properties.picked).toBeDefined();
    // The dashboard's own data: the same candidates, their texts inert (no escape sequence).
    const page = await http(dash.url, "GET", "/api/jobs/best-1", { token: TOKEN });
    expect(page.json.picked).toBe(2);
    expect(page.json.candidates[2].error).toBe(`boom ${HOSTILE} red`);
  });
});
