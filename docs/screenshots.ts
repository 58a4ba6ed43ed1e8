// Makes the dashboard's screenshots in docs/: the jobs list and a job page 1280 px wide
// (dashboard-jobs.png, dashboard-job.png) and 390 px wide, a phone's (dashboard-jobs-390.png,
// dashboard-job-390.png): real jobs (a worker process, real sandboxes, the scripted model of the
// tests) shown by the dashboard in headless Chromium. Run by hand, not by the tests.
// Usage: npx tsx docs/screenshots.ts   (Docker, redis-server, chromium and dist/ needed)
import { BatchClient } from "../src/queue/batch.js";
import { PatchbayClient } from "../src/queue/client.js";
import { startDashboard } from "../src/web/server.js";
import { launchBrowser } from "../test/support/browser.js";
import { startRedis, startWorkerProc } from "../test/support/cluster.js";
import { reply, startFakeAnthropic, toolUse } from "../test/support/fake-anthropic.js";
import { byTurn, clampScript, taskOf } from "../test/support/scripts.js";

const CLAMP = new URL("../examples/clamp", import.meta.url).pathname;
const OUT = new URL(".", import.meta.url).pathname;
const QUEUE = "screenshots";

const redis = await startRedis();
const fake = await startFakeAnthropic((req) =>
  /long-running/.test(taskOf(req.body)) ? byTurn([reply(toolUse("bash", { command: "python3 -m unittest -q; sleep 600" }))])(req) : byTurn(clampScript())(req),
);
const env = { REDIS_URL: redis.url, PATCHBAY_QUEUE: QUEUE, ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "screenshots", PATCHBAY_CONCURRENCY: "3" };
const worker = startWorkerProc(env);
const client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
const dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: "screenshots-token-0123456789" });
const browser = await launchBrowser();
try {
  await worker.waitFor(/ready: queue screenshots/);
  const tasks = ["Make the failing tests pass.", "Fix clamp() for values above the upper bound.", "Make the failing tests pass, then run them again."];
  const done = [];
  for (const [i, task] of tasks.entries()) done.push(await client.enqueue({ task, repo: { path: CLAMP }, verify: "python3 -m unittest -q", jobId: `clamp-${i + 1}` }));
  await Promise.all(done.map((id) => client.waitForResult(id, { timeoutMs: 180_000 })));
  // a batch with a long name and a dated model id: the list cuts both with an ellipsis
  const batches = new BatchClient(client);
  const sweep = [1, 2].map((i) => ({ task: `Fix clamp() (sweep line ${i}).`, repo: { path: CLAMP }, verify: "python3 -m unittest -q", model: "claude-sonnet-4-5-20250929" }));
  const { batchId } = await batches.submit(sweep, { name: "nightly-regression-sweep-2026-12-01.clamp" });
  await batches.wait(batchId);
  const cancelled = await client.enqueue({ task: "A long-running job that was cancelled.", repo: { path: CLAMP }, jobId: "long-running-1" });
  while ((await client.status(cancelled)).state !== "active") await new Promise((r) => setTimeout(r, 200));
  await client.cancel(cancelled);
  await client.waitForResult(cancelled, { timeoutMs: 60_000 });
  const running = await client.enqueue({ task: "A long-running job: the full test suite.", repo: { path: CLAMP }, jobId: "long-running-2" });
  while ((await client.status(running)).state !== "active") await new Promise((r) => setTimeout(r, 200));

  const page = await browser.newPage({ viewport: { width: 1280, height: 560 }, deviceScaleFactor: 1 });
  await page.goto(`${dash.url}/jobs`);
  await page.locator('tr[data-job-id="clamp-1"]').waitFor();
  await page.screenshot({ path: `${OUT}dashboard-jobs.png` });

  await page.setViewportSize({ width: 1280, height: 900 });
  await page.goto(`${dash.url}/jobs/clamp-1`);
  await page.locator("#diff pre.diff").waitFor();
  await page.locator("#live", { hasText: "finished" }).waitFor();
  // the whole page in the viewport: off-screen turns are not painted (content-visibility: auto)
  await page.setViewportSize({ width: 1280, height: await page.evaluate(() => document.documentElement.scrollHeight) });
  await page.waitForTimeout(300);
  await page.setViewportSize({ width: 1280, height: await page.evaluate(() => document.documentElement.scrollHeight) });
  await page.screenshot({ path: `${OUT}dashboard-job.png`, fullPage: true });

  // a phone: the list as cards, a job page's first screen
  const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 1 });
  await phone.goto(`${dash.url}/jobs`);
  await phone.locator('tr[data-job-id="clamp-1"]').waitFor();
  await phone.screenshot({ path: `${OUT}dashboard-jobs-390.png` });
  await phone.goto(`${dash.url}/jobs/clamp-1`);
  await phone.locator("#diff pre.diff").waitFor();
  await phone.locator("#live", { hasText: "finished" }).waitFor();
  await phone.screenshot({ path: `${OUT}dashboard-job-390.png` });
  console.log(`wrote ${["dashboard-jobs.png", "dashboard-job.png", "dashboard-jobs-390.png", "dashboard-job-390.png"].map((f) => OUT + f).join(", ")}`);
} finally {
  await browser.close();
  await dash.close();
  await client.close();
  await worker.stop("SIGTERM");
  await fake.close();
  await redis.stop();
}
