// The queue client for CLI commands, loaded only by commands that talk to Redis. Redis is probed
// first with a connection that does not retry, so a refused connection is reported at once.
import { Redis } from "ioredis";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { JobFailedError, JobNotFoundError, PatchbayClient, type ClientOptions } from "../queue/client.js";
import { JobSpecError, type JobResult } from "../spec.js";
import { CliError, connection, UsageError, type ClientArgs } from "./command.js";
import { flagError } from "./spec-flags.js";

export { JobFailedError, JobNotFoundError, PatchbayClient };

/** Connects once, without retries: resolves if Redis answers PING, else throws a one-line CliError. */
export async function probeRedis(url: string, timeoutMs = 3000): Promise<void> {
  const r = new Redis(url, { lazyConnect: true, connectTimeout: timeoutMs, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
  let cause: Error | undefined;
  r.on("error", (err: Error) => (cause ??= err)); // the socket's error (ECONNREFUSED, ...), not "Connection is closed"
  try {
    await r.connect();
    await r.ping();
  } catch (err) {
    const why = (cause ?? (err as Error)).message || "connection failed";
    throw new CliError(`cannot reach Redis at ${url} (${why}): start it (npm run services) or pass --redis-url / set REDIS_URL`);
  } finally {
    r.disconnect();
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
  await probeRedis(opts.redisUrl);
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

/** Writes DIR/patch.diff, DIR/result.json and DIR/transcript.jsonl; returns the patch's path. */
export async function writeOut(c: PatchbayClient, id: string, result: JobResult, dir: string): Promise<string> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "patch.diff"), result.patch);
  writeFileSync(join(dir, "result.json"), JSON.stringify(result, null, 2) + "\n");
  const lines: string[] = [];
  for await (const e of c.watch(id, { follow: false })) lines.push(JSON.stringify(e) + "\n");
  writeFileSync(join(dir, "transcript.jsonl"), lines.join(""));
  return join(dir, "patch.diff");
}

/** The final result of a job, failed ones included (a JobFailedError becomes a failed result). */
export async function finalResult(c: PatchbayClient, id: string): Promise<JobResult | undefined> {
  const { emptyResult } = await import("../spec.js");
  try {
    return await c.result(id);
  } catch (err) {
    if (err instanceof JobFailedError) return emptyResult("failed", err.reason, { jobId: id });
    throw err;
  }
}
