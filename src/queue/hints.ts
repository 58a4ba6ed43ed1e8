// What a printed command (a hint: "start a worker", "watch it") needs to reach the same queue: the
// flags that differ from the defaults. A Redis URL with a password is not printed: $REDIS_URL stands in.
import { DEFAULT_QUEUE, DEFAULT_REDIS_URL } from "../core/config/config.js";
import { shownRedisUrl } from "../redis/url.js";

/** ` --queue Q` and ` --redis-url U` where they are not the defaults ("" when both are). */
export function hintFlags(queueName: string, redisUrl: string): string {
  const q = queueName === DEFAULT_QUEUE ? "" : ` --queue ${quoteArg(queueName)}`;
  let url = "";
  if (redisUrl !== DEFAULT_REDIS_URL)
    url = shownRedisUrl(redisUrl) !== redisUrl ? ' --redis-url "$REDIS_URL"' : ` --redis-url ${quoteArg(redisUrl)}`;
  return q + url;
}

/** A shell word: as it is when plain, else single-quoted (and any control character dropped). */
export function quoteArg(s: string): string {
  const clean = s.replace(/[\x00-\x1f\x7f]/g, "");
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(clean) ? clean : `'${clean.replace(/'/g, `'\\''`)}'`;
}
