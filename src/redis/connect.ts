// Connections to the Redis a URL names (src/redis/target.ts): one server, a Sentinel group's master
// or a Cluster, with TLS and an ACL user. Every connection patchbay opens — the client's, the
// worker's, the dashboard's, doctor's — is made here, so each form works everywhere alike.
import { readFileSync } from "node:fs";
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";
import type { ConnectionOptions as TlsOptions } from "node:tls";
import { kinded } from "../core/errors.js";
import { parseRedisUrl, type HostPort, type RedisTarget, type RedisTlsFiles } from "./target.js";

/** The TLS files, user or password a connection needs cannot be read. */
export class RedisConfigError extends kinded("config") {}

/** Where the TLS files come from beside the URL: PATCHBAY_REDIS_TLS_CA, _CERT and _KEY. */
export interface RedisSettings {
  redisTls?: RedisTlsFiles;
}

const TLS_ENV: Record<keyof RedisTlsFiles, string> = {
  ca: "PATCHBAY_REDIS_TLS_CA",
  cert: "PATCHBAY_REDIS_TLS_CERT",
  key: "PATCHBAY_REDIS_TLS_KEY",
};

/** Node's TLS options for a target: the URL's files first, then the environment's; undefined without TLS. */
export function tlsOptions(t: RedisTarget, env: RedisTlsFiles = {}): TlsOptions | undefined {
  if (!t.tls) {
    // Files for TLS with a URL without it: the connection would go in clear, which the files say is not meant.
    const set = (Object.keys(TLS_ENV) as (keyof RedisTlsFiles)[]).filter((k) => env[k]);
    if (set.length)
      throw new RedisConfigError(
        `${set.map((k) => TLS_ENV[k]).join(", ")} ${set.length > 1 ? "are" : "is"} set but the Redis URL is not rediss://: use rediss:// (or unset ${set.length > 1 ? "them" : "it"})`,
      );
    return undefined;
  }
  const out: TlsOptions = {};
  for (const part of ["ca", "cert", "key"] as const) {
    const file = t.tlsFiles[part] ?? env[part];
    if (file === undefined || file === "") continue;
    try {
      out[part] = readFileSync(file);
    } catch (err) {
      const from = t.tlsFiles[part] !== undefined ? `the Redis URL's ${part}=` : TLS_ENV[part];
      throw new RedisConfigError(
        `${from}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      );
    }
  }
  if (Boolean(out.cert) !== Boolean(out.key))
    throw new RedisConfigError(
      `a TLS client certificate needs both ${TLS_ENV.cert} and ${TLS_ENV.key} (or cert= and key= in the URL)`,
    );
  return out;
}

/** ioredis' options for one server or the Sentinel group's master (not a Cluster). */
export function nodeOptions(t: RedisTarget, settings: RedisSettings, options: RedisOptions = {}): RedisOptions {
  const tls = tlsOptions(t, settings.redisTls);
  const auth = {
    ...(t.username !== undefined ? { username: t.username } : {}),
    ...(t.password !== undefined ? { password: t.password } : {}),
  };
  const base: RedisOptions = { ...options, ...auth, db: t.db, ...(tls ? { tls } : {}) };
  if (t.mode === "single") return { ...base, host: t.nodes[0]!.host, port: t.nodes[0]!.port };
  return {
    ...base,
    sentinels: t.nodes,
    name: t.masterName!,
    role: "master",
    // No failoverDetector: its subscription outlives the socket it was made for, and its
    // +switch-master, arriving while a reconnect is asking the sentinels, ends the connection for
    // good ("Connection is closed." for every later command; test/redis-failover-connections).
    // A dead master's socket fails, and a demoted one's clients are killed by the sentinels
    // (CLIENT KILL TYPE normal): either way the reconnect asks the sentinels for the promoted one.
    // A reconnect that a sentinel not yet told of the failover sent to the old master, now a
    // replica, is answered READONLY (enableReadyCheck is off, so ioredis never checks the role):
    // reconnect, asking the sentinels again, and send the command again there.
    reconnectOnError: options.reconnectOnError ?? ((err: Error) => (/^READONLY /.test(err.message) ? 2 : false)),
    ...(t.sentinelPassword !== undefined ? { sentinelPassword: t.sentinelPassword } : {}),
    ...(tls ? { enableTLSForSentinelMode: true, sentinelTLS: tls } : {}),
    ...(options.retryStrategy ? { sentinelRetryStrategy: options.retryStrategy } : {}),
  };
}

/** ioredis Cluster's options: the per-node part (auth, TLS, BullMQ's) under redisOptions. */
function clusterOptions(t: RedisTarget, settings: RedisSettings, options: RedisOptions): ClusterOptions {
  const { lazyConnect, enableOfflineQueue, enableReadyCheck, retryStrategy, ...perNode } = options;
  const tls = tlsOptions(t, settings.redisTls);
  return {
    redisOptions: {
      ...perNode,
      ...(t.username !== undefined ? { username: t.username } : {}),
      ...(t.password !== undefined ? { password: t.password } : {}),
      ...(tls ? { tls } : {}),
    },
    ...(lazyConnect !== undefined ? { lazyConnect } : {}),
    ...(enableOfflineQueue !== undefined ? { enableOfflineQueue } : {}),
    ...(enableReadyCheck !== undefined ? { enableReadyCheck } : {}),
    ...(retryStrategy ? { clusterRetryStrategy: retryStrategy } : {}),
    // Nodes are reached as the cluster announces them (by IP here): no DNS lookup of an address;
    // each node's certificate is verified against the address it is reached by.
    ...(tls ? { dnsLookup: (address, cb) => cb(null, address) } : {}),
  };
}

/**
 * A connection to the Redis `url` names. A Cluster comes back typed as Redis: the commands
 * patchbay and BullMQ send are the same on both, and every key of a queue is in one slot
 * (keyspaceQueueName), so nothing that needs one server's keyspace is sent to a Cluster.
 */
export function openRedis(url: string | RedisTarget, settings: RedisSettings, options: RedisOptions = {}): Redis {
  const t = typeof url === "string" ? parseRedisUrl(url) : url;
  if (t.mode === "cluster") return new Cluster(t.nodes, clusterOptions(t, settings, options)) as unknown as Redis;
  return new Redis(nodeOptions(t, settings, options));
}

/** Whether a connection from openRedis is a Cluster. */
export function isCluster(conn: Redis): boolean {
  return (conn as unknown as { isCluster?: boolean }).isCluster === true;
}

/** Another connection with the same settings (for a blocking read or a subscription), named. */
export function duplicateRedis(conn: Redis, connectionName: string): Redis {
  if (isCluster(conn)) {
    const c = conn as unknown as Cluster;
    return c.duplicate([], { redisOptions: { ...c.options.redisOptions, connectionName } }) as unknown as Redis;
  }
  return conn.duplicate({ connectionName });
}

/**
 * A connection ioredis ended on its own (it gave up on it: every later command fails with
 * "Connection is closed.") is connected again after `delayMs`, unless `closing()` says it was
 * ended on purpose. `onEnd` hears of each such end (a worker logs it).
 */
export function keepConnected(conn: Redis, closing: () => boolean, onEnd?: () => void, delayMs = 1000): void {
  conn.on("end", () => {
    if (closing()) return;
    onEnd?.();
    const again = setTimeout(
      () => void (!closing() && conn.status === "end" && conn.connect().catch(() => {})),
      delayMs,
    );
    again.unref?.();
  });
}

/** How many replicas a write that matters waits for (WAIT), and how long. */
export interface WaitSetting {
  replicas: number;
  timeoutMs: number;
}

/**
 * PATCHBAY_REDIS_WAIT_REPLICAS resolved for a target: "auto" is 1 behind Sentinel (a replica is
 * there to be promoted) and 0 elsewhere; on a Cluster always 0 (WAIT has no key: ioredis would send
 * it to any node, not the one that took the writes).
 */
export function waitSetting(
  setting: { replicas: "auto" | number; timeoutMs: number },
  t: Pick<RedisTarget, "mode">,
): WaitSetting {
  if (t.mode === "cluster" && setting.replicas !== "auto" && setting.replicas > 0) {
    throw new RedisConfigError(
      `PATCHBAY_REDIS_WAIT_REPLICAS=${setting.replicas} cannot work on a Redis Cluster (WAIT names no key, so it cannot be sent to the master that took the writes): set it to auto or 0`,
    );
  }
  const replicas =
    t.mode === "cluster" ? 0 : setting.replicas === "auto" ? (t.mode === "sentinel" ? 1 : 0) : setting.replicas;
  return { replicas, timeoutMs: Math.max(1, setting.timeoutMs) }; // WAIT with 0 would block for ever
}

/**
 * After writes that must outlive a failover, on the connection that made them: WAIT until
 * `replicas` have them. Replication is asynchronous, so a master that dies before that loses them;
 * when WAIT cannot confirm (it timed out, or was sent again to a newly promoted master after the
 * old one died), `recheck` looks for what was written and writes again what is missing. Returns
 * whether the replicas confirmed.
 */
export async function confirmWrites(conn: Redis, w: WaitSetting, recheck: () => Promise<void>): Promise<boolean> {
  if (w.replicas <= 0) return true;
  const acked = Number(await conn.call("WAIT", w.replicas, w.timeoutMs).catch(() => 0));
  if (acked >= w.replicas) return true;
  await recheck();
  return false;
}

/** A one-off connection to one sentinel of a target, without retries (the caller connects and disconnects it). */
export function sentinelConnection(
  t: RedisTarget,
  settings: RedisSettings,
  sentinel: HostPort,
  timeoutMs: number,
): Redis {
  const tls = tlsOptions(t, settings.redisTls);
  const r = new Redis({
    host: sentinel.host,
    port: sentinel.port,
    ...(t.sentinelPassword !== undefined ? { password: t.sentinelPassword } : {}),
    ...(tls ? { tls } : {}),
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  r.on("error", () => {}); // each call's own rejection says it
  return r;
}
