// Dashboard job page with a 2,000-event transcript in headless Chromium: time from navigation to the
// first contentful paint, to the transcript's first paint (goal ≤ 1 s) and to the whole of it on screen, and the same for the
// static viewer's file. A private Redis, the dashboard in this process, no worker (the job waits).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { PatchbayClient } from "../src/queue/client.js";
import { keys } from "../src/queue/keys.js";
import type { TranscriptEvent } from "../src/core/spec/spec.js";
import { renderTranscriptHtml } from "../src/web/html.js";
import { startDashboard } from "../src/web/server.js";
import { launchBrowser, signedIn } from "../test/support/browser.js";
import { startRedis } from "../test/support/cluster.js";
import { log, median, round } from "./lib.js";

const CLAMP = new URL("../examples/clamp", import.meta.url).pathname;
const QUEUE = "bench-web";
const JOB = "bench-web-2000";

/** A realistic transcript of exactly n events: start, sandbox, turns of request/response/tool call/result, end. */
export function syntheticTranscript(n: number, jobId = JOB): TranscriptEvent[] {
  const t = Date.parse("2026-01-01T00:00:00Z");
  let i = 0;
  const base = () => ({ ts: new Date(t + i++ * 100).toISOString(), jobId, attempt: 1 });
  const out: TranscriptEvent[] = [
    { ...base(), type: "job_started", spec: { task: "Make the failing tests pass.", repo: { path: CLAMP } } },
    { ...base(), type: "sandbox_ready", container: "patchbay-bench", ms: 900 },
  ];
  for (let turn = 1; out.length + 4 < n; turn++) {
    const id = `toolu_${turn}`;
    out.push({ ...base(), type: "model_request", turn, messagesCount: turn * 2 - 1 });
    out.push({
      ...base(),
      type: "model_response",
      turn,
      content: [
        { type: "text", text: `Step ${turn}: let me look at the next file.` },
        { type: "tool_use", id, name: "bash", input: { command: `sed -n 1,20p src/mod${turn}.py` } },
      ],
      stopReason: "tool_use",
      usage: { inputTokens: 50, outputTokens: 40, cacheReadTokens: 1200 + turn, cacheWriteTokens: 60 },
      ms: 800,
      model: "claude-sonnet-5-5",
    });
    out.push({
      ...base(),
      type: "tool_call",
      turn,
      toolUseId: id,
      name: "bash",
      input: { command: `sed -n 1,20p src/mod${turn}.py` },
    });
    out.push({
      ...base(),
      type: "tool_result",
      turn,
      toolUseId: id,
      name: "bash",
      output: Array.from({ length: 20 }, (_, l) => `    line ${l} of module ${turn}: x = f(x) + ${l}`).join("\n"),
      isError: turn % 17 === 0,
      ms: 35,
    });
  }
  while (out.length < n - 1) out.push({ ...base(), type: "context_trimmed", removedChars: 1000, keptTurns: 10 });
  out.push({ ...base(), type: "job_finished", status: "completed", costUsd: 1.23, turns: 499 });
  return out;
}

export async function benchWeb() {
  const N = 2000;
  const runs = 7;
  const redis = await startRedis();
  const client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
  const token = "bench-web-token-0123456789";
  const dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token });
  const browser = await launchBrowser();
  const dir = mkdtempSync(join(tmpdir(), "pb-bench-web-"));
  try {
    const events = syntheticTranscript(N);
    await client.enqueue({ task: "Make the failing tests pass.", repo: { path: CLAMP }, jobId: JOB });
    const stream = keys(QUEUE).events(JOB);
    const m = client.redis.multi();
    for (const e of events) m.xadd(stream, "*", "e", JSON.stringify(e));
    await m.exec();

    log(`web: job page with ${N} events, ${runs} loads in headless Chromium`);
    const fcp: number[] = [];
    const full: number[] = [];
    const firstTurn: number[] = [];
    const ctx = await browser.newContext(signedIn(dash.url, token));
    for (let i = -1; i < runs; i++) {
      const page = await ctx.newPage();
      await page.goto(`${dash.url}/jobs/${JOB}`, { waitUntil: "commit" });
      // each resolves on the first animation frame at which the transcript's first turn / all its events are in the DOM
      const first = (await (
        await page.waitForFunction(
          () => document.querySelector("#transcript article.turn") !== null && performance.now(),
          undefined,
          { polling: "raf", timeout: 30_000 },
        )
      ).jsonValue()) as number;
      const done = (await (
        await page.waitForFunction(
          (n) => document.getElementById("live")?.getAttribute("data-count") === String(n) && performance.now(),
          N,
          { polling: "raf", timeout: 30_000 },
        )
      ).jsonValue()) as number;
      const paint = await page.evaluate(
        () => performance.getEntriesByType("paint").find((p) => p.name === "first-contentful-paint")?.startTime ?? NaN,
      );
      const rendered = await page.locator("#transcript > *").count();
      if (rendered < 500) throw new Error(`only ${rendered} elements rendered`);
      if (i >= 0) {
        fcp.push(paint);
        firstTurn.push(first);
        full.push(done);
      }
      await page.close();
    }
    await ctx.close();

    // the baseline in the same run: the empty jobs list (the same shell, styles and scripts)
    const empty: number[] = [];
    const bctx = await browser.newContext(signedIn(dash.url, token));
    for (let i = -1; i < runs; i++) {
      const page = await bctx.newPage();
      await page.goto(`${dash.url}/jobs?batch=none`, { waitUntil: "commit" });
      const done = (await (
        await page.waitForFunction(
          () => document.getElementById("note")?.textContent === "no jobs match" && performance.now(),
          undefined,
          { polling: "raf", timeout: 30_000 },
        )
      ).jsonValue()) as number;
      if (i >= 0) empty.push(done);
      await page.close();
    }
    await bctx.close();

    log(`web: static view of the same ${N} events`);
    const file = join(dir, "job.html");
    const t0 = performance.now();
    writeFileSync(file, renderTranscriptHtml(events));
    const renderHtmlMs = performance.now() - t0;
    const view: number[] = [];
    const vctx = await browser.newContext();
    for (let i = -1; i < runs; i++) {
      const page = await vctx.newPage();
      await page.goto(pathToFileURL(file).href, { waitUntil: "commit" });
      const done = (await (
        await page.waitForFunction(() => document.body?.hasAttribute("data-rendered") && performance.now(), undefined, {
          polling: "raf",
          timeout: 30_000,
        })
      ).jsonValue()) as number;
      if (i >= 0) view.push(done);
      await page.close();
    }
    await vctx.close();
    return {
      events: N,
      baselineEmptyJobsListMs: round(median(empty), 1),
      jobPage: {
        firstContentfulPaintMs: round(median(fcp), 1),
        firstTurnOnScreenMs: round(median(firstTurn), 1),
        allEventsOnScreenMs: round(median(full), 1),
        goalMs: 1000,
        withinGoal: median(firstTurn) <= 1000,
      },
      staticView: {
        htmlBytes: renderTranscriptHtml(events).length,
        renderTranscriptHtmlMs: round(renderHtmlMs, 1),
        allEventsOnScreenMs: round(median(view), 1),
      },
      chromium: browser.version(),
    };
  } finally {
    await browser.close();
    await dash.close();
    await client.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
