// Which hosts are forges, where their APIs are, and their tokens: parsed from the environment that
// src/core/config/config.ts was given. Tokens stay in a closure (`token(host)`), so a Config printed or sent
// anywhere carries none; a token goes only to the host it was given for (GITHUB_TOKEN to github.com,
// GITLAB_TOKEN to gitlab.com, PATCHBAY_FORGE_TOKEN_<HOST> to that host alone). Pure.
export type ForgeHostKind = "github" | "gitlab";

export interface ForgeHost {
  /** As in the repositories' git URLs: `github.com`, `ghe.example.com`, `127.0.0.1:8080`. */
  host: string;
  kind: ForgeHostKind;
  /** The REST API's base: `https://api.github.com`, `https://ghe.example.com/api/v3`, `https://gitlab.example.com`. */
  apiUrl: string;
}

export interface ForgeSettings {
  hosts: readonly ForgeHost[];
  /** The token for a host, if one was given for it. */
  token(host: string): string | undefined;
}

const DEFAULT_HOSTS: ForgeHost[] = [
  { host: "github.com", kind: "github", apiUrl: "https://api.github.com" },
  { host: "gitlab.com", kind: "gitlab", apiUrl: "https://gitlab.com" },
];

/** The environment variable holding a host's token: PATCHBAY_FORGE_TOKEN_ and the host, upper case, other characters as `_`. */
export const tokenVariable = (host: string): string =>
  `PATCHBAY_FORGE_TOKEN_${host.toUpperCase().replace(/[^A-Z0-9]/g, "_")}`;

/**
 * `PATCHBAY_FORGES`: `HOST=github@API_URL,HOST=gitlab@API_URL` (comma-separated; API_URL is
 * http(s); HOST as in the git URLs, with its port if any). The defaults (github.com, gitlab.com)
 * stay unless an entry names their host. A bad list: the message naming the entry.
 */
export function parseForges(text: string | undefined): ForgeHost[] | string {
  const out = [...DEFAULT_HOSTS];
  const entries = (text ?? "")
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);
  const named = new Set<string>();
  for (const [i, entry] of entries.entries()) {
    const m = /^([A-Za-z0-9.-]+(?::\d{1,5})?)=(github|gitlab)@(\S+)$/.exec(entry);
    if (!m)
      return `entry ${i + 1} must be HOST=github@API_URL or HOST=gitlab@API_URL, not ${JSON.stringify(entry.slice(0, 100))}`;
    let api: URL;
    try {
      api = new URL(m[3]!);
    } catch {
      return `entry ${i + 1} (${m[1]}): ${JSON.stringify(m[3]!.slice(0, 100))} is not a URL`;
    }
    if (!/^https?:$/.test(api.protocol) || api.username || api.password)
      return `entry ${i + 1} (${m[1]}): the API URL must be http(s) without credentials`;
    const host = m[1]!.toLowerCase();
    if (named.has(host)) return `entry ${i + 1} (${host}): the host is named twice`;
    named.add(host);
    const at = out.findIndex((h) => h.host === host);
    const entryHost: ForgeHost = { host, kind: m[2] as ForgeHostKind, apiUrl: api.href.replace(/\/+$/, "") };
    if (at >= 0) out[at] = entryHost;
    else out.push(entryHost);
  }
  return out;
}

/** The settings: the hosts, and a token lookup over the environment's values, read once here. */
export function forgeSettings(hosts: ForgeHost[], env: Readonly<Record<string, string | undefined>>): ForgeSettings {
  const tokens = new Map<string, string>();
  for (const h of hosts) {
    const own = env[tokenVariable(h.host)];
    const general = h.host === "github.com" ? env.GITHUB_TOKEN : h.host === "gitlab.com" ? env.GITLAB_TOKEN : undefined;
    const t = own || general;
    if (t) tokens.set(h.host, t);
  }
  return { hosts: Object.freeze(hosts), token: (host) => tokens.get(host.toLowerCase()) };
}
