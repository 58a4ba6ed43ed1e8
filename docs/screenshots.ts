// Makes the dashboard's screenshots in docs/: the jobs list, a job page and a campaign's page 1280
// px wide (dashboard-jobs.png, dashboard-job.png, dashboard-campaign.png) and 390 px wide, a
// phone's (dashboard-jobs-390.png, dashboard-job-390.png, dashboard-campaign-390.png): real jobs (a
// worker process, real sandboxes, the scripted model of the tests) shown by the dashboard in
// headless Chromium. The campaign's jobs are real; its changesets are seeded in the campaign store
// as publishing and tracking would leave them (no forge is called). Run by hand, not by the tests.
// Usage: npx tsx docs/screenshots.ts   (Docker, redis-server, chromium and dist/ needed)
import { CampaignStore } from "../src/campaign/store.js";
import type { Changeset } from "../src/campaign/changeset.js";
import { BatchClient } from "../src/batch/batches.js";
import { PatchbayClient } from "../src/queue/client.js";
import { startDashboard } from "../src/web/server.js";
import { launchBrowser, signedIn } from "../test/support/browser.js";
import { startRedis, startWorkerProc } from "../test/support/cluster.js";
import { reply, startFakeAnthropic, text, toolUse } from "../test/support/fake-anthropic.js";
import { byTurn, clampScript, taskOf } from "../test/support/scripts.js";

const CLAMP = new URL("../examples/clamp", import.meta.url).pathname;
const OUT = new URL(".", import.meta.url).pathname;
const QUEUE = "screenshots";

const redis = await startRedis();
const fake = await startFakeAnthropic((req) =>
  /long-running/.test(taskOf(req.body))
    ? byTurn([reply(toolUse("bash", { command: "python3 -m unittest -q; sleep 600" }))])(req)
    : /in reporting/.test(taskOf(req.body))
      ? byTurn([1, 2, 3].map(() => reply(text("Done."))))(req) // changes nothing: its verify fails
      : byTurn(clampScript())(req),
);

/** The campaign: 12 services, its jobs run for real, its changesets as a few weeks of tracking leave them. */
const SERVICES = [
  "billing",
  "checkout",
  "search",
  "inventory",
  "notifications",
  "auth-gateway",
  "recommendations",
  "shipping",
  "payments",
  "user-profile",
  "reporting",
  "catalog",
];
const CAMPAIGN = "bump-logging-api";
const BRANCH = `patchbay/${CAMPAIGN}`;
type Seed = Pick<Changeset, "state"> & Partial<Changeset>;
const pr = (n: number, checks: Changeset["checks"], review: Changeset["review"]): Partial<Changeset> => ({
  forge: "github",
  number: n,
  checks,
  review,
  branch: BRANCH,
  base: "main",
  verified: true,
});
const SEEDS: (Seed | undefined)[] = [
  { state: "merged", ...pr(412, "passing", "approved") },
  { state: "merged", ...pr(1088, "passing", "approved") },
  { state: "merged", ...pr(97, "passing", "approved") },
  { state: "merged", ...pr(230, "passing", "approved") },
  { state: "open", ...pr(518, "failing", "changes_requested") },
  { state: "open", ...pr(77, "passing", "approved") },
  { state: "draft", ...pr(1402, "pending", "review_required") },
  { state: "draft", ...pr(64, "passing", "review_required") },
  { state: "closed", ...pr(301, "none", "none"), reason: "closed on GitHub: the service is being retired" },
  {
    state: "conflict",
    branch: BRANCH,
    base: "main",
    verified: true,
    reason: "the base moved: main changed src/logging/setup.py since the job ran (campaign retry --status conflict)",
  },
  undefined, // reporting: its verify failed, so nothing was published
  { state: "open", ...pr(845, "failing", "none") },
];

