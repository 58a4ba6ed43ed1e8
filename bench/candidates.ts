// Best-of-N's cost in wall time (issue 45): the same job with candidates 1 and with candidates 4,
// enqueue to result, through in-process workers with 4 free slots in all (2 workers x 2) on a
// private Redis, the Docker backend and the warm pool as a worker has it by default. The scripted
// server answers each conversation's 3 replies after REPLY_MS, so that the agent phase weighs as a
// real model's does; setup is `sleep 2` (a fixed cost, run once either way); verify is the clamp
// example's tests. In the run with 4, exactly one conversation fixes the bug: the job's result must
// be that candidate (the JSON says whether it was, and that the job's transcript has one setup).
// Both rows are measured in this run, alternately, medians of RUNS after one warm-up each; the
// ratio (4 over 1) is bench/ratios.ts's `candidates_4_of_1`, goal <= 1.3. Where the time of the run
// with 4 goes is in `phases_4_ms` (medians over its runs), from the transcripts and BullMQ's stamps.
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { AnthropicModel } from "../src/agent/model.js";
import { loadConfig } from "../src/core/config/config.js";
import type { JobResult, TranscriptEvent } from "../src/core/spec/spec.js";
import { PatchbayClient } from "../src/queue/client.js";
import { startWorker, type WorkerHandle } from "../src/queue/worker.js";
import { startRedis } from "../test/support/cluster.js";
import { reply, startFakeAnthropic, text, toolUse, type Policy } from "../test/support/fake-anthropic.js";
import { CLAMP_FIX } from "../test/support/scripts.js";
import { cpuMeter, type CpuReport } from "./cpu.js";
import { log, median, round } from "./lib.js";

const CLAMP = new URL("../examples/clamp", import.meta.url).pathname;
const RUNS = Number(process.env["CANDIDATES_RUNS"] ?? 5);
const REPLY_MS = 1500;
const WORKERS = 2;
const SLOTS = 2;
const N = 4;
/** The one conversation (by its order of arrival in a run) that fixes the bug in the run with N. */
const RIGHT = 3;

/**
 * The scripted server for a run: each new conversation (no assistant turn yet) takes the next
 * number, carried in its tool_use ids; `right` fixes the bug, the others make an edit that does not.
 */
function runPolicy(right: number): Policy {
  let next = 0;
  return ({ body }) => {
    let conv: number | undefined;
    let step = 0;
    const msgs = (body as { messages: { role: string; content: unknown }[] }).messages;
    for (const m of msgs) {
      if (m.role !== "assistant" || !Array.isArray(m.content)) continue;
      step++;
      for (const b of m.content as { type: string; id?: string }[]) {
        const at = b.type === "tool_use" ? /^toolu_c(\d+)_/.exec(b.id ?? "") : null;
        if (at) conv = Number(at[1]);
      }
    }
    conv ??= ++next;
    const id = (s: number) => `toolu_c${conv}_${s}`;
    const wrong = {
      command: "str_replace",
      path: "/workspace/clamp.py",
      old_str: "    return v\n",
      new_str: "    return v  # ok\n",
    };
    const steps = [
      reply(toolUse("bash", { command: "ls" }, id(0))),
      reply(toolUse("str_replace_based_edit_tool", conv === right ? CLAMP_FIX : wrong, id(1))),
      reply(text(`Conversation ${conv} is done.`)),
    ];
    return { ...steps[Math.min(step, steps.length - 1)]!, delayMs: REPLY_MS };
  };
}

/** Containers of this bench's queue (the pools' and the jobs'), to wait for the pools to settle between runs. */
function containers(queueName: string): number {
  const out = execFileSync("docker", ["ps", "-aq", "--filter", `label=patchbay.queue=${queueName}`], {
    encoding: "utf8",
  });
  return out.split("\n").filter(Boolean).length;
}

async function settle(queueName: string, want: number): Promise<void> {
  let same = 0;
  for (let i = 0; i < 120 && same < 3; i++) {
    same = containers(queueName) === want ? same + 1 : 0;
    await new Promise((r) => setTimeout(r, 500));
  }
}

const ms = (ts: string | undefined, from: number | undefined) =>
  ts === undefined || from === undefined ? undefined : Date.parse(ts) - from;

interface Run {
  /** Enqueue to the job's result recorded (BullMQ's finishedOn, stamped by the worker). */
  wallMs: number;
  /** Enqueue to waitForResult's return: wallMs plus its polling (100 ms growing to 1 s), so it is not the ratio's. */
  seenMs: number;
  cpu?: CpuReport;
  result: JobResult;
  events: TranscriptEvent[];
  phases: Record<string, number | undefined>;
}

