// `patchbay run` and `patchbay enqueue`. The heavy modules (BullMQ, the client) load when a
// command runs, not when the CLI starts.
import { CONNECTION_USAGE, connectionFlags, stringFlag, UsageError, type Command, type Values } from "./command.js";
import { checkOut, outDir } from "./out.js";
import { flagError, hasSpecFlags, SPEC_USAGE, specFlags, specFrom } from "./spec-flags.js";
import { STATUS_EXIT_USAGE } from "./exit.js";

/** Validates specs (schema, local paths) before any connection: a mistake is a usage error. */
async function prepare(specs: unknown[], values: Values): Promise<void> {
  const { prepareSpecs } = await import("../queue/enqueue-spec.js");
  try {
    prepareSpecs(specs);
  } catch (err) {
    throw new UsageError(flagError((err as Error).message, values));
  }
}

const run: Command = {
  summary: "enqueue one job, show progress, wait, write the patch",
  usage: `patchbay run (--repo DIR | --git URL | --archive FILE) --task TEXT [options]

Enqueues one job, shows its progress on stderr (turns, tool calls, tokens, cost), waits, and writes
DIR/patch.diff, DIR/transcript.jsonl, DIR/transcript.html and DIR/result.json (default DIR:
./patchbay-out/<queue>/<job id>). Ctrl-C stops waiting; the job keeps running on its worker unless
--cancel-on-exit is given. With --local the job runs in this process instead, as a worker runs it
(no Redis, no worker; Docker, or PATCHBAY_BACKEND): Ctrl-C cancels it.

Exit status, by the job's final status: ${STATUS_EXIT_USAGE}; 130 interrupted (Ctrl-C).

${SPEC_USAGE}
  --out DIR              where to write the results (refused when it holds files, unless --force)
  --force                write into a non-empty --out
  --json                 print the result as JSON on stdout
  --cancel-on-exit       on Ctrl-C (or SIGTERM), cancel the job too and write its patch so far to
                         --out (waits up to 30 s; a second Ctrl-C exits at once)
  --local                run the job here, in this process (default DIR: ./patchbay-out/local/<id>)
${CONNECTION_USAGE}`,
  options: {
    ...specFlags,
    ...connectionFlags,
    out: { type: "string" },
    force: { type: "boolean" },
    json: { type: "boolean" },
    "cancel-on-exit": { type: "boolean" },
    local: { type: "boolean" },
  },
  async run({ values, config }) {
    if (!hasSpecFlags(values))
      throw new UsageError("run needs a job: --repo DIR (or --git URL, --archive FILE) and --task TEXT");
    const spec = specFrom(values);
    await prepare([spec], values);
    checkOut(values);
    if (values.local) {
      const used = ["queue", "redis-url", "cancel-on-exit"].filter((f) => values[f] !== undefined);
      if (used.length)
        throw new UsageError(
          `--local runs the job in this process, with no queue: ${used.map((f) => `--${f}`).join(", ")} ${used.length === 1 ? "does" : "do"} not apply`,
        );
      const { runLocal } = await import("./run-local.js");
      return runLocal(spec, { values, config: config() });
    }
    const { withClient } = await import("./queue-connect.js");
    return withClient({ values, config }, async (c) => {
      const id = await c.enqueue(spec);
      process.stderr.write(`patchbay: job ${id} enqueued on queue ${c.queueName}\n`);
      const { follow } = await import("./follow.js");
      return follow(c, id, {
        out: outDir(values, c.queueName, id),
        json: Boolean(values.json),
        cancelOnExit: Boolean(values["cancel-on-exit"]),
      });
    });
  },
};

const enqueue: Command = {
  summary: "enqueue one job or a --batch file; print the ids",
  usage: `patchbay enqueue (--repo DIR | --git URL | --archive FILE) --task TEXT [options] [--json]
patchbay enqueue --batch tasks.jsonl [--json]

Enqueues jobs and prints their ids, one per line, at once (--json: {"queue":..., "ids":[...]}).
With --batch, each line of the file is one JobSpec as JSON; if any line is bad, nothing is
enqueued and the line is named. Exit status: 0 enqueued; 1 Redis unreachable or a --job-id taken
by another spec; 2 usage error (bad flag, bad spec, missing local repo).

${SPEC_USAGE}
  --batch FILE           one JobSpec per line (no other spec flags)
  --json                 print the ids as JSON
${CONNECTION_USAGE}`,
  options: { ...specFlags, ...connectionFlags, batch: { type: "string" }, json: { type: "boolean" } },
  async run({ values, config }) {
    let specs: unknown[];
    const batch = stringFlag(values, "batch");
    if (batch !== undefined) {
      if (hasSpecFlags(values))
        throw new UsageError("--batch takes no other spec flags (put them in the file's lines)");
      specs = await batchSpecs(batch);
    } else {
      if (!hasSpecFlags(values))
        throw new UsageError("enqueue needs a job (--repo DIR --task TEXT, ...) or --batch FILE");
      specs = [specFrom(values)];
      await prepare(specs, values);
    }
    const { withClient } = await import("./queue-connect.js");
    return withClient({ values, config }, async (c) => {
      const ids = await c.enqueueBatch(specs);
      if (values.json) console.log(JSON.stringify({ queue: c.queueName, ids }));
      else for (const id of ids) console.log(id);
      // The next step on stderr: stdout stays the ids alone, for scripts.
      const flags = c.hintFlags();
      process.stderr.write(
        ids.length === 1
          ? `patchbay: next: patchbay watch ${ids[0]}${flags}  (or: patchbay result ${ids[0]}${flags} once it has finished)\n`
          : `patchbay: next: patchbay status ${ids.slice(0, 3).join(" ")}${ids.length > 3 ? " …" : ""}${flags}  (or: patchbay list${flags})\n`,
      );
      return 0;
    });
  },
};

/** Reads a JSONL batch the way `batch submit` does; every bad line is named, and any bad line is a usage error. */
async function batchSpecs(file: string): Promise<unknown[]> {
  const { readBatchFile } = await import("../batch/batch-file.js");
  try {
    return readBatchFile(file).map((l) => l.spec);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

export const submitCommands: Record<string, Command> = { run, enqueue };
