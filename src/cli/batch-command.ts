// `patchbay batch submit | wait | run | status | list | cancel | retry`: many jobs under one id.
// The library side is src/batch/batches.ts, loaded when a command runs (not for --help).
import { count } from "../core/count.js";
import { join, resolve } from "node:path";
import {
  CliError,
  CONNECTION_USAGE,
  connectionFlags,
  duration,
  listFlag,
  numberFlag,
  stringFlag,
  UsageError,
  type ClientArgs,
  type Command,
  type Values,
} from "./command.js";
import { worstExitCode } from "./exit.js";
import { safeText } from "../core/term.js";
import { usd } from "../core/money.js";
import { JOB_STATUSES as STATUSES, type JobStatusName } from "../core/spec/names.js";
import type { BatchClient, BatchProgress, BatchStatus, JobSummary } from "../batch/batches.js";
import type { PatchbayClient } from "../queue/client.js";

const safe = (s: string) => safeText(s, { oneLine: true });
const lib = () => import("../batch/batches.js");

/** Runs fn with a BatchClient; an unknown batch is a one-line failure, a bad file or spec a usage error. */
async function withBatches<T>(args: ClientArgs, fn: (b: BatchClient, c: PatchbayClient) => Promise<T>): Promise<T> {
  const { withClient } = await import("./queue-connect.js");
  const { BatchClient, BatchNotFoundError, BatchConflictError, BatchFileError } = await lib();
  return withClient(args, async (c) => {
    try {
      return await fn(new BatchClient(c), c);
    } catch (err) {
      if (err instanceof BatchNotFoundError || err instanceof BatchConflictError) throw new CliError(err.message);
      if (err instanceof BatchFileError) throw new UsageError(err.message);
      throw err;
    }
  });
}

async function readFile(file: string) {
  const { readBatchFile, BatchFileError } = await lib();
  try {
    return readBatchFile(file);
  } catch (err) {
    if (err instanceof BatchFileError) throw new UsageError(err.message);
    throw err;
  }
}

function submitOpts(values: Values) {
  const name = stringFlag(values, "name");
  if (name !== undefined && !/^[A-Za-z0-9_.-]{1,96}$/.test(name))
    throw new UsageError(`--name takes 1-96 characters from A-Z a-z 0-9 _ . -, not '${safe(name)}'`);
  const budgetUsd = numberFlag(values, "budget-usd", { what: "USD for the whole batch" });
  return { ...(name !== undefined ? { name } : {}), ...(budgetUsd !== undefined ? { budgetUsd } : {}) };
}

const SUBMIT_FLAGS = `  --name NAME            the batch id (default: b- and a hash of the file's jobs); the same
                         file submitted again under the same name enqueues nothing new
  --budget-usd X         a budget for the whole batch: once its jobs have spent X, jobs not
                         started end as budget_exceeded (no sandbox) and running ones stop
                         after their current turn`;

const BATCH_FILE = `Each line of the file is one JobSpec as JSON (blank lines are skipped); every line is checked
first, and one bad line enqueues nothing (its file:line is named). Line N's job id is
<batch>-L<N> (a spec's own jobId is not used).`;

async function submitFile(b: BatchClient, file: string, values: Values) {
  const lines = await readFile(file);
  const r = await b.submit(lines, submitOpts(values));
  const again = lines.length - r.added;
  process.stderr.write(
    `patchbay: batch ${r.batchId}: ${count(r.added, "job")} enqueued on queue ${b.c.queueName}${again ? ` (${again} were already there)` : ""}\n`,
  );
  return r;
}

