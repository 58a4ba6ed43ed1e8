// One connection attempt, no retries, with a reason a person can act on: what a command, a worker
// and doctor do at start, so a wrong password, an untrusted certificate or a master name no
// Sentinel knows is an error there and then, not a reconnect loop.
import { safeText } from "../core/term.js";
import { Redis } from "ioredis";
import { isIP } from "node:net";
import { connect as tlsConnect, type ConnectionOptions as TlsOptions } from "node:tls";
import { PatchbayError } from "../core/errors.js";
import { withTimeout } from "../core/timeout.js";
import {
  nodeOptions,
  openRedis,
  RedisConfigError,
  sentinelConnection,
  tlsOptions,
  type RedisSettings,
} from "./connect.js";
import { parseRedisUrl, type HostPort, type RedisTarget } from "./target.js";
import { shownRedisUrl } from "./url.js";
import { answerReason, exchange, whatAnswers } from "./port-speaks.js";

/** Redis cannot be used as configured: kind "config" (credentials, TLS, a master's name), or "infra" (nothing answers). */
export class RedisConnectError extends PatchbayError {
  constructor(
    /** The URL as messages show it (no password). */
    readonly shownUrl: string,
    /** Why, and what to do. */
    readonly why: string,
    kind: "config" | "infra",
  ) {
    super(kind, `Redis at ${shownUrl}: ${why}`);
  }
}

const TLS_TRUST = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_GET_ISSUER_CERT",
  "CERT_HAS_EXPIRED",
  "CERT_UNTRUSTED",
  "CERT_SIGNATURE_FAILURE",
]);

/** What an error from a connection attempt means, and what to do: [kind, sentence]. */
export function redisErrorReason(err: Error & { code?: string }, t: RedisTarget): ["config" | "infra", string] {
  // What the server said is quoted below: a hostile port's bytes reach a terminal only as safe text.
  const msg = safeText(err.message ?? "", { oneLine: true });
  const who = t.username ? `user '${t.username}'` : "the default user";
  if (/WRONGPASS|invalid username-password|invalid password/i.test(msg))
    return [
      "config",
      `Redis refused the password of ${who}: set the right one in REDIS_URL (redis://USER:PASSWORD@HOST:PORT)`,
    ];
  if (/NOAUTH|Authentication required/i.test(msg))
    return ["config", "Redis wants a password: put it in REDIS_URL (redis://USER:PASSWORD@HOST:PORT)"];
  if (/NOPERM/i.test(msg))
    return [
      "config",
      `Redis refused ${who} a command (${msg.slice(0, 160)}): give the ACL user ~* &* +@all, or at least what BullMQ needs`,
    ];
  if (err.code && TLS_TRUST.has(err.code))
    return [
      "config",
      `Redis's TLS certificate is not trusted (${err.code}): set PATCHBAY_REDIS_TLS_CA (or ?ca= in the URL) to the CA that signed it`,
    ];
  if (err.code === "ERR_TLS_CERT_ALTNAME_INVALID")
    return [
      "config",
      `Redis's TLS certificate does not name the host (${msg.slice(0, 160)}): connect by a name it lists`,
    ];
  if (/wrong version number|packet length too long|EPROTO/i.test(`${msg} ${err.code ?? ""}`))
    return ["config", "TLS to a port that does not speak TLS: use redis:// for it, or the server's tls-port"];
  if (/certificate required|alert number 116|handshake failure/i.test(msg))
    return [
      "config",
      "Redis asks for a client certificate: set PATCHBAY_REDIS_TLS_CERT and PATCHBAY_REDIS_TLS_KEY (or cert= and key= in the URL)",
    ];
  return ["infra", msg || "connection failed"];
}

function fail(t: RedisTarget, url: string, err: Error): RedisConnectError {
  const [kind, why] = redisErrorReason(err, t);
  return new RedisConnectError(shownRedisUrl(url), why, kind);
}

/** The master's address each reachable sentinel gives; a clear error when none names it. */
async function sentinelMaster(
  t: RedisTarget,
  url: string,
  settings: RedisSettings,
  timeoutMs: number,
): Promise<HostPort> {
  const answers: string[] = [];
  let last: Error | undefined;
  for (const s of t.nodes) {
    const r = sentinelConnection(t, settings, s, timeoutMs);
    try {
      await r.connect();
      const addr = (await r.call("SENTINEL", "get-master-addr-by-name", t.masterName!)) as [string, string] | null;
      if (addr) return { host: addr[0], port: Number(addr[1]) };
      const masters = (await r.call("SENTINEL", "masters").catch(() => [])) as string[][];
      answers.push(...masters.map((m) => m[m.indexOf("name") + 1]!).filter(Boolean));
    } catch (err) {
      last = err as Error;
    } finally {
      r.disconnect();
    }
  }
  const listed = t.nodes.map((n) => `${n.host}:${n.port}`).join(", ");
  if (answers.length > 0 || !last) {
    const known = [...new Set(answers)]
      .slice(0, 10)
      .map((n) => `'${n}'`)
      .join(", ");
    throw new RedisConnectError(
      shownRedisUrl(url),
      `no Sentinel at ${listed} knows a master named '${t.masterName}' (they know ${known || "none"}): fix the name after the sentinels in REDIS_URL`,
      "config",
    );
  }
  const [kind, why] = redisErrorReason(last, t);
  // The URL's password is the master's; sentinels with one of their own take ?sentinelPassword=.
  const sentinelAuth =
    kind === "config" && /password/i.test(why)
      ? "the sentinels want a password of their own: put it in the URL as ?sentinelPassword="
      : why;
  throw new RedisConnectError(shownRedisUrl(url), `no Sentinel at ${listed} answers (${sentinelAuth})`, kind);
}

