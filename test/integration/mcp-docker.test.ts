// MCP servers on Docker: a per-repo image with Node made by `patchbay image build --from` (the
// host's node, and test/fixtures/mcp-server.mjs bundled with its SDK into one file), its server
// run in a hardened sandbox (read-only root, no network, uid 1000) through a real job driven by
// the scripted model.
//
// Backend: Docker (a per-repo image with Node made by `image build --from`; the hardened sandbox
// runs the server).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { reply, text, toolResults, toolResultText, toolUse } from "../support/fake-anthropic.js";
import { closeScripted, runScripted } from "../support/scripted-job.js";
import { toolRuleProblems } from "../support/tool-rules.js";
import { buildMcpImage } from "../support/mcp-image.js";

let repo = "";
let TAG = "";
beforeAll(async () => {
  TAG = await buildMcpImage();
  repo = mkdtempSync(join(tmpdir(), "pb-mcp-docker-"));
  writeFileSync(join(repo, "a.txt"), "hello\n");
}, 900_000);
afterAll(() => {
  if (repo) rmSync(repo, { recursive: true, force: true });
});
afterEach(closeScripted);

describe("an MCP server in a per-repo image with Node (Docker)", { timeout: 300_000 }, () => {
  it("its tools offered and called: a file read as the agent, an image, a hanging call given up, a crash an error", async () => {
    const fx = { command: "node", args: ["/opt/mcp/server.mjs"], env: { FIXTURE_NAME: "fx" } };
    const { result, fake } = await runScripted(
      [
        reply(toolUse("mcp__fx__read_file", { path: "a.txt" }), toolUse("mcp__fx__screenshot", {})),
        reply(toolUse("mcp__fx__hang", {})),
        reply(toolUse("mcp__fx__crash", {}), toolUse("bash", { command: "echo fine" })),
        reply(text("done")),
      ],
      { repo: { path: repo }, image: TAG, mcp: { servers: { fx } }, commandTimeoutSec: 2 },
      "mcp-docker",
    );
    expect(result.status).toBe("completed");
    expect(toolRuleProblems(fake.requests[0]!.body.tools)).toEqual([]);
    const [read, shot] = toolResults(fake.requests[1]);
    expect(toolResultText(read)).toBe("fx:1000:hello\n");
    expect(shot.content[1]).toMatchObject({ type: "image", source: { type: "base64", media_type: "image/png" } });
    expect(toolResults(fake.requests[2])[0]).toMatchObject({
      is_error: true,
      content: expect.stringContaining("did not answer hang within 2 s"),
    });
    const [crashed, bash] = toolResults(fake.requests[3]);
    expect(crashed).toMatchObject({ is_error: true, content: expect.stringContaining("fixture: crashing on purpose") });
    expect(toolResultText(bash)).toBe("fine");
  });

  // A server runs as the agent's uid, but in a Landlock domain of its own (src/sandbox/py/helper.py):
  // the agent's commands cannot read its /proc/PID/environ on this machine, whose kernel has
  // Landlock, while a process of the agent's own can still be read. On a host without Landlock, or
  // under gVisor, the agent can read a server's env: which is why docs/jobspec.md still says to put
  // no secret there.
  it("a server's env is not readable by the agent's commands (Landlock), while its own children's is", async () => {
    const fx = {
      command: "node",
      args: ["/opt/mcp/server.mjs"],
      env: { FIXTURE_NAME: "fx", NOT_A_SECRET: "seen-by-the-agent" },
    };
    const read = [
      "grep -l server.mjs /proc/[0-9]*/cmdline >/dev/null 2>&1 && echo server-running",
      "for p in /proc/[0-9]*; do { tr '\\0' '\\n' < $p/environ; } 2>/dev/null | grep '^NOT_A_SECRET='; done | sort -u",
      "NOT_A_SECRET=own-child sleep 30 & sleep 0.5; tr '\\0' '\\n' < /proc/$!/environ | grep '^NOT_A_SECRET='; kill $!",
    ].join("; ");
    const { result, fake } = await runScripted(
      [reply(toolUse("bash", { command: read })), reply(text("done"))],
      { repo: { path: repo }, image: TAG, mcp: { servers: { fx } } },
      "mcp-docker-env",
    );
    expect(result.status).toBe("completed");
    expect(toolResultText(toolResults(fake.requests[1])[0])).toBe("server-running\nNOT_A_SECRET=own-child");
  });
});