const submit: Command = {
  summary: "enqueue a file of jobs as one batch; print its id",
  usage: `patchbay batch submit tasks.jsonl [--name NAME] [--budget-usd X] [--json]

Enqueues every job of the file under one batch id and prints it (--json: {"batchId", "ids",
"added"}). ${BATCH_FILE}
Exit status: 0 enqueued; 1 Redis unreachable, or the name is taken by other jobs; 2 usage (a bad line).

${SUBMIT_FLAGS}
  --json                 print the batch id and job ids as JSON
${CONNECTION_USAGE}`,
  options: {
    ...connectionFlags,
    name: { type: "string" },
    "budget-usd": { type: "string" },
    json: { type: "boolean" },
  },
  positionals: { min: 1, max: 1, name: "tasks.jsonl" },
  async run({ values, positionals, config }) {
    submitOpts(values);
    await readFile(positionals[0]!); // a bad file is a usage error before any connection
    return withBatches({ values, config }, async (b) => {
      const r = await submitFile(b, positionals[0]!, values);
      // batchId as everywhere else (batch status, the library); batch kept for scripts written before.
      console.log(values.json ? JSON.stringify({ batchId: r.batchId, ids: r.ids, added: r.added }) : r.batchId);
      process.stderr.write(
        `patchbay: next: patchbay batch wait ${r.batchId}${b.c.hintFlags()} --out DIR  (or: patchbay batch status ${r.batchId}${b.c.hintFlags()})\n`,
      );
      return 0;
    });
  },
};

// ------------------------------------------------------------------------------------------------
// Progress: a bar redrawn in place on a terminal, else one line per finished job
// ------------------------------------------------------------------------------------------------

const countsText = (st: BatchStatus) =>
  [
    ...STATUSES.filter((s) => st.counts[s]).map((s) => `${s} ${st.counts[s]}`),
    ...(st.running ? [`running ${st.running}`] : []),
    ...(st.waiting ? [`waiting ${st.waiting}`] : []),
  ].join(" · ");

function eta(st: BatchStatus, now: number): string {
  if (st.done >= st.total) return "done";
  if (!st.done) return "ETA -";
  const elapsed = now - st.createdAt;
  return `ETA ${duration((elapsed / st.done) * (st.total - st.done))}`;
}

function jobLine(st: BatchStatus, jobId: string, r: JobSummary, n: number): string {
  const v = r.verified === undefined ? "" : r.verified ? " (verified)" : " (verify failed)";
  return safe(
    `[${n}/${st.total}] line ${r.line} ${jobId} ${r.status}${v} ${r.scripted ? "scripted" : usd(r.costUsd)} ${duration(r.totalMs)}${r.error && r.status !== "completed" ? `: ${r.error.slice(0, 160)}` : ""}`,
  );
}

class ProgressView {
  /** Whether every job finished so far was answered by a scripted model (nothing priced). */
  scripted: boolean | undefined;
  private drawn = 0;
  private finishedSeen = 0;
  private readonly t0 = Date.now();

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly tty = Boolean(out.isTTY),
  ) {}

  update(p: BatchProgress): void {
    const st = p.status;
    for (const f of p.finished) this.scripted = (this.scripted ?? true) && Boolean(f.result.scripted);
    const lines = p.finished.map((f) => jobLine(st, f.jobId, f.result, ++this.finishedSeen));
    if (!this.tty) {
      for (const l of lines) this.out.write(l + "\n");
      return;
    }
    // Finished jobs that did not complete are printed above the bar; the bar is redrawn below.
    const shown = lines.filter((_, i) => p.finished[i]!.result.status !== "completed");
    this.clear();
    for (const l of shown) this.out.write(this.fit(l) + "\n");
    const width = 30;
    const filled = st.total ? Math.round((st.done / st.total) * width) : 0;
    const bar = `[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${st.done}/${st.total}`;
    const now = Date.now();
    const spend = `${usd(st.spentUsd)} spent${st.budgetUsd !== undefined ? ` of ${usd(st.budgetUsd)}` : ""}`;
    const l1 = `${bar}  ${countsText(st)}`;
    const l2 = `${spend} · ${duration(now - this.t0)} elapsed · ${eta(st, now)}${st.cancelled ? " · cancelled" : ""}`;
    this.out.write(`${this.fit(l1)}\n${this.fit(l2)}\n`);
    this.drawn = 2;
  }

  private fit(s: string): string {
    const cols = (this.out.columns || 100) - 1;
    return s.length > cols ? `${s.slice(0, cols - 1)}…` : s;
  }

  private clear(): void {
    if (this.drawn) this.out.write(`\x1b[${this.drawn}A\r\x1b[J`);
    this.drawn = 0;
  }
}