/** What a failed connection means; `whole` when it says all (the client's own error adds nothing). */
type Diagnosis = { kind: "config" | "infra"; why: string; whole?: boolean };

const CLIENT_CERT =
  "Redis asks for a client certificate: set PATCHBAY_REDIS_TLS_CERT and PATCHBAY_REDIS_TLS_KEY (or cert= and key= in the URL)";

/**
 * When a connection fails without a reason (reset, timeout), TLS is the usual cause: the port
 * speaks the other protocol, or wants a client certificate. Asked of the port directly.
 */
async function tlsMismatch(
  t: RedisTarget,
  node: HostPort,
  tls: TlsOptions | undefined,
): Promise<Diagnosis | undefined> {
  const { host, port } = node;
  const name = isIP(host) ? {} : { servername: host };
  // What answers there, plain and over TLS: an HTTP server, TLS, silence, a close, another protocol.
  const answer = await whatAnswers(host, port, 1500);
  const said = (tls: boolean) => {
    const r = answerReason(answer, tls, 1500);
    return r && { ...r, whole: true };
  };
  if (!t.tls) return said(false);
  if (answer.speaks === "redis")
    return {
      kind: "config",
      why: "this port speaks plain Redis, not TLS: use redis:// for it, or the server's tls-port",
    };
  if (["http", "https", "other", "silent"].includes(answer.speaks)) return said(true);
  if (tls?.cert) return undefined;
  const hello = await exchange(tlsConnect({ host, port, ...tls, ...name }), "secureConnect", 1500);
  if (!hello.reached) return undefined;
  if (/certificate required|alert number 116|handshake failure/i.test(hello.answer))
    return { kind: "config", why: CLIENT_CERT };
  // Closed right after the handshake: Redis refusing a client without a certificate, or a TLS
  // proxy whose Redis is down; said both ways, as an outage.
  if (/^end|ECONNRESET/i.test(hello.answer))
    return {
      kind: "infra",
      why: "the TLS endpoint closed the connection after the handshake: Redis may want a client certificate (PATCHBAY_REDIS_TLS_CERT and PATCHBAY_REDIS_TLS_KEY), or the Redis behind a TLS proxy is down",
    };
  return undefined;
}

/**
 * A connected connection to the Redis `url` names, made once without retries; the caller
 * disconnects it. A RedisConnectError (kind "config" or "infra") says why not.
 */
export async function probeRedisTarget(
  url: string,
  settings: RedisSettings,
  timeoutMs = 3000,
): Promise<{ conn: Redis; target: RedisTarget; master?: HostPort }> {
  const t = parseRedisUrl(url);
  const master = t.mode === "sentinel" ? await sentinelMaster(t, url, settings, timeoutMs) : undefined;
  const options = {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  };
  // The Sentinel's master, asked already, is probed as the server it is (no second round of sentinels).
  const conn = master
    ? new Redis({ ...nodeOptions({ ...t, mode: "single", nodes: [master] }, settings, options) })
    : openRedis(t, settings, options);
  let cause: Error | undefined;
  conn.on("error", (err: Error) => (cause ??= err)); // the socket's or the AUTH's error, not "Connection is closed"
  conn.on("node error", (err: Error) => (cause ??= err)); // a Cluster's, per node
  try {
    // Bounded as a whole: a server that accepts and never answers must not hold a start for ever.
    const ready = async () => {
      await conn.connect();
      await conn.ping();
      // ioredis reports a database that is not there as an event and goes on in db 0: asked here.
      if (t.db !== 0) await conn.select(t.db);
    };
    await withTimeout(ready(), timeoutMs * 2, `no answer to the connection and PING within ${timeoutMs * 2} ms`);
    return { conn, target: t, ...(master ? { master } : {}) };
  } catch (err) {
    conn.disconnect();
    if (err instanceof RedisConfigError) throw err;
    if (/DB index is out of range/i.test((err as Error).message))
      throw new RedisConnectError(
        shownRedisUrl(url),
        `this Redis has no database ${t.db}: use one below its \`databases\` setting`,
        "config",
      );
    const e =
      cause && !/Connection is closed|Failed to refresh slots/i.test(cause.message)
        ? cause
        : ((err as { lastNodeError?: Error }).lastNodeError ?? cause ?? (err as Error));
    const [kind] = redisErrorReason(e, t);
    const code = (e as NodeJS.ErrnoException).code;
    // A TLS handshake answered by something that is not TLS: asked what it is (an HTTP server?).
    const notTls = t.tls && /wrong version number|packet length too long|EPROTO/i.test(`${e.message} ${code ?? ""}`);
    const diagnosis =
      (kind === "infra" && code !== "ECONNREFUSED" && code !== "ENOTFOUND") || notTls
        ? await tlsMismatch(t, master ?? t.nodes[0]!, tlsOptions(t, settings.redisTls))
        : undefined;
    // What answered says it all: ioredis' own error ("Unknown RESP type 72 "H". Please report this.") is left out.
    throw diagnosis
      ? new RedisConnectError(
          shownRedisUrl(url),
          diagnosis.whole ? diagnosis.why : `${diagnosis.why} (${e.message})`,
          diagnosis.kind,
        )
      : fail(t, url, e);
  }
}
