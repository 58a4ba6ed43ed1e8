// Job commands of the CLI: worker, run, enqueue, status, result, watch, cancel, list, doctor.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Command } from "./cli.js";
import { loadConfig } from "./config.js";
import { formatEvent } from "./cli-format.js";
import { doctor } from "./doctor.js";
import { keys } from "./keys.js";
import { JobFailedError, PatchbayClient } from "./queue.js";
import { emptyResult, JobSpecError, parseJobSpec, type JobResult } from "./spec.js";
import { startWorker } from "./worker.js";

const specFlags = {
  repo: { type: "string" },
  git: { type: "string" },
  ref: { type: "string" },
  archive: { type: "string" },
  task: { type: "string" },
  verify: { type: "string" },
  setup: { type: "string", multiple: true },
  model: { type: "string" },
  timeout: { type: "string" },
  "command-timeout": { type: "string" },
  "max-turns": { type: "string" },
  tools: { type: "string" },
  spec: { type: "string" },
  "job-id": { type: "string" },
} as const;

const SPEC_USAGE = `  --repo DIR | --git URL [--ref REF] | --archive FILE   the repository (exactly one)
  --task TEXT            what to do
  --verify CMD           a command run after the agent (its exit code and tail are in the result)
  --setup CMD            a command run before the agent (repeatable)
  --model M              model id (default $PATCHBAY_MODEL or claude-sonnet-5-5)
  --timeout SEC          wall clock for the whole job       --command-timeout SEC  per bash command
  --max-turns N          --tools text_editor_20250728|text_editor_20250124|edit_file
  --spec FILE            a whole JobSpec as JSON; flags override it
  --job-id ID            idempotency key: enqueueing the same id twice runs it once`;

/** A JobSpec from --spec and flags (flags win), validated. */
function specFrom(v: Record<string, unknown>): unknown {
  let base: Record<string, unknown> = {};
  if (v.spec) {
    try {
      base = JSON.parse(readFileSync(String(v.spec), "utf8"));
    } catch (err) {
      throw new JobSpecError(`--spec ${v.spec}: ${(err as Error).message}`);
    }
  }
  const spec: Record<string, unknown> = { ...base };
  // Relative paths become absolute in PatchbayClient.enqueue (the worker runs elsewhere).
  if (v.repo) spec.repo = { path: String(v.repo) };
  if (v.git) spec.repo = { git: String(v.git), ...(v.ref ? { ref: String(v.ref) } : {}) };
  if (v.archive) spec.repo = { archive: String(v.archive) };
  if (v.task) spec.task = v.task;
  if (v.verify) spec.verify = v.verify;
  if (v.setup) spec.setup = v.setup;
  if (v.model) spec.model = v.model;
  if (v.tools) spec.tools = v.tools;
  if (v["job-id"]) spec.jobId = v["job-id"];
  for (const [flag, key] of [["timeout", "timeoutSec"], ["command-timeout", "commandTimeoutSec"], ["max-turns", "maxTurns"]] as const) {
    if (v[flag] !== undefined) spec[key] = Number(v[flag]);
  }
  return spec;
}

async function withClient<T>(fn: (c: PatchbayClient) => Promise<T>): Promise<T> {
  const c = new PatchbayClient();
  try {
    // Commands would wait for Redis forever (BullMQ's connections retry without end): say so instead.
    const reachable = await Promise.race([c.redis.ping().then(() => true, () => false), new Promise<false>((r) => setTimeout(() => r(false), 5000).unref())]);
    if (!reachable) throw new Error(`cannot reach Redis at ${loadConfig().redisUrl}: start it (npm run services) or set REDIS_URL`);
    return await fn(c);
  } finally {
    await c.close();
  }
}

async function writeOut(c: PatchbayClient, id: string, result: JobResult, dir: string): Promise<string> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "patch.diff"), result.patch);
  writeFileSync(join(dir, "result.json"), JSON.stringify(result, null, 2) + "\n");
  const lines: string[] = [];
  for await (const e of c.watch(id, { follow: false })) lines.push(JSON.stringify(e));
  writeFileSync(join(dir, "transcript.jsonl"), lines.map((l) => l + "\n").join(""));
  return join(dir, "patch.diff");
}

async function warnIfNoWorker(c: PatchbayClient): Promise<void> {
  const k = keys(loadConfig().queueName);
  const [, beats] = await c.redis.scan("0", "MATCH", k.heartbeat("*"), "COUNT", 1000);
  if (!beats.length) process.stderr.write(`patchbay: no worker is running on queue '${loadConfig().queueName}' yet; start one with: npx patchbay worker\n`);
}

