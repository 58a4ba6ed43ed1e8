// Which Redis a URL names: one server, a Sentinel group's master, or a Cluster; TLS or not; the ACL
// user and password; TLS files named in its query. Pure: no I/O (src/redis/connect.ts connects).
//
//   redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]                      one server (rediss:// with TLS)
//   redis+sentinel://[USER[:PASSWORD]@]HOST:PORT,HOST:PORT/MASTER[/DB]  the master Sentinel names
//   redis+cluster://[USER[:PASSWORD]@]HOST:PORT,HOST:PORT            a Cluster, from seed nodes
//
// rediss+sentinel:// and rediss+cluster:// use TLS to every node (and to the sentinels). The query
// may name `ca`, `cert` and `key` files (TLS), `sentinelPassword` and, as ioredis reads them,
// `password` and `db`.
import { kinded } from "../core/errors.js";
import { shownRedisUrl, userinfoEnd } from "./url.js";

/** A Redis URL that does not say which Redis (its message names the part and shows the forms). */
export class RedisUrlError extends kinded("config") {}

export type RedisMode = "single" | "sentinel" | "cluster";

export interface HostPort {
  host: string;
  port: number;
}

export interface RedisTlsFiles {
  ca?: string;
  cert?: string;
  key?: string;
}

/** Where a REDIS_URL points: one server, a Sentinel group or a Cluster, and how to log in. */
export interface RedisTarget {
  /** One server, a Sentinel group, or a Cluster. */
  mode: RedisMode;
  /** Whether the connections use TLS (rediss…). */
  tls: boolean;
  /** single: the server; sentinel: the sentinels; cluster: the seed nodes. */
  nodes: HostPort[];
  /** sentinel: the master's name as the sentinels know it. */
  masterName?: string;
  /** The ACL user, where the URL names one. */
  username?: string;
  /** The password, where the URL has one. */
  password?: string;
  /** The sentinels' own password, where they have one. */
  sentinelPassword?: string;
  /** The database number (0 on a Cluster). */
  db: number;
  /** TLS files the URL's query names (the environment's PATCHBAY_REDIS_TLS_* fill what it does not). */
  tlsFiles: RedisTlsFiles;
}

export const REDIS_URL_FORMS =
  "redis://[USER:PASSWORD@]HOST:PORT[/DB], redis+sentinel://[USER:PASSWORD@]HOST:PORT,…/MASTER[/DB] or redis+cluster://[USER:PASSWORD@]HOST:PORT,… (rediss… with TLS)";

const SCHEME = /^(rediss?)(?:\+(sentinel|cluster))?:\/\/(.*)$/i;
const QUERY_KEYS = ["ca", "cert", "key", "password", "db", "sentinelPassword"] as const;
const DEFAULT_PORT: Record<RedisMode, number> = { single: 6379, sentinel: 26379, cluster: 6379 };

/** The target a URL names, or a RedisUrlError naming what is wrong (never the password). */
export function parseRedisUrl(url: string): RedisTarget {
  const shown = shownRedisUrl(url).slice(0, 200);
  const bad = (what: string) => new RedisUrlError(`Redis URL ${shown}: ${what}; the forms are ${REDIS_URL_FORMS}`);
  const m = SCHEME.exec(url);
  if (!m) throw bad("not a redis://, rediss://, redis+sentinel:// or redis+cluster:// URL");
  const tls = m[1]!.toLowerCase() === "rediss";
  const mode = (m[2]?.toLowerCase() ?? "single") as RedisMode;
  let rest = m[3]!;
  // The user part first (a password may hold ? and #), then the query (shownRedisUrl splits alike).
  const at = userinfoEnd(rest);
  const userinfo = at < 0 ? undefined : rest.slice(0, at);
  rest = rest.slice(at + 1);
  const q = rest.indexOf("?");
  const query = new URLSearchParams(q < 0 ? "" : rest.slice(q + 1));
  if (q >= 0) rest = rest.slice(0, q);
  const slash = rest.indexOf("/");
  const hosts = slash < 0 ? rest : rest.slice(0, slash);
  const path =
    slash < 0
      ? []
      : rest
          .slice(slash + 1)
          .split("/")
          .filter((s) => s !== "");
  const t: RedisTarget = { mode, tls, nodes: hostList(hosts, DEFAULT_PORT[mode], bad), db: 0, tlsFiles: {} };
  if (mode === "single" && t.nodes.length > 1) throw bad("several hosts: use redis+sentinel:// or redis+cluster://");
  if (userinfo !== undefined) readUserinfo(userinfo, t, bad);
  readPath(path, t, bad);
  readQuery(query, t, bad);
  if (!tls && (t.tlsFiles.ca || t.tlsFiles.cert || t.tlsFiles.key)) throw bad("TLS files without TLS: use rediss://");
  return t;
}

