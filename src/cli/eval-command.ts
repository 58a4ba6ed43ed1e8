// `patchbay eval run | grade | compare`: task sets in SWE-bench's format, run through the workers
// and graded on this host (src/eval/), or predictions graded alone, or two runs side by side.
// The library side is loaded when a command runs (not for --help).
import { closeSync, constants, existsSync, fstatSync, openSync, readFileSync, realpathSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { count } from "../core/count.js";
import { usd } from "../core/money.js";
import { safeText } from "../core/term.js";
import type { EvalInstance, Graded, RunSummary } from "../eval/types.js";
import type { EvalProgress } from "../eval/run.js";
import {
  CliError,
  CONNECTION_USAGE,
  connectionFlags,
  numberFlag,
  stringFlag,
  UsageError,
  type Command,
  type Values,
} from "./command.js";

const safe = (s: string) => safeText(s, { oneLine: true });
const NAME = /^[A-Za-z0-9_.-]{1,80}$/;

function nameOf(values: Values): string {
  const name = stringFlag(values, "name");
  if (name === undefined) throw new UsageError("--name is required: the run's name (its batch is eval-NAME)");
  if (!NAME.test(name) || name === "." || name === "..")
    throw new UsageError(`--name takes 1-80 characters from A-Z a-z 0-9 _ . - (not . or ..), not '${safe(name)}'`);
  return name;
}

/** The set's instances, their repos resolved against the set file's directory; a bad set is a usage error. */
async function readSet(file: string, values: Values): Promise<EvalInstance[]> {
  const { parseTaskSet, resolveRepo, localRepoOutside, EvalSetError } = await import("../eval/instance.js");
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new UsageError(`cannot read the task set ${safe(file)}: ${(err as Error).message}`);
  }
  let instances: EvalInstance[];
  const dir = dirname(resolve(file));
  try {
    instances = parseTaskSet(text, file).map((i) => ({
      ...i,
      patchbay: { ...i.patchbay, repo: resolveRepo(i.patchbay.repo, dir) },
    }));
  } catch (err) {
    if (err instanceof EvalSetError) throw new UsageError(err.message);
    throw err;
  }
  // A set is often another's file, but its jobs are the operator's: a worker adds any egress
  // credential they name to setup commands the set chose (what is fetched or sent with it), so a
  // set naming any is refused unless the operator says they trust it.
  const withCredentials = instances.filter((i) => i.patchbay.network?.setup?.credentials?.length);
  if (withCredentials.length && !values["with-credentials"])
    throw new UsageError(
      `the task set's instances name the workers' egress credentials (network.setup.credentials): ${withCredentials
        .slice(0, 5)
        .map((i) => safe(i.instance_id))
        .join(
          ", ",
        )}${withCredentials.length > 5 ? ` and ${withCredentials.length - 5} more` : ""}. Their setup commands would use them: pass --with-credentials if you trust the set`,
    );
  // A worker reads any local repo the jobs name. Its local repos stay under its own directory
  // (links resolved) unless told otherwise.
  if (values["repos-anywhere"]) return instances;
  const outside = instances.filter((i) => localRepoOutside(real(i.patchbay.repo), real(dir)));
  if (outside.length)
    throw new UsageError(
      `the task set names local repos outside its own directory (${safe(dir)}): ${outside
        .slice(0, 5)
        .map((i) => `${safe(i.instance_id)}: ${safe(i.patchbay.repo)}`)
        .join(
          "; ",
        )}${outside.length > 5 ? `; and ${outside.length - 5} more` : ""}. Move them under it, or pass --repos-anywhere if you trust the set`,
    );
  return instances;
}

/** A local path (or file: URL) with its links resolved where it exists; anything else as it is. */
function real(repo: string): string {
  try {
    return realpathSync(/^file:/i.test(repo) ? fileURLToPath(repo) : repo);
  } catch {
    return repo;
  }
}

/** A positive integer flag of at most `max`. */
function upTo(values: Values, flag: string, max: number, what: string): number | undefined {
  const n = numberFlag(values, flag, { integer: true, what });
  if (n !== undefined && n > max) throw new UsageError(`--${flag} takes at most ${max} (${what}), not ${n}`);
  return n;
}

