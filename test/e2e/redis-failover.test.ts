// Issue 28 §2: a Sentinel failover under a running batch, and right after a job's result write.
// Debian's redis-server and redis-sentinel on loopback (test/support/redis-topology.ts: a master
// with a password, a replica, three sentinels), worker processes on Docker (the engine whose
// sandboxes must not leak), the real SDK against the scripted server, and the CLI's `batch wait`
// as the client that has to follow the new master too.
//
// Backend: Docker (worker processes: what a failover must not leak is the engine's).
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchClient } from "../../src/batch/batches.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { docker } from "../../src/backend/docker.js";
import { LABEL } from "../../src/backend/owner.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic } from "../support/fake-anthropic.js";
import { cli, removeDir, removeQueueSandboxes, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { startSentinelGroup, type SentinelGroup } from "../support/redis-topology.js";
import { byTurn, taskOf } from "../support/scripts.js";
import { ensureBuilt } from "../support/cli-helpers.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PASSWORD = "failover-pw";
/** Each job: a command, then done; each reply a little late, so the batch is still running when the master dies. */
const JOB = (i: number) => [
  { ...reply(toolUse("bash", { command: `echo ${i} > /workspace/out-${i}` })), delayMs: 250 },
  { ...reply(text("Done.")), delayMs: 250 },
];

async function transcript(c: PatchbayClient, id: string): Promise<TranscriptEvent[]> {
  const events: TranscriptEvent[] = [];
  for await (const e of c.watch(id, { follow: false })) events.push(e);
  return events;
}

async function engineLeftovers(queue: string): Promise<string[]> {
  const list = await docker().listContainers({ all: true, filters: { label: [`${LABEL.queue}=${queue}`] } });
  return list.map((c) => `${c.Names[0]} (${c.State})`);
}

/** BullMQ's own account of each job it failed (reason, stack, attempts made and started), for a failure's message. */
async function failedJobs(url: string, queue: string): Promise<string> {
  const c = new PatchbayClient({ redisUrl: url, queueName: queue });
  try {
    const jobs = await c.queue.getJobs(["failed"]);
    return jobs
      .map(
        (j) =>
          `${j.id}: ${j.failedReason} (made ${j.attemptsMade}, started ${j.attemptsStarted}, stalls ${j.stalledCounter})\n  ${(j.stacktrace ?? []).join("\n  ")}`,
      )
      .join("\n");
  } finally {
    await c.close();
  }
}

/** Every worker the test started, stopped by its pid (a drain: the pool's sandboxes go with it). */
async function stopAll(workers: WorkerProc[]): Promise<void> {
  await Promise.all(workers.map((w) => w.stop("SIGTERM")));
}

describe("a Sentinel failover under a batch: every job ends once, with its status", () => {
  const QUEUE = `failover-${process.pid}`;
  let group: SentinelGroup;
  let fake: FakeAnthropic;
  let workers: WorkerProc[] = [];
  let dir: string;
  /** How many times the model saw each job's first turn: more than once is a job run twice. */
  const firstTurns = new Map<string, number>();

  beforeAll(async () => {
    await ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), "pb-failover-"));
    writeFileSync(join(dir, "README"), "a tiny repo\n");
    group = await startSentinelGroup({ password: PASSWORD });
    fake = await startFakeAnthropic(
      byTurn((body) => {
        const task = taskOf(body).replace(/^<task>\n|\n<\/task>$/g, "");
        const i = Number(/job (\d+)/.exec(task)?.[1] ?? -1);
        if ((body.messages as unknown[]).length === 1) firstTurns.set(task, (firstTurns.get(task) ?? 0) + 1);
        return JOB(i);
      }),
    );
  }, 300_000);

  afterAll(async () => {
    await stopAll(workers);
    await fake?.close();
    await group?.stop();
    await removeQueueSandboxes(QUEUE);
    if (dir) removeDir(dir);
  });

  it("30 jobs on 3 workers; the master SIGKILLed mid-batch; the replica promoted; the batch ends right and nothing leaks", async () => {
    const env = {
      REDIS_URL: group.url,
      PATCHBAY_QUEUE: QUEUE,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_CONCURRENCY: "2",
      PATCHBAY_LOCK_MS: "15000",
      PATCHBAY_STALLED_MS: "3000",
      PATCHBAY_REDIS_WAIT_MS: "500",
    };
    workers = [startWorkerProc(env), startWorkerProc(env), startWorkerProc(env)];
    await Promise.all(workers.map((w) => w.waitFor(new RegExp(`ready: queue ${QUEUE}`), 180_000)));

    const file = join(dir, "thirty.jsonl");
    writeFileSync(
      file,
      Array.from({ length: 30 }, (_, i) => JSON.stringify({ task: `job ${i}`, repo: { path: dir } })).join("\n") + "\n",
    );
    const sub = await cli(["batch", "submit", file, "--name", "ha"], env);
    expect(sub.code, sub.stderr).toBe(0);
    const out = join(dir, "out");
    const waiting = cli(["batch", "wait", "ha", "--out", out], env, { timeoutMs: 600_000 });

    // Mid-batch: some jobs done, some running, some waiting.
    const watcher = new PatchbayClient({ redisUrl: group.url, queueName: QUEUE });
    const batches = new BatchClient(watcher);
    let doneAtKill: number;
    for (;;) {
      const st = await batches.status("ha");
      if (st.done >= 8) {
        doneAtKill = st.done;
        break;
      }
      await sleep(50);
    }
    const oldMaster = group.master.port;
    await group.master.kill("SIGKILL");
    const newMaster = await group.waitForFailover(oldMaster, 60_000);
    expect(newMaster).toBe(group.replica.port);
    expect(doneAtKill).toBeLessThan(30);

    const w = await waiting;
    expect(
      w.code,
      `${w.stdout}\n${w.stderr}\n${await failedJobs(group.url, QUEUE)}\n${workers.map((x) => x.log()).join("\n---\n")}`,
    ).toBe(0);
    const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8"));
    expect(summary.total).toBe(30);
    expect(summary.counts).toMatchObject({ completed: 30, failed: 0 });

    // Each job: completed once, by one run of the agent, with one job_finished in its transcript.
    const st = await batches.status("ha", { jobs: true });
    expect(st.jobs).toHaveLength(30);
    for (const j of st.jobs!) {
      const r = (await watcher.result(j.jobId))!;
      expect(r.status, j.jobId).toBe("completed");
      expect(r.patch).toContain(`out-${j.line - 1}`);
      const finished = (await transcript(watcher, j.jobId)).filter((e) => e.type === "job_finished");
      expect(finished, j.jobId).toHaveLength(1);
    }
    // Ending once is the promise; starting once is not quite: a job's move to active that the old
    // master took but never replicated is in the queue again on the new one, so a job running at the
    // kill may start again elsewhere (at most the 6 slots' jobs). Every other job ran its agent once.
    expect(firstTurns.size).toBe(30);
    const again = [...firstTurns].filter(([, n]) => n > 1);
    expect(again.length, JSON.stringify(again)).toBeLessThanOrEqual(6);
    expect(
      again.every(([, n]) => n === 2),
      JSON.stringify(again),
    ).toBe(true);
    // The workers lived through it (reconnected, not restarted) and drain cleanly.
    for (const x of workers) expect(x.proc.exitCode).toBe(null);
    expect(workers.some((x) => /redis: .*reconnecting/.test(x.log()))).toBe(true);
    await watcher.close();
    await stopAll(workers);
    expect(workers.map((x) => x.proc.exitCode)).toEqual([0, 0, 0]);
    expect(await engineLeftovers(QUEUE)).toEqual([]);
  }, 600_000);
});

