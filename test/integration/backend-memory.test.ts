// The memory backend (src/backend/memory.ts): boxes as objects that execute nothing, for the fleet
// bench's simulations. A whole scripted job runs on it (the repo in, the agent's tools, the patch,
// verify) through runJob and through a worker on a real Redis; a worker refuses it unless
// PATCHBAY_TEST_BACKENDS=1. No Docker, no root.
//
// Backend: memory (the backend itself: a scripted job through `runJob` and an in-process worker on
// a private Redis; the refusal without `PATCHBAY_TEST_BACKENDS=1`).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { loadConfig } from "../../src/core/config/config.js";
import { runJob } from "../../src/job/run.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { startWorker, type WorkerHandle } from "../../src/queue/worker.js";
import { keys } from "../../src/queue/keys.js";
import { Redis } from "ioredis";
import { backendOf } from "../../src/backend/index.js";
import { MemoryBackend } from "../../src/backend/memory.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { startRedis } from "../support/cluster.js";
import { startFakeAnthropic, toolResults, toolResultText, type FakeAnthropic } from "../support/fake-anthropic.js";
import { byTurn, clampScript } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const MEMORY = { PATCHBAY_BACKEND: "memory", PATCHBAY_TEST_BACKENDS: "1" };

describe("the memory backend", () => {
  let fake: FakeAnthropic;
  beforeAll(async () => {
    fake = await startFakeAnthropic(byTurn(clampScript()));
  });
  afterAll(async () => {
    await fake?.close();
  });
  const model = () => new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });

  it("runs a scripted job end to end through runJob: the agent's edits, the patch, verify; no box left", async () => {
    const backend = new MemoryBackend();
    const events: TranscriptEvent[] = [];
    const result = await runJob(
      { task: "Fix clamp.", repo: { path: CLAMP }, verify: "python3 -m unittest -q" },
      { model: model(), backend, config: loadConfig({ ...process.env, ...MEMORY }), onEvent: (e) => events.push(e) },
    );
    expect(result.status).toBe("completed");
    expect(result.filesChanged).toEqual(["clamp.py"]);
    // (whole-file hunks: the memory backend's diff, see src/backend/memory-exec.ts)
    expect(result.patch).toMatch(
      /^diff --git a\/clamp.py b\/clamp.py\n--- a\/clamp.py\n\+\+\+ b\/clamp.py\n@@ -1,10 \+1,10 @@\n/,
    );
    expect(result.patch).toMatch(/^\+ {8}return hi$/m);
    expect(result.verify?.exitCode).toBe(0);
    // The editor read the repo's real file from the box, and refused the ambiguous edit.
    const seen = fake.requests.slice(-5).map((r) => toolResultText(toolResults(r)[0]));
    expect(seen[1]).toMatch(/def clamp\(v, lo, hi\)/);
    expect(seen[2]).toMatch(/Multiple occurrences of old_str `return lo`/);
    expect(events.filter((e) => e.type === "verify")).toHaveLength(1);
    expect(backend.size).toBe(0); // the job's box and the verify round's, removed
  });

  describe("through a worker on Redis", () => {
    let redis: Awaited<ReturnType<typeof startRedis>>;
    let worker: WorkerHandle;
    let client: PatchbayClient;
    beforeAll(async () => {
      redis = await startRedis();
      worker = await startWorker({
        redisUrl: redis.url,
        queueName: "memory",
        concurrency: 2,
        model,
        log: () => {},
        config: loadConfig({ ...process.env, ...MEMORY }),
      });
      client = new PatchbayClient({ redisUrl: redis.url, queueName: "memory" });
    });
    afterAll(async () => {
      await client?.close();
      await worker?.shutdown(2000);
      await redis?.stop();
    });

    it("runs enqueued jobs to completed, with their patches", async () => {
      const ids = await Promise.all(
        [1, 2, 3].map(() =>
          client.enqueue({ task: "Fix clamp.", repo: { path: CLAMP }, verify: "python3 -m unittest -q" }),
        ),
      );
      const results = await Promise.all(ids.map((id) => client.waitForResult(id, { timeoutMs: 60_000 })));
      expect(results.map((r) => r.status)).toEqual(["completed", "completed", "completed"]);
      for (const r of results) expect(r.patch).toMatch(/^\+ {8}return hi$/m);
      expect((backendOf("memory") as MemoryBackend).size).toBe(worker.worker.concurrency); // only the warm pool's boxes
    });

    it("writes each job's transcript whole and in order, its stream under the retention TTL", async () => {
      const id = await client.enqueue({ task: "Fix clamp.", repo: { path: CLAMP } });
      expect((await client.waitForResult(id, { timeoutMs: 60_000 })).status).toBe("completed");
      const types: string[] = [];
      for await (const e of client.watch(id, { follow: false })) types.push(e.type);
      expect(types[0]).toBe("job_started");
      expect(types.at(-1)).toBe("job_finished");
      expect(types.indexOf("sandbox_ready")).toBeLessThan(types.indexOf("model_request"));
      expect(types.filter((t) => t === "model_request")).toHaveLength(
        types.filter((t) => t === "model_response").length,
      );
      // The TTL is set with the stream's first write (the writes after it are plain XADDs, which keep it).
      const raw = new Redis(redis.url);
      const ttl = await raw.ttl(keys("memory").events(id)).finally(() => raw.disconnect());
      const retention = loadConfig({ ...process.env, ...MEMORY }).retentionSec;
      expect(ttl).toBeGreaterThan(retention - 120);
      expect(ttl).toBeLessThanOrEqual(retention);
    });
  });

  it("a worker refuses it unless PATCHBAY_TEST_BACKENDS=1: it executes nothing", async () => {
    const config = loadConfig({ ...process.env, PATCHBAY_BACKEND: "memory", PATCHBAY_TEST_BACKENDS: "0" });
    expect(config.backend).toBe("memory");
    await expect(startWorker({ queueName: "memory-refused", config })).rejects.toThrow(
      /PATCHBAY_BACKEND=memory runs repos with no isolation: a worker refuses it/,
    );
  });
});
