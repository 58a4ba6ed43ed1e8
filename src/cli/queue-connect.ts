// The queue client for CLI commands, loaded only by commands that talk to Redis. Redis is probed
// first with a connection that does not retry, so a refused connection is reported at once.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { JobFailedError, JobNotFoundError, PatchbayClient, type ClientOptions } from "../queue/client.js";
import type { RedisSettings } from "../redis/connect.js";
import { probeRedisTarget, RedisConnectError } from "../redis/probe.js";
import { JobSpecError, type JobResult, type TranscriptEvent } from "../core/spec/spec.js";
import { writeJobFiles } from "./out.js";
import { CliError, connection, UsageError, type ClientArgs } from "./command.js";
import { flagError } from "./spec-flags.js";

export { JobFailedError, JobNotFoundError, PatchbayClient };

/** Connects once, without retries: resolves if Redis answers PING, else throws a one-line CliError saying why and what to do. */
export async function probeRedis(url: string, settings: RedisSettings, timeoutMs = 3000): Promise<void> {
  try {
    (await probeThroughFailover(url, settings, timeoutMs)).conn.disconnect();
  } catch (err) {
    if (!(err instanceof RedisConnectError) || err.kind !== "infra")
      throw new CliError((err as Error).message, "config");
    throw new CliError(
      `cannot reach Redis at ${err.shownUrl} (${err.why}): start it (${inPatchbayRepo() ? "npm run services" : "e.g. redis-server --maxmemory-policy noeviction"}) or pass --redis-url / set REDIS_URL`,
    );
  }
}

/** How long a command started during a Sentinel failover waits for the new master to answer. */
export const FAILOVER_WAIT_MS = 30_000;

/**
 * probeRedisTarget, once; through Sentinel, again every half second for up to FAILOVER_WAIT_MS while
 * nothing answers: during a failover the sentinels still name the master that just died for a few
 * seconds, and a command started then is to wait for the new one, as the worker's connections do.
 */
async function probeThroughFailover(url: string, settings: RedisSettings, timeoutMs: number) {
  const sentinel = /^rediss?\+sentinel:/i.test(url);
  const until = Date.now() + FAILOVER_WAIT_MS;
  for (;;) {
    try {
      return await probeRedisTarget(url, settings, timeoutMs);
    } catch (err) {
      // The master the sentinels named refused; sentinels that do not answer at all are not a failover.
      const infra = err instanceof RedisConnectError && err.kind === "infra" && !/sentinel/i.test(err.why);
      if (!sentinel || !infra || Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/** Whether the command runs in patchbay's own clone, where `npm run services` starts Redis (not after `npm i patchbay`). */
function inPatchbayRepo(): boolean {
  try {
    const pkg = JSON.parse(readFileSync(join(process.cwd(), "package.json"), "utf8")) as {
      name?: string;
      scripts?: Record<string, string>;
    };
    return pkg.name === "patchbay" && pkg.scripts?.services !== undefined;
  } catch {
    return false;
  }
}

/** Resolves --queue / --redis-url against the environment. */
export function clientOptions({ values, config }: ClientArgs): Required<Pick<ClientOptions, "queueName" | "redisUrl">> {
  const flags = connection(values);
  return { queueName: flags.queueName ?? config().queueName, redisUrl: flags.redisUrl ?? config().redisUrl };
}

/** Runs fn with a client on a reachable Redis; job errors become one-line failures. */
export async function withClient<T>(args: ClientArgs, fn: (c: PatchbayClient) => Promise<T>): Promise<T> {
  const { values } = args;
  const opts = clientOptions(args);
  await probeRedis(opts.redisUrl, args.config());
  const c = new PatchbayClient({ ...opts, config: args.config() });
  try {
    return await fn(c);
  } catch (err) {
    if (err instanceof JobNotFoundError) throw new CliError(err.message);
    if (err instanceof JobSpecError) throw new UsageError(flagError(err.message, values));
    throw err;
  } finally {
    await c.close();
  }
}

/** Writes DIR/patch.diff, DIR/result.json, DIR/transcript.jsonl and DIR/transcript.html; returns the patch's path. */
export async function writeOut(c: PatchbayClient, id: string, result: JobResult, dir: string): Promise<string> {
  const events: TranscriptEvent[] = [];
  for await (const e of c.watch(id, { follow: false })) events.push(e);
  return writeJobFiles(dir, result, events);
}

/** The final result of a job, failed ones included (a JobFailedError becomes a failed result). */
export async function finalResult(c: PatchbayClient, id: string): Promise<JobResult | undefined> {
  const { emptyResult } = await import("../core/spec/spec.js");
  try {
    return await c.result(id);
  } catch (err) {
    if (err instanceof JobFailedError) return emptyResult("failed", err.reason, { jobId: id });
    throw err;
  }
}