function decode(s: string, bad: (w: string) => Error, what: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw bad(`its ${what} has a bad %-escape`);
  }
}

function hostList(s: string, defaultPort: number, bad: (w: string) => Error): HostPort[] {
  if (s === "") throw bad("no host");
  return s.split(",").map((part) => {
    const m = /^(?:\[([0-9a-f:.]+)\]|([a-z0-9._-]+))(?::(\d{1,5}))?$/i.exec(part);
    const port = m?.[3] === undefined ? defaultPort : Number(m[3]);
    if (!m || port < 1 || port > 65535) throw bad(`'${part.slice(0, 80)}' is not HOST:PORT`);
    return { host: m[1] ?? m[2]!, port };
  });
}

function readUserinfo(s: string, t: RedisTarget, bad: (w: string) => Error): void {
  const colon = s.indexOf(":");
  const user = decode(colon < 0 ? s : s.slice(0, colon), bad, "user");
  if (colon >= 0) t.password = decode(s.slice(colon + 1), bad, "password");
  // redis://PASSWORD@host (no colon) is ioredis' and redis-cli's old form: a password, user default.
  else if (user !== "") t.password = user;
  if (colon >= 0 && user !== "") t.username = user;
}

function readPath(path: string[], t: RedisTarget, bad: (w: string) => Error): void {
  if (t.mode === "sentinel") {
    const name = path.shift();
    if (name === undefined) throw bad("no master name after the sentinels (…/MASTER)");
    t.masterName = decode(name, bad, "master name");
  }
  if (t.mode === "cluster" && path.length > 0) throw bad("a Cluster has only database 0: no /DB");
  const db = path.shift();
  if (db !== undefined) t.db = dbNumber(db, bad);
  if (path.length > 0)
    throw bad(`'/${path.join("/").slice(0, 40)}' after the ${t.mode === "sentinel" ? "master name and " : ""}database`);
}

function dbNumber(s: string, bad: (w: string) => Error): number {
  if (!/^\d{1,5}$/.test(s)) throw bad(`database '${s.slice(0, 20)}' is not a number`);
  return Number(s);
}

function readQuery(query: URLSearchParams, t: RedisTarget, bad: (w: string) => Error): void {
  const seen = new Set<string>();
  for (const [k, v] of query) {
    if (!(QUERY_KEYS as readonly string[]).includes(k))
      throw bad(`unknown option '${k.slice(0, 40)}' (known: ${QUERY_KEYS.join(", ")})`);
    if (seen.has(k)) throw bad(`'${k}' given twice`);
    seen.add(k);
    if (k === "password" && t.password !== undefined) throw bad("a password both before the host and in ?password=");
    if (k === "db" && t.db !== 0) throw bad("a database both in the path and in ?db=");
    if (k === "ca" || k === "cert" || k === "key") t.tlsFiles[k] = v;
    else if (k === "password") t.password = v;
    else if (k === "sentinelPassword") {
      if (t.mode !== "sentinel") throw bad("sentinelPassword without redis+sentinel://");
      t.sentinelPassword = v;
    } else if (t.mode === "cluster") throw bad("a Cluster has only database 0: no db=");
    else t.db = dbNumber(v, bad);
  }
}

/**
 * The queue's name as it goes into keys: on a Cluster, hash-tagged (`{fix}`) so every key of the
 * queue — BullMQ's and patchbay's — hashes to one slot, as their multi-key scripts and
 * transactions need. A name that already has a tag is kept; elsewhere names are as given.
 */
export function keyspaceQueueName(queueName: string, target: Pick<RedisTarget, "mode">): string {
  if (target.mode !== "cluster" || /\{[^}]+\}/.test(queueName)) return queueName;
  return `{${queueName}}`;
}