export const commands: Record<string, Command> = {
  worker: {
    summary: "run the daemon (takes jobs, one sandbox each)",
    usage: `patchbay worker [--concurrency N]

Runs the daemon: takes jobs from the queue and runs each in its own sandbox. SIGTERM or SIGINT
drains (stops taking jobs, lets active ones finish until $PATCHBAY_DRAIN_MS, then abandons them
to another worker) and removes its containers.`,
    options: { concurrency: { type: "string" } },
    async run({ values }) {
      const h = await startWorker({ ...(values.concurrency ? { concurrency: Number(values.concurrency) } : {}) });
      await new Promise<void>((done) => {
        const stop = (sig: string) => {
          process.stderr.write(`[worker ${h.id}] ${sig}: shutting down\n`);
          void h.shutdown().then(done);
        };
        process.once("SIGTERM", () => stop("SIGTERM"));
        process.once("SIGINT", () => stop("SIGINT"));
      });
      return 0;
    },
  },

  run: {
    summary: "enqueue one job, show progress, wait, write the patch",
    usage: `patchbay run --repo DIR --task TEXT [options] [--out DIR] [--json]

Enqueues one job, shows its progress on stderr (turns, tool calls, tokens, cost), waits, and writes
DIR/patch.diff, DIR/transcript.jsonl and DIR/result.json (default DIR: ./patchbay-out/<job id>).
Exit code 0 only when the job's status is completed.

${SPEC_USAGE}
  --out DIR              where to write the results
  --json                 print the result as JSON on stdout`,
    options: { ...specFlags, out: { type: "string" }, json: { type: "boolean" } },
    async run({ values }) {
      return withClient(async (c) => {
        const id = await c.enqueue(specFrom(values));
        const out = resolve(String(values.out ?? join("patchbay-out", id)));
        process.stderr.write(`patchbay: job ${id} enqueued\n`);
        await warnIfNoWorker(c);
        const progress = (async () => {
          for await (const e of c.watch(id)) {
            const line = formatEvent(e);
            if (line) process.stderr.write(line + "\n");
          }
        })();
        let result: JobResult;
        try {
          result = await c.waitForResult(id);
        } catch (err) {
          await progress.catch(() => {});
          if (err instanceof JobFailedError) {
            // Failed for good: still leave the transcript and a result that says why.
            await writeOut(c, id, emptyResult("failed", err.message, { jobId: id }), out);
            if (values.json) console.log(JSON.stringify(emptyResult("failed", err.message, { jobId: id })));
            process.stderr.write(`patchbay: ${err.message}; transcript: ${join(out, "transcript.jsonl")}\n`);
            return 1;
          }
          throw err;
        }
        await progress.catch(() => {});
        const patchPath = await writeOut(c, id, result, out);
        if (values.json) console.log(JSON.stringify(result));
        process.stderr.write(`patchbay: ${result.status}${result.error ? ` (${result.error})` : ""}; ${result.filesChanged.length} files changed; patch: ${patchPath}\n`);
        return result.status === "completed" ? 0 : 1;
      });
    },
  },

  enqueue: {
    summary: "enqueue one job or a --batch file; print the ids",
    usage: `patchbay enqueue --repo DIR --task TEXT [options]
patchbay enqueue --batch tasks.jsonl

Enqueues jobs and prints their ids, one per line, at once. With --batch, each line of the file is
one JobSpec as JSON; if any line is bad, nothing is enqueued and the line number is named.

${SPEC_USAGE}
  --batch FILE           one JobSpec per line`,
    options: { ...specFlags, batch: { type: "string" } },
    async run({ values }) {
      let specs: unknown[];
      if (values.batch) {
        const lines = readFileSync(String(values.batch), "utf8").split("\n");
        specs = [];
        const errors: string[] = [];
        lines.forEach((line, i) => {
          if (!line.trim()) return;
          let parsed: unknown;
          try {
            parsed = JSON.parse(line);
          } catch (err) {
            return errors.push(`${values.batch}:${i + 1}: not valid JSON: ${(err as Error).message}`);
          }
          const r = parseJobSpec(parsed);
          if (!r.ok) return errors.push(`${values.batch}:${i + 1}: ${r.error}`);
          specs.push(parsed);
        });
        if (errors.length) {
          process.stderr.write(`patchbay enqueue: nothing enqueued:\n${errors.join("\n")}\n`);
          return 2;
        }
      } else {
        specs = [specFrom(values)];
      }
      return withClient(async (c) => {
        const ids = await c.enqueueBatch(specs);
        for (const id of ids) console.log(id);
        return 0;
      });
    },
  },

  status: {
    summary: "a job's queue state and result status",
    usage: `patchbay status <jobId> [--json]

The job's queue state (waiting, active, completed, failed, ...) and its result's status.`,
    options: { json: { type: "boolean" } },
    positionals: true,
    run: ({ values, positionals }) =>
      withClient(async (c) => {
        const s = await c.status(needId(positionals));
        if (values.json) console.log(JSON.stringify(s));
        else console.log(`${s.id}\t${s.state}${s.resultStatus ? `\t${s.resultStatus}` : ""}${s.failedReason ? `\t${s.failedReason}` : ""}`);
        return 0;
      }),
  },

  result: {
    summary: "a finished job's patch (or all its files with --out)",
    usage: `patchbay result <jobId> [--out DIR] [--json]

Prints the patch of a finished job (or writes patch.diff, transcript.jsonl, result.json to DIR).`,
    options: { out: { type: "string" }, json: { type: "boolean" } },
    positionals: true,
    run: ({ values, positionals }) =>
      withClient(async (c) => {
        const id = needId(positionals);
        let r: JobResult | undefined;
        try {
          r = await c.result(id);
        } catch (err) {
          if (!(err instanceof JobFailedError)) throw err;
          r = emptyResult("failed", err.message, { jobId: id });
        }
        if (!r) {
          process.stderr.write(`patchbay: job ${id} has not finished yet (patchbay status ${id})\n`);
          return 3;
        }
        if (values.out) process.stderr.write(`patchbay: wrote ${await writeOut(c, id, r, resolve(String(values.out)))}\n`);
        else if (values.json) console.log(JSON.stringify(r));
        else process.stdout.write(r.patch);
        return r.status === "completed" ? 0 : 1;
      }),
  },

  watch: {
    summary: "a job's transcript, live, from any host",
    usage: `patchbay watch <jobId> [--json]

Shows a job's transcript live, from any host, until the job ends (--json: raw events, one per line).`,
    options: { json: { type: "boolean" } },
    positionals: true,
    run: ({ values, positionals }) =>
      withClient(async (c) => {
        for await (const e of c.watch(needId(positionals))) {
          const line = values.json ? JSON.stringify(e) : formatEvent(e, { verbose: true });
          if (line) console.log(line);
        }
        return 0;
      }),
  },

  cancel: {
    summary: "stop a job from any host",
    usage: `patchbay cancel <jobId>

Cancels a job from any host: a running job stops within seconds with status cancelled (its patch
so far is kept); a waiting one will not run.`,
    positionals: true,
    run: ({ positionals }) =>
      withClient(async (c) => {
        const id = needId(positionals);
        const r = await c.cancel(id);
        console.log(r === "finished" ? `${id} had already finished` : `${id} ${r}`);
        return 0;
      }),
  },

  list: {
    summary: "recent jobs",
    usage: `patchbay list [--json]

Recent jobs with their state.`,
    options: { json: { type: "boolean" } },
    run: ({ values }) =>
      withClient(async (c) => {
        const jobs = await c.list();
        if (values.json) console.log(JSON.stringify(jobs));
        else for (const j of jobs) console.log(`${j.id}\t${j.state}\t${j.resultStatus ?? ""}\t${(j.task ?? "").slice(0, 60)}`);
        return 0;
      }),
  },

  doctor: {
    summary: "check Docker, Redis, the image, gVisor, the API key",
    usage: `patchbay doctor [--json]

Checks the Docker engine, Redis, the sandbox image, the gVisor runtime and the API key, and says
what to do about each miss.`,
    options: { json: { type: "boolean" } },
    async run({ values }) {
      const checks = await doctor();
      if (values.json) console.log(JSON.stringify(checks));
      else for (const c of checks) console.log(`${c.ok ? "ok  " : c.required ? "FAIL" : "warn"}  ${c.name}: ${c.detail}${c.fix && !c.ok ? `\n      → ${c.fix}` : ""}`);
      return checks.every((c) => c.ok || !c.required) ? 0 : 1;
    },
  },
};

function needId(positionals: string[]): string {
  if (!positionals[0]) throw new JobSpecError("a job id is required (patchbay list shows them)");
  return positionals[0];
}
