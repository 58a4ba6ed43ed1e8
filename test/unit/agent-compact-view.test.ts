// A context_compacted event as the user sees it: the static view (renderTranscriptHtml, which
// `patchbay view` writes and whose transcript.js the dashboard's job page runs too) in Chromium,
// with a hostile summary shown as inert text and the summary request's tokens in the totals; and
// the CLI's progress line.
import { describe, expect, it } from "vitest";
import { formatEvent } from "../../src/cli/format.js";
import { TranscriptEvent } from "../../src/core/spec/spec.js";
import { inView } from "../support/browser.js";

const base = { jobId: "compact-1", attempt: 1 };
const ts = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
const HOSTILE = `read src/a.ts <img src=x onerror="alert(1)"><script>alert(2)</script>\u001b[31m & fixed it`;
const events = [
  { ...base, ts: ts(0), type: "job_started", spec: { task: "t", repo: { path: "/r" } } },
  {
    ...base,
    ts: ts(1),
    type: "model_response",
    turn: 1,
    content: [{ type: "text", text: "hi" }],
    stopReason: "end_turn",
    usage: { inputTokens: 100, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 },
    ms: 1,
    model: "m",
  },
  {
    ...base,
    ts: ts(2),
    type: "context_compacted",
    turn: 41,
    reason: "prompt_too_long",
    turnsDropped: 30,
    messagesKept: 9,
    tokensBefore: 161_000,
    tokensAfter: 52_000,
    summary: HOSTILE,
    usage: { inputTokens: 90_000, outputTokens: 800, cacheReadTokens: 0, cacheWriteTokens: 0 },
  },
  { ...base, ts: ts(3), type: "job_finished", status: "completed", costUsd: 0, turns: 41 },
].map((e) => TranscriptEvent.parse(e));

describe("a context_compacted event, shown", { timeout: 120_000 }, () => {
  it("the view shows its counts and the summary as text, and counts its tokens in the totals", async () => {
    await inView(events, async (page, rec, url) => {
      const card = page.locator(".ev.compacted");
      expect(await card.count()).toBe(1);
      expect(await card.locator(".title").textContent()).toBe("Context compacted (turn 41)");
      expect(await card.locator(".meta").first().textContent()).toBe(
        " · 30 older turns replaced by a summary · 9 messages kept · ~161,000 → ~52,000 tokens · the API refused the request as too long",
      );
      expect(await card.locator("details.summary pre").textContent()).toBe(HOSTILE.replace("\u001b[31m", "")); // the escape sequence taken out whole
      expect(await page.locator("img").count()).toBe(0);
      expect(await page.locator("#totals").textContent()).toContain("tokens in 90,100 / out 810");
      expect(rec).toEqual({ dialogs: [], pageErrors: [], consoleErrors: [], requests: [url] });
    });
  });

  it("the CLI's progress line says what was compacted", () => {
    expect(formatEvent(events[2]!)).toMatch(
      / context: 30 older turns compacted into a summary, ~161\.0k → ~52\.0k tokens \(the API refused the request as too long\)$/,
    );
  });
});