function interrupted(): { signal: AbortSignal; remove(): void } {
  const ctl = new AbortController();
  const handler = (sig: NodeJS.Signals) => ctl.abort(sig);
  process.once("SIGINT", handler);
  process.once("SIGTERM", handler);
  return { signal: ctl.signal, remove: () => (process.off("SIGINT", handler), process.off("SIGTERM", handler)) };
}

/** Waits with progress on stderr, writes DIR when asked, returns the exit code. */
export async function waitAndReport(
  b: BatchClient,
  c: PatchbayClient,
  batchId: string,
  values: Values,
  out?: string,
): Promise<number> {
  await b.status(batchId); // unknown batch: fail at once
  if (!(await c.hasWorker()))
    process.stderr.write(
      `patchbay: no worker is running on queue '${c.queueName}' yet; start one with: npx patchbay worker${c.hintFlags()}\n`,
    );
  const view = new ProgressView(process.stderr);
  const intr = interrupted();
  let st: BatchStatus;
  try {
    st = await b.wait(batchId, { signal: intr.signal, onProgress: (p) => view.update(p) });
  } catch (err) {
    if (!intr.signal.aborted) throw err;
    process.stderr.write(
      `\npatchbay: ${String(intr.signal.reason)}: stopped waiting; batch ${batchId} keeps running (patchbay batch status ${batchId}${c.hintFlags()}; patchbay batch cancel ${batchId}${c.hintFlags()})\n`,
    );
    return 130;
  } finally {
    intr.remove();
  }
  if (out !== undefined) {
    const summary = await b.writeOut(batchId, out);
    if (values.json) console.log(JSON.stringify(summary));
    process.stderr.write(
      `patchbay: wrote ${count(st.total, "job directory", "job directories")}, ${join(out, "summary.json")} and ${join(out, "summary.md")}\n`,
    );
  } else if (values.json) console.log(JSON.stringify(st));
  const spent = view.scripted ? "scripted, nothing priced" : `${usd(st.spentUsd)} spent`;
  process.stderr.write(`patchbay: batch ${batchId} done: ${countsText(st)}; ${spent}\n`);
  return worstExitCode(STATUSES.filter((s) => st.counts[s] > 0));
}

const WAIT_EXIT = `Exit status: 0 every job completed; otherwise the code of the worst job, worst first: 1 failed
(or an error), 3 verify_failed, 4 budget_exceeded / max_turns / timeout, 5 cancelled; 2 usage;
130 interrupted (the batch keeps running).`;

const OUT_USAGE = `DIR/<jobId>/ gets patch.diff, transcript.jsonl, result.json (and transcript.html) of each line's
latest job; DIR/summary.json and DIR/summary.md the counts by status, verified or not, cost and
tokens (cache reads too), p50/p95 job time, the most common errors and a table of the jobs.`;

const wait: Command = {
  summary: "wait for a batch with live progress; write its results and summary",
  usage: `patchbay batch wait <batch> [--out DIR] [--json]

Shows progress on stderr until every job of the batch has ended: on a terminal a bar (done/total,
counts by status, spend, elapsed time, ETA) redrawn in place; otherwise one line per finished
job. ${OUT_USAGE}
${WAIT_EXIT}

  --out DIR              write the results and the summary there
  --json                 print the summary (or, without --out, the status) as JSON on stdout
${CONNECTION_USAGE}`,
  options: { ...connectionFlags, out: { type: "string" }, json: { type: "boolean" } },
  positionals: { min: 1, max: 1, name: "batch" },
  run: async ({ values, positionals, config }) => {
    const out = stringFlag(values, "out");
    return withBatches({ values, config }, (b, c) =>
      waitAndReport(b, c, positionals[0]!, values, out === undefined ? undefined : resolve(out)),
    );
  },
};

