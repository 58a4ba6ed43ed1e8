// `patchbay run` after the enqueue: progress on stderr, the wait, Ctrl-C, and the output files.
import { join } from "node:path";
import { finalLine, formatEvent } from "./format.js";
import { emptyResult, type JobResult } from "../core/spec/spec.js";
import { JobFailedError, type PatchbayClient } from "../queue/client.js";
import { writeOut } from "./queue-connect.js";
import { exitCodeFor } from "./exit.js";

export interface FollowOptions {
  out: string;
  json: boolean;
  cancelOnExit: boolean;
}

/** Resolves with the signal's name on the first SIGINT or SIGTERM; remove() unhooks. */
function interrupted(): { signal: Promise<NodeJS.Signals>; remove(): void } {
  let handler: (s: NodeJS.Signals) => void = () => {};
  const signal = new Promise<NodeJS.Signals>((resolve) => (handler = resolve));
  process.once("SIGINT", handler);
  process.once("SIGTERM", handler);
  return { signal, remove: () => (process.off("SIGINT", handler), process.off("SIGTERM", handler)) };
}

/** How long `run --cancel-on-exit` waits after Ctrl-C for the cancelled job's result (its patch so far). */
export const CANCEL_WAIT_MS = 30_000;

async function onInterrupt(c: PatchbayClient, id: string, sig: NodeJS.Signals, opts: FollowOptions): Promise<number> {
  if (opts.cancelOnExit) {
    let failed = false;
    const r = await c.cancel(id).catch((err: Error) => ((failed = true), `not cancelled (${err.message})`));
    process.stderr.write(`\npatchbay: ${sig}: job ${id} ${r === "finished" ? "had already finished" : r}\n`);
    if (!failed) await writeCancelled(c, id, opts);
  } else {
    process.stderr.write(
      `\npatchbay: ${sig}: stopped waiting; job ${id} keeps running on its worker.\n` +
        `  follow it: patchbay watch ${id}${c.hintFlags()}    stop it: patchbay cancel ${id}${c.hintFlags()}    (or run with --cancel-on-exit)\n`,
    );
  }
  return 130;
}

/**
 * After a Ctrl-C that cancelled the job: waits (at most CANCEL_WAIT_MS; a second Ctrl-C ends the
 * wait) for its result, which carries the patch of what was done, and writes it to --out as a run
 * that ends does, so nothing done is lost.
 */
async function writeCancelled(c: PatchbayClient, id: string, opts: FollowOptions): Promise<void> {
  process.stderr.write(
    `patchbay: waiting up to ${CANCEL_WAIT_MS / 1000} s for job ${id}'s result (its patch so far); Ctrl-C again to exit now\n`,
  );
  const again = interrupted();
  try {
    const got = await Promise.race([
      c.waitForResult(id, { timeoutMs: CANCEL_WAIT_MS, warnIfNoWorker: false }).then(
        (r) => r,
        (err: unknown) =>
          err instanceof JobFailedError ? emptyResult("failed", err.reason, { jobId: id }) : undefined,
      ),
      again.signal.then(() => undefined),
    ]);
    if (!got) {
      process.stderr.write(`patchbay: no result of job ${id} written to ${opts.out}\n`);
      return;
    }
    const patchPath = await writeOut(c, id, got, opts.out);
    if (opts.json) console.log(JSON.stringify(got));
    process.stderr.write(finalLine(id, got, patchPath) + "\n");
  } finally {
    again.remove();
  }
}

export async function follow(c: PatchbayClient, id: string, opts: FollowOptions): Promise<number> {
  if (!(await c.hasWorker()))
    process.stderr.write(
      `patchbay: no worker is running on queue '${c.queueName}' yet; start one with: npx patchbay worker${c.hintFlags()}\n`,
    );
  const stopWatching = new AbortController();
  const progress = (async () => {
    for await (const e of c.watch(id, { signal: stopWatching.signal })) {
      const line = formatEvent(e);
      if (line) process.stderr.write(line + "\n");
    }
  })().catch(() => {});
  const intr = interrupted();
  let result: JobResult;
  try {
    const outcome = await Promise.race([
      c.waitForResult(id, { warnIfNoWorker: false }).then((r) => ({ r })),
      intr.signal.then((sig) => ({ sig })),
    ]);
    if ("sig" in outcome) {
      stopWatching.abort();
      return await onInterrupt(c, id, outcome.sig, opts);
    }
    result = outcome.r;
  } catch (err) {
    if (!(err instanceof JobFailedError)) throw err;
    await progress;
    // Failed for good: still leave the transcript and a result that says why.
    const failed = emptyResult("failed", err.reason, { jobId: id });
    await writeOut(c, id, failed, opts.out);
    if (opts.json) console.log(JSON.stringify(failed));
    process.stderr.write(`patchbay: ${err.message}; transcript: ${join(opts.out, "transcript.jsonl")}\n`);
    return 1;
  } finally {
    intr.remove();
  }
  await progress;
  const patchPath = await writeOut(c, id, result, opts.out);
  if (opts.json) console.log(JSON.stringify(result));
  process.stderr.write(finalLine(id, result, patchPath) + "\n");
  return exitCodeFor(result.status);
}