/** --verify: a command as a JobSpec's verify takes it (its bounds and words); undefined when not given. */
async function verifyFlag(values: Values): Promise<string | undefined> {
  const cmd = stringFlag(values, "verify");
  if (cmd === undefined) return undefined;
  const { JobSpec } = await import("../core/spec/spec.js");
  const r = JobSpec.shape.verify.unwrap().safeParse(cmd);
  if (!r.success) {
    const why = r.error.issues[0]?.message ?? "not a command";
    throw new UsageError(`--verify takes a command, the agent's judge as a JobSpec's verify: it ${safe(why)}`);
  }
  return r.data;
}

const outOf = (values: Values, name: string) => resolve(stringFlag(values, "out") ?? join("patchbay-eval", name));

const pct = (x: number | undefined) => (x === undefined ? "n/a" : `${(100 * x).toFixed(1)}%`);

/** "; best-of-K x% (n judged)" where a verify judged instances' candidates, else nothing. */
function bestOf(p: RunSummary["patchbay"]): string {
  if (p.bestOfK === undefined || p.bestOfK === null) return "";
  return `; best-of-${p.candidates} ${pct(p.bestOfK)} (${count(p.judged ?? 0, "instance")} judged by verify)`;
}

/** The lines a finished run prints: SWE-bench's counts, then cost, pass@1, best-of-K, pass@K and harness overhead. */
export function summaryLines(s: RunSummary): string[] {
  const p = s.patchbay;
  const k = String(p.candidates);
  return [
    `resolved ${s.resolved_instances} of ${count(s.total_instances, "instance")} (${s.unresolved_instances} unresolved, ${s.empty_patch_instances} empty patch, ${s.error_instances} error, ${s.incomplete_ids.length} incomplete)`,
    `cost ${usd(p.costUsd)}; per resolved instance ${p.costPerResolvedUsd === null ? "n/a (none resolved)" : usd(p.costPerResolvedUsd)}; tokens ${p.inputTokens} in, ${p.outputTokens} out`,
    `pass@1 ${pct(p.passAtK["1"])}${bestOf(p)}${p.candidates > 1 ? `; pass@${k} ${pct(p.passAtK[k])} (oracle)` : ""}`,
    `harness overhead per instance: median ${p.harnessMs.median} ms (total ${p.harnessMs.total} ms); wall ${Math.round(p.wallMs / 1000)} s`,
  ];
}

function progressLine(p: EvalProgress): string {
  const c = p.candidate || p.picked !== undefined ? ` candidate ${p.candidate + 1}` : "";
  const picked = p.picked ? " (picked by verify)" : "";
  return `patchbay: [${p.graded}/${p.total}] ${safe(p.instance_id)}${c}: ${p.outcome}${picked}${p.before ? " (graded before)" : ""}\n`;
}

