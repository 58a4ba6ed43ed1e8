// A job's candidates_started and candidate_picked events as the user sees them in the static view
// (renderTranscriptHtml, which `patchbay view` writes and whose transcript.js the dashboard's job
// page runs too) in Chromium: how many started and the seed's size, then which was picked and why,
// a line per candidate, a candidate's hostile error as inert text.
import { describe, expect, it } from "vitest";
import { TranscriptEvent } from "../../src/core/spec/spec.js";
import { inView } from "../support/browser.js";

const base = { jobId: "best-1", attempt: 1 };
const ts = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
const HOSTILE = `<img src=x onerror="alert(1)"><script>alert(2)</script>\u001b[31m`;
const WHY = "candidate 2 is the only one verify passed";
const events = [
  { ...base, ts: ts(0), type: "job_started", spec: { task: "t", repo: { path: "/r" } } },
  { ...base, ts: ts(1), type: "candidates_started", jobIds: ["best-1-C1", "best-1-C2"], seedBytes: 10_240 },
  {
    ...base,
    ts: ts(2),
    type: "candidate_picked",
    picked: 2,
    why: WHY,
    candidates: [
      {
        n: 1,
        jobId: "best-1-C1",
        status: "failed",
        costUsd: 0,
        turns: 0,
        patchBytes: 0,
        filesChanged: 0,
        error: HOSTILE,
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
    ],
  },
  { ...base, ts: ts(3), type: "job_finished", status: "completed", costUsd: 0.02, turns: 5 },
].map((e) => TranscriptEvent.parse(e));

describe("a job's candidates in the transcript view", { timeout: 120_000 }, () => {
  it("says how many started, which was picked and why, and a line per candidate, as text", async () => {
    await inView(events, async (page, rec, url) => {
      const cards = page.locator(".ev.candidates");
      expect(await cards.count()).toBe(2);
      expect(await cards.nth(0).locator(".title").textContent()).toBe("Candidates started");
      expect(await cards.nth(0).locator(".meta").allTextContents()).toEqual([
        " · 2 candidates from one setup · its workspace 10,240 bytes",
        "best-1-C1, best-1-C2",
      ]);
      expect(await cards.nth(1).locator(".title").textContent()).toBe("Picked candidate 2");
      expect(await cards.nth(1).locator("span.meta").textContent()).toBe(` · ${WHY}`);
      expect(await cards.nth(1).locator(".cand-line").allTextContents()).toEqual([
        `1. best-1-C1 · failed · not verified · $0.00 · 0 turns · 0 bytes in 0 files · ${HOSTILE.replace("\u001b[31m", "")}`,
        "* 2. best-1-C2 · completed · verified · $0.02 · 5 turns · 31 bytes in 1 file",
      ]);
      expect(await page.locator("img").count()).toBe(0);
      expect(rec).toEqual({ dialogs: [], pageErrors: [], consoleErrors: [], requests: [url] });
    });
  });
});
