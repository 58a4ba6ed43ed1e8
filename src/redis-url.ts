// A Redis URL as messages show it (the CLI's, doctor's, the configuration's errors, the hints).

/**
 * A Redis URL as a message may show it: a password (in the user part, or a `password=` or
 * `sentinelPassword=` in the query) as ***. Read by hand, not with URL: a Sentinel or Cluster URL
 * names several hosts, which URL does not parse.
 */
export function shownRedisUrl(redisUrl: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(redisUrl)?.[0] ?? "";
  let rest = redisUrl.slice(scheme.length);
  let query = "";
  const q = rest.indexOf("?");
  if (q >= 0) [rest, query] = [rest.slice(0, q), rest.slice(q)];
  const at = rest.lastIndexOf("@");
  if (at >= 0) {
    const userinfo = rest.slice(0, at);
    const colon = userinfo.indexOf(":");
    // user:password@ keeps the user; a lone word before @ is ioredis' password-only form.
    rest = `${colon < 0 ? "" : userinfo.slice(0, colon)}:***${rest.slice(at)}`;
  }
  query = query.replace(/([?&](?:[a-z]*password)=)[^&#]*/gi, "$1***");
  return scheme + rest + query;
}