const run: Command = {
  summary: "run a task set (SWE-bench's format) through the workers and grade it",
  usage: `patchbay eval run SET --name NAME [--model M] [--candidates K] [--verify CMD] [--budget-usd X] [--out DIR]

Runs every instance of SET (JSONL or a JSON array of SWE-bench instances with patchbay's own
fields; docs/eval.md) as a job on the workers, K jobs per instance, in one batch named eval-NAME;
an instance with a verify command (its patchbay.verify, else --verify) is one job whose K
candidates verify judges, the job picking one: every candidate is graded, and best-of-K (the
pick resolved) is reported beside pass@1 and pass@K. The agent sees only the problem statement. As each job ends, its patch is graded on this host in a
fresh sandbox (the base commit, setup, the patch, the instance's test patch, its test command).
Writes DIR/preds.jsonl, DIR/<instance>/report.json (SWE-bench's), test_output.txt, the transcript,
and DIR/summary.json (SWE-bench's v2 fields, then cost, tokens, pass@k and harness overhead).
Running the same command again adds no job and grades nothing twice.
Exit status: 0 the run ended (whatever it resolved); 1 Redis or the engine unreachable, the
name taken by another set; 2 usage (a bad set, a bad flag).

  --name NAME            the run's name (letters, digits, _ . -); its batch is eval-NAME
  --model M              the model the jobs use (default: the workers')
  --candidates K         candidates per instance, 1-16 (default 1): pass@1 and pass@K are reported
  --verify CMD           the agent's judge for instances without their own patchbay.verify (a
                         JobSpec's verify: never the instance's tests); with K > 1 it picks one
  --budget-usd X         a budget for the whole run's jobs
  --out DIR              where the files go (default ./patchbay-eval/NAME)
  --grade-concurrency N  predictions graded at once on this host (default 2)
  --repos-anywhere       allow local repos outside the set file's directory (a set you trust)
  --with-credentials     let the set's setups name the workers' egress credentials (a set you trust)
  --json                 print the summary as JSON
${CONNECTION_USAGE}`,
  options: {
    ...connectionFlags,
    name: { type: "string" },
    model: { type: "string" },
    candidates: { type: "string" },
    verify: { type: "string" },
    "budget-usd": { type: "string" },
    out: { type: "string" },
    "grade-concurrency": { type: "string" },
    "repos-anywhere": { type: "boolean" },
    "with-credentials": { type: "boolean" },
    json: { type: "boolean" },
  },
  positionals: { min: 1, max: 1, name: "SET" },
  async run({ values, positionals, config }) {
    const name = nameOf(values);
    const candidates = upTo(values, "candidates", 16, "jobs per instance") ?? 1;
    const verify = await verifyFlag(values);
    const gradeConcurrency = upTo(values, "grade-concurrency", 64, "gradings at once") ?? 2;
    const budgetUsd = numberFlag(values, "budget-usd", { what: "USD for the whole run" });
    const instances = await readSet(positionals[0]!, values);
    const out = outOf(values, name);
    const { withClient } = await import("./queue-connect.js");
    const { BatchClient, BatchConflictError } = await import("../batch/batches.js");
    const { runEval } = await import("../eval/run.js");
    const { EvalStore } = await import("../eval/store.js");
    const startedAt = Date.now();
    return withClient({ values, config }, async (c) => {
      const store = new EvalStore(c.redis, c.queueName, c.retentionSec);
      process.stderr.write(
        `patchbay: eval ${name}: ${count(instances.length, "instance")} × ${candidates} on queue ${c.queueName}; files in ${safe(out)}\n`,
      );
      try {
        const s = await runEval(new BatchClient(c), {
          name,
          instances,
          out,
          candidates,
          ...(verify !== undefined ? { verify } : {}),
          gradeConcurrency,
          ...(stringFlag(values, "model") ? { model: stringFlag(values, "model") } : {}),
          ...(budgetUsd !== undefined ? { budgetUsd } : {}),
          onSubmitted: ({ batchId, added, total }) =>
            void process.stderr.write(
              `patchbay: batch ${batchId}: ${count(added, "job")} enqueued${added < total ? ` (${total - added} were already there)` : ""}\n`,
            ),
          onProgress: (p) => process.stderr.write(progressLine(p)),
          // Saved as it grades, for the dashboard's eval page (the last save wins).
          onSummary: (summary, batchId) => store.save(summary, { set: resolve(positionals[0]!), startedAt, batchId }),
        });
        if (values.json) console.log(JSON.stringify(s));
        else for (const l of summaryLines(s)) console.log(l);
        return 0;
      } catch (err) {
        if (err instanceof BatchConflictError)
          throw new CliError(
            `${err.message} (the run eval-${name} was made from another set or flags: choose another --name)`,
          );
        throw err;
      }
    });
  },
};