const run: Command = {
  summary: "submit a file of jobs as a batch and wait for it (submit + wait)",
  usage: `patchbay batch run tasks.jsonl [--out DIR] [--name NAME] [--budget-usd X] [--json]

batch submit, then batch wait: ${BATCH_FILE}
${OUT_USAGE} (default DIR: ./patchbay-out/<batch>)
${WAIT_EXIT}

${SUBMIT_FLAGS}
  --out DIR              where to write the results and the summary
  --json                 print the summary as JSON on stdout
${CONNECTION_USAGE}`,
  options: {
    ...connectionFlags,
    name: { type: "string" },
    "budget-usd": { type: "string" },
    out: { type: "string" },
    json: { type: "boolean" },
  },
  positionals: { min: 1, max: 1, name: "tasks.jsonl" },
  async run({ values, positionals, config }) {
    submitOpts(values);
    await readFile(positionals[0]!);
    return withBatches({ values, config }, async (b, c) => {
      const r = await submitFile(b, positionals[0]!, values);
      const out = resolve(stringFlag(values, "out") ?? join("patchbay-out", r.batchId));
      return waitAndReport(b, c, r.batchId, values, out);
    });
  },
};

const status: Command = {
  summary: "a batch's counts by status, spend and budget",
  usage: `patchbay batch status <batch> [--json] [--jobs]

Counts of the batch's jobs (done, running, waiting, by status, verified), its spend and budget,
read from the batch's index in Redis (cheap at any size). --json: an object; --jobs adds every
line's latest job and its result summary.
Exit status: 0; 1 an unknown batch or Redis unreachable; 2 usage.

${CONNECTION_USAGE}`,
  options: { ...connectionFlags, json: { type: "boolean" }, jobs: { type: "boolean" } },
  positionals: { min: 1, max: 1, name: "batch" },
  run: async ({ values, positionals, config }) =>
    withBatches({ values, config }, async (b) => {
      const st = await b.status(positionals[0]!, { jobs: Boolean(values.jobs) });
      if (values.json) {
        console.log(JSON.stringify(st));
        return 0;
      }
      console.log(
        `batch ${st.batchId}${st.name && st.name !== st.batchId ? ` (${safe(st.name)})` : ""}, created ${duration(Date.now() - st.createdAt)} ago${st.cancelled ? ", cancelled" : ""}`,
      );
      console.log(`${count(st.total, "job")}: ${st.done} done, ${st.running} running, ${st.waiting} waiting`);
      if (st.done)
        console.log(
          STATUSES.filter((s) => st.counts[s])
            .map((s) => `${s} ${st.counts[s]}`)
            .join(" · "),
        );
      if (st.verified || st.unverified) console.log(`verify: ${st.verified} passed, ${st.unverified} failed`);
      console.log(`spent ${usd(st.spentUsd)}${st.budgetUsd !== undefined ? ` of a ${usd(st.budgetUsd)} budget` : ""}`);
      for (const j of st.jobs ?? [])
        console.log([j.line, j.jobId, j.result?.status ?? j.state, safe(j.result?.error ?? "")].join("\t").trimEnd());
      return 0;
    }),
};

const list: Command = {
  summary: "batches, newest first",
  usage: `patchbay batch list [--limit N] [--json]

Batches of the queue, newest first: id, name, jobs done/total, spend, age, state.
Exit status: 0; 1 Redis unreachable; 2 usage.
  --limit N              at most N batches (default 50)
  --json                 an array of objects
${CONNECTION_USAGE}`,
  options: { ...connectionFlags, limit: { type: "string" }, json: { type: "boolean" } },
  run: async ({ values, config }) => {
    const limit = numberFlag(values, "limit", { integer: true }) ?? 50;
    return withBatches({ values, config }, async (b) => {
      const all = await b.list({ limit });
      if (values.json) console.log(JSON.stringify(all));
      else if (!all.length) process.stderr.write(`patchbay: no batches in queue ${b.c.queueName}\n`);
      else {
        const now = Date.now();
        const rows = all.map((x) => [
          x.batchId,
          safe(x.name ?? "-"),
          `${x.done}/${x.total}`,
          usd(x.spentUsd),
          duration(now - x.createdAt),
          x.cancelled ? "cancelled" : x.done >= x.total ? "done" : "running",
        ]);
        const table = [["BATCH", "NAME", "DONE", "SPENT", "AGE", "STATE"], ...rows];
        const widths = table[0]!.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
        console.log(
          table
            .map((r) =>
              r
                .map((cell, i) => cell.padEnd(widths[i]!))
                .join("  ")
                .trimEnd(),
            )
            .join("\n"),
        );
      }
      return 0;
    });
  },
};

