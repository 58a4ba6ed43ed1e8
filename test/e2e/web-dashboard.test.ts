// The dashboard in a real browser (headless Chromium, Debian's package): a private Redis, a worker
// process running jobs in real sandboxes against the scripted model, the dashboard in this process.
//
// Backend: Docker (the setup network, the policy's limits, the engine's refusals, a browser over
// real jobs).
import { usd } from "../../src/core/money.js";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchClient } from "../../src/batch/batches.js";
import { PatchbayClient } from "../../src/queue/client.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { launchBrowser, recordPage } from "../support/browser.js";
import { cli, removeDir, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic, type Reply } from "../support/fake-anthropic.js";
import { byTurn, clampScript, taskOf } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const QUEUE = "web-dashboard";
const TOKEN = "dashboard-test-token-0123456789";
const EDITOR = "str_replace_based_edit_tool";

// Hostile output: markup that would run if it were parsed as HTML, and terminal escapes
// (colour, window title, clipboard write).
const HOSTILE_PRINTF = String.raw`printf '<script>window.__pwned=1;alert(1)</script>\n<img src=x onerror="window.__pwned=2;alert(2)">\n\033[31mRED\033[0m \033]0;evil-title\007\033]52;c;ZXZpbA==\007 done\n'`;
const HOSTILE_SCRIPT = (): Reply[] => [
  reply(
    text("Looking <script>window.__pwned=3;alert(3)</script> around."),
    toolUse("bash", { command: HOSTILE_PRINTF }),
  ),
  reply(
    toolUse(EDITOR, {
      command: "create",
      path: "/workspace/<img src=x onerror=alert(4)>.txt",
      file_text: "<script>window.__pwned=4</script>\n",
    }),
  ),
  reply(text('All done <img src=x onerror="window.__pwned=5;alert(5)"> \u001b[2J')),
];
const STEPS = (n: number): Reply[] => [
  ...Array.from({ length: n }, (_, i) =>
    reply(text(`Step ${i}.`), toolUse("bash", { command: `echo live-step-${i}` })),
  ),
  reply(text("All steps done.")),
];

