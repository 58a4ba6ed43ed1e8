// Guards the job page's head in headless Chromium, with jobs made by hand (no sandbox): the job's
// status comes first and the queue's state is plain text beside it (a cancelled job shows no green
// "completed" badge); while a tool call runs the page counts it and shows the cost so far, not
// "0 tool calls" and a blank cost; without the dashboard's token (tokenless reads) Cancel and Retry
// are greyed out saying why, and with it they are not. The hand-made task text is hostile: inert.
import { Worker } from "bullmq";
import { Redis } from "ioredis";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import { keys } from "../../src/queue/keys.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { launchBrowser, recordPage, signedIn } from "../support/browser.js";
import { startRedis } from "../support/cluster.js";

const QUEUE = "web-job-page";
const TOKEN = "job-page-test-token-0123456789";
const HOSTILE = '<img src=x onerror="window.__pwned=1">';

describe("the job page's head in headless Chromium", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let client: PatchbayClient;
  let conn: Redis;
  let worker: Worker;
  let dash: Dashboard;
  let browser: Browser;
  let release!: () => void;

  beforeAll(async () => {
    redis = await startRedis();
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    await client.enqueue({
      task: `cancelled ${HOSTILE}`,
      repo: { git: "https://example.org/a.git" },
      jobId: "was-cancelled",
    });
    await client.enqueue({
      task: `running ${HOSTILE}`,
      repo: { git: "https://example.org/b.git" },
      jobId: "running-1",
    });
    // A stand-in worker: the first job hands back a cancelled result (BullMQ calls it completed),
    // the second stays active until the end.
    conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    const held = new Promise<void>((r) => (release = r));
    worker = new Worker(
      QUEUE,
      async (job) => {
        if (job.id === "was-cancelled")
          return {
            status: "cancelled",
            patch: "",
            filesChanged: [],
            diffstat: "",
            turns: 1,
            costUsd: 0.01,
            error: "the job was cancelled",
          };
        await held;
        return undefined;
      },
      { connection: conn, prefix: client.queue.opts.prefix, concurrency: 1 },
    );
    const events = keys(QUEUE).events("running-1");
    const add = (e: object) =>
      client.redis.xadd(events, "*", "e", JSON.stringify({ jobId: "running-1", ts: Date.now(), ...e }));
    await add({ type: "model_request", turn: 1 });
    await add({
      type: "model_response",
      turn: 1,
      model: "claude-sonnet-4-5",
      usage: { inputTokens: 1000, outputTokens: 100, cacheReadTokens: 0, cacheWriteTokens: 0 },
      ms: 10,
      stopReason: "tool_use",
      content: [{ type: "tool_use", id: "tu-1", name: "bash", input: { command: "sleep 60" } }],
    });
    await add({ type: "tool_call", turn: 1, toolUseId: "tu-1", name: "bash", input: { command: "sleep 60" } });
    for (let i = 0; i < 100 && (await client.queue.getJobState("running-1")) !== "active"; i++)
      await new Promise((r) => setTimeout(r, 100));
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN, loopbackReads: true });
    browser = await launchBrowser();
  }, 60_000);

  afterAll(async () => {
    release?.();
    await browser?.close();
    await dash?.close();
    await worker?.close(true);
    conn?.disconnect();
    await client?.close();
    await redis?.stop();
  });

  it("a cancelled job's status is cancelled, its queue state plain text beside it; the list says the same", async () => {
    const ctx = await browser.newContext(signedIn(dash.url, TOKEN));
    try {
      const page = await ctx.newPage();
      const rec = recordPage(page);
      await page.goto(`${dash.url}/jobs/was-cancelled`);
      await page.locator("#head[data-status=cancelled]").waitFor();
      const badges = await page.locator("#head .badge").allTextContents();
      expect(badges).toEqual(["cancelled"]); // no "completed" badge
      expect(await page.locator("#head dd.queue-state").textContent()).toBe("completed");
      expect(await page.locator("#head .task").textContent()).toContain(HOSTILE); // as text
      await page.goto(`${dash.url}/jobs`);
      const row = page.locator('tr[data-job-id="was-cancelled"]');
      await row.waitFor();
      expect(await row.locator("td.c-status .badge").textContent()).toBe("cancelled");
      expect(await row.locator("td.c-queue").textContent()).toBe("completed");
      expect(await row.locator("td .badge.s-completed").count()).toBe(0);
      expect(await page.locator('tr[data-job-id="running-1"] td.c-status').textContent()).toBe("running");
      expect(await page.evaluate(() => (window as { __pwned?: number }).__pwned)).toBeUndefined();
      expect(rec.pageErrors).toEqual([]);
    } finally {
      await ctx.close();
    }
  });

  it("while a tool call runs: the call counted as running, the turns and the cost so far", async () => {
    const ctx = await browser.newContext(signedIn(dash.url, TOKEN));
    try {
      const page = await ctx.newPage();
      await page.goto(`${dash.url}/jobs/running-1`);
      await page.locator(".tool .result .pending").waitFor();
      await page.locator("#head[data-state=active]").waitFor();
      expect(await page.locator("#totals").textContent()).toMatch(
        /^3 events · 1 turn · 1 tool call \(1 running\) · tokens in 1,000 .* · \$\d+\.\d{4} so far$/,
      );
      const dd = (name: string) =>
        page.locator("#head dt", { hasText: new RegExp(`^${name}$`) }).locator("xpath=../dd");
      expect(await dd("status").textContent()).toBe("running");
      expect(await dd("turns").textContent()).toBe("1");
      expect(await dd("cost").textContent()).toMatch(/^\$\d+\.\d{4} so far$/);
    } finally {
      await ctx.close();
    }
  });

  it("without the token Cancel and Retry are greyed out saying why; with it Cancel is on", async () => {
    const anon = await browser.newContext(); // tokenless reads: the page opens, its writes would be refused
    try {
      const page = await anon.newPage();
      await page.goto(`${dash.url}/jobs/running-1`);
      await page.locator("#head[data-state=active]").waitFor();
      for (const b of ["#cancel", "#retry"]) {
        expect(await page.locator(b).isDisabled(), b).toBe(true);
        expect(await page.locator(b).getAttribute("title"), b).toMatch(/need the dashboard's token .*\?token=/);
      }
      expect(await page.locator("#msg").textContent()).toMatch(
        /^read-only: Cancel and Retry need the dashboard's token/,
      );
    } finally {
      await anon.close();
    }
    const ctx = await browser.newContext(signedIn(dash.url, TOKEN));
    try {
      const page = await ctx.newPage();
      await page.goto(`${dash.url}/jobs/running-1`);
      await page.locator("#head[data-state=active]").waitFor();
      await page.locator("#cancel:not([disabled])").waitFor();
      expect(await page.locator("#msg").textContent()).toBe("");
    } finally {
      await ctx.close();
    }
  });
});
