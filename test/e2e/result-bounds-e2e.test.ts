// Issue 23, point 6: "300,000 empty files make a ~70 MB result", kept in Redis for 7 days and
// repeated by each verify round's `patch` event. A real job (the worker on a private Redis, a real
// sandbox, the scripted model) whose agent creates 300,000 empty files, through two verify rounds:
// what it leaves in Redis is bounded, the cut is counted, and the whole patch is still there, once.
// The sandbox is the local backend's (test/support/backend.ts): the bounds are the queue's.
//
// Backend: local (the bounds are the queue's; the time is git's on 300,000 files either way).
import { Redis } from "ioredis";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { keys } from "../../src/queue/keys.js";
import { BOUNDS, PatchGoneError } from "../../src/queue/result-bounds.js";
import type { EventOf, JobResult, TranscriptEvent } from "../../src/core/spec/spec.js";
import { startWorker, type WorkerHandle } from "../../src/queue/worker.js";
import { cli, removeDir, startRedis } from "../support/cluster.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic } from "../support/fake-anthropic.js";
import { byTurn } from "../support/scripts.js";
import { localWorkerConfig } from "../support/backend.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const QUEUE = "bounded-results";
const FILES = 300_000;
/** Everything the job leaves in Redis but its one patch key (MEMORY USAGE, every key): the bound this test holds it to. */
const REST_MAX = 1024 * 1024;

// Turn 1 makes the files; verify (round 1) wants a marker the agent then writes (turn 3), so two
// verify rounds each take a patch of 300,000 files and write a `patch` event.
const SCRIPT = [
  reply(
    text("Making the files."),
    toolUse("bash", {
      command: `mkdir -p /workspace/many && cd /workspace/many && seq -f 'f%06g' ${FILES} | xargs touch && ls | wc -l`,
    }),
  ),
  reply(text("Done.")),
  reply(toolUse("bash", { command: "touch /workspace/verified-ok" })),
  reply(text("Marker written.")),
];