const cancel: Command = {
  summary: "cancel a batch: running jobs stop, the others will not run",
  usage: `patchbay batch cancel <batch> [--json]

Running jobs of the batch stop within seconds (status cancelled, their patch so far kept); jobs
not started yet end as cancelled, without a sandbox, when a worker takes them. batch retry
undoes it for the lines it runs again. A batch whose every line has ended is left as it is (it
keeps the statuses its jobs ended with), and that is said.
Exit status: 0 (a finished batch too); 1 an unknown batch, or Redis unreachable; 2 usage.

${CONNECTION_USAGE}`,
  options: { ...connectionFlags, json: { type: "boolean" } },
  positionals: { min: 1, max: 1, name: "batch" },
  run: async ({ values, positionals, config }) =>
    withBatches({ values, config }, async (b) => {
      const r = await b.cancel(positionals[0]!);
      console.log(
        values.json
          ? JSON.stringify({ batchId: positionals[0], ...r })
          : r.finished
            ? `batch ${positionals[0]} is ${r.finished}: nothing to cancel, it is left as it is`
            : `batch ${positionals[0]} cancelled: ${count(r.signalled, "running job")} signalled, ${count(r.waiting, "waiting job")} will not run`,
      );
      return 0;
    }),
};

const retry: Command = {
  summary: "run again the jobs of a batch that ended with some statuses",
  usage: `patchbay batch retry <batch> [--status STATUS,...] [--json]

Runs again, as new jobs of the same batch (<batch>-L<line>-r<n>), the lines whose latest job ended
with one of the statuses (default: all but completed); status, wait and the summary then show the
latest attempt of each line. Prints the new job ids (--json: {"batchId", "ids"}).
Exit status: 0 (also when nothing matched); 1 an unknown batch or Redis unreachable; 2 usage.
  --status STATUS        repeatable or comma-separated: ${STATUSES.join(", ")}
  --json                 print the new ids as JSON
${CONNECTION_USAGE}`,
  options: { ...connectionFlags, status: { type: "string", multiple: true }, json: { type: "boolean" } },
  positionals: { min: 1, max: 1, name: "batch" },
  run: async ({ values, positionals, config }) => {
    const statuses = listFlag(values, "status");
    const bad = statuses?.filter((s) => !STATUSES.includes(s as JobStatusName));
    if (bad?.length) throw new UsageError(`--status takes ${STATUSES.join(", ")}, not '${safe(bad.join(", "))}'`);
    return withBatches({ values, config }, async (b) => {
      const r = await b.retry(positionals[0]!, statuses ? { statuses: statuses as JobStatusName[] } : {});
      if (r.missing.length)
        process.stderr.write(
          `patchbay: lines ${r.missing.join(", ")} are no longer in the queue and cannot be retried\n`,
        );
      if (values.json) console.log(JSON.stringify({ batchId: positionals[0], ids: r.ids }));
      else if (!r.ids.length)
        process.stderr.write(
          `patchbay: no job of batch ${positionals[0]} ended ${statuses ? statuses.join(" or ") : "other than completed"}\n`,
        );
      else for (const id of r.ids) console.log(id);
      return 0;
    });
  },
};

export const batchCommands: Record<string, Command> = {
  "batch submit": submit,
  "batch wait": wait,
  "batch run": run,
  "batch status": status,
  "batch list": list,
  "batch cancel": cancel,
  "batch retry": retry,
};
