// Which errors are the Redis connection's, not the job's: a command that never reached a server
// that could take it (the connection closed or ended, a reconnect gave up, the server loading or
// demoted, a Cluster without a master for the slot). Pure: the worker hands such a job back
// instead of spending its attempts (src/queue/attempt-outcome.ts).
import { PatchbayError } from "../core/errors.js";

/** ioredis' own messages for a command the connection, not the command, failed. */
const CONNECTION =
  /^(Connection is closed\.|Connection is aborted|Connection is discarded|Reached the max retries per request limit|Command aborted due to connection close|Stream isn't writeable|Failed to refresh slots cache|All sentinels are unreachable|None of startup nodes is available|Too many Cluster redirections|Cluster is disconnected)/;
/** Redis's replies (ReplyError) that say the server could not take a write now, not that it was wrong. */
const REPLY = /^(READONLY|LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|NOREPLICAS) /;

/**
 * Whether `err` says the Redis connection failed under a command (not that the command was
 * wrong). patchbay's own errors never are (their messages may carry a sandbox's or a repo's
 * text); a MULTI refused (EXECABORT) or the result record's refusal is judged by its causes.
 */
export function isRedisConnectionError(err: unknown, depth = 0): boolean {
  if (!(err instanceof Error) || err instanceof PatchbayError || depth > 3) return false;
  if (err.name === "MaxRetriesPerRequestError" || CONNECTION.test(err.message)) return true;
  if (err.name === "ReplyError" && REPLY.test(err.message)) return true;
  // Not socket codes (ECONNREFUSED, ECONNRESET): the engine's socket fails with the same ones, and
  // a Redis command does not reject with them here (maxRetriesPerRequest: null waits for the reconnect).
  const causes = [
    (err as { cause?: unknown }).cause,
    ...(((err as { previousErrors?: unknown }).previousErrors as unknown[] | undefined) ?? []),
  ];
  return causes.some((c) => isRedisConnectionError(c, depth + 1));
}
