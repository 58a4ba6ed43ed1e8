// A JobSpec's MCP servers: an MCP server written with the SDK (test/fixtures/mcp-server.mjs) run in
// the job's sandbox with the host's node, its tools offered as mcp__SERVER__TOOL, driven by the
// scripted model through runJob. On the local backend (runJob's logic; the box sees the host's
// node; the server is bundled outside /tmp, which the box has of its own).
//
// Backend: local (runJob's logic; the fixture MCP server runs with the host's node, which the local
// box sees).
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { buildSync } from "esbuild";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { runJob } from "../../src/job/run.js";
import { defaults } from "../../src/core/config/config.js";
import { mcpToolName } from "../../src/tools/mcp.js";
import { parseJobSpec } from "../../src/core/spec/spec.js";
import { localBackend, localWorkerConfig } from "../support/backend.js";
import { reply, startFakeAnthropic, text, toolResults, toolResultText, toolUse } from "../support/fake-anthropic.js";
import { closeScripted, runScripted } from "../support/scripted-job.js";
import { toolRuleProblems } from "../support/tool-rules.js";

// The fixture bundled with its SDK into one file outside /tmp: the box has a /tmp of its own, so a
// checkout under /tmp (a CI clone) would be out of its sight.
const BUNDLE_DIR = mkdtempSync("/var/tmp/pb-mcp-local-");
const SERVER = join(BUNDLE_DIR, "server.mjs");
buildSync({
  entryPoints: [resolve("test/fixtures/mcp-server.mjs")],
  bundle: true,
  platform: "node",
  format: "esm",
  outfile: SERVER,
  logLevel: "error",
});
chmodSync(BUNDLE_DIR, 0o755); // the agent's uid runs it
const repo = mkdtempSync(join(tmpdir(), "pb-mcp-"));
writeFileSync(join(repo, "a.txt"), "hello\n");
afterAll(() => {
  rmSync(repo, { recursive: true, force: true });
  rmSync(BUNDLE_DIR, { recursive: true, force: true });
});
afterEach(closeScripted);

const servers = {
  fx: { command: "node", args: [SERVER], env: { FIXTURE_NAME: "fx" } },
  other: { command: "node", args: [SERVER], env: { FIXTURE_NAME: "other" } },
};