describe("the master killed right after a job's result write, before a replica had it", () => {
  const QUEUE = `failover-rec-${process.pid}`;
  let group: SentinelGroup;
  let fake: FakeAnthropic;
  let worker: WorkerProc | undefined;
  let dir: string;
  let firstTurns = 0;
  let cut = false;

  /**
   * Replication made to lag for real: the replica frozen (SIGSTOP) and its link killed on the
   * master, so what the master writes next (the job's last events, its result record) reaches no
   * replica. Done as the model is asked for the job's last turn.
   */
  async function cutReplication(): Promise<void> {
    process.kill(group.replica.pid, "SIGSTOP");
    const m = new Redis({
      host: "127.0.0.1",
      port: group.master.port,
      password: PASSWORD,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    m.on("error", () => {});
    await m.call("CLIENT", "KILL", "TYPE", "replica");
    m.disconnect();
  }

  beforeAll(async () => {
    await ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), "pb-failover-rec-"));
    writeFileSync(join(dir, "README"), "a tiny repo\n");
    group = await startSentinelGroup({ password: PASSWORD });
    fake = await startFakeAnthropic(async ({ body }) => {
      const turn = (body.messages as { role: string }[]).filter((m) => m.role === "assistant").length;
      if (turn === 0) {
        firstTurns++;
        return reply(toolUse("bash", { command: "echo fixed > /workspace/fixed" }));
      }
      if (turn === 1 && !cut) {
        cut = true; // once: a second run of the agent must fail the test, not freeze the new master
        await cutReplication();
      }
      return reply(text("Done."));
    });
  }, 300_000);

  afterAll(async () => {
    if (group && group.replica.running()) process.kill(group.replica.pid, "SIGCONT");
    await worker?.stop("SIGTERM");
    await fake?.close();
    await group?.stop();
    await removeQueueSandboxes(QUEUE);
    if (dir) removeDir(dir);
  });

  it("the record is written again on the promoted replica: the job completes once, its agent not run again, one job_finished", async () => {
    // WAIT longer than the failover takes here (~3 s): it is still out when the master dies,
    // ioredis sends it again to the new master, and the worker then finds the record gone. The
    // lock (at least twice the WAIT) outlives both, so the job does not stall meanwhile.
    const env = {
      REDIS_URL: group.url,
      PATCHBAY_QUEUE: QUEUE,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_LOCK_MS: "30000",
      PATCHBAY_STALLED_MS: "2000",
      PATCHBAY_REDIS_WAIT_MS: "15000",
    };
    worker = startWorkerProc(env);
    await worker.waitFor(new RegExp(`ready: queue ${QUEUE}`), 180_000);
    const id = "after-write";
    // The job's events stream, read on the master itself: job_finished is written in the one
    // transaction with the result record, so the moment it is there the master dies.
    const onMaster = new Redis({
      host: "127.0.0.1",
      port: group.master.port,
      password: PASSWORD,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    onMaster.on("error", () => {});
    const client = new PatchbayClient({ redisUrl: group.url, queueName: QUEUE });
    await client.enqueue({ jobId: id, task: "fix it", repo: { path: dir } });
    const stream = `patchbay:${QUEUE}:events:${id}`;
    let last = "0";
    for (let killed = false; !killed;) {
      const res = await onMaster.xread("BLOCK", 1000, "STREAMS", stream, last);
      for (const [, entries] of res ?? []) {
        for (const [entryId, fields] of entries) {
          last = entryId;
          if (!killed && JSON.parse(fields[1]!).type === "job_finished") {
            const record = await onMaster.exists(`patchbay:${QUEUE}:result:${id}`);
            await group.master.kill("SIGKILL");
            expect(record).toBe(1); // written, on the master alone
            killed = true;
          }
        }
      }
    }
    onMaster.disconnect();
    process.kill(group.replica.pid, "SIGCONT");
    await group.waitForFailover(group.master.port, 60_000);

    const r = await client.waitForResult(id, { timeoutMs: 120_000 }).catch((err: Error) => {
      throw new Error(`${err.message}\nworker:\n${worker!.log()}\nnew master:\n${group.replica.log()}`);
    });
    expect(r.status, worker.log()).toBe("completed");
    expect(r.patch).toContain("fixed");
    expect(firstTurns, worker.log()).toBe(1);
    expect(
      (await transcript(client, id)).filter((e) => e.type === "job_finished"),
      worker.log(),
    ).toHaveLength(1);
    expect(worker.log()).toMatch(/job after-write: its result record was lost in a Redis failover; written again/);
    await client.close();
    expect(await worker.stop("SIGTERM")).toBe(0);
    expect(await engineLeftovers(QUEUE)).toEqual([]);
  }, 300_000);
});
