// Which errors are the Redis connection's, not the job's: a command that never reached a server
// that could take it (the connection closed or ended, a reconnect gave up, the server loading or
// demoted, a Cluster without a master for the slot). Pure: the worker hands such a job back
// instead of spending its attempts (src/queue/attempt-outcome.ts), and a worker whose connection
// ended stops taking jobs until it is back (src/queue/worker.ts).

/** ioredis' and Redis's messages for a command the connection, not the command, failed. */
const MESSAGES = /^(Connection is closed\.|Reached the max retries per request limit|Command aborted due to connection close|Stream isn't writeable|LOADING |READONLY |MASTERDOWN |CLUSTERDOWN |TRYAGAIN |Failed to refresh slots cache|All sentinels are unreachable|None of startup nodes is available)/;
/** Whether `err` says the Redis connection failed under a command (not that the command was wrong). */
export function isRedisConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  // Not socket codes (ECONNREFUSED, ECONNRESET): the engine's socket fails with the same ones, and
  // a Redis command does not reject with them here (maxRetriesPerRequest: null waits for the reconnect).
  return err.name === "MaxRetriesPerRequestError" || MESSAGES.test(err.message);
}
