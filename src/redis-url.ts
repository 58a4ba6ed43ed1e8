// A Redis URL as messages show it (the CLI's, doctor's, the configuration's errors, the hints).

/**
 * A Redis URL as a message may show it: a password (in the user part, or ioredis's ?password=) as
 * ***. One that may hold a secret but does not parse is not shown at all.
 */
export function shownRedisUrl(redisUrl: string): string {
  if (!redisUrl.includes("@") && !/password=/i.test(redisUrl)) return redisUrl; // nothing secret in it
  let u: URL;
  try {
    u = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(redisUrl) ? redisUrl : `redis://${redisUrl}`);
  } catch {
    return "(a Redis URL that does not parse, not shown)";
  }
  if (!u.password && !u.searchParams.has("password")) return redisUrl;
  if (u.password) u.password = "***";
  if (u.searchParams.has("password")) u.searchParams.set("password", "***");
  return u.toString();
}