/** A gate the scripted model waits on before answering a given turn of a task. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
}

describe("dashboard in headless Chromium", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let worker: WorkerProc;
  let client: PatchbayClient;
  let dash: Dashboard;
  let browser: Browser;
  let ctx: BrowserContext;
  let env: Record<string, string>;
  const liveGate = gate();

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeAnthropic(async (req) => {
      const task = taskOf(req.body);
      const turn = (req.body.messages as { role: string }[]).filter((m) => m.role === "assistant").length;
      if (/live steps/.test(task)) {
        if (turn === 2) await liveGate.opened; // hold the job after two tool calls until the page is open
        return byTurn(STEPS(4))(req);
      }
      if (/long-running/.test(task))
        return byTurn([reply(toolUse("bash", { command: "echo started-sleeping; sleep 300" }))])(req);
      if (/hostile/.test(task)) return byTurn(HOSTILE_SCRIPT())(req);
      return byTurn(clampScript())(req);
    });
    env = {
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: QUEUE,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_CONCURRENCY: "3",
      PATCHBAY_CANCEL_POLL_MS: "500",
    };
    worker = startWorkerProc(env);
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN });
    browser = await launchBrowser();
    ctx = await browser.newContext();
    const login = await ctx.newPage(); // every page needs the token, reads too: the cookie ?token= sets
    await login.goto(`${dash.url}/jobs?token=${TOKEN}`);
    await login.close();
    await worker.waitFor(/ready: queue web-dashboard/);
  });

  afterAll(async () => {
    await ctx?.close();
    await browser?.close();
    await dash?.close();
    await client?.close();
    await worker?.stop("SIGTERM");
    await fake?.close();
    await redis?.stop();
  });

  async function open(path: string): Promise<{ page: Page; rec: ReturnType<typeof recordPage> }> {
    const page = await ctx.newPage();
    const rec = recordPage(page);
    await page.goto(dash.url + path);
    return { page, rec };
  }

  async function eventsOf(id: string): Promise<TranscriptEvent[]> {
    const out: TranscriptEvent[] = [];
    for await (const e of client.watch(id, { follow: false })) out.push(e);
    return out;
  }

  it("lists a running job, and its page shows new tool calls as they happen, without a reload", async () => {
    const id = await client.enqueue({ task: "Run the live steps.", repo: { path: CLAMP }, jobId: "live-steps-1" });
    // the job is held at its third model call: two tool calls done
    await waitUntil(async () => fake.requests.filter((r) => /live steps/.test(taskOf(r.body))).length >= 3);

    const list = await open("/jobs?state=active");
    const row = list.page.locator(`tr[data-job-id="${id}"]`);
    await row.waitFor();
    expect(await row.locator("td").nth(1).textContent()).toBe("running"); // the status first; the queue state after it
    expect(await row.locator("td.task").textContent()).toBe("Run the live steps.");
    await list.page.close();

    const { page, rec } = await open(`/jobs/${id}`);
    await page.locator(".tool .result pre", { hasText: "live-step-1" }).waitFor();
    const before = await page.locator(".tool .result pre").count();
    expect(before).toBe(2);
    expect(await page.locator(".tool .result pre", { hasText: "live-step-2" }).count()).toBe(0);
    await page.evaluate(() => ((window as any).__sameDocument = true));

    liveGate.open();
    await page.locator(".ev.finished[data-status=completed]").waitFor({ timeout: 60_000 });
    for (const i of [2, 3])
      expect(await page.locator(".tool .result pre", { hasText: `live-step-${i}` }).count()).toBe(1);
    expect(await page.locator("article.turn").count()).toBe(5);
    expect(await page.locator("article.turn").last().locator(".text").textContent()).toBe("All steps done.");
    // the same document all along: the events arrived over the open connection
    expect(await page.evaluate(() => (window as any).__sameDocument)).toBe(true);
    expect(await page.evaluate(() => performance.getEntriesByType("navigation").length)).toBe(1);
    // per turn and cumulated tokens and cost; the head turns completed
    expect(await page.locator("article.turn").first().locator("header .meta").textContent()).toMatch(
      /in \d[\d,]* · out \d+ · cache read \d+ · cache write \d+ · \$\d+\.\d{4} \(total \$\d+\.\d{4}\)/,
    );
    expect(await page.locator("#totals").textContent()).toMatch(/5 turns · 4 tool calls · tokens in [\d,]+/);
    await page.locator("#head[data-status=completed]").waitFor();
    expect(rec.pageErrors).toEqual([]);
    await page.close();
  }, 180_000);

  it("cancel on the job page stops a running job: status cancelled; retry runs it again", async () => {
    const id = await client.enqueue({
      task: "A long-running job to cancel.",
      repo: { path: CLAMP },
      jobId: "cancel-me-1",
    });
    const login = await ctx.newPage();
    await login.goto(`${dash.url}/jobs?token=${TOKEN}`); // sets the token cookie, redirects to /jobs
    expect(new URL(login.url()).search).toBe("");
    await login.close();

    const { page, rec } = await open(`/jobs/${id}`);
    // the sleep is running: its tool call is shown, its result pending. (The page shows a call as
    // soon as the model asks for it; the job's own tool_call event says the command started.)
    const started = async (runs: number) =>
      waitUntil(async () => (await eventsOf(id)).filter((e) => e.type === "tool_call").length >= runs);
    await page
      .locator(".tool .call .input", { hasText: "$ echo started-sleeping; sleep 300" })
      .waitFor({ timeout: 60_000 });
    await started(1);
    await page.locator(".tool .result .pending").waitFor();
    await page.locator("#head[data-state=active]").waitFor();
    await page.locator("#cancel:not([disabled])").click();
    await page.locator(".ev.finished[data-status=cancelled]").waitFor({ timeout: 60_000 });
    await page.locator("#head[data-status=cancelled]").waitFor({ timeout: 30_000 });
    expect((await client.status(id)).outcome).toBe("cancelled");
    expect(await page.locator("#msg").textContent()).toBe("cancel: signalled");

    // Retry runs it again on the same page (a second run below the first), and cancel stops it again.
    await page.locator("#retry:not([disabled])").click();
    await page.locator(".ev.attempt", { hasText: /^Run 2/ }).waitFor({ timeout: 60_000 });
    await page.locator("#head[data-state=active]").waitFor({ timeout: 60_000 });
    await started(2);
    await page.locator(".tool .result .pending").waitFor({ timeout: 60_000 });
    await page.locator("#cancel:not([disabled])").click();
    await page.locator(".ev.finished[data-status=cancelled]").nth(1).waitFor({ timeout: 60_000 });
    expect(await page.locator("article.turn").count()).toBe(2); // one per run, not merged
    expect(await page.locator(".ev.finished").count()).toBe(2);
    await waitUntil(async () => (await client.status(id)).state === "completed");
    expect((await client.status(id)).outcome).toBe("cancelled");
    expect(rec.dialogs).toEqual([]);
    expect(rec.pageErrors).toEqual([]);
    await page.close();
  }, 180_000);

  it("without the token the job page and an action are refused, and the job goes on", async () => {
    const other = await browser.newContext(); // no cookie
    try {
      const id = await client.enqueue({
        task: "Fix the failing test (no token).",
        repo: { path: CLAMP },
        jobId: "no-token-1",
      });
      const page = await other.newPage();
      expect((await page.goto(`${dash.url}/jobs/${id}`))!.status()).toBe(401);
      expect(await page.content()).not.toContain("no token)");
      const r = await page.evaluate(
        async (u) => (await fetch(u, { method: "POST" })).status,
        `${dash.url}/api/jobs/${id}/cancel`,
      );
      expect(r).toBe(401);
      expect((await client.waitForResult(id, { timeoutMs: 120_000 })).status).toBe("completed");
    } finally {
      await other.close();
    }
  }, 180_000);

  it("hostile tool output, model text and file names render as inert text", async () => {
    const id = await client.enqueue({
      task: "A hostile job <img src=x onerror=alert(9)>",
      repo: { path: CLAMP },
      jobId: "hostile-1",
    });
    const result = await client.waitForResult(id, { timeoutMs: 120_000 });
    expect(result.status).toBe("completed");
    expect(result.patch).toContain("<script>window.__pwned=4</script>");

    const { page, rec } = await open(`/jobs/${id}`);
    await page.locator("#live", { hasText: "finished" }).waitFor();
    await page.locator("#diff pre.diff").waitFor();
    const transcript = (await page.locator("#transcript").textContent())!;
    expect(transcript).toContain("<script>window.__pwned=1;alert(1)</script>");
    expect(transcript).toContain('<img src=x onerror="window.__pwned=2;alert(2)">');
    expect(transcript).toContain("Looking <script>window.__pwned=3;alert(3)</script> around.");
    expect(transcript).toContain('All done <img src=x onerror="window.__pwned=5;alert(5)">');
    // in the output, the colour, the window title and the clipboard write are gone, whole
    const output = await page.locator(".tool .result pre").first().textContent();
    expect(output).toBe(
      '<script>window.__pwned=1;alert(1)</script>\n<img src=x onerror="window.__pwned=2;alert(2)">\nRED  done',
    );
    expect(transcript).not.toContain("\u001b");
    expect(transcript).not.toMatch(/evil-title(?!\\007)/); // only in the command as typed
    const diff = (await page.locator("#diff").textContent())!;
    expect(diff).toContain("+<script>window.__pwned=4</script>");
    expect(diff).toContain("<img src=x onerror=alert(4)>.txt");
    expect(await page.locator("#head h1 + pre").textContent()).toBe("A hostile job <img src=x onerror=alert(9)>");

    // nothing ran, nothing was injected, nothing was fetched
    expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined();
    expect(await page.locator("main img, main script, main iframe, main style, main a[href^=javascript]").count()).toBe(
      0,
    );
    expect(rec.dialogs).toEqual([]);
    expect(rec.requests.filter((u) => /\/x$/.test(u))).toEqual([]);
    expect(rec.requests.every((u) => u.startsWith(dash.url))).toBe(true);
    expect(rec.pageErrors).toEqual([]);
    expect(await page.title()).toBe("patchbay · hostile-1");

    const list = await open("/jobs");
    await list.page.locator('tr[data-job-id="hostile-1"]').waitFor();
    expect(await list.page.locator('tr[data-job-id="hostile-1"] td.task').textContent()).toBe(
      "A hostile job <img src=x onerror=alert(9)>",
    );
    expect(await list.page.locator("main img").count()).toBe(0);
    expect(list.rec.dialogs).toEqual([]);
    await list.page.close();
    await page.close();
  }, 180_000);

  it("the batches page shows a batch's progress, counts by status and spend, and links to its jobs", async () => {
    const batches = new BatchClient(client);
    const { batchId, ids } = await batches.submit(
      [1, 2].map((i) => ({ task: `Fix the failing test (batch ${i}).`, repo: { path: CLAMP } })),
      { name: "web-batch-1" },
    );
    const st = await batches.wait(batchId);
    expect(st.counts.completed).toBe(2);

    const { page, rec } = await open("/batches");
    const row = page.locator(`tr[data-batch-id="${batchId}"]`);
    await row.waitFor();
    expect(await row.locator("td.progress .meta").textContent()).toBe("2 / 2 done · 0 running · 0 waiting");
    expect(await row.locator("td.counts").textContent()).toBe("completed 2 ");
    expect(await row.locator("td.spend").textContent()).toBe(usd(st.spentUsd)); // as the server's formatter says it
    expect(st.spentUsd).toBeGreaterThan(0);
    await row.locator("td a").first().click();
    await page.waitForURL(/\/jobs\?batch=web-batch-1$/);
    await page.locator("#rows tr").nth(1).waitFor();
    expect(
      (await page.locator("#rows tr").evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-job-id")))).sort(),
    ).toEqual([...ids].sort());
    expect(await page.locator("#rows tr td:nth-child(8)").allTextContents()).toEqual([batchId, batchId]);
    expect(rec.pageErrors).toEqual([]);
    await page.close();
  }, 180_000);

  it("calls the model asked for that never ran (the job ended first) show as not run; ids from the model collide with nothing", async () => {
    const base = { jobId: "notrun-1", attempt: 1 };
    const ts = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 };
    const use = (id: string, command: string) => ({ type: "tool_use", id, name: "bash", input: { command } });
    const events = [
      { ...base, ts: ts(0), type: "job_started", spec: { task: "t", repo: { path: "/r" } } },
      {
        ...base,
        ts: ts(1),
        type: "model_response",
        turn: 1,
        content: [use("ran-1", "echo ran"), use("__proto__", "echo never-1"), use("toString", "echo never-2")],
        stopReason: "tool_use",
        usage,
        ms: 1,
        model: "m",
      },
      {
        ...base,
        ts: ts(2),
        type: "tool_call",
        turn: 1,
        toolUseId: "ran-1",
        name: "bash",
        input: { command: "echo ran" },
      },
      {
        ...base,
        ts: ts(3),
        type: "tool_result",
        turn: 1,
        toolUseId: "ran-1",
        name: "bash",
        output: "ran",
        isError: false,
        ms: 1,
      },
      {
        ...base,
        ts: ts(4),
        type: "job_finished",
        status: "cancelled",
        costUsd: 0,
        turns: 1,
        error: "the job was cancelled",
      },
    ];
    const dir = mkdtempSync(join(tmpdir(), "pb-web-notrun-"));
    writeFileSync(join(dir, "t.jsonl"), events.map((e) => JSON.stringify(e)).join("\n") + "\n");
    const viewed = await cli(["view", join(dir, "t.jsonl"), "-o", join(dir, "t.html")], env);
    expect(viewed.code, viewed.stderr).toBe(0);
    const view = await ctx.newPage();
    const rec = recordPage(view);
    try {
      await view.goto(pathToFileURL(join(dir, "t.html")).href);
      await view.locator("body[data-rendered]").waitFor();
      expect(await view.locator(".tool").count()).toBe(3);
      expect(await view.locator(".tool .result .pending").count()).toBe(0);
      expect(await view.locator(".tool .result .notrun").allTextContents()).toEqual([
        "not run: the job ended first",
        "not run: the job ended first",
      ]);
      expect(await view.locator('.tool[data-tool-use-id="ran-1"] .result pre').textContent()).toBe("ran");
      expect(rec.pageErrors).toEqual([]);
    } finally {
      await view.close();
      removeDir(dir);
    }
  });

  it("the static view of a transcript shows the same turns as the job page, with no network request", async () => {
    const id = await client.enqueue({
      task: "Fix the failing test (static view).",
      repo: { path: CLAMP },
      jobId: "static-1",
    });
    const result = await client.waitForResult(id, { timeoutMs: 120_000 });
    expect(result.status).toBe("completed");
    const dir = mkdtempSync(join(tmpdir(), "pb-web-view-"));
    const file = join(dir, "transcript.jsonl");
    // what a user does: the events from `patchbay watch --json`, then `patchbay view`
    const watched = await cli(["watch", id, "--json"], env);
    expect(watched.code).toBe(0);
    expect(
      watched.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l)),
    ).toEqual(await eventsOf(id));
    writeFileSync(file, watched.stdout);
    writeFileSync(join(dir, "patch.diff"), result.patch); // as run --out and batch wait --out write it
    const out = join(dir, "job.html");
    const viewed = await cli(["view", file, "-o", out], env);
    expect(viewed.code).toBe(0);
    expect(viewed.stderr).toBe(`[view] wrote ${out}\n`);

    const { page } = await open(`/jobs/${id}`);
    await page.locator("#live", { hasText: "finished" }).waitFor();
    await page.locator("#diff pre.diff").waitFor();
    const live = await turnsOf(page);
    const liveDiff = await page.locator("#diff pre.diff").textContent();
    await page.close();

    const offline = await browser.newContext({ javaScriptEnabled: true });
    try {
      const view = await offline.newPage();
      const rec = recordPage(view);
      const fileUrl = pathToFileURL(out).href;
      const attempted: string[] = [];
      await view.route("**/*", (route) => {
        if (route.request().url() === fileUrl) return route.continue();
        attempted.push(route.request().url());
        return route.abort();
      });
      await view.goto(fileUrl);
      await view.locator("body[data-rendered]").waitFor();
      expect(attempted).toEqual([]);
      expect(rec.requests).toEqual([fileUrl]);
      expect(rec.pageErrors).toEqual([]);
      const fromFile = await turnsOf(view);
      expect(fromFile).toEqual(live);
      expect(fromFile).toHaveLength(6);
      expect(await view.locator("#diff pre.diff").textContent()).toBe(liveDiff);
      expect(await view.locator(".ev.finished").getAttribute("data-status")).toBe("completed");
    } finally {
      await offline.close();
      removeDir(dir);
    }
  }, 240_000);
});

/** Each turn as the reader sees it: its title, texts, and tool calls with their output. */
function turnsOf(page: Page) {
  return page.$$eval("#transcript article.turn", (turns) =>
    turns.map((t) => ({
      title: t.querySelector("header .title")?.textContent,
      texts: [...t.querySelectorAll(".text")].map((x) => x.textContent),
      tools: [...t.querySelectorAll(".tool")].map((x) => ({
        name: x.querySelector(".name")?.textContent,
        input: x.querySelector(".input")?.textContent,
        output: x.querySelector(".result")?.textContent,
        error: x.classList.contains("error"),
      })),
    })),
  );
}

async function waitUntil(cond: () => Promise<boolean> | boolean, timeoutMs = 60_000): Promise<void> {
  const t0 = Date.now();
  while (!(await cond())) {
    if (Date.now() - t0 > timeoutMs) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 100));
  }
}
