// `patchbay doctor`'s Redis checks, each named: the connection, TLS, auth, eviction policy, and
// Sentinel's or the Cluster's view. What fails says which of them and what to do.
import { count, plural } from "../core/count.js";
import type { Redis } from "ioredis";
import type { Config } from "../core/config/config.js";
import { isCluster, sentinelConnection } from "../redis/connect.js";
import { probeRedisTarget, RedisConnectError } from "../redis/probe.js";
import type { HostPort, RedisTarget } from "../redis/target.js";
import { shownRedisUrl } from "../redis/url.js";

export interface RedisCheck {
  name: string;
  ok: boolean;
  required: boolean;
  detail: string;
  fix?: string;
}

const LOOPBACK = /^(127\.|localhost$|::1$|\[::1\]$)/;

/** The check a failed connection belongs to, from what failed. */
function failedCheck(err: Error): RedisCheck {
  const why = err instanceof RedisConnectError ? err.why : err.message;
  const name = /TLS|certificate/i.test(why)
    ? "redis tls"
    : /password|ACL user|refused .* a command/i.test(why)
      ? "redis auth"
      : /Sentinel/.test(why)
        ? "redis sentinel"
        : "redis";
  const fix = name === "redis" ? "run `npm run services` or set REDIS_URL" : undefined;
  return {
    name,
    ok: false,
    required: true,
    detail: err instanceof RedisConnectError ? `${err.shownUrl}: ${why}` : why,
    ...(fix ? { fix } : {}),
  };
}

/** Field `name` of an INFO section's text. */
function infoField(info: string, name: string): string | undefined {
  return new RegExp(`^${name}:(.*)$`, "m").exec(info)?.[1]?.trim();
}

export async function redisChecks(redisUrl: string, config: Pick<Config, "redisTls">): Promise<RedisCheck[]> {
  let probed: Awaited<ReturnType<typeof probeRedisTarget>>;
  try {
    probed = await probeRedisTarget(redisUrl, config, 2000);
  } catch (err) {
    return [failedCheck(err as Error)];
  }
  const { conn, target, master } = probed;
  try {
    const where = master
      ? `master ${master.host}:${master.port} of '${target.masterName}'`
      : target.mode === "cluster"
        ? `a Cluster (seeds ${target.nodes.length})`
        : `${target.nodes[0]!.host}:${target.nodes[0]!.port}`;
    const checks: RedisCheck[] = [
      { name: "redis", ok: true, required: true, detail: `${shownRedisUrl(redisUrl)}: ${where}` },
    ];
    if (target.tls)
      checks.push({
        name: "redis tls",
        ok: true,
        required: true,
        detail: `handshake done, certificate verified${config.redisTls?.ca || target.tlsFiles.ca ? " against the configured CA" : " against the system's CAs"}${config.redisTls?.cert || target.tlsFiles.cert ? "; client certificate sent" : ""}`,
      });
    checks.push(authCheck(target));
    checks.push(await evictionCheck(conn));
    if (target.mode === "sentinel") checks.push(await sentinelCheck(target, config, master!));
    if (isCluster(conn)) checks.push(await clusterCheck(conn));
    return checks;
  } finally {
    conn.disconnect();
  }
}

function authCheck(t: RedisTarget): RedisCheck {
  if (t.password !== undefined)
    return {
      name: "redis auth",
      ok: true,
      required: true,
      detail: `authenticated as ${t.username ? `ACL user '${t.username}'` : "the default user"}`,
    };
  const local = t.nodes.every((n) => LOOPBACK.test(n.host));
  return local
    ? { name: "redis auth", ok: true, required: false, detail: "no password (Redis on loopback)" }
    : {
        name: "redis auth",
        ok: false,
        required: false,
        detail: "no password: anyone who reaches this Redis can read and change every job",
        fix: "set a password (requirepass or an ACL user) and put it in REDIS_URL: redis://USER:PASSWORD@HOST:PORT",
      };
}

async function evictionCheck(conn: Redis): Promise<RedisCheck> {
  // INFO, not CONFIG GET: managed Redis and ACL users without +@admin may not run CONFIG.
  const info = await conn.info("memory").catch((err: Error) => err);
  if (info instanceof Error)
    return {
      name: "redis eviction",
      ok: false,
      required: false,
      detail: `INFO memory refused: ${info.message.slice(0, 160)}`,
      fix: "let the user run INFO, and set maxmemory-policy noeviction",
    };
  const policy = infoField(info, "maxmemory_policy") ?? "unknown";
  const max = infoField(info, "maxmemory_human");
  return policy === "noeviction"
    ? {
        name: "redis eviction",
        ok: true,
        required: false,
        detail: `maxmemory-policy noeviction${max && max !== "0B" ? `, maxmemory ${max}` : ", no maxmemory"}`,
      }
    : {
        name: "redis eviction",
        ok: false,
        required: false,
        detail: `maxmemory-policy is ${policy}`,
        fix: "BullMQ needs `maxmemory-policy noeviction` or jobs can vanish",
      };
}

async function sentinelCheck(t: RedisTarget, config: Pick<Config, "redisTls">, master: HostPort): Promise<RedisCheck> {
  const views: string[] = [];
  for (const s of t.nodes) {
    const r = sentinelConnection(t, config, s, 2000);
    try {
      await r.connect();
      const addr = (await r.call("SENTINEL", "get-master-addr-by-name", t.masterName!)) as string[] | null;
      const replicas = ((await r.call("SENTINEL", "replicas", t.masterName!)) as unknown[]).length;
      const quorum = await r.call("SENTINEL", "ckquorum", t.masterName!).then(
        () => "quorum ok",
        (e: Error) => `quorum: ${e.message.slice(0, 80)}`,
      );
      views.push(
        `${s.host}:${s.port} says ${addr ? `${addr[0]}:${addr[1]}` : "none"}, ${count(replicas, "replica")}, ${quorum}`,
      );
    } catch (err) {
      views.push(`${s.host}:${s.port} does not answer (${(err as Error).message.slice(0, 80)})`);
    } finally {
      r.disconnect();
    }
  }
  const agree = views.every((v) => v.includes(`says ${master.host}:${master.port},`) && v.includes("quorum ok"));
  return {
    name: "redis sentinel",
    ok: agree,
    required: false,
    detail: `master '${t.masterName}': ${views.join("; ")}`,
    ...(agree
      ? {}
      : { fix: "every sentinel should answer, name the same master and reach its quorum (SENTINEL ckquorum)" }),
  };
}

async function clusterCheck(conn: Redis): Promise<RedisCheck> {
  const info = (await conn.call("CLUSTER", "INFO")) as string;
  const state = infoField(info, "cluster_state");
  const masters = infoField(info, "cluster_size");
  return {
    name: "redis cluster",
    ok: state === "ok",
    required: true,
    detail: `cluster_state ${state}, ${masters ?? "?"} ${plural(Number(masters), "master")} serving slots; each queue's keys share one slot ({queue})`,
    ...(state === "ok" ? {} : { fix: "every slot must be served: see CLUSTER INFO and redis-cli --cluster check" }),
  };
}
