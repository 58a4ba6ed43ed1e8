// `patchbay status | result | watch | cancel | list`: reading and steering jobs by id, from any host.
// An id that is not in the queue is a failure (exit 1: "no job <id> in queue <q>").
import { resolve } from "node:path";
import {
  CONNECTION_USAGE,
  connectionFlags,
  duration,
  listFlag,
  numberFlag,
  stringFlag,
  UsageError,
  type Command,
} from "./command.js";
import type { JobStatusInfo, PatchbayClient } from "../queue/client.js";
import type { JobResult } from "../core/spec/spec.js";
import { parseCandidateJobId } from "../core/candidate-id.js";
import { safeText } from "../core/term.js";
import { wroteJobFiles } from "./out.js";
import { badStates, badStatuses, LIST_STATUSES, QUEUE_STATES, statesFor, type QueueStateName } from "./list-filter.js";
import { exitCodeFor, STATUS_EXIT_USAGE } from "./exit.js";

/** Job-supplied text (task, reasons) for a terminal: one line, no escapes. */
const safe = (s: string) => safeText(s, { oneLine: true });

const client = () => import("./queue-connect.js");

const status: Command = {
  summary: "the queue state and result status of one or more jobs",
  usage: `patchbay status <jobId>... [--json]

Each job's outcome (waiting or running while it has not finished, and after that its result's
status: completed, failed, cancelled, ...) and, for a job that did not complete, why: one line
per id, tab-separated (--json: an array of objects, with BullMQ's state too).
Exit status: 0 all ids found; 1 an id is not in the queue (the others are still shown); 2 usage.

${CONNECTION_USAGE}`,
  options: { ...connectionFlags, json: { type: "boolean" } },
  positionals: { min: 1, name: "jobId" },
  run: async ({ values, positionals, config }) =>
    (await client()).withClient({ values, config }, async (c) => {
      const { JobNotFoundError } = await client();
      const found: JobStatusInfo[] = [];
      let code = 0;
      for (const id of positionals) {
        try {
          found.push(await c.status(id));
        } catch (err) {
          if (!(err instanceof JobNotFoundError)) throw err;
          process.stderr.write(`patchbay: ${err.message}\n`);
          code = 1;
        }
      }
      if (values.json) console.log(JSON.stringify(found));
      else for (const s of found) console.log([s.id, s.outcome, safe(s.error ?? "")].join("\t").trimEnd());
      return code;
    }),
};

const result: Command = {
  summary: "a finished job's patch (or all its files with --out)",
  usage: `patchbay result <jobId> [--out DIR] [--json] [--candidates]

Prints the patch of a finished job on stdout (--json: the whole JobResult; --out DIR: writes
patch.diff, transcript.jsonl, transcript.html and result.json to DIR). A job that did not complete
has its status and reason on stderr.
  --candidates           a job with candidates (docs/jobspec.md#candidates): after the patch, a table of
                         them on stderr, so stdout stays the patch (number, job id, status, verified, cost,
                         turns, patch bytes, files changed, error; * marks the one picked), then why it was
                         picked. With --json, no table: the JSON's "candidates" and "picked" hold the same.
                         A job without candidates says so on stderr; the exit status is the job's all the same
Exit status: 0 completed; 1 it ended otherwise, has not finished yet, or is not in the queue; 2 usage.

${CONNECTION_USAGE}`,
  options: {
    ...connectionFlags,
    out: { type: "string" },
    json: { type: "boolean" },
    candidates: { type: "boolean" },
  },
  positionals: { min: 1, max: 1, name: "jobId" },
  run: async ({ values, positionals, config }) =>
    (await client()).withClient({ values, config }, async (c) => {
      const { finalResult, writeOut } = await client();
      const id = positionals[0]!;
      const r = await finalResult(c, id);
      if (!r) {
        process.stderr.write(`patchbay: job ${id} has not finished yet (patchbay watch ${id}${c.hintFlags()})\n`);
        return 1;
      }
      const out = stringFlag(values, "out");
      if (out !== undefined) {
        await writeOut(c, id, r, resolve(out));
        process.stderr.write(`patchbay: ${wroteJobFiles(resolve(out))}\n`);
      } else if (values.json) console.log(JSON.stringify(r));
      else process.stdout.write(r.patch);
      if (r.status !== "completed")
        process.stderr.write(`patchbay: job ${id} ${r.status}${r.error ? `: ${safe(r.error)}` : ""}\n`);
      if (values.candidates) process.stderr.write(await candidatesNote(c, id, r, values.json === true));
      return r.status === "completed" ? 0 : 1;
    }),
};

/**
 * What `result --candidates` adds on stderr: the table of a job's candidates and why the one was
 * picked (from its transcript's `candidate_picked`), nothing more with --json (the JSON has them), or
 * that the job has none, naming its parent when the id is a candidate's own.
 */
async function candidatesNote(c: PatchbayClient, id: string, r: JobResult, json: boolean): Promise<string> {
  if (!r.candidates?.length) {
    const parent = parseCandidateJobId(id);
    const whose = parent
      ? `: it is candidate ${parent.n} of job ${safe(parent.jobId)} (patchbay result ${safe(parent.jobId)} --candidates${c.hintFlags()})`
      : " (it ran as one; a spec's candidates: N runs N, docs/jobspec.md#candidates)";
    return `patchbay: job ${safe(id)} has no candidates${whose}\n`;
  }
  if (json) return "";
  let why: string | undefined;
  for await (const e of c.watch(id, { follow: false })) if (e.type === "candidate_picked") why = e.why;
  const { candidatesTable } = await import("./format.js");
  return `${candidatesTable(r.candidates, r.picked, why)}\n`;
}

