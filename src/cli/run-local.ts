// `patchbay run --local`: the job in this process, through runJob as a worker runs it (the same
// phases, result and transcript), with no Redis and no worker. Progress and the final line are the
// queued run's (format.ts); the files and the exit code too. Ctrl-C cancels the job: it ends
// `cancelled` with its patch so far, as a cancel from any host would.
import { randomUUID } from "node:crypto";
import type { Config } from "../core/config/config.js";
import type { JobResult, TranscriptEvent } from "../core/spec/spec.js";
import { CliError, UsageError, type Values } from "./command.js";
import { exitCodeFor } from "./exit.js";
import { finalLine, formatEvent } from "./format.js";
import { outDir, writeJobFiles } from "./out.js";

export async function runLocal(spec: Record<string, unknown>, o: { values: Values; config: Config }): Promise<number> {
  const { runJob } = await import("../job/run.js");
  const { checkCredentials } = await import("../queue/health.js");
  const { configuredBackend } = await import("../backend/index.js");
  const backend = configuredBackend(o.config, "run --local"); // as a worker's: the local backend only in tests
  const creds = await checkCredentials(o.config); // as a worker would: no job that can only fail
  if (!creds.ok) throw new CliError(creds.reason);
  // What enqueue says of the model (src/queue/client.ts checkModels), for the job run here.
  const { unknownModelWarning, usdBudgetProblem } = await import("../agent/prices.js");
  const model = typeof spec.model === "string" ? spec.model : o.config.model;
  const budget = spec.budget as { usd?: number } | undefined;
  const problem = usdBudgetProblem(model, budget?.usd);
  if (problem) throw new UsageError(`invalid JobSpec: ${problem}`);
  const warning = typeof spec.model === "string" ? unknownModelWarning(spec.model) : undefined;
  if (warning) process.emitWarning(warning, { code: "PATCHBAY_UNKNOWN_MODEL" });
  const jobId = typeof spec.jobId === "string" ? spec.jobId : `local-${randomUUID().slice(0, 8)}`;
  process.stderr.write(`patchbay: job ${jobId} running here (--local)\n`);
  const events: TranscriptEvent[] = [];
  const ctl = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    process.stderr.write(`\npatchbay: ${sig}: cancelling job ${jobId} (it ends with its patch so far)\n`);
    ctl.abort("cancelled");
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  let result: JobResult;
  try {
    result = await runJob(spec, {
      jobId,
      config: o.config,
      backend,
      signal: ctl.signal,
      onEvent: (e) => {
        events.push(e);
        const line = formatEvent(e);
        if (line) process.stderr.write(line + "\n");
      },
    });
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
  const patchPath = await writeJobFiles(outDir(o.values, "local", jobId), result, events);
  if (o.values.json) console.log(JSON.stringify(result));
  process.stderr.write(finalLine(jobId, result, patchPath) + "\n");
  return ctl.signal.aborted && result.status === "cancelled" ? 130 : exitCodeFor(result.status);
}
