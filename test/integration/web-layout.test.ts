// The dashboard's layout and its not-found pages in headless Chromium (Debian's package): a private
// Redis, an in-process worker on the local backend (test/support/backend.ts) running real jobs
// against the scripted model, the dashboard in this process. At 1280 and 390 px wide: no page
// scrolls sideways with long model and batch ids (cut with an ellipsis, whole in a title);
// /jobs/<unknown> and /batches/<unknown> are 404 pages that say so, /batches/<known> is its jobs;
// a disabled Cancel looks disabled.
//
// Backend: local (in-process workers: `localWorkerConfig()`).
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { BatchClient } from "../../src/batch/batches.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { startWorker, type WorkerHandle } from "../../src/queue/worker.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { localWorkerConfig } from "../support/backend.js";
import { launchBrowser, recordPage, signedIn } from "../support/browser.js";
import { startRedis } from "../support/cluster.js";
import { reply, startFakeAnthropic, toolUse, type FakeAnthropic } from "../support/fake-anthropic.js";
import { byTurn, clampScript, taskOf } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const QUEUE = "web-layout";
const TOKEN = "layout-test-token-0123456789";
// No break opportunity in either: before, each widened its column and the page scrolled sideways.
const LONG_BATCH = `nightly-regression-sweep-2026-12-01.${"x".repeat(40)}.retry_3`; // 85 of at most 96
const LONG_MODEL = "claude-sonnet-4-5-20250929-extended-context-preview-with-a-long-model-identifier";
const WIDTHS = [1280, 390] as const;

