// Issue 27's three parts through the real worker, Docker and the SDKs at once: a worker process
// (Docker backend, the hardened sandbox) on Bedrock (PATCHBAY_PROVIDER=bedrock: Anthropic's Bedrock
// client, SigV4-signed, answered by the Bedrock stand-in in event-stream frames), a job with a custom
// tool and an MCP server in a per-repo image with Node, and a context window small enough that the
// conversation is compacted on the way. The tokens and keys stay on the worker.
//
// Backend: Docker (a worker process: issue 27's parts through the real worker, the engine and the
// SDKs).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { reply, text, toolResults, toolResultText, toolUse, type Policy } from "../support/fake-anthropic.js";
import { startBedrockFake, type PlatformFake } from "../support/platform-fakes.js";
import { buildMcpImage } from "../support/mcp-image.js";
import { removeQueueSandboxes, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";

const QUEUE = `extended-${process.pid}`;
const AWS = { AWS_ACCESS_KEY_ID: "AKIAPATCHBAYWORKER01", AWS_SECRET_ACCESS_KEY: "worker-secret-never-shown-7c6b5a" };
const isSummaryRequest = (body: any) => /summarise the earlier part/.test(JSON.stringify(body?.system ?? ""));
const BIG = "python3 -c \"print('x' * 8000)\"";

describe("issue 27 through a worker process on Docker and Bedrock", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let bedrock: PlatformFake;
  let worker: WorkerProc;
  let client: PatchbayClient;
  let repo: string;
  let image: string;
  let agentTurn = 0;

  beforeAll(async () => {
    image = await buildMcpImage();
    redis = await startRedis();
    repo = mkdtempSync(join(tmpdir(), "pb-extended-"));
    writeFileSync(join(repo, "a.txt"), "hello\n");
    const policy: Policy = ({ body }) => {
      if (isSummaryRequest(body)) return reply(text("summary: counted the words, read a.txt, printed blocks of x."));
      const turn = agentTurn++;
      if (turn === 0)
        return reply(
          toolUse("word_count", { text: "one two three" }),
          toolUse("mcp__fx__read_file", { path: "a.txt" }),
        );
      if (turn <= 8) return reply(toolUse("bash", { command: BIG }));
      return reply(text("done"));
    };
    bedrock = await startBedrockFake(policy, {
      accessKeyId: AWS.AWS_ACCESS_KEY_ID,
      secretAccessKey: AWS.AWS_SECRET_ACCESS_KEY,
      region: "us-west-2",
    });
    worker = startWorkerProc({
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: QUEUE,
      PATCHBAY_CONCURRENCY: "1",
      PATCHBAY_POOL: "0",
      PATCHBAY_PROVIDER: "bedrock",
      AWS_REGION: "us-west-2",
      ...AWS,
      AWS_SESSION_TOKEN: "",
      AWS_PROFILE: "",
      ANTHROPIC_BEDROCK_BASE_URL: bedrock.url,
      ANTHROPIC_API_KEY: "",
      PATCHBAY_CONTEXT_WINDOW: "12000",
    });
    await worker.waitFor(/ready/, 180_000);
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
  }, 900_000);

  afterAll(async () => {
    await client?.close();
    await worker?.stop();
    await bedrock?.close();
    await redis?.stop();
    await removeQueueSandboxes(QUEUE);
    if (repo) rmSync(repo, { recursive: true, force: true });
  });

  it("a custom tool, an MCP server's tool and a compaction in one job, every request SigV4-signed to the mapped model", async () => {
    const id = await client.enqueue({
      task: "Count the words, read a.txt, print some blocks.",
      repo: { path: repo },
      image,
      tools: {
        custom: [
          {
            name: "word_count",
            description: "Counts the words of text.",
            input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
            command: "python3 -c 'import json,sys; print(len(json.load(sys.stdin)[\"text\"].split()))'",
          },
        ],
      },
      mcp: { servers: { fx: { command: "node", args: ["/opt/mcp/server.mjs"], env: { FIXTURE_NAME: "fx" } } } },
    });
    const result = await client.waitForResult(id, { timeoutMs: 600_000 });
    const events: TranscriptEvent[] = [];
    for await (const e of client.watch(id, { follow: false })) events.push(e);
    expect(result.status, result.error).toBe("completed");
    // Every request valid for Bedrock (the stand-in refuses a bad signature, URL or body with 403).
    expect(bedrock.seen.flatMap((s) => s.problems)).toEqual([]);
    expect(new Set(bedrock.seen.map((s) => s.path))).toEqual(
      new Set(["/model/anthropic.claude-sonnet-5-5/invoke-with-response-stream"]),
    );
    const agent = bedrock.upstream.requests.filter((r) => !isSummaryRequest(r.body));
    const [count, read] = toolResults(agent[1]);
    expect(toolResultText(count)).toBe("3");
    expect(toolResultText(read)).toBe("fx:1000:hello\n");
    expect(events.find((e) => e.type === "tool_call" && (e as { server?: string }).server === "fx")).toBeDefined();
    // The window forced at least one compaction; its summary request went to Bedrock too, and is in the usage.
    const compacted = events.filter((e) => e.type === "context_compacted");
    expect(compacted.length).toBeGreaterThan(0);
    expect(bedrock.upstream.requests.some((r) => isSummaryRequest(r.body))).toBe(true);
    expect(JSON.stringify(events) + JSON.stringify(result) + worker.log()).not.toContain(AWS.AWS_SECRET_ACCESS_KEY);
  });
});
