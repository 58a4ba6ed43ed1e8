// MCP and custom tool calls as the user sees them: the static view (renderTranscriptHtml, which
// `patchbay view` writes and whose transcript.js the dashboard's job page runs too) in Chromium
// shows them like the built-in tools, an MCP call naming its server (a hostile name as inert text).
import { describe, expect, it } from "vitest";
import { TranscriptEvent } from "../../src/core/spec/spec.js";
import { inView } from "../support/browser.js";

const base = { jobId: "mcp-view-1", attempt: 1 };
const ts = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
const usage = { inputTokens: 10, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 };
const HOSTILE = `fx<img src=x onerror="alert(1)">`;
const events = [
  { ...base, ts: ts(0), type: "job_started", spec: { task: "t", repo: { path: "/r" } } },
  {
    ...base,
    ts: ts(1),
    type: "model_response",
    turn: 1,
    content: [
      { type: "tool_use", id: "t1", name: "mcp__fx__screenshot", input: {} },
      { type: "tool_use", id: "t2", name: "run_tests", input: { filter: "a" } },
    ],
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
    toolUseId: "t1",
    name: "mcp__fx__screenshot",
    input: {},
    server: HOSTILE,
  },
  {
    ...base,
    ts: ts(3),
    type: "tool_result",
    turn: 1,
    toolUseId: "t1",
    name: "mcp__fx__screenshot",
    output: "here\n[image image/png, 70 bytes]",
    isError: false,
    ms: 5,
  },
  { ...base, ts: ts(4), type: "tool_call", turn: 1, toolUseId: "t2", name: "run_tests", input: { filter: "a" } },
  {
    ...base,
    ts: ts(5),
    type: "tool_result",
    turn: 1,
    toolUseId: "t2",
    name: "run_tests",
    output: "1 failed\n[exit code 1]",
    isError: true,
    ms: 7,
  },
  { ...base, ts: ts(6), type: "job_finished", status: "completed", costUsd: 0, turns: 1 },
].map((e) => TranscriptEvent.parse(e));

describe("MCP and custom tool calls, shown", { timeout: 120_000 }, () => {
  it("the view shows each like a built-in tool call, the MCP one with its server", async () => {
    await inView(events, async (page, rec, url) => {
      const mcp = page.locator('.tool[data-tool-use-id="t1"]');
      expect(await mcp.locator(".call .name").textContent()).toBe("mcp__fx__screenshot");
      expect(await mcp.locator(".call .server").textContent()).toBe(`MCP server ${HOSTILE}`);
      expect(await mcp.locator(".result .out").textContent()).toBe("here\n[image image/png, 70 bytes]");
      const own = page.locator('.tool[data-tool-use-id="t2"]');
      expect(await own.getAttribute("class")).toBe("tool error");
      expect(await own.locator(".call .server").count()).toBe(0);
      expect(await own.locator(".result .out").textContent()).toBe("1 failed\n[exit code 1]");
      expect(await page.locator("img").count()).toBe(0);
      expect(rec).toEqual({ dialogs: [], pageErrors: [], consoleErrors: [], requests: [url] });
    });
  });
});