describe("300,000 files make a bounded result", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let worker: WorkerHandle;
  let client: PatchbayClient;
  let r: Redis;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeAnthropic(byTurn(SCRIPT));
    // A checkpoint of this job is over its bound and not stored anyway: off, for time.
    const config = localWorkerConfig({ PATCHBAY_CHECKPOINTS: "0" });
    worker = await startWorker({
      redisUrl: redis.url,
      queueName: QUEUE,
      concurrency: 1,
      pool: 0,
      model: () => new AnthropicModel({ apiKey: "test-key", baseURL: fake.url }),
      log: () => {},
      config,
    });
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    r = new Redis(redis.url);
  });

  afterAll(async () => {
    r?.disconnect();
    await client?.close();
    await worker?.shutdown(5000);
    await fake?.close();
    await redis?.stop();
  });

  it("the stored result and events stay under their bounds, the cut is counted, and the whole patch is returned", async () => {
    const id = await client.enqueue({
      task: "Make many files.",
      repo: { path: CLAMP },
      verify: "test -f /workspace/verified-ok",
      verifyRounds: 1,
      jobId: "many-files-1",
    });
    const result = await client.waitForResult(id, { timeoutMs: 900_000 });
    expect(result.status, result.error).toBe("completed");
    const k = keys(QUEUE);

    // The library gives the whole patch back: every file, then the marker.
    const files = FILES + 1;
    expect(result.patch.match(/^diff --git /gm)).toHaveLength(files);
    expect(result.patch).toContain("diff --git a/many/f300000 b/many/f300000\nnew file mode 100644\n");
    expect(result.patch).toContain("diff --git a/verified-ok b/verified-ok\n");
    expect(result.patchStored).toBeUndefined();
    // ...and the lists, cut with the cut counted.
    expect(result.filesChanged.length).toBeGreaterThan(0);
    expect(result.filesChanged.length).toBeLessThanOrEqual(BOUNDS.filesChangedEntries);
    expect(result.filesChangedTotal).toBe(files);
    expect(result.filesChangedCut).toBe(files - result.filesChanged.length);
    expect(result.filesChanged[0]).toBe("many/f000001");
    expect(result.diffstatCut).toBeGreaterThan(files - 1000);
    expect(result.diffstat).toMatch(/ 300001 files changed, 0 insertions\(\+\), 0 deletions\(-\)\n$/);

    // BullMQ's copy: the bounded result, naming the stored patch.
    const raw = (await r.hget(`bull:${QUEUE}:${id}`, "returnvalue"))!;
    expect(Buffer.byteLength(raw)).toBeLessThanOrEqual(BOUNDS.resultBytes);
    const stored = JSON.parse(raw) as JobResult;
    expect(stored.patch).toBe("");
    expect(stored.patchStored?.bytes).toBe(Buffer.byteLength(result.patch));
    // The patch itself: one key, the whole patch, with the retention's TTL (7 days by default).
    expect(await r.strlen(k.patch(id))).toBe(Buffer.byteLength(result.patch));
    const ttl = await r.ttl(k.patch(id));
    expect(ttl).toBeGreaterThan(7 * 24 * 3600 - 3600);
    expect(ttl).toBeLessThanOrEqual(7 * 24 * 3600);

    // The transcript: two patch events (one per verify round), each bounded and counting its cut.
    const entries = (await r.xrange(k.events(id), "-", "+")).map(([, f]) => f[1]!);
    const events = entries.map((e) => JSON.parse(e) as TranscriptEvent);
    const patches = events.filter((e): e is EventOf<"patch"> => e.type === "patch");
    expect(patches.map((e) => e.filesChangedTotal)).toEqual([FILES, files]);
    for (const e of patches) {
      expect(e.filesChanged.length).toBeLessThanOrEqual(BOUNDS.filesChangedEntries);
      expect(e.filesChangedCut).toBe(e.filesChangedTotal! - e.filesChanged.length);
      expect(e.diffstatCut).toBeGreaterThan(FILES - 1000);
      expect(e.bytes).toBeGreaterThan(40_000_000);
    }
    for (const e of entries) expect(Buffer.byteLength(e)).toBeLessThanOrEqual(BOUNDS.resultBytes);

    // Everything in Redis but the one patch key, together: under REST_MAX.
    const sizes = new Map<string, number>();
    let cursor = "0";
    do {
      const [next, found] = await r.scan(cursor, "COUNT", 1000);
      for (const key of found) sizes.set(key, Number(await r.memory("USAGE", key, "SAMPLES", 0)));
      cursor = next;
    } while (cursor !== "0");
    const patchKeys = [...sizes].filter(([, n]) => n > REST_MAX).map(([key]) => key);
    expect(patchKeys).toEqual([k.patch(id)]);
    const rest = [...sizes].filter(([key]) => key !== k.patch(id)).reduce((s, [, n]) => s + n, 0);
    expect(rest).toBeLessThan(REST_MAX);

    // The CLI writes the whole patch too.
    const dir = mkdtempSync(join(tmpdir(), "pb-bounded-"));
    try {
      const out = await cli(["result", id, "--out", dir], { REDIS_URL: redis.url, PATCHBAY_QUEUE: QUEUE });
      expect(out.code, out.stderr).toBe(0);
      expect(readFileSync(join(dir, "patch.diff"), "utf8") === result.patch).toBe(true);
      const written = JSON.parse(readFileSync(join(dir, "result.json"), "utf8")) as JobResult;
      expect(written.filesChangedTotal).toBe(files);
    } finally {
      removeDir(dir);
    }

    // A stored patch replaced or gone (past its retention): an error that says so, never an empty
    // patch, and waitForResult does not wait on it.
    await r.set(k.patch(id), "another patch");
    await expect(client.result(id)).rejects.toThrow(
      /the patch stored for job many-files-1 is not the one its result names/,
    );
    await r.del(k.patch(id));
    await expect(client.waitForResult(id, { timeoutMs: 60_000 })).rejects.toThrow(PatchGoneError);
    await expect(client.result(id)).rejects.toThrow(/is no longer in Redis: it was kept for PATCHBAY_RETENTION_SEC/);
  }, 1_200_000);
});