/** One job from enqueue to its result, and where its time went. */
async function runOnce(client: PatchbayClient, repo: string, candidates: number): Promise<Run> {
  const t0 = Date.now();
  const id = await client.enqueue({
    task: "Make the failing tests pass.",
    repo: { path: repo },
    setup: "sleep 2",
    verify: "python3 -m unittest -q",
    verifyRounds: 0,
    candidates,
  });
  const result = await client.waitForResult(id, { timeoutMs: 300_000 });
  const seenMs = Date.now() - t0;
  const events = await transcript(client, id);
  const setup = events.find((e) => e.type === "setup");
  const phases: Run["phases"] = { setup_end: ms(setup?.ts, t0) };
  const job = await client.queue.getJob(id);
  const ended = job?.finishedOn ? job.finishedOn - t0 : undefined;
  const wallMs = ended ?? seenMs;
  if (candidates === 1) {
    Object.assign(phases, {
      sandbox_ready: ms(events.find((e) => e.type === "sandbox_ready")?.ts, t0),
      conversation: conversation(events),
      verify: events.find((e) => e.type === "verify")?.ms,
      ended,
    });
    return { wallMs, seenMs, result, events, phases };
  }
  // The run with N: the seed's store and the children's add, each child's pickup, seed load,
  // agent and verify, and the parent's second step after the last child ended.
  phases["candidates_started"] = ms(events.find((e) => e.type === "candidates_started")?.ts, t0);
  const children = await Promise.all(
    Array.from({ length: candidates }, (_, i) => child(client, `${id}-C${i + 1}`, t0)),
  );
  const max = (k: keyof Child) => Math.max(...children.map((c) => c[k] ?? NaN));
  Object.assign(phases, {
    children_picked_up_last: max("pickedUp"),
    children_ready_last: max("ready"),
    child_ready_after_pickup_max: Math.max(...children.map((c) => (c.ready ?? NaN) - (c.pickedUp ?? NaN))),
    child_conversation_max: max("conversation"),
    child_verify_max: max("verifyMs"),
    children_ended_last: max("ended"),
    candidate_picked: ms(events.find((e) => e.type === "candidate_picked")?.ts, t0),
    ended,
  });
  return { wallMs, seenMs, result, events, phases };
}

interface Child {
  pickedUp?: number;
  ready?: number;
  verifyMs?: number;
  conversation?: number;
  ended?: number;
}

/** First model request to last model response: the model's part of the agent phase, and the tools between. */
function conversation(evs: TranscriptEvent[]): number | undefined {
  const first = evs.find((e) => e.type === "model_request")?.ts;
  const last = evs.filter((e) => e.type === "model_response").at(-1)?.ts;
  return first && last ? Date.parse(last) - Date.parse(first) : undefined;
}

async function child(client: PatchbayClient, id: string, t0: number): Promise<Child> {
  const job = await client.queue.getJob(id);
  const evs = await transcript(client, id);
  return {
    ...(job?.processedOn ? { pickedUp: job.processedOn - t0 } : {}),
    ...(job?.finishedOn ? { ended: job.finishedOn - t0 } : {}),
    ready: ms(evs.find((e) => e.type === "sandbox_ready")?.ts, t0),
    verifyMs: evs.find((e) => e.type === "verify")?.ms,
    conversation: conversation(evs),
  };
}

async function transcript(client: PatchbayClient, id: string): Promise<TranscriptEvent[]> {
  const out: TranscriptEvent[] = [];
  for await (const e of client.watch(id, { follow: false })) out.push(e);
  return out;
}

/** Checks that a run of the job with N did what best-of-N promises; a string names what did not. */
function check(run: Run): string | undefined {
  const setups = run.events.filter((e) => e.type === "setup").length;
  if (setups !== 1) return `the job's transcript has ${setups} setup events, not 1`;
  const { result } = run;
  if (result.status !== "completed" || !result.verified) return `the job ended ${result.status}: ${result.error}`;
  const verified = (result.candidates ?? []).filter((c) => c.verified).map((c) => c.n);
  if (verified.length !== 1 || result.picked !== verified[0])
    return `picked ${result.picked}, verified ${JSON.stringify(verified)}`;
  return undefined;
}

