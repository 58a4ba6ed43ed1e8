// What answers on a port that did not act as Redis: asked directly, over a plain socket and over
// TLS at once, with a Redis PING on each. So a wrong port is named for what it is (an HTTP or
// HTTPS server, TLS, something that accepts and says nothing or closes, another protocol) instead
// of ioredis' parser error ("Unknown RESP type 72 "H". Please report this.").
import { isIP, Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";

/** What a port answered to a Redis PING, plain and over TLS. */
export type PortAnswer =
  | { speaks: "redis" | "http" | "https" | "tls-redis" | "tls" | "silent" | "closed" | "unreachable" }
  | { speaks: "other"; said: string };

/**
 * Whether a socket got as far as `ready` (connect, or a TLS handshake), and what it then answered
 * to PING within ms: its first bytes (latin1), "timeout", "end", or "error: <message>".
 */
export function exchange(s: Socket, ready: string, ms: number): Promise<{ reached: boolean; answer: string }> {
  let reached = false;
  return new Promise((resolve) => {
    const done = (answer: string) => (s.destroy(), resolve({ reached, answer }));
    s.setTimeout(ms, () => done("timeout"));
    s.once("error", (err) => done(`error: ${err.message}`));
    s.once(ready, () => ((reached = true), s.write("PING\r\n")));
    s.once("data", (d: Buffer) => done(d.toString("latin1", 0, 64)));
    s.once("end", () => done("end"));
  });
}

const REDIS = /^[+-]/; // a simple string or an error: PONG, NOAUTH, ERR …
const HTTP = /^HTTP\/\d/;

/**
 * What answers on host:port: both exchanges run at once, each bounded by `ms`. A plain answer
 * wins unless it is TLS's (a record header) or none (silence, a close), where the TLS one tells.
 */
export async function whatAnswers(host: string, port: number, ms: number): Promise<PortAnswer> {
  const name = isIP(host) ? {} : { servername: host };
  const [plain, tls] = await Promise.all([
    exchange(new Socket().connect(port, host), "connect", ms),
    exchange(tlsConnect({ host, port, rejectUnauthorized: false, ...name }), "secureConnect", ms),
  ]);
  return classify(plain, tls);
}

/** The verdict from the two exchanges' outcomes (pure: whatAnswers' reading, tested without sockets). */
export function classify(
  plain: { reached: boolean; answer: string },
  tls: { reached: boolean; answer: string },
): PortAnswer {
  if (!plain.reached) return { speaks: "unreachable" };
  const a = plain.answer;
  if (REDIS.test(a)) return { speaks: "redis" };
  if (HTTP.test(a)) return { speaks: "http" };
  if (tls.reached) {
    if (REDIS.test(tls.answer)) return { speaks: "tls-redis" };
    if (HTTP.test(tls.answer)) return { speaks: "https" };
    return { speaks: "tls" };
  }
  if (a === "timeout") return { speaks: "silent" };
  if (a === "end" || a.startsWith("error:")) return { speaks: "closed" };
  if (/^[\x15\x16]\x03/.test(a)) return { speaks: "tls" };
  return {
    speaks: "other",
    said: JSON.stringify(
      a
        .trimEnd()
        .replace(/[^\x20-\x7e]/g, "?")
        .slice(0, 40),
    ),
  };
}

/**
 * What a person reads about a port that is not plain Redis, and whose fix it is ("config": the URL
 * names the wrong thing; "infra": something there does not answer); undefined for a Redis.
 * `tls` says whether the URL asked for TLS (rediss://); `ms` is how long silence was waited for.
 */
export function answerReason(
  answer: PortAnswer,
  tls: boolean,
  ms: number,
): { kind: "config" | "infra"; why: string } | undefined {
  const notRedis = "check the host and port (Redis listens on 6379 by default)";
  switch (answer.speaks) {
    case "redis":
    case "unreachable":
      return undefined;
    case "http":
      return { kind: "config", why: `an HTTP server answers on this port, not Redis: ${notRedis}` };
    case "https":
      return { kind: "config", why: `an HTTPS server answers on this port, not Redis: ${notRedis}` };
    case "tls-redis":
      return tls ? undefined : { kind: "config", why: "this port speaks TLS: use rediss:// (Redis answers behind it)" };
    case "tls":
      return {
        kind: "config",
        why: tls
          ? `this port speaks TLS, and nothing behind it answered a Redis PING: ${notRedis}`
          : `this port speaks TLS: use rediss:// if it is Redis over TLS (nothing answered a Redis PING over it without a client certificate); else ${notRedis}`,
      };
    case "silent":
      return {
        kind: "infra",
        why: `something accepted the connection and answered nothing to a Redis PING within ${ms} ms: not Redis, or a Redis that hangs; ${notRedis}`,
      };
    case "closed":
      return {
        kind: "infra",
        why: `something accepted the connection and closed it without a word: not Redis, or a Redis that drops this client; ${notRedis}`,
      };
    case "other":
      return {
        kind: "config",
        why: `something that is not Redis answers on this port (it said ${answer.said}): ${notRedis}`,
      };
  }
}
