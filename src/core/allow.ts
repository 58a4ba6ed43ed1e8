// The setup phase's allow-list: entry syntax, host matching, IP literals and address classes.
// Pure: no I/O (BlockList is an in-memory matcher).
import { BlockList, isIP } from "node:net";

/** Named presets, resolved on the worker from each tool's own configuration (src/net/presets.ts). */
export const PRESET_NAMES = ["npm", "pypi", "debian", "go"] as const;
export type PresetName = (typeof PRESET_NAMES)[number];
export const isPresetName = (s: string): s is PresetName => (PRESET_NAMES as readonly string[]).includes(s);

/**
 * How a host is reached: a CONNECT tunnel (which carries TLS only) or a plain-HTTP request. An
 * entry without a port allows the one port of each: 443 for tunnels, 80 for plain HTTP.
 */
export type Via = "connect" | "http";
export const DEFAULT_PORT: Readonly<Record<Via, number>> = { connect: 443, http: 80 };
export const MAX_ALLOW_ENTRIES = 64;

export interface AllowRule {
  /** Lower-case host name without a trailing dot; for a wildcard, the suffix after "*.". */
  host: string;
  /** `*.example.org`: any name below example.org (not example.org itself). */
  wildcard: boolean;
  /** Only this port (both ways); undefined means DEFAULT_PORT's. */
  port?: number;
}

const LABEL_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
// getaddrinfo reads "127.1", "2130706433" and "0x7f.1" as IPv4 addresses; no real name has a
// numeric last label, so such a name is an IP literal too.
const NUMERIC_LABEL_RE = /^(?:0x[0-9a-f]*|[0-9]+)$/i;

/** A lower-case host name with no trailing dot, or undefined if it is not a valid DNS name. */
export function normalizeHost(raw: string): string | undefined {
  let h = raw.toLowerCase();
  if (h.endsWith(".")) h = h.slice(0, -1);
  if (h.length === 0 || h.length > 253) return undefined;
  return h.split(".").every((l) => LABEL_RE.test(l)) ? h : undefined;
}

/** An IPv4/IPv6 literal in any form a resolver would accept (brackets, numeric or hex labels). */
export function isIpLiteral(raw: string): boolean {
  const h = raw.replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "");
  if (isIP(h) !== 0 || h.includes(":")) return true;
  const last = h.split(".").at(-1) ?? "";
  return NUMERIC_LABEL_RE.test(last);
}

/** Parses one allow-list entry (`host`, `*.host`, either with `:port`); a string is the error. */
export function parseAllowEntry(entry: string): AllowRule | string {
  const m = /^(.*?)(?::(\d{1,5}))?$/.exec(entry.trim())!;
  const [hostPart, portPart] = [m[1]!, m[2]];
  const port = portPart === undefined ? undefined : Number(portPart);
  if (port !== undefined && (port < 1 || port > 65535)) return `bad port in ${JSON.stringify(entry)}`;
  if (/^[a-z]+:\/\//i.test(entry)) return `a host name, not a URL (got ${JSON.stringify(entry)})`;
  const wildcard = hostPart.startsWith("*.");
  const name = wildcard ? hostPart.slice(2) : hostPart;
  if (isIpLiteral(name)) return `IP addresses are not allowed, only host names (got ${JSON.stringify(entry)})`;
  const host = normalizeHost(name);
  if (!host) return `not a host name or preset (got ${JSON.stringify(entry)}; presets: ${PRESET_NAMES.join(", ")})`;
  // "*.com" would open a whole top-level domain.
  if (wildcard && !host.includes("."))
    return `a wildcard needs at least two labels after "*." (got ${JSON.stringify(entry)})`;
  return { host, wildcard, ...(port !== undefined ? { port } : {}) };
}

/** Why host:port may not be reached this way (`host` already normalized), or undefined when a rule allows it. */
export function refusal(rules: readonly AllowRule[], host: string, port: number, via: Via): string | undefined {
  const named = rules.filter((r) => (r.wildcard ? host.endsWith(`.${r.host}`) : host === r.host));
  if (!named.length) return "not on the allow-list";
  if (named.some((r) => (r.port ?? DEFAULT_PORT[via]) === port)) return undefined;
  const ports = [...new Set(named.map((r) => r.port ?? DEFAULT_PORT[via]))].sort((a, b) => a - b).join(", ");
  const what = via === "connect" ? "CONNECT" : "plain HTTP";
  return `port ${port}: ${what} only to port ${DEFAULT_PORT[via]} or a port an allow-list entry names (host:port); ${host} allows ${ports}`;
}

/** Whether host:port is allowed by the rules this way. `host` must already be normalized. */
export function isAllowed(rules: readonly AllowRule[], host: string, port: number, via: Via): boolean {
  return refusal(rules, host, port, via) === undefined;
}

// Which addresses are public: src/core/address-class.ts (the proxy checks each resolved address).
export { addressClass } from "./address-class.js";

/** A matcher for CIDR ranges (test-only exemptions of the proxy; never from a JobSpec). */
export function cidrMatcher(cidrs: readonly string[]): (ip: string) => boolean {
  const list = new BlockList();
  for (const c of cidrs) {
    const [net, prefix] = c.split("/");
    const fam = isIP(net ?? "");
    if (!fam || prefix === undefined) throw new Error(`not a CIDR range: ${c}`);
    list.addSubnet(net!, Number(prefix), fam === 4 ? "ipv4" : "ipv6");
  }
  return (ip) => {
    const fam = isIP(ip);
    return fam !== 0 && list.check(ip, fam === 4 ? "ipv4" : "ipv6");
  };
}