export async function benchCandidates() {
  const redis = await startRedis();
  let policy: Policy = () => reply(text("unused"));
  const fake = await startFakeAnthropic((req) => policy(req));
  const repo = mkdtempSync(join(tmpdir(), "pb-bench-cand-"));
  cpSync(CLAMP, repo, { recursive: true });
  const queueName = `bench-cand-${process.pid}`;
  const workers: WorkerHandle[] = [];
  const client = new PatchbayClient({ redisUrl: redis.url, queueName });
  try {
    for (let i = 0; i < WORKERS; i++)
      workers.push(
        await startWorker({
          redisUrl: redis.url,
          queueName,
          concurrency: SLOTS,
          model: () => new AnthropicModel({ apiKey: "bench", baseURL: fake.url, maxRetries: 0 }),
          log: () => {},
          config: loadConfig({ ...process.env, PATCHBAY_WORKER_ID: `bench-cand-${process.pid}-${i}` }),
        }),
      );
    log(
      `candidates: the job with candidates 1 and ${N}, ${RUNS} runs each after a warm-up, ${WORKERS}x${SLOTS} slots, ${REPLY_MS} ms a reply`,
    );
    const load0 = round(loadavg()[0]!, 1);
    const one: Run[] = [];
    const many: Run[] = [];
    const problems: string[] = [];
    for (let i = -1; i < RUNS; i++) {
      for (const n of [1, N]) {
        await settle(queueName, WORKERS * SLOTS);
        policy = runPolicy(n === 1 ? 1 : RIGHT);
        const meter = await cpuMeter(`patchbay.queue=${queueName}`);
        const run = await runOnce(client, repo, n);
        run.cpu = meter.stop(1);
        const bad =
          n === 1 ? (run.result.verified ? undefined : `candidates 1 ended ${run.result.status}`) : check(run);
        if (bad) problems.push(`run ${i + 1}, candidates ${n}: ${bad}`);
        log(
          `candidates ${n}: ${run.wallMs} ms ${JSON.stringify({ ...run.phases, cpu: run.cpu })}${bad ? ` (${bad})` : ""}`,
        );
        if (i >= 0) (n === 1 ? one : many).push(run);
      }
    }
    return { ...summary(one, many, problems), loadavg_1min: { start: load0, end: round(loadavg()[0]!, 1) } };
  } finally {
    await client.close();
    for (const w of workers) await w.shutdown(5000);
    await redis.stop();
    await fake.close();
    rmSync(repo, { recursive: true, force: true });
  }
}

function summary(one: Run[], many: Run[], problems: string[]) {
  const med = (runs: Run[], k: string) => {
    const xs = runs.map((r) => r.phases[k]).filter((x): x is number => x !== undefined && Number.isFinite(x));
    return xs.length ? round(median(xs), 0) : undefined;
  };
  const cpu = (runs: Run[]) =>
    Object.fromEntries(
      (["container", "dockerd", "containerd", "worker", "total"] as const).map((k) => [
        k,
        round(median(runs.map((r) => r.cpu?.[k] ?? NaN)), 0),
      ]),
    );
  const phases = (runs: Run[]) => Object.fromEntries(Object.keys(runs[0]?.phases ?? {}).map((k) => [k, med(runs, k)]));
  return {
    runs: RUNS,
    slots: WORKERS * SLOTS,
    reply_ms: REPLY_MS,
    replies_per_candidate: 3,
    setup: "sleep 2",
    wall_ms: {
      candidates_1: round(median(one.map((r) => r.wallMs)), 0),
      [`candidates_${N}`]: round(median(many.map((r) => r.wallMs)), 0),
    },
    // The same runs as seen by waitForResult, whose polling adds up to 1 s to each.
    wall_seen_by_client_ms: {
      candidates_1: round(median(one.map((r) => r.seenMs)), 0),
      [`candidates_${N}`]: round(median(many.map((r) => r.seenMs)), 0),
    },
    // Core-ms a run took: its containers, the engine (shared with anything else using it), this
    // process (workers, Redis client, scripted server), and the machine's busy time (all of it,
    // the other processes on the machine included).
    cpu_core_ms_1: cpu(one),
    [`cpu_core_ms_${N}`]: cpu(many),
    [`phases_1_ms`]: phases(one),
    [`phases_${N}_ms`]: phases(many),
    // Every run with N picked the one candidate verify passed, with one setup in the job's transcript.
    picked_the_verified: many.every((r) => !check(r)),
    one_setup: many.every((r) => r.events.filter((e) => e.type === "setup").length === 1),
    ...(problems.length ? { problems } : {}),
  };
}
