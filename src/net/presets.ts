// Presets: the hosts a package tool uses, read from that tool's own configuration on the worker
// host, so no registry host is written into patchbay. The parsers are pure; resolvePresets does
// the reading (bounded child processes and small files).
import { execFile } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { isPresetName, normalizeHost, type PresetName } from "../core/allow.js";
import type { Config } from "../core/config/config.js";
import { kinded } from "../core/errors.js";

/** What the presets read of the worker's host: its environment (for npm, go, python) and pip's settings. */
export type PresetEnv = Pick<Config, "hostEnv" | "pip">;

/** The host of an http(s) URL, normalized, or undefined. */
export function urlHost(raw: string): string | undefined {
  try {
    const u = new URL(raw.trim());
    if (u.protocol !== "http:" && u.protocol !== "https:") return undefined;
    return normalizeHost(u.hostname);
  } catch {
    return undefined;
  }
}

const uniq = (xs: (string | undefined)[]) => [...new Set(xs.filter((x): x is string => Boolean(x)))];

/** Hosts of `deb` lines (one-line format) and `URIs:` fields (deb822 .sources files). */
export function aptSourceHosts(text: string): string[] {
  const out: (string | undefined)[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*/, "").trim();
    const one = /^deb(?:-src)?\s+(?:\[[^\]]*\]\s+)?(\S+)/.exec(line);
    if (one) out.push(urlHost(one[1]!));
    const uris = /^URIs:\s*(.*)$/i.exec(line);
    if (uris) for (const u of uris[1]!.split(/\s+/)) out.push(urlHost(u));
  }
  return uniq(out);
}

/** index-url and extra-index-url of a pip.conf (any section: global, install, download). */
export function pipConfHosts(text: string): string[] {
  const out: (string | undefined)[] = [];
  let inIndexValue = false;
  for (const raw of text.split("\n")) {
    const line = raw.replace(/^\s*[#;].*/, "");
    const kv = /^([a-z-]+)\s*[=:]\s*(.*)$/i.exec(line); // keys start a line; continuations are indented
    if (kv) {
      inIndexValue = /index-url$/i.test(kv[1]!);
      if (inIndexValue) for (const u of kv[2]!.split(/\s+/)) out.push(urlHost(u));
    } else if (inIndexValue && /^\s+\S/.test(line)) {
      // a continuation line of a multi-line extra-index-url value
      for (const u of line.trim().split(/\s+/)) out.push(urlHost(u));
    } else if (/^\s*\[/.test(line)) inIndexValue = false;
  }
  return uniq(out);
}

/** GOPROXY's list (comma or pipe separated; `direct` and `off` are not hosts) and GOSUMDB's server. */
export function goEnvHosts(goproxy: string, gosumdb: string): string[] {
  const proxies = goproxy.split(/[,|]/).map((p) => urlHost(p));
  // GOSUMDB is "name[+key] [url]": the url when given, else the name is the host.
  const [name, url] = gosumdb.trim().split(/\s+/);
  const sum = url ? urlHost(url) : name && name !== "off" ? normalizeHost(name.split("+")[0]!) : undefined;
  return uniq([...proxies, sum]);
}

export class PresetError extends kinded("setup") {}

const execFileP = promisify(execFile);
async function run(host: PresetEnv, cmd: string, args: string[]): Promise<string> {
  const { stdout } = await execFileP(cmd, args, { timeout: 15_000, maxBuffer: 1 << 20, env: { ...host.hostEnv } });
  return stdout;
}
const readSmall = (p: string) =>
  readFile(p, "utf8").then(
    (t) => t.slice(0, 1 << 20),
    () => "",
  );

async function npmHosts(env: PresetEnv): Promise<string[]> {
  const registry = await run(env, "npm", ["config", "get", "registry"]).catch((e: Error) => {
    throw new PresetError(`preset npm: \`npm config get registry\` failed on the worker: ${e.message.split("\n")[0]}`);
  });
  const host = urlHost(registry);
  if (!host)
    throw new PresetError(`preset npm: npm's registry is not an http(s) URL: ${JSON.stringify(registry.trim())}`);
  return [host];
}

// pip's own default index when nothing is configured: asked of pip itself, not written here.
const PIP_DEFAULT =
  "from pip._internal.models.index import PyPI\nprint(PyPI.url)\nprint('https://' + PyPI.file_storage_domain + '/')";

async function pypiHosts(host: PresetEnv): Promise<string[]> {
  const env = [host.pip.indexUrl, ...host.pip.extraIndexUrls].map((u) => (u ? urlHost(u) : undefined));
  const files = [
    host.pip.configFile,
    "/etc/pip.conf",
    "/etc/xdg/pip/pip.conf",
    join(homedir(), ".pip/pip.conf"),
    join(homedir(), ".config/pip/pip.conf"),
  ];
  const conf = (await Promise.all(files.map((f) => (f ? readSmall(f) : Promise.resolve(""))))).flatMap(pipConfHosts);
  const configured = uniq([...env, ...conf]);
  if (configured.length) return configured;
  const out = await run(host, "python3", ["-c", PIP_DEFAULT]).catch((e: Error) => {
    throw new PresetError(
      `preset pypi: no index configured for pip and pip's default could not be read: ${e.message.split("\n")[0]}`,
    );
  });
  return uniq(out.split("\n").map(urlHost));
}

async function debianHosts(): Promise<string[]> {
  const dir = "/etc/apt/sources.list.d";
  const names = await readdir(dir).catch(() => [] as string[]);
  const paths = ["/etc/apt/sources.list", ...names.filter((n) => /\.(list|sources)$/.test(n)).map((n) => join(dir, n))];
  const hosts = uniq((await Promise.all(paths.map(readSmall))).flatMap(aptSourceHosts));
  if (!hosts.length)
    throw new PresetError("preset debian: no apt sources on the worker (/etc/apt/sources.list, sources.list.d)");
  return hosts;
}

async function goHosts(host: PresetEnv): Promise<string[]> {
  const out = await run(host, "go", ["env", "GOPROXY", "GOSUMDB"]).catch((e: Error) => {
    throw new PresetError(`preset go: \`go env\` failed on the worker: ${e.message.split("\n")[0]}`);
  });
  const [goproxy = "", gosumdb = ""] = out.split("\n");
  return goEnvHosts(goproxy, gosumdb);
}

const READERS: Record<PresetName, (host: PresetEnv) => Promise<string[]>> = {
  npm: npmHosts,
  pypi: pypiHosts,
  debian: debianHosts,
  go: goHosts,
};
const cache = new Map<PresetName, { at: number; hosts: Promise<string[]> }>();
const CACHE_MS = 5 * 60_000;

/** The hosts of a preset, read from the worker's configuration (cached for a few minutes). */
export function presetHosts(name: PresetName, host: PresetEnv, now = Date.now()): Promise<string[]> {
  const hit = cache.get(name);
  if (hit && now - hit.at < CACHE_MS) return hit.hosts;
  const hosts = READERS[name](host);
  cache.set(name, { at: now, hosts });
  hosts.catch(() => cache.delete(name));
  return hosts;
}

/** Expands presets in an allow-list; other entries are kept as they are. */
export async function expandPresets(entries: readonly string[], host: PresetEnv): Promise<string[]> {
  const out = await Promise.all(entries.map((e) => (isPresetName(e) ? presetHosts(e, host) : Promise.resolve([e]))));
  return [...new Set(out.flat())];
}
