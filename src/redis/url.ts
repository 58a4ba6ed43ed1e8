// A Redis URL as messages show it (the CLI's, doctor's, the configuration's errors, the hints).

/** Query keys whose values are never shown (matched on the decoded key, any case). */
const SECRET_KEY = /pass|secret|token|auth/i;

/**
 * Where a Redis URL's user part ends: at its last `@`, so that a password may hold `@`, `?`, `#`
 * or `/` as typed (an `@` in a query value must be %-encoded). src/redis/target.ts splits the same way.
 */
export function userinfoEnd(rest: string): number {
  return rest.lastIndexOf("@");
}

function decodedKey(k: string): string {
  try {
    return decodeURIComponent(k.replace(/\+/g, " "));
  } catch {
    return k;
  }
}

/**
 * A Redis URL as a message may show it: a password (in the user part, or any query value whose
 * key names a password or secret, %-encoded keys included) as ***. Read by hand, not with URL: a
 * Sentinel or Cluster URL names several hosts, which URL does not parse.
 */
export function shownRedisUrl(redisUrl: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(redisUrl)?.[0] ?? "";
  let rest = redisUrl.slice(scheme.length);
  const at = userinfoEnd(rest);
  let user = "";
  if (at >= 0) {
    const userinfo = rest.slice(0, at);
    const colon = userinfo.indexOf(":");
    // user:password@ keeps the user; a lone word before @ is ioredis' password-only form.
    user = `${colon < 0 ? "" : userinfo.slice(0, colon)}:***@`;
    rest = rest.slice(at + 1);
  }
  const q = rest.indexOf("?");
  if (q < 0) return scheme + user + rest;
  // Values run to the next & only (a # is part of a value here, as URLSearchParams reads it).
  const query = rest
    .slice(q + 1)
    .split("&")
    .map((pair) => {
      const eq = pair.indexOf("=");
      return eq >= 0 && SECRET_KEY.test(decodedKey(pair.slice(0, eq))) ? `${pair.slice(0, eq)}=***` : pair;
    })
    .join("&");
  return `${scheme}${user}${rest.slice(0, q)}?${query}`;
}
