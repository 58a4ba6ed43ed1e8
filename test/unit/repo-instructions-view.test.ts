// An instructions_loaded event as the user sees it: the static view (renderTranscriptHtml, which
// `patchbay view` writes and whose transcript.js the dashboard's job page runs too) in Chromium,
// with what it names shown as inert text even if a path or reason carried markup; and the CLI's
// progress line.
import { describe, expect, it } from "vitest";
import { formatEvent } from "../../src/cli/format.js";
import { TranscriptEvent } from "../../src/core/spec/spec.js";
import { inView } from "../support/browser.js";

const base = { jobId: "instr-1", attempt: 1 };
const ts = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
const HOSTILE = `pkg/<img src=x onerror="alert(1)"><script>alert(2)</script>\u001b[31m/AGENTS.md`;
const events = [
  { ...base, ts: ts(0), type: "job_started", spec: { task: "t", repo: { path: "/r" } } },
  {
    ...base,
    ts: ts(1),
    type: "instructions_loaded",
    files: ["AGENTS.md", "CLAUDE.md"],
    bytes: 32_768,
    cut: true,
    refused: [{ path: HOSTILE, reason: "a symbolic link, or a path through one: not followed" }],
  },
  { ...base, ts: ts(3), type: "job_finished", status: "completed", costUsd: 0, turns: 1 },
].map((e) => TranscriptEvent.parse(e));

describe("an instructions_loaded event, shown", { timeout: 120_000 }, () => {
  it("the view names the files, the bytes, the cut and each file left out, as text", async () => {
    await inView(events, async (page, rec, url) => {
      const card = page.locator(".ev.instructions");
      expect(await card.count()).toBe(1);
      expect(await card.locator(".title").textContent()).toBe("Repository instructions");
      expect(await card.locator(".meta").first().textContent()).toBe(
        " · AGENTS.md, CLAUDE.md · 32,768 bytes · cut at the bound · 1 file left out",
      );
      expect(await card.locator("div.meta").textContent()).toBe(
        `${HOSTILE.replace("\u001b[31m", "")}: a symbolic link, or a path through one: not followed`,
      );
      expect(await page.locator("img").count()).toBe(0);
      expect(rec).toEqual({ dialogs: [], pageErrors: [], consoleErrors: [], requests: [url] });
    });
  });

  it("the CLI's progress line says what was offered and what was left out", () => {
    expect(formatEvent(events[1]!)).toMatch(
      / instructions: AGENTS\.md, CLAUDE\.md \(32768 bytes, cut at the bound\); left out: pkg\/<img src=x onerror="alert\(1\)"><script>alert\(2\)<\/script>…$/,
    );
    expect(formatEvent(events[1]!)).not.toContain("\u001b");
  });
});