async function seedCampaign(client: PatchbayClient): Promise<void> {
  const lines = SERVICES.map((_, i) => i + 1);
  const batches = new BatchClient(client);
  const specs = SERVICES.map((s) => ({
    task: `Bump the logging API to structlog 24 in ${s}.`,
    repo: { path: CLAMP },
    verify: "python3 -m unittest -q",
  }));
  const { batchId, ids } = await batches.submit(specs, { name: CAMPAIGN, lines, budgetUsd: 25 });
  await batches.wait(batchId);
  const store = new CampaignStore(client.redis, QUEUE, client.retentionSec);
  const git = (s: string) => `https://github.com/acme/${s}.git`;
  await store.saveDef({
    name: CAMPAIGN,
    createdAt: Date.now(),
    budgetUsd: 25,
    repos: SERVICES.map((s, i) => ({ line: i + 1, git: git(s), vars: {} })),
    publish: {
      branch: BRANCH,
      draft: true,
      title: "Bump the logging API to structlog 24",
      body: "{{summary}}",
      author: { name: "patchbay", email: "patchbay@acme.example" },
      message: "Bump the logging API",
    },
  });
  for (const [i, seed] of SEEDS.entries()) {
    if (!seed) continue;
    const url = seed.number ? `https://github.com/acme/${SERVICES[i]}/pull/${seed.number}` : undefined;
    await store.saveChangeset(CAMPAIGN, {
      line: i + 1,
      repo: git(SERVICES[i]!),
      jobId: ids[i]!,
      updatedAt: Date.now(),
      ...(url ? { url } : {}),
      ...seed,
    });
  }
}
const env = {
  REDIS_URL: redis.url,
  PATCHBAY_QUEUE: QUEUE,
  ANTHROPIC_BASE_URL: fake.url,
  ANTHROPIC_API_KEY: "screenshots",
  PATCHBAY_CONCURRENCY: "3",
};
const worker = startWorkerProc(env);
const client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
const TOKEN = "screenshots-token-0123456789";
const dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN });
const browser = await launchBrowser();
try {
  await worker.waitFor(/ready: queue screenshots/);
  const tasks = [
    "Make the failing tests pass.",
    "Fix clamp() for values above the upper bound.",
    "Make the failing tests pass, then run them again.",
  ];
  const done = [];
  for (const [i, task] of tasks.entries())
    done.push(
      await client.enqueue({ task, repo: { path: CLAMP }, verify: "python3 -m unittest -q", jobId: `clamp-${i + 1}` }),
    );
  await Promise.all(done.map((id) => client.waitForResult(id, { timeoutMs: 180_000 })));
  // a batch with a long name and a dated model id: the list cuts both with an ellipsis
  const batches = new BatchClient(client);
  const sweep = [1, 2].map((i) => ({
    task: `Fix clamp() (sweep line ${i}).`,
    repo: { path: CLAMP },
    verify: "python3 -m unittest -q",
    model: "claude-sonnet-4-5-20250929",
  }));
  const { batchId } = await batches.submit(sweep, { name: "nightly-regression-sweep-2026-12-01.clamp" });
  await batches.wait(batchId);
  const cancelled = await client.enqueue({
    task: "A long-running job that was cancelled.",
    repo: { path: CLAMP },
    jobId: "long-running-1",
  });
  while ((await client.status(cancelled)).state !== "active") await new Promise((r) => setTimeout(r, 200));
  await client.cancel(cancelled);
  await client.waitForResult(cancelled, { timeoutMs: 60_000 });
  const running = await client.enqueue({
    task: "A long-running job: the full test suite.",
    repo: { path: CLAMP },
    jobId: "long-running-2",
  });
  while ((await client.status(running)).state !== "active") await new Promise((r) => setTimeout(r, 200));

  const page = await browser.newPage({
    viewport: { width: 1280, height: 560 },
    deviceScaleFactor: 1,
    ...signedIn(dash.url, TOKEN),
  });
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
  const phone = await browser.newPage({
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 1,
    ...signedIn(dash.url, TOKEN),
  });
  await phone.goto(`${dash.url}/jobs`);
  await phone.locator('tr[data-job-id="clamp-1"]').waitFor();
  await phone.screenshot({ path: `${OUT}dashboard-jobs-390.png` });
  await phone.goto(`${dash.url}/jobs/clamp-1`);
  await phone.locator("#diff pre.diff").waitFor();
  await phone.locator("#live", { hasText: "finished" }).waitFor();
  await phone.screenshot({ path: `${OUT}dashboard-job-390.png` });

  // a campaign's page: the burndown and a row per repository, whole at 1280 px, its first screen on a phone
  await seedCampaign(client);
  await page.setViewportSize({ width: 1280, height: 600 });
  await page.goto(`${dash.url}/campaigns/${CAMPAIGN}`);
  await page
    .locator("#rows tr")
    .nth(SERVICES.length - 1)
    .waitFor();
  await page.setViewportSize({ width: 1280, height: await page.evaluate(() => document.documentElement.scrollHeight) });
  await page.screenshot({ path: `${OUT}dashboard-campaign.png`, fullPage: true });
  await phone.goto(`${dash.url}/campaigns/${CAMPAIGN}`);
  await phone
    .locator("#rows tr")
    .nth(SERVICES.length - 1)
    .waitFor();
  await phone.screenshot({ path: `${OUT}dashboard-campaign-390.png` });
  const made = [
    "dashboard-jobs.png",
    "dashboard-job.png",
    "dashboard-jobs-390.png",
    "dashboard-job-390.png",
    "dashboard-campaign.png",
    "dashboard-campaign-390.png",
  ];
  console.log(`wrote ${made.map((f) => OUT + f).join(", ")}`);
} finally {
  await browser.close();
  await dash.close();
  await client.close();
  await worker.stop("SIGTERM");
  await fake.close();
  await redis.stop();
}
