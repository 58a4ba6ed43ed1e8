// Guards the repository's instructions through the worker: a job enqueued on Redis with the
// operator's `instructions`, run by an in-process worker through BullMQ against the scripted
// server, gives the model the operator's text in the system prompt and the repo's AGENTS.md in the
// first user message, and its transcript on Redis carries the instructions_loaded event; with
// `repoInstructions: false` neither the block nor the event.
//
// Backend: local (in-process workers: `localWorkerConfig()`; the reading through Docker is instructions.test.ts).
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { startWorker, type WorkerHandle } from "../../src/queue/worker.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { localWorkerConfig } from "../support/backend.js";
import { startRedis } from "../support/cluster.js";
import { reply, startFakeAnthropic, text, type FakeAnthropic } from "../support/fake-anthropic.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;

describe("repository instructions through the worker", { timeout: 120_000 }, () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let worker: WorkerHandle;
  let client: PatchbayClient;
  let fake: FakeAnthropic;
  const repo = mkdtempSync(join(tmpdir(), "pb-instr-worker-"));

  beforeAll(async () => {
    cpSync(CLAMP, repo, { recursive: true });
    writeFileSync(join(repo, "AGENTS.md"), "Run the tests with python3 -m unittest.\n");
    fake = await startFakeAnthropic(() => reply(text("Done.")));
    redis = await startRedis();
    worker = await startWorker({
      redisUrl: redis.url,
      queueName: "instr",
      concurrency: 1,
      model: () => new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 }),
      log: () => {},
      config: localWorkerConfig(),
    });
    client = new PatchbayClient({ redisUrl: redis.url, queueName: "instr" });
  });
  afterAll(async () => {
    await client?.close();
    await worker?.shutdown(2000);
    await redis?.stop();
    await fake?.close();
    rmSync(repo, { recursive: true, force: true });
  });

  const events = async (id: string) => {
    const out: TranscriptEvent[] = [];
    for await (const e of client.watch(id, { follow: false })) out.push(e);
    return out;
  };

  it("offers the operator's instructions in the system prompt and the repo's before the task", async () => {
    const before = fake.requests.length;
    const id = await client.enqueue({
      task: "t",
      repo: { path: repo },
      instructions: "Keep the public API unchanged.",
    });
    expect((await client.waitForResult(id, { timeoutMs: 90_000 })).status).toBe("completed");
    const body = fake.requests[before]!.body;
    expect(JSON.stringify(body.system)).toContain("<operator-instructions>\\nKeep the public API unchanged.");
    expect(body.messages[0].content[0].text).toContain("Run the tests with python3 -m unittest.");
    expect(body.messages[0].content[0].cache_control).toEqual({ type: "ephemeral" });
    const loaded = (await events(id)).find((e) => e.type === "instructions_loaded");
    expect(loaded).toMatchObject({ files: ["AGENTS.md"], bytes: 40, cut: false });
  });

  it("leaves them out with repoInstructions: false", async () => {
    const before = fake.requests.length;
    const id = await client.enqueue({ task: "t", repo: { path: repo }, repoInstructions: false });
    expect((await client.waitForResult(id, { timeoutMs: 90_000 })).status).toBe("completed");
    expect(JSON.stringify(fake.requests[before]!.body.messages[0])).not.toContain("python3 -m unittest");
    expect((await events(id)).some((e) => e.type === "instructions_loaded")).toBe(false);
  });
});
