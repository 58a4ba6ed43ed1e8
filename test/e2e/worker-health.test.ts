// A worker only takes jobs it can run: an unreachable engine or a missing sandbox image pauses it
// (the job waits for a healthy worker, no attempt burnt), it resumes by itself once healthy, and
// the API's 429/529 answers throttle the worker instead of failing job attempts.
//
// Backend: Docker (an engine away, an image missing, Docker cut mid-job), but the 429/529 storm
// local.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import { docker } from "../../src/backend/docker.js";
import { LABEL } from "../../src/backend/owner.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import {
  apiError,
  reply,
  startFakeAnthropic,
  text,
  toolUse,
  type FakeAnthropic,
  type Policy,
} from "../support/fake-anthropic.js";
import { startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { startDockerProxy } from "../support/docker-proxy.js";
import { byTurn, taskOf } from "../support/scripts.js";
import { LOCAL_WORKER_ENV } from "../support/backend.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const IMAGE = "patchbay-sandbox:latest";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// A short job: one turn, no tool call; it completes with an empty patch. (BullMQ counts a
// completion in attemptsMade: a job that completed with no failed attempt shows 1.)
const done = byTurn([reply(text("Nothing to change."))]);

describe("worker health", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let policy: Policy = done;
  let client: PatchbayClient | undefined;
  let workers: WorkerProc[] = [];
  let queue = 0;
  const tags: string[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeAnthropic((req) => policy(req));
  });
  afterEach(async () => {
    await Promise.all(workers.map((w) => w.stop("SIGKILL")));
    workers = [];
    await client?.close();
    client = undefined;
    policy = done;
  });
  afterAll(async () => {
    for (const t of tags) execFileSync("docker", ["rmi", t], { stdio: "ignore" }); // the tag only: the image stays
    await fake?.close();
    await redis?.stop();
  });

  const setup = () => {
    const name = `health-${++queue}-${randomBytes(3).toString("hex")}`;
    client = new PatchbayClient({ redisUrl: redis.url, queueName: name });
    const env = {
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: name,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_CONCURRENCY: "1",
      PATCHBAY_HEALTH_MIN_MS: "200",
      PATCHBAY_HEALTH_MAX_MS: "1000",
    };
    const start = (extra: Record<string, string> = {}) => {
      const w = startWorkerProc({ ...env, ...extra });
      workers.push(w);
      return w;
    };
    return { name, client, start };
  };
  const transcript = async (c: PatchbayClient, id: string) => {
    const out: TranscriptEvent[] = [];
    for await (const e of c.watch(id, { follow: false })) out.push(e);
    return out;
  };

  it("a worker whose engine is unreachable takes no job; a healthy worker on the same queue completes it", async () => {
    const { name, client, start } = setup();
    const sick = start({ DOCKER_HOST: "tcp://127.0.0.1:2" }); // nothing listens there
    await sick.waitFor(/unhealthy/);
    await sick.waitFor(new RegExp(`ready: queue ${name}`));
    const id = await client.enqueue({ task: "nothing to do", repo: { path: CLAMP } });
    await sleep(2000); // the window in which the sick worker would have taken (and failed) it
    expect(sick.log()).not.toMatch(new RegExp(`job ${id}`));
    expect((await client.status(id)).state).toBe("waiting");

    const well = start();
    const result = await client.waitForResult(id, { timeoutMs: 60_000 });
    expect(result.status).toBe("completed");
    expect(well.log()).toMatch(new RegExp(`job ${id} attempt 1: completed`));
    expect(sick.log()).not.toMatch(new RegExp(`job ${id}`));
    expect(sick.log()).toMatch(/unhealthy: .*paused/);
    expect(sick.log().match(/unhealthy/g)).toHaveLength(1); // one line per state change, not per retry
    expect((await client.status(id)).attemptsMade).toBe(1); // BullMQ counts the completion: no failed attempt
  }, 180_000);

  it("a 429/529 storm across jobs throttles the worker: every job completes, no attempt burnt", async () => {
    const STORM = 16; // the SDK makes 5 requests per job attempt (maxRetries 4): several throttles
    policy = (req) => (req.index < STORM ? apiError(req.index % 3 === 2 ? 529 : 429, "slow down") : done(req));
    const { client, start } = setup();
    const w = start({ ...LOCAL_WORKER_ENV, PATCHBAY_CONCURRENCY: "2" }); // the throttle is the worker's logic: the local backend
    await w.waitFor(/ready: queue/);
    const ids = await Promise.all(
      [1, 2, 3].map((i) => client.enqueue({ task: `job ${i} in a storm`, repo: { path: CLAMP } })),
    );
    for (const id of ids) {
      const result = await client.waitForResult(id, { timeoutMs: 150_000 });
      expect(result.status).toBe("completed");
    }
    expect(fake.requests.length).toBeGreaterThan(STORM);
    expect(w.log()).toMatch(/throttl/);
    expect(w.log()).not.toMatch(/error: /);
    for (const id of ids) {
      expect((await client.status(id)).attemptsMade).toBe(1); // the completion alone
      const failed = (await transcript(client, id)).filter((e) => e.type === "job_finished" && e.status === "failed");
      expect(failed).toEqual([]);
    }
  }, 240_000);

  it("recovers by itself: a missing sandbox image pauses the worker; once the tag appears it completes the waiting job", async () => {
    const tag = `patchbay-sandbox:pb-health-${randomBytes(4).toString("hex")}`;
    const { name, client, start } = setup();
    const w = start({ PATCHBAY_IMAGE: tag });
    await w.waitFor(/unhealthy: .*paused/);
    await w.waitFor(new RegExp(`ready: queue ${name}`));
    const id = await client.enqueue({ task: "nothing to do", repo: { path: CLAMP } });
    await sleep(2000);
    expect(w.log()).not.toMatch(new RegExp(`job ${id}`));
    expect((await client.status(id)).state).toBe("waiting");

    execFileSync("docker", ["tag", IMAGE, tag]);
    tags.push(tag);
    const result = await client.waitForResult(id, { timeoutMs: 60_000 });
    expect(result.status).toBe("completed");
    expect(w.log()).toMatch(/healthy again/);
    expect(w.log()).toMatch(new RegExp(`job ${id} attempt 1: completed`));
    expect((await client.status(id)).attemptsMade).toBe(1);
    expect(w.log().match(/unhealthy/g)).toHaveLength(1);
  }, 180_000);

  it("Docker gone mid-job, twice: the first engine failure counts as an attempt, the second sends the job back uncounted; it completes", async () => {
    const proxy = await startDockerProxy(); // this worker's "Docker": cut during the job's first turn
    const workerId = `pb-test-health-elsewhere:${randomBytes(3).toString("hex")}:w`;
    let cuts = 0;
    // The job: a bash call, then done. The engine goes away while the model answers the first
    // request of each of the first two runs: in run 1 the bash call fails; run 2 resumes from
    // run 1's checkpoint (the bash call again, then the second request), and its patch fails.
    policy = (req) => {
      const turn = (req.body.messages as { role: string }[]).filter((m) => m.role === "assistant").length;
      if (taskOf(req.body).includes("engine dies") && turn === cuts && cuts < 2) {
        cuts++;
        void proxy.cut();
      }
      return byTurn([reply(toolUse("bash", { command: "echo hi" })), reply(text("Done."))])(req);
    };
    const { client, start } = setup();
    const w = start({ DOCKER_HOST: proxy.url, PATCHBAY_WORKER_ID: workerId });
    const count = (re: RegExp) => w.log().match(re)?.length ?? 0;
    const until = async (what: () => boolean, label: string) => {
      for (const t0 = Date.now(); !what(); await sleep(100))
        if (Date.now() - t0 > 60_000) throw new Error(`timed out waiting for ${label}:\n${w.log()}`);
    };
    try {
      await w.waitFor(/ready: queue/);
      const id = await client.enqueue({ task: "the engine dies under this job", repo: { path: CLAMP }, attempts: 3 });
      await until(() => count(/unhealthy:/g) === 1, "the first outage");
      await proxy.restore();
      await until(() => count(/unhealthy:/g) === 2, "the second outage");
      await proxy.restore();
      const result = await client.waitForResult(id, { timeoutMs: 90_000 });
      expect(result.status).toBe("completed");
      expect(cuts).toBe(2);
      expect(count(/healthy again/g)).toBe(2);
      expect(w.log()).toMatch(new RegExp(`job ${id} attempt 1: error: .*the engine failed`));
      expect(w.log()).toMatch(new RegExp(`job ${id} attempt 2: .*back to the queue, no attempt counted`));
      // One failed attempt (the first outage) and the completion; the second outage cost nothing.
      expect((await client.status(id)).attemptsMade).toBe(2);
      const failed = (await transcript(client, id)).filter((e) => e.type === "job_finished" && e.status === "failed");
      expect(failed).toHaveLength(1);
    } finally {
      await w.stop("SIGKILL");
      await proxy.close();
      // The sandboxes the worker lost with its engine: removed here (they would wait for their deadline).
      for (const c of await docker().listContainers({
        all: true,
        filters: { label: [`${LABEL.worker}=${workerId}`] },
      })) {
        await docker()
          .getContainer(c.Id)
          .remove({ force: true, v: true })
          .catch(() => {});
      }
      const { Volumes } = await docker().listVolumes({ filters: { label: [`${LABEL.worker}=${workerId}`] } });
      for (const v of Volumes ?? [])
        await docker()
          .getVolume(v.Name)
          .remove()
          .catch(() => {});
    }
  }, 240_000);
});