const grade: Command = {
  summary: "grade predictions (SWE-bench's format) against a task set, on this host",
  usage: `patchbay eval grade SET --predictions FILE --name NAME [--out DIR]

Grades each prediction ({instance_id, model_patch, model_name_or_path}, JSONL or JSON) of FILE
for its instance of SET, in a fresh sandbox on this host, and writes the same files as eval run.
Needs no Redis and no worker. Exit status: 0 graded; 2 usage (a bad set or predictions file).

  --predictions FILE     the predictions
  --name NAME            the run's name (letters, digits, _ . -)
  --out DIR              where the files go (default ./patchbay-eval/NAME)
  --grade-concurrency N  predictions graded at once (default 2)
  --repos-anywhere       allow local repos outside the set file's directory (a set you trust)
  --with-credentials     let the set's setups name the workers' egress credentials (a set you trust)
  --json                 print the summary as JSON`,
  options: {
    predictions: { type: "string" },
    name: { type: "string" },
    out: { type: "string" },
    "grade-concurrency": { type: "string" },
    "repos-anywhere": { type: "boolean" },
    "with-credentials": { type: "boolean" },
    json: { type: "boolean" },
  },
  positionals: { min: 1, max: 1, name: "SET" },
  async run({ values, positionals }) {
    const name = nameOf(values);
    const file = stringFlag(values, "predictions");
    if (!file) throw new UsageError("--predictions FILE is required (SWE-bench's predictions: JSONL or JSON)");
    const instances = await readSet(positionals[0]!, values);
    const { parsePredictions, EvalSetError } = await import("../eval/instance.js");
    let preds;
    try {
      preds = parsePredictions(readFileSync(file, "utf8"), file);
    } catch (err) {
      if (err instanceof EvalSetError) throw new UsageError(err.message);
      throw new UsageError(`cannot read the predictions ${safe(file)}: ${(err as Error).message}`);
    }
    const concurrency = upTo(values, "grade-concurrency", 64, "gradings at once") ?? 2;
    const { gradeSet } = await import("../eval/grade-set.js");
    const s = await gradeSet({
      name,
      instances,
      preds,
      out: outOf(values, name),
      concurrency,
      onGraded: (g: Pick<Graded, "instance_id" | "outcome">, n: number, total: number) =>
        void process.stderr.write(`patchbay: [${n}/${total}] ${safe(g.instance_id)}: ${g.outcome}\n`),
    });
    if (values.json) console.log(JSON.stringify(s));
    else for (const l of summaryLines(s)) console.log(l);
    return 0;
  },
};

/** The largest summary.json compare reads (10,000 instances' accounts and id lists fit many times over). */
const SUMMARY_MAX_BYTES = 256 * 1024 * 1024;

/** A run given as its directory or its summary.json: a regular file (never waited on, as a FIFO would be), of a summary's shape. */
async function readSummary(given: string): Promise<RunSummary> {
  const file = existsSync(given) && statSync(given).isDirectory() ? join(given, "summary.json") : given;
  const { RunSummarySchema } = await import("../eval/store.js");
  let text: string;
  try {
    const fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      const st = fstatSync(fd);
      if (!st.isFile()) throw new Error("not a regular file");
      if (st.size > SUMMARY_MAX_BYTES) throw new Error(`over ${count(SUMMARY_MAX_BYTES, "byte")}`);
      text = readFileSync(fd, "utf8");
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    throw new UsageError(`cannot read the run summary ${safe(file)}: ${safe((err as Error).message)}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`cannot read the run summary ${safe(file)}: ${safe((err as Error).message)}`);
  }
  const r = RunSummarySchema.safeParse(value);
  if (!r.success) {
    const first = r.error.issues[0]!;
    throw new UsageError(
      `the run summary ${safe(file)} is not an eval run's summary.json: ${safe(first.path.join("."))}: ${safe(first.message)}`,
    );
  }
  return r.data;
}

const compare: Command = {
  summary: "two eval runs side by side: resolved, cost, and the instances that differ",
  usage: `patchbay eval compare RUN_A RUN_B [--json]

RUN_A and RUN_B are run directories (or their summary.json). Prints resolved, cost, cost per
resolved instance and pass@k of each, then every instance whose outcome differs.
Exit status: 0 compared; 2 usage (a run that cannot be read).

  --json                 print the comparison as JSON`,
  options: { json: { type: "boolean" } },
  positionals: { min: 2, max: 2, name: "RUN" },
  async run({ values, positionals }) {
    const a = await readSummary(positionals[0]!);
    const b = await readSummary(positionals[1]!);
    const { compareRuns, compareText } = await import("../eval/compare.js");
    const cmp = compareRuns(a, b);
    console.log(values.json ? JSON.stringify(cmp) : compareText(cmp));
    return 0;
  },
};

export const evalCommands: Record<string, Command> = {
  "eval run": run,
  "eval grade": grade,
  "eval compare": compare,
};
