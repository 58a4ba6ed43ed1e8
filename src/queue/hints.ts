// What a printed command (a hint: "start a worker", "watch it") needs to reach the same queue: the
// flags that differ from the defaults. A Redis URL is printed as given, its password as *** (the
// reader types it back in): never a "$REDIS_URL" that may be unset or hold another URL.
import { DEFAULT_QUEUE, DEFAULT_REDIS_URL } from "../core/config/config.js";
import { shownRedisUrl } from "../redis/url.js";

/** ` --queue Q` and ` --redis-url U` where they are not the defaults ("" when both are); U without its password. */
export function hintFlags(queueName: string, redisUrl: string): string {
  const q = queueName === DEFAULT_QUEUE ? "" : ` --queue ${quoteArg(queueName)}`;
  const url = redisUrl === DEFAULT_REDIS_URL ? "" : ` --redis-url ${quoteArg(shownRedisUrl(redisUrl))}`;
  return q + url;
}

/** A shell word: as it is when plain, else single-quoted (and any control character dropped). */
export function quoteArg(s: string): string {
  const clean = s.replace(/[\x00-\x1f\x7f]/g, "");
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(clean) ? clean : `'${clean.replace(/'/g, `'\\''`)}'`;
}