describe("dashboard layout and not-found pages in headless Chromium", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let worker: WorkerHandle;
  let client: PatchbayClient;
  let dash: Dashboard;
  let browser: Browser;
  let batchId: string;
  let ids: string[];

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeAnthropic((req) =>
      /long-running/.test(taskOf(req.body))
        ? byTurn([reply(toolUse("bash", { command: "echo started; sleep 300" }))])(req)
        : byTurn(clampScript())(req),
    );
    worker = await startWorker({
      redisUrl: redis.url,
      queueName: QUEUE,
      concurrency: 2,
      model: () => new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 }),
      log: () => {},
      config: localWorkerConfig(),
    });
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN });
    browser = await launchBrowser();
    const batches = new BatchClient(client);
    const task = (i: number) =>
      `Fix the failing test (layout ${i}): clamp() returns the lower bound for values above the upper one, and the task goes on long enough to be cut.`;
    ({ batchId, ids } = await batches.submit(
      [1, 2].map((i) => ({
        task: task(i),
        repo: { path: CLAMP },
        model: LONG_MODEL,
        verify: "python3 -m unittest -q",
      })),
      { name: LONG_BATCH },
    ));
    const st = await batches.wait(batchId);
    expect(st.done).toBe(2);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await dash?.close();
    await client?.close();
    await worker?.shutdown(5000);
    await fake?.close();
    await redis?.stop();
  });

  const pageOf = (width: number) => browser.newPage({ viewport: { width, height: 800 }, ...signedIn(dash.url, TOKEN) });

  /** The document's width against the viewport's: wider means a sideways scroll. */
  const widths = (page: Page) =>
    page.evaluate(() => ({
      scroll: document.documentElement.scrollWidth,
      client: document.documentElement.clientWidth,
    }));

  it("the jobs list fits 1280 and 390 px with long model and batch ids: cut with an ellipsis, whole in a title", async () => {
    for (const width of WIDTHS) {
      const page = await pageOf(width);
      const rec = recordPage(page);
      await page.goto(`${dash.url}/jobs`);
      await page.locator(`tr[data-job-id="${ids[0]}"] td.c-status .badge.s-completed`).waitFor();
      const w = await widths(page);
      expect(w.scroll, `the jobs page at ${width} px`).toBeLessThanOrEqual(w.client);
      // read in one go: the list is redrawn every 2 s
      const cells = await page.evaluate((id) => {
        const row = document.querySelector(`tr[data-job-id="${id}"]`)!;
        const look = (name: string) => {
          const td = row.querySelector<HTMLElement>(`td.c-${name}`)!;
          const text = td.querySelector("a") ?? td; // what holds the text: a link, or the cell
          const r = td.getBoundingClientRect();
          return {
            text: td.textContent,
            title: td.title,
            cut: text.scrollWidth > text.clientWidth,
            ellipsis: getComputedStyle(text).textOverflow,
            left: r.left,
            right: r.right,
          };
        };
        const link = row.querySelector("td.c-job a")!.getBoundingClientRect();
        return {
          model: look("model"),
          batch: look("batch"),
          job: look("job"),
          link: { left: link.left, right: link.right, width: link.width },
        };
      }, ids[0]!);
      for (const [cell, full] of [
        [cells.model, LONG_MODEL],
        [cells.batch, batchId],
      ] as const) {
        expect(cell).toMatchObject({ text: full, title: full, cut: true, ellipsis: "ellipsis" });
        expect(cell.right).toBeLessThanOrEqual(width);
      }
      expect(cells.job.title).toBe(ids[0]);
      // the row is usable: its job link is on the screen, wide enough to tap
      expect(cells.link.left).toBeGreaterThanOrEqual(0);
      expect(cells.link.right).toBeLessThanOrEqual(width);
      expect(cells.link.width).toBeGreaterThan(width === 390 ? 200 : 100);
      await page.locator(`tr[data-job-id="${ids[0]}"] td.c-job a`).click();
      await page.waitForURL(`${dash.url}/jobs/${ids[0]}`);
      await page.locator("#head[data-status]").waitFor();
      await page.locator("#diff pre.diff").waitFor();
      // one file: "1 file", never "1 files" (the job's patch and the transcript's patch card)
      expect(await page.locator("#diff h2").textContent()).toBe("Patch (1 file)");
      await page
        .locator("#transcript")
        .getByText(/Job finished/)
        .first()
        .waitFor({ state: "attached" });
      expect(await page.locator("#transcript").textContent()).toMatch(/1 file changed · [\d,]+ bytes/);
      expect(await page.locator("body").textContent()).not.toMatch(/\b1 files\b|\b1 turns\b/);
      const j = await widths(page);
      expect(j.scroll, `the job page at ${width} px`).toBeLessThanOrEqual(j.client);

      await page.goto(`${dash.url}/batches`);
      await page.locator(`tr[data-batch-id="${batchId}"] td.spend`).waitFor();
      const b = await widths(page);
      expect(b.scroll, `the batches page at ${width} px`).toBeLessThanOrEqual(b.client);
      expect(rec.pageErrors).toEqual([]);
      await page.close();
    }
  }, 120_000);

  it("an unknown job id is a 404 page that says so, its id as text; a known one is the job's page, whatever its length", async () => {
    const page = await pageOf(1280);
    const rec = recordPage(page);
    const res = await page.goto(`${dash.url}/jobs/no-such-job-1`);
    expect(res!.status()).toBe(404);
    expect(res!.headers()["content-type"]).toBe("text/html; charset=utf-8");
    expect(await page.locator("main h1").textContent()).toBe("No job no-such-job-1");
    expect(await page.locator("main").textContent()).toContain(`in queue ${QUEUE}`);
    expect(await page.locator('main a[href="/jobs"]').count()).toBe(1);

    const hostile = `<img src=x onerror="window.__pwned=1;alert(1)">`;
    expect((await page.goto(`${dash.url}/jobs/${encodeURIComponent(hostile)}`))!.status()).toBe(404);
    expect(await page.locator("main h1").textContent()).toBe(`No job ${hostile}`);
    expect(await page.locator("main img").count()).toBe(0);
    expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined();

    // BullMQ's own keys beside the jobs' (a hash, a stream) name no job
    for (const key of ["meta", "events"]) expect((await page.goto(`${dash.url}/jobs/${key}`))!.status(), key).toBe(404);
    expect((await page.goto(`${dash.url}/jobs/${ids[0]}`))!.status()).toBe(200);
    await page.locator("#head[data-status]").waitFor();
    // the longest id a job can have (128 characters) has its page too: over 100 it was the router's JSON 414
    const longest = await client.enqueue({
      task: "Fix the failing test (the longest id).",
      repo: { path: CLAMP },
      jobId: `${"j".repeat(120)}-longest`,
    });
    expect(longest).toHaveLength(128);
    expect((await page.goto(`${dash.url}/jobs/${longest}`))!.status()).toBe(200);
    await page.locator("#head[data-state]").waitFor();
    expect(rec.dialogs).toEqual([]);
    expect(rec.pageErrors).toEqual([]);
    await page.close();
  });

  it("/batches/<id> is the batch's jobs, as its links are; an unknown batch is a 404 page", async () => {
    const page = await pageOf(390);
    const rec = recordPage(page);
    await page.goto(`${dash.url}/batches/${batchId}`);
    expect(page.url()).toBe(`${dash.url}/jobs?batch=${batchId}`);
    await page.locator("#rows tr").nth(1).waitFor();
    expect(
      (await page.locator("#rows tr").evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-job-id")))).sort(),
    ).toEqual([...ids].sort());

    for (const id of ["no-such-batch", "<b>bold</b>", "a".repeat(97)]) {
      const res = await page.goto(`${dash.url}/batches/${encodeURIComponent(id)}`);
      expect(res!.status(), id).toBe(404);
      expect(res!.headers()["content-type"]).toBe("text/html; charset=utf-8");
      expect(await page.locator("main h1").textContent()).toBe(`No batch ${id}`);
      expect(await page.locator('main a[href="/batches"]').count()).toBe(1);
    }
    expect(await page.locator("main b").count()).toBe(0);
    expect(rec.pageErrors).toEqual([]);
    await page.close();
  });

  it("Cancel is enabled while the job runs and looks disabled, and is, once it ended", async () => {
    const id = await client.enqueue({ task: "A long-running job to cancel.", repo: { path: CLAMP }, timeoutSec: 120 });
    const page = await pageOf(1280);
    await page.goto(`${dash.url}/jobs/${id}`);
    await page.locator("#head[data-state=active]").waitFor({ timeout: 60_000 });
    const cancel = page.locator("#cancel");
    await page.locator("#cancel:not([disabled])").waitFor();
    const style = () =>
      cancel.evaluate((b) => {
        const s = getComputedStyle(b);
        return { color: s.color, border: s.borderTopColor, background: s.backgroundColor, cursor: s.cursor };
      });
    const enabled = await style();
    const ariaEnabled = await cancel.getAttribute("aria-disabled");

    expect(await client.cancel(id)).toBe("signalled");
    await page.locator("#head[data-status=cancelled]").waitFor({ timeout: 60_000 });
    await page.locator("#cancel[disabled]").waitFor();
    const disabled = await style();
    // before, a disabled Cancel kept its red text and border, only faded: it read as one to press
    expect(disabled.color).not.toBe(enabled.color);
    expect(disabled.border).not.toBe(enabled.border);
    expect(disabled.background).not.toBe(enabled.background);
    expect({ enabled: enabled.cursor, disabled: disabled.cursor }).toEqual({
      enabled: "pointer",
      disabled: "not-allowed",
    });
    expect(await cancel.isDisabled()).toBe(true);
    expect({ enabled: ariaEnabled, disabled: await cancel.getAttribute("aria-disabled") }).toEqual({
      enabled: "false",
      disabled: "true",
    });
    expect(await cancel.getAttribute("title")).toBe("the job has finished: nothing to cancel");
    await page.close();

    // a finished job's page, narrow: disabled from the start, the same grey
    const narrow = await pageOf(390);
    await narrow.goto(`${dash.url}/jobs/${ids[0]}`);
    await narrow.locator("#head[data-status]").waitFor();
    expect(await narrow.locator("#cancel").isDisabled()).toBe(true);
    expect(await narrow.locator("#cancel").evaluate((b) => getComputedStyle(b).color)).toBe(disabled.color);
    await narrow.close();
  }, 120_000);
});
