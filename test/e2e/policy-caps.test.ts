// The worker's policy caps what a spec may spend (issue 41, part 5), through a real worker process on
// a private Redis: PATCHBAY_MAX_BUDGET_USD, PATCHBAY_MAX_TURNS, PATCHBAY_MAX_TOKENS and PATCHBAY_MODELS
// each refuse a spec past them once (no retry, no sandbox, no model request) with the bound and its
// knob named; a spec that sets none of them runs with the caps as its own (the transcript's spec and
// the model request's max_tokens say so); PATCHBAY_RUNTIME=runsc runs the job's container under gVisor
// (the engine's own record of the container says runsc) and refuses a spec asking for runc.
//
// Backend: Docker (the setup network, the policy's limits, the engine's refusals, a browser over
// real jobs).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobFailedError, PatchbayClient } from "../../src/queue/client.js";
import { docker } from "../../src/backend/docker.js";
import { LABEL } from "../../src/backend/owner.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic } from "../support/fake-anthropic.js";
import { removeQueueSandboxes, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const QUEUE = "policy-caps";

let redis: Awaited<ReturnType<typeof startRedis>>;
let fake: FakeAnthropic;
let worker: WorkerProc;
let c: PatchbayClient;
/** The runtime the engine records for each of the queue's containers, read while a job's model request is open. */
const runtimes: string[] = [];

beforeAll(async () => {
  redis = await startRedis();
  fake = await startFakeAnthropic(async ({ requests }) => {
    const mine = requests.filter((r) => r.body.messages.length === 1).length;
    if (requests.at(-1)!.body.messages.length > 1) return reply(text("Done."));
    for (const info of await docker().listContainers({ filters: { label: [`${LABEL.queue}=${QUEUE}`] } }))
      runtimes.push((await docker().getContainer(info.Id).inspect()).HostConfig.Runtime ?? "");
    return reply(toolUse("bash", { command: `echo turn ${mine}` }));
  });
  worker = startWorkerProc({
    REDIS_URL: redis.url,
    PATCHBAY_QUEUE: QUEUE,
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: "test-key",
    PATCHBAY_CONCURRENCY: "2",
    PATCHBAY_POOL: "0",
    PATCHBAY_MAX_BUDGET_USD: "1",
    PATCHBAY_MAX_TURNS: "5",
    PATCHBAY_MAX_TOKENS: "2048",
    PATCHBAY_MODELS: "claude-haiku-4-5",
    PATCHBAY_RUNTIME: "runsc",
  });
  await worker.waitFor(new RegExp(`ready: queue ${QUEUE}`), 120_000);
  // The worker's own refusal is tested: the client leaves it to the worker (test/e2e/worker-bounds.test.ts has the client's).
  c = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE, checkWorkerBounds: false });
}, 180_000);

afterAll(async () => {
  await c?.close();
  await worker?.stop("SIGTERM");
  await fake?.close();
  await redis?.stop();
  await removeQueueSandboxes(QUEUE);
});

async function events(id: string): Promise<TranscriptEvent[]> {
  const out: TranscriptEvent[] = [];
  for await (const e of c.watch(id, { follow: false })) out.push(e);
  return out;
}

describe("a worker with caps on what a spec may spend, and a forced runtime", () => {
  it("refuses a spec over each cap, or naming a model off its list, or another runtime: once, with the bound and its knob", async () => {
    const requests = fake.requests.length;
    const cases: [Record<string, unknown>, string][] = [
      [
        { budget: { usd: 5 } },
        "budget.usd: 5 is over this worker's bound of 1 (PATCHBAY_MAX_BUDGET_USD on the worker raises it)",
      ],
      [{ maxTurns: 10 }, "maxTurns: 10 is over this worker's bound of 5 (PATCHBAY_MAX_TURNS on the worker raises it)"],
      [
        { maxTokens: 4096 },
        "maxTokens: 4096 is over this worker's bound of 2048 (PATCHBAY_MAX_TOKENS on the worker raises it)",
      ],
      [
        { model: "claude-opus-4-5" },
        'model: "claude-opus-4-5" is not in this worker\'s model allow-list; allowed: claude-sonnet-5-5, claude-haiku-4-5 (PATCHBAY_MODELS on the worker sets the list)',
      ],
      [
        { runtime: "runc" },
        'runtime: "runc" is not allowed by this worker, which runs every sandbox under runsc (PATCHBAY_RUNTIME on the worker)',
      ],
    ];
    const ids = await Promise.all(
      cases.map(([extra]) => c.enqueue({ task: "t", repo: { path: CLAMP }, attempts: 3, ...extra })),
    );
    for (const [i, id] of ids.entries()) {
      const err = await c.waitForResult(id, { timeoutMs: 120_000 }).catch((e: Error) => e);
      expect(err).toBeInstanceOf(JobFailedError);
      expect((err as JobFailedError).reason).toBe(`JobSpec refused by this worker's policy: ${cases[i]![1]}`);
      expect(await c.status(id)).toMatchObject({ state: "failed", attemptsMade: 1 });
      expect((await events(id)).map((e) => e.type)).toEqual(["job_finished"]);
    }
    expect(fake.requests.length).toBe(requests);
  }, 180_000);

  it("runs a spec that sets none of them with the caps as its own, in a container whose runtime is runsc", async () => {
    const id = await c.enqueue({ task: "t", repo: { path: CLAMP }, model: "claude-haiku-4-5" });
    const result = await c.waitForResult(id, { timeoutMs: 240_000 });
    expect(result.status).toBe("completed");
    const started = (await events(id)).find((e) => e.type === "job_started");
    expect(started).toMatchObject({
      spec: { budget: { usd: 1 }, maxTurns: 5, maxTokens: 2048, runtime: "runsc", model: "claude-haiku-4-5" },
    });
    const first = fake.requests.find((r) => r.body.messages.length === 1)!;
    expect(first.body.max_tokens).toBe(2048);
    expect(runtimes.length).toBeGreaterThan(0);
    expect(new Set(runtimes)).toEqual(new Set(["runsc"]));
  }, 300_000);
});