describe("MCP servers in a job (local backend)", () => {
  it("offers their tools, passes text and images, times out a hanging call, survives a crashed server, and names the server in tool_call", async () => {
    const dotted = mcpToolName("fx", "dotted.name");
    const { result, events, fake } = await runScripted(
      [
        reply(toolUse("mcp__fx__read_file", { path: "a.txt" })),
        reply(toolUse("mcp__fx__screenshot", {}), toolUse(dotted, {})),
        reply(toolUse("mcp__fx__hang", {})),
        reply(toolUse("mcp__fx__read_file", { path: "a.txt" })),
        reply(toolUse("mcp__fx__crash", {})),
        reply(
          toolUse("mcp__fx__read_file", { path: "a.txt" }),
          toolUse("mcp__other__read_file", { path: "a.txt" }),
          toolUse("bash", { command: "echo fine" }),
        ),
        reply(text("done")),
      ],
      { repo: { path: repo }, mcp: { servers }, commandTimeoutSec: 1 },
      "mcp",
      localBackend(),
    );
    expect(result.status).toBe("completed");
    const offered = fake.requests[0]!.body.tools;
    const names = offered.map((t: any) => t.name);
    for (const s of ["fx", "other"])
      for (const t of ["read_file", "screenshot", "hang", "crash"]) expect(names).toContain(`mcp__${s}__${t}`);
    expect(dotted).toMatch(/^mcp__fx__dotted_name_[0-9a-f]{8}$/);
    expect(offered.find((t: any) => t.name === dotted).description).toBe(
      'A name with a dot (its MCP name: "dotted.name")',
    );
    expect(offered.find((t: any) => t.name === "mcp__fx__read_file").input_schema).toMatchObject({
      type: "object",
      properties: { path: { type: "string" } },
      required: ["path"],
    });
    expect(toolRuleProblems(offered)).toEqual([]);

    const results = (i: number) => toolResults(fake.requests[i]);
    expect(toolResultText(results(1)[0])).toBe("fx:1000:hello\n");
    const [shot, dot] = results(2);
    expect(shot.content).toEqual([
      { type: "text", text: "here" },
      { type: "image", source: { type: "base64", media_type: "image/png", data: expect.stringMatching(/^iVBOR/) } },
    ]);
    expect(toolResultText(dot)).toBe("dotted");
    expect(results(3)[0]).toMatchObject({
      is_error: true,
      content: 'The MCP server "fx" did not answer hang within 1 s (the call was given up; the server still runs).',
    });
    expect(toolResultText(results(4)[0])).toBe("fx:1000:hello\n");
    const [crashed] = results(5);
    expect(crashed.is_error).toBe(true);
    expect(toolResultText(crashed)).toMatch(
      /^The MCP server "fx" stopped during the call: it exited \(stderr: fixture: crashing on purpose\)\.$/,
    );
    const [gone, other, bash] = results(6);
    expect(gone).toMatchObject({
      is_error: true,
      content: expect.stringMatching(/^The MCP server "fx" is not running: it exited/),
    });
    expect(other.is_error).toBeUndefined();
    expect(toolResultText(other)).toBe("other:1000:hello\n");
    expect(toolResultText(bash)).toBe("fine");

    const calls = events.filter((e) => e.type === "tool_call") as { name: string; server?: string }[];
    expect(calls.map((c) => [c.name, c.server])).toContainEqual(["mcp__other__read_file", "other"]);
    expect(calls.find((c) => c.name === "bash")!.server).toBeUndefined();
    const shotEvent = events.find((e) => e.type === "tool_result" && e.name === "mcp__fx__screenshot") as {
      output: string;
    };
    expect(shotEvent.output).toBe("here\n[image image/png, 70 bytes]");
  });

  it("a server that floods requests and never reads its stdin is ended with a clear error, the worker's heap and event loop unharmed; 160,000 non-text items are cut to the output bound", async () => {
    // The worker's heap and event loop, sampled while the job runs.
    let maxHeap = 0;
    let maxLag = 0;
    let last = Date.now();
    const base = process.memoryUsage().heapUsed;
    const sampler = setInterval(() => {
      const now = Date.now();
      maxLag = Math.max(maxLag, now - last - 50);
      last = now;
      maxHeap = Math.max(maxHeap, process.memoryUsage().heapUsed);
    }, 50);
    try {
      const { result, fake } = await runScripted(
        [
          reply(toolUse("mcp__fx__many_items", {})),
          reply(toolUse("mcp__fx__flood", {})),
          reply(toolUse("mcp__other__read_file", { path: "a.txt" }), toolUse("bash", { command: "echo fine" })),
          reply(text("done")),
        ],
        { repo: { path: repo }, mcp: { servers }, commandTimeoutSec: 90 },
        "mcp",
        localBackend(),
      );
      expect(result.status).toBe("completed");
      const [many] = toolResults(fake.requests[1]);
      const manyText = toolResultText(many);
      expect(manyText.length).toBeLessThan(defaults.shell.maxOutputBytes + 200);
      expect(manyText).toMatch(/^\[audio content not passed on: not text or an image\]\n/);
      expect(manyText).toMatch(/\[output cut at \d+ bytes: \d+ more items not shown\]$/);
      const [flooded] = toolResults(fake.requests[2]);
      expect(flooded).toMatchObject({
        is_error: true,
        content:
          'The MCP server "fx" stopped during the call: it did not read its stdin: over 8192 writes waited for it, so it was ended.',
      });
      const [other, bash] = toolResults(fake.requests[3]);
      expect(toolResultText(other)).toBe("other:1000:hello\n");
      expect(toolResultText(bash)).toBe("fine");
    } finally {
      clearInterval(sampler);
    }
    expect(maxHeap - base).toBeLessThan(200 << 20);
    expect(maxLag).toBeLessThan(3000);
  }, 300_000);

  it("a verify round's end stops the servers with the agent's processes; the next round has them again", async () => {
    const { result, fake } = await runScripted(
      [
        reply(text("first round")),
        reply(toolUse("mcp__fx__read_file", { path: "a.txt" })),
        reply(text("second round")),
      ],
      { repo: { path: repo }, mcp: { servers: { fx: servers.fx } }, verify: "false", verifyRounds: 1 },
      "mcp",
      localBackend(),
    );
    expect(result.status).toBe("verify_failed");
    const [after] = toolResults(fake.requests[2]);
    expect(after.is_error).toBeUndefined();
    expect(toolResultText(after)).toBe("fx:1000:hello\n");
  });

  it("a server that cannot start fails the job with its reason, before the model is asked", async () => {
    const { result, fake } = await runScripted(
      [reply(text("never"))],
      {
        repo: { path: repo },
        mcp: {
          servers: {
            fx: servers.fx,
            broken: { command: "node", args: ["-e", "console.error('no config'); process.exit(2)"] },
          },
        },
      },
      "mcp",
      localBackend(),
    );
    expect(result.status).toBe("failed");
    expect(result.error).toMatch(/^MCP server "broken" did not start: .* \(stderr: no config\)$/);
    expect(fake.requests).toHaveLength(0);
  });

  it("a server that lists more tools than a server may offer fails the job so", async () => {
    const { result } = await runScripted(
      [reply(text("never"))],
      {
        repo: { path: repo },
        mcp: { servers: { many: { command: "node", args: [SERVER], env: { FIXTURE_MANY: "1" } } } },
      },
      "mcp",
      localBackend(),
    );
    expect(result.status).toBe("failed");
    expect(result.error).toMatch(
      /^MCP server "many" did not start: it lists 137 tools, more than the 128 a server may offer/,
    );
  });

  it("a worker with PATCHBAY_ALLOW_MCP=0 refuses the spec", async () => {
    const fake = await startFakeAnthropic([reply(text("never asked"))]);
    try {
      const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
      const err = await runJob(
        { task: "t", repo: { path: repo }, mcp: { servers } },
        {
          model,
          backend: localBackend(),
          config: localWorkerConfig({ PATCHBAY_ALLOW_MCP: "0" }),
          labels: { "patchbay.test": "mcp" },
        },
      ).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(err?.message).toBe(
        "JobSpec refused by this worker's policy: mcp: MCP servers are not allowed by this worker (PATCHBAY_ALLOW_MCP=1 on the worker allows them)",
      );
      expect(fake.requests).toHaveLength(0);
    } finally {
      await fake.close();
    }
  });

  it("the spec's server names keep mcp__NAME__TOOL unambiguous", () => {
    const error = (s: unknown) =>
      (parseJobSpec({ task: "t", repo: { path: "." }, mcp: { servers: s } }) as { error?: string }).error;
    expect(error({ ok_name: { command: "node" } })).toBeUndefined();
    expect(error({ a__b: { command: "node" } })).toMatch(
      /mcp\.servers\.a__b: a server's name must be 1-32 letters, digits, - and single _/,
    );
    expect(error({ x: { command: "" } })).toMatch(/mcp\.servers\.x\.command: must be a non-empty command/);
    expect(error({ x: { command: "node", env: { "A=B": "1" } } })).toMatch(
      /mcp\.servers\.x\.env\.A=B: must be an environment variable's name/,
    );
  });
});
