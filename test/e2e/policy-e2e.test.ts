// The JobSpec cannot widen the sandbox (issue 23, point 8), through real worker processes on a
// private Redis: a default worker refuses `limits.network: "bridge"`, limits over its bounds and an
// image off its list, each job failing once (no retry, no sandbox, no model request) with the line
// that names the bound and the knob; an image `patchbay image build --from` made runs on a default
// worker, and one PATCHBAY_IMAGES names runs on a worker so configured.
//
// Backend: Docker (the setup network, the policy's limits, the engine's refusals, a browser over
// real jobs).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobFailedError, PatchbayClient } from "../../src/queue/client.js";
import { docker } from "../../src/backend/docker.js";
import { buildImageFrom } from "../../src/sandbox/image-from.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import {
  reply,
  startFakeAnthropic,
  text,
  toolResults,
  toolResultText,
  toolUse,
  type FakeAnthropic,
} from "../support/fake-anthropic.js";
import { removeQueueSandboxes, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { byTurn } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const PLAIN = `pb-policy-plain:${process.pid}`; // the sandbox image under another name: no --from label
const FROM = `pb-policy-from:${process.pid}`;
const SANDBOX = "patchbay-sandbox:latest";

let redis: Awaited<ReturnType<typeof startRedis>>;
let fake: FakeAnthropic;
const workers: WorkerProc[] = [];
const clients: PatchbayClient[] = [];
const ctx = fs.mkdtempSync(path.join(os.tmpdir(), "pb-policy-"));

beforeAll(async () => {
  await docker()
    .getImage(SANDBOX)
    .tag({ repo: PLAIN.split(":")[0]!, tag: PLAIN.split(":")[1] });
  fs.writeFileSync(
    path.join(ctx, "Dockerfile"),
    `FROM ${SANDBOX}\nUSER root\nRUN echo from-build > /etc/pb-marker\nUSER 1000:1000\n`,
  );
  await buildImageFrom(ctx, FROM, { log: () => {} });
  redis = await startRedis();
  // Every job that reaches the model reads the marker (which image it runs in), then ends.
  fake = await startFakeAnthropic(
    byTurn([reply(toolUse("bash", { command: "cat /etc/pb-marker 2>&1; echo RAN" })), reply(text("Done."))]),
  );
}, 300_000);
afterAll(async () => {
  for (const c of clients) await c.close();
  for (const w of workers) await w.stop("SIGTERM");
  await fake?.close();
  await redis?.stop();
  for (const q of ["policy-default", "policy-images"]) await removeQueueSandboxes(q);
  for (const image of [PLAIN, FROM])
    await docker()
      .getImage(image)
      .remove({ force: true })
      .catch(() => {});
  fs.rmSync(ctx, { recursive: true, force: true });
});

async function workerOn(queue: string, env: Record<string, string> = {}): Promise<PatchbayClient> {
  const w = startWorkerProc({
    REDIS_URL: redis.url,
    PATCHBAY_QUEUE: queue,
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: "test-key",
    PATCHBAY_CONCURRENCY: "1",
    PATCHBAY_POOL: "0",
    ...env,
  });
  workers.push(w);
  await w.waitFor(new RegExp(`ready: queue ${queue}`));
  // The worker's own refusal is what is tested: the client leaves it to the worker (a default client
  // refuses such specs at enqueue already: test/e2e/worker-bounds.test.ts).
  const c = new PatchbayClient({ redisUrl: redis.url, queueName: queue, checkWorkerBounds: false });
  clients.push(c);
  return c;
}

/** A job the worker must refuse: it fails once, with no model request, and its transcript says why. */
async function refused(c: PatchbayClient, extra: Record<string, unknown>): Promise<string> {
  const requests = fake.requests.length;
  const id = await c.enqueue({ task: "t", repo: { path: CLAMP }, attempts: 3, ...extra });
  const err = await c.waitForResult(id, { timeoutMs: 120_000 }).catch((e: Error) => e);
  expect(err).toBeInstanceOf(JobFailedError);
  const st = await c.status(id);
  expect(st).toMatchObject({ state: "failed", attemptsMade: 1 });
  expect(fake.requests.length).toBe(requests);
  const events: TranscriptEvent[] = [];
  for await (const e of c.watch(id, { follow: false })) events.push(e);
  expect(events.map((e) => e.type)).toEqual(["job_finished"]); // no sandbox_ready: nothing was made
  expect(events[0]).toMatchObject({ status: "failed", error: (err as JobFailedError).reason });
  return (err as JobFailedError).reason;
}

/** A job the worker runs: it completes, and the marker says which image it ran in. */
async function runs(c: PatchbayClient, extra: Record<string, unknown>): Promise<string> {
  const id = await c.enqueue({ task: "t", repo: { path: CLAMP }, ...extra });
  const result = await c.waitForResult(id, { timeoutMs: 120_000 });
  expect(result.status).toBe("completed");
  const r = fake.requests.filter((q) => toolResults(q).length).at(-1);
  return toolResultText(toolResults(r)[0]);
}

describe("a default worker (no policy knobs)", () => {
  let c: PatchbayClient;
  beforeAll(async () => {
    c = await workerOn("policy-default");
  });

  it('refuses limits.network: "bridge" once, without retry, naming PATCHBAY_ALLOW_BRIDGE', async () => {
    expect(await refused(c, { limits: { network: "bridge" } })).toBe(
      'JobSpec refused by this worker\'s policy: limits.network: "bridge" (the full network in every phase) is not allowed by this worker; its sandboxes have none (PATCHBAY_ALLOW_BRIDGE=1 on the worker allows it; for setup, network.setup.allow names hosts instead)',
    );
  });

  it("refuses limits and timeouts over its bounds, naming each bound and its knob", async () => {
    const why = await refused(c, {
      limits: { memoryMb: 16_384, cpus: 8, pids: 4096, diskMb: 20_480 },
      timeoutSec: 86_400,
      commandTimeoutSec: 7200,
    });
    expect(why.split("; ")).toEqual([
      "JobSpec refused by this worker's policy: limits.memoryMb: 16384 is over this worker's bound of 8192 (PATCHBAY_MAX_MEMORY_MB on the worker raises it)",
      "limits.cpus: 8 is over this worker's bound of 4 (PATCHBAY_MAX_CPUS on the worker raises it)",
      "limits.pids: 4096 is over this worker's bound of 1024 (PATCHBAY_MAX_PIDS on the worker raises it)",
      "limits.diskMb: 20480 is over this worker's bound of 10240 (PATCHBAY_MAX_DISK_MB on the worker raises it)",
      "timeoutSec: 86400 is over this worker's bound of 14400 (PATCHBAY_MAX_TIMEOUT_SEC on the worker raises it)",
      "commandTimeoutSec: 7200 is over this worker's bound of 3600 (PATCHBAY_MAX_COMMAND_TIMEOUT_SEC on the worker raises it)",
    ]);
  });

  // Within the bound but more than the engine has: the engine would refuse the create, which looked
  // like the host's fault and was retried three times.
  it("refuses more CPUs than its engine has, once, naming the engine's count", async () => {
    const ncpu = (await docker().info()).NCPU as number;
    expect(await refused(c, { limits: { cpus: ncpu + 1 } })).toBe(
      `JobSpec refused by this worker's policy: limits.cpus: ${ncpu + 1} is more than the ${ncpu} CPUs of this worker's Docker engine`,
    );
  });

  it("refuses an image off its list (a local image image build --from did not make), and one the engine lacks", async () => {
    expect(await refused(c, { image: PLAIN })).toBe(
      `JobSpec refused by this worker's policy: image: "${PLAIN}" is not in this worker's image allow-list; allowed: the sandbox image ${SANDBOX}, images built by patchbay image build --from (PATCHBAY_IMAGES on the worker sets the list)`,
    );
    expect(await refused(c, { image: `pb-policy-absent:${process.pid}` })).toMatch(
      /is not in this worker's image allow-list \(and no such image is on this worker's engine\)/,
    );
  });

  it("runs an image patchbay image build --from made, and specs within its bounds", async () => {
    expect(await runs(c, { image: FROM, limits: { memoryMb: 1024, network: "none" }, timeoutSec: 600 })).toMatch(
      /^from-build\nRAN/,
    );
    expect(await runs(c, { image: SANDBOX })).toMatch(/No such file or directory\nRAN/);
  });
});

describe("a worker with PATCHBAY_IMAGES", () => {
  it("runs the images it lists, and no longer those of image build --from unless @from is listed", async () => {
    const c = await workerOn("policy-images", { PATCHBAY_IMAGES: PLAIN });
    expect(await runs(c, { image: PLAIN })).toMatch(/No such file or directory\nRAN/);
    expect(await refused(c, { image: FROM })).toMatch(
      new RegExp(
        `image: "${FROM}" is not in this worker's image allow-list; allowed: the sandbox image ${SANDBOX}, ${PLAIN} \\(PATCHBAY_IMAGES`,
      ),
    );
  });
});
