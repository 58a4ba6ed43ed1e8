// What a dashboard runs with: its options resolved against the Config (src/core/config/config.ts parses the
// environment; nothing here reads it), checked once before anything listens or connects.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Config } from "../core/config/config.js";
import { isLoopback } from "./auth.js";
import { kinded } from "../core/errors.js";

export interface DashboardOptions {
  host?: string;
  port?: number;
  redisUrl?: string;
  queueName?: string;
  /** Default: the config's dashboardToken (PATCHBAY_DASHBOARD_TOKEN); on loopback a random one when that is unset. */
  token?: string;
  /** Serve HTTPS with this certificate and key (PEM); default: the files PATCHBAY_DASHBOARD_TLS_CERT/_KEY name. */
  tls?: { cert: string | Buffer; key: string | Buffer };
  /**
   * Serve reads (GET, HEAD: pages, transcripts, /metrics, the API's reads) without a token to a
   * loopback peer whose request carries no proxy header; a loopback bind only. Off by default: a
   * reverse proxy on the same host is a loopback peer too, and may send no header saying so.
   */
  loopbackReads?: boolean;
  /** Live transcripts served at once; default PATCHBAY_DASHBOARD_MAX_STREAMS (64). */
  maxStreams?: number;
  /** The parsed environment; default: loadConfig() at start. */
  config?: Config;
}

export class DashboardConfigError extends kinded("config") {}

export interface DashboardSettings {
  host: string;
  port: number;
  loopback: boolean;
  /** Tokenless reads opened (DashboardOptions.loopbackReads), on a loopback bind. */
  openReads: boolean;
  token: string;
  /** Whether the token was made up here (then the caller should show it). */
  generatedToken: boolean;
  tls?: { cert: string | Buffer; key: string | Buffer };
  maxStreams: number;
  redisUrl: string;
  queueName: string;
  /** A spec's model when it names none (PATCHBAY_MODEL), for the rows. */
  defaultModel: string;
}

function tlsFiles(opts: DashboardOptions, config: Config): DashboardSettings["tls"] {
  if (opts.tls) return opts.tls;
  const t = config.dashboardTls;
  if (!t) return undefined;
  if (!t.cert || !t.key)
    throw new DashboardConfigError(
      "HTTPS needs both PATCHBAY_DASHBOARD_TLS_CERT and PATCHBAY_DASHBOARD_TLS_KEY (PEM files); one of them is unset",
    );
  try {
    return { cert: readFileSync(t.cert), key: readFileSync(t.key) };
  } catch (err) {
    throw new DashboardConfigError(`cannot read the dashboard's TLS files: ${(err as Error).message}`);
  }
}

/** The settings, or a DashboardConfigError saying what to set. */
export function dashboardSettings(opts: DashboardOptions, config: Config): DashboardSettings {
  const host = opts.host ?? "127.0.0.1";
  const loopback = isLoopback(host);
  const given = opts.token ?? config.dashboardToken;
  if (!loopback && !given)
    throw new DashboardConfigError(`binding ${host} (not loopback) needs a token: set PATCHBAY_DASHBOARD_TOKEN`);
  if (opts.loopbackReads && !loopback)
    throw new DashboardConfigError(`tokenless reads (--loopback-reads) need a loopback bind, not ${host}`);
  if (given !== undefined && given.length < 16)
    throw new DashboardConfigError("PATCHBAY_DASHBOARD_TOKEN must be at least 16 characters");
  const tls = tlsFiles(opts, config);
  return {
    host,
    port: opts.port ?? 7474,
    loopback,
    openReads: opts.loopbackReads === true,
    token: given ?? randomBytes(24).toString("base64url"),
    generatedToken: given === undefined,
    ...(tls ? { tls } : {}),
    maxStreams: opts.maxStreams ?? config.dashboardMaxStreams,
    redisUrl: opts.redisUrl ?? config.redisUrl,
    queueName: opts.queueName || config.queueName, // empty: the default, as the client takes it
    defaultModel: config.model,
  };
}
