// The egress proxy's limits and its records (one per connection or request, each an `egress`
// event), bounded where they are made: the host, method and reason come from the sandbox (a raw
// CONNECT target can be 16 KiB of anything) and end up in Redis, the CLI and the dashboard.
// Pure.

export interface EgressLimits {
  /** Open connections per job at once (client side). */
  maxConnections: number;
  /** Bytes up + down per job. */
  maxBytes: number;
  /** A connection with no traffic either way for this long is closed. */
  idleMs: number;
  /** A connection open this long is closed whatever it does. */
  totalMs: number;
  connectMs: number;
  dnsMs: number;
  /** Request and response heads. */
  headerBytes: number;
  /** A CONNECT tunnel's TLS ClientHello must be complete this long after the 200. */
  helloMs: number;
}

export const DEFAULT_EGRESS_LIMITS: EgressLimits = {
  maxConnections: 64,
  maxBytes: 2 * 1024 ** 3,
  idleMs: 60_000,
  totalMs: 15 * 60_000,
  connectMs: 15_000,
  dnsMs: 10_000,
  headerBytes: 16 * 1024,
  helloMs: 10_000,
};

export interface EgressRecord {
  host: string;
  port: number;
  method: string;
  allowed: boolean;
  reason?: string;
  /** The address connected to. */
  address?: string;
  status?: number;
  /** A request's path inside a terminated tunnel, without its query. */
  path?: string;
  /** The name of the credential the proxy added to the request (never its value). */
  credential?: string;
  bytesUp: number;
  bytesDown: number;
  ms: number;
}

/** Longest field kept, in bytes (all printable ASCII once bounded). A DNS name is at most 253. */
export const RECORD_BOUNDS = { host: 253, method: 24, reason: 400, address: 64, path: 400, credential: 64 } as const;

/**
 * `s` as printable ASCII of at most `max` bytes: other characters become "?" (nothing from the
 * sandbox reaches a terminal or a page as a control sequence), and a longer value is cut with "...".
 */
export function bounded(s: string, max: number, spaces = false): string {
  const head = s.length > max ? s.slice(0, max - 3) : s;
  const clean = head.replace(spaces ? /[^\x20-\x7e]/g : /[^\x21-\x7e]/g, "?");
  return s.length > max ? `${clean}...` : clean;
}

/** The record with every string field bounded and the port a valid number. */
export function boundRecord(r: EgressRecord): EgressRecord {
  const out: EgressRecord = {
    ...r,
    host: bounded(r.host, RECORD_BOUNDS.host),
    port: Number.isInteger(r.port) && r.port >= 0 && r.port <= 65535 ? r.port : 0,
    method: bounded(r.method, RECORD_BOUNDS.method),
  };
  if (r.reason !== undefined) out.reason = bounded(r.reason, RECORD_BOUNDS.reason, true);
  if (r.address !== undefined) out.address = bounded(r.address, RECORD_BOUNDS.address);
  if (r.path !== undefined) out.path = bounded(r.path.replace(/[?#].*$/s, ""), RECORD_BOUNDS.path);
  if (r.credential !== undefined) out.credential = bounded(r.credential, RECORD_BOUNDS.credential);
  return out;
}