const watch: Command = {
  summary: "a job's transcript, live, from any host",
  usage: `patchbay watch <jobId> [--json]

Shows a job's transcript live, from any host, until the job ends, then its final status on
stderr (--json: raw events on stdout, one per line).
Exit status, by the job's final status: ${STATUS_EXIT_USAGE}.

${CONNECTION_USAGE}`,
  options: { ...connectionFlags, json: { type: "boolean" } },
  positionals: { min: 1, max: 1, name: "jobId" },
  run: async ({ values, positionals, config }) =>
    (await client()).withClient({ values, config }, async (c) => {
      const { finalResult } = await client();
      const { finalLine, formatEvent } = await import("./format.js");
      const id = positionals[0]!;
      for await (const e of c.watch(id)) {
        const line = values.json ? JSON.stringify(e) : formatEvent(e);
        if (line) console.log(line);
      }
      const r = await finalResult(c, id);
      if (!r) {
        process.stderr.write(`patchbay: job ${id} is still running, but its transcript ended\n`);
        return 1;
      }
      process.stderr.write(finalLine(id, r) + "\n");
      return exitCodeFor(r.status);
    }),
};

const cancel: Command = {
  summary: "stop one or more jobs from any host",
  usage: `patchbay cancel <jobId>... [--json]

Cancels jobs from any host: a running job stops within seconds with status cancelled (its patch
so far is kept); a waiting one is cancelled at once (it never runs, and every command shows it
cancelled). Prints "<id> cancelled|signalled|finished" per id
(--json: [{"id":..., "outcome":...}]).
Exit status: 0 all ids found; 1 an id is not in the queue; 2 usage.

${CONNECTION_USAGE}`,
  options: { ...connectionFlags, json: { type: "boolean" } },
  positionals: { min: 1, name: "jobId" },
  run: async ({ values, positionals, config }) =>
    (await client()).withClient({ values, config }, async (c) => {
      const { JobNotFoundError } = await client();
      const done: { id: string; outcome: string }[] = [];
      let code = 0;
      for (const id of positionals) {
        try {
          done.push({ id, outcome: await c.cancel(id) });
        } catch (err) {
          if (!(err instanceof JobNotFoundError)) throw err;
          process.stderr.write(`patchbay: ${err.message}\n`);
          code = 1;
        }
      }
      if (values.json) console.log(JSON.stringify(done));
      else
        for (const d of done)
          console.log(d.outcome === "finished" ? `${d.id} had already finished` : `${d.id} ${d.outcome}`);
      return code;
    }),
};

const list: Command = {
  summary: "recent jobs, newest first",
  usage: `patchbay list [--status STATUS]... [--state STATE]... [--limit N] [--json]

Recent jobs, newest first: id, status (a finished job's result status; until it has finished,
waiting or running), age (since enqueued), duration (running time so far, or until it finished) and task.
An empty queue says so on stderr.
Exit status: 0 (an empty queue too); 1 Redis unreachable; 2 usage.
  --status STATUS        only jobs of these statuses (repeatable or comma-separated; docs/jobspec.md#statuses):
                         ${LIST_STATUSES.join(", ")}
  --state STATE          only jobs in these BullMQ queue states: ${QUEUE_STATES.join(", ")}
                         (the queue's completed holds every job that returned a result, cancelled and
                         verify_failed ones too; --status completed is the jobs that completed)
  --limit N              at most N jobs (default 50)
  --json                 an array of objects (createdAt, startedAt, finishedAt in epoch ms)
${CONNECTION_USAGE}`,
  options: {
    ...connectionFlags,
    json: { type: "boolean" },
    status: { type: "string", multiple: true },
    state: { type: "string", multiple: true },
    limit: { type: "string" },
  },
  run: async ({ values, config }) => {
    const states = listFlag(values, "state");
    const statuses = listFlag(values, "status");
    const bad = (states && badStates(states)) ?? (statuses && badStatuses(statuses));
    if (bad) throw new UsageError(bad);
    const limit = numberFlag(values, "limit", { integer: true }) ?? 50;
    const from = (statuses ? statesFor(statuses) : (states as QueueStateName[] | undefined))?.filter(
      (s) => !states || states.includes(s),
    );
    return (await client()).withClient({ values, config }, async (c) => {
      // A status filter reads further back (up to STATUS_SCAN × N jobs) to find N of those statuses.
      const read = await c.list({ limit: statuses ? limit * STATUS_SCAN : limit, ...(from ? { states: from } : {}) });
      const jobs = (statuses ? read.filter((j) => statuses.includes(j.outcome)) : read).slice(0, limit);
      if (values.json) console.log(JSON.stringify(jobs));
      else if (!jobs.length) {
        const which = [...(statuses ?? []), ...(states ?? [])].join(" or ");
        process.stderr.write(`patchbay: no ${which ? `${which} ` : ""}jobs in queue ${c.queueName}\n`);
      } else console.log(table(jobs));
      return 0;
    });
  },
};

/** How many times N recent jobs `list --status` reads to find N of the statuses asked for. */
const STATUS_SCAN = 20;

function table(jobs: JobStatusInfo[]): string {
  const now = Date.now();
  const rows = jobs.map((j) => [
    j.id,
    j.outcome,
    j.createdAt ? duration(now - j.createdAt) : "-",
    j.startedAt ? duration((j.finishedAt ?? now) - j.startedAt) : "-",
    safe(j.task ?? "")
      .replace(/\s+/g, " ")
      .slice(0, 60),
  ]);
  const all = [["ID", "STATUS", "AGE", "DURATION", "TASK"], ...rows];
  const widths = all[0]!.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  return all
    .map((r) =>
      r
        .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

export const inspectCommands: Record<string, Command> = { status, result, watch, cancel, list };
