// Where a job's repo comes from, as the host that reads it sees it: one rule for every source.
//
// A source that names the worker's own file system, in any form, is "local": `{ path }`,
// `{ archive }`, and a `{ git }` value that git itself would read as a path (an absolute or relative
// path, `/x/.git`, `file:` URLs, a `host:path` whose first `/` comes before its first `:`). Every
// other `{ git }` value is "remote" (https, http, ssh, git, and scp-like `[user@]host:path`) with
// the host git would connect to, or "unsupported": a transport helper (`ext::`, `fd::`, any
// `name::`), another scheme, a value that starts with `-`, an authority git and curl might read
// differently (a backslash, a space, a second `@`). classifySource follows git's own rules
// (transport.c, connect.c url_is_local_not_ssh) and is pure.
//
// A local source is then held to a list of roots by checkLocalPath: lexically first (a path not
// under a root is refused before the file system is touched), then through its symlinks (the real
// path, or for a path that is not there the real path of its nearest existing parent), so a
// symlink out of a root is refused whether or not its target exists. The refusal is one and the
// same whatever the path, so it tells nothing of what exists outside the roots.
// The HTTP API (src/web/api/sources.ts) and the worker (src/job/repo/source-check.ts) both call these.
import { lstatSync, readlinkSync, realpathSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

export type SourceField = "path" | "archive" | "git";

export type SourceClass =
  /** The worker's file system: `path` as given (a file: URL's path), absolute or not. */
  | { kind: "local"; field: SourceField; path: string }
  /** A git server: its host as git connects to it (lower case), and its port if the URL names one. */
  | { kind: "remote"; field: "git"; scheme: "https" | "http" | "ssh" | "git"; host: string; port?: string }
  /** A `{ git }` value no worker clones; `why` says what it is. */
  | { kind: "unsupported"; field: "git"; why: string };

const SCHEMES: Record<string, "https" | "http" | "ssh" | "git"> = {
  https: "https",
  http: "http",
  ssh: "ssh",
  "git+ssh": "ssh",
  "ssh+git": "ssh",
  git: "git",
};
// userinfo (no `@`, `/`, `\`, space or control), a DNS name or IPv4 or [IPv6], a port.
const AUTHORITY =
  /^(?:[^@/\\?#\s\u0000-\u001f\u007f]*@)?(\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?)(?::(\d{1,5}))?$/i;
// scp-like `[user@]host:path`: what ssh would be run with.
const SCP_HOST = /^(?:[a-z0-9._-]+@)?([a-z0-9](?:[a-z0-9._-]*[a-z0-9])?)$/i;

/** What a `{ git }` value is to git: a path, a server, or neither. */
export function classifyGit(url: string): SourceClass {
  const no = (why: string): SourceClass => ({ kind: "unsupported", field: "git", why });
  if (url.startsWith("-")) return no("it starts with '-', which git would read as an option");
  if (/[\u0000-\u001f\u007f]/.test(url)) return no("it holds a control character");
  const helper = /^([a-z][a-z0-9+.-]*)::/i.exec(url);
  if (helper)
    return no(`it names git's transport helper "${helper[1]!.slice(0, 40)}::", which runs a program on the worker`);
  if (/^file:/i.test(url)) {
    try {
      return { kind: "local", field: "git", path: fileURLToPath(url) };
    } catch {
      return no("it is not a local file: URL");
    }
  }
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url);
  if (scheme) {
    const name = SCHEMES[scheme[1]!.toLowerCase()];
    if (!name) return no(`its scheme "${scheme[1]!.slice(0, 40)}" is not one a worker clones (https, http, ssh, git)`);
    const rest = url.slice(scheme[0].length);
    const authority = rest.slice(0, rest.search(/[/?#]|$/));
    const m = AUTHORITY.exec(authority);
    if (!m) return no("its host part is not a plain [user@]host[:port]");
    return { kind: "remote", field: "git", scheme: name, host: m[1]!.toLowerCase(), ...(m[2] ? { port: m[2] } : {}) };
  }
  // git's url_is_local_not_ssh: no ':' at all, or a '/' before the first one, is a path.
  const colon = url.indexOf(":");
  const slash = url.indexOf("/");
  if (colon < 0 || (slash >= 0 && slash < colon)) return { kind: "local", field: "git", path: url };
  const m = SCP_HOST.exec(url.slice(0, colon));
  if (!m) return no("its host part (before ':') is not a plain [user@]host");
  return { kind: "remote", field: "git", scheme: "ssh", host: m[1]!.toLowerCase() };
}

/** What a spec's `repo` is, or undefined when it is no repo source at all (the spec's parser says why). */
export function classifySource(repo: unknown): SourceClass | undefined {
  if (typeof repo !== "object" || repo === null) return undefined;
  const r = repo as Record<string, unknown>;
  if (typeof r.path === "string") return { kind: "local", field: "path", path: r.path };
  if (typeof r.archive === "string") return { kind: "local", field: "archive", path: r.archive };
  if (typeof r.git === "string") return classifyGit(r.git);
  return undefined;
}

const within = (p: string, root: string) => p === root || p.startsWith(root.endsWith(sep) ? root : root + sep);

/**
 * The real path of p, or of its nearest existing parent with the rest appended; undefined when it
 * cannot be resolved (a loop, no permission, over 40 links). A dangling symlink on the way counts
 * as where it points, not as itself: a link inside a root to a missing path outside it is outside
 * (its target could be made between the check and the read).
 */
function realish(p: string, links = 0): string | undefined {
  if (links > 40) return undefined;
  try {
    return realpathSync.native(p);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "ENOENT" && code !== "ENOTDIR") return undefined;
    const link = danglingTarget(p);
    if (link !== undefined) return realish(resolve(dirname(p), link), links + 1);
    const parent = dirname(p);
    if (parent === p) return undefined;
    const up = realish(parent, links + 1);
    return up === undefined ? undefined : join(up, basename(p));
  }
}

/** What p says, where p itself is a symlink (one realpath could not follow: its target is missing). */
function danglingTarget(p: string): string | undefined {
  try {
    return lstatSync(p).isSymbolicLink() ? readlinkSync(p) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The real path to read for a local source under one of the roots, or undefined (refused). A
 * relative path is refused (it would mean the reader's working directory), and so is one whose
 * path or real path is outside every root. Nothing is read for a path outside the roots as given.
 */
export function checkLocalPath(given: string, roots: readonly string[]): string | undefined {
  if (!isAbsolute(given)) return undefined;
  const p = resolve(given);
  if (!roots.some((r) => within(p, resolve(r)))) return undefined;
  const real = realish(p);
  if (real === undefined) return undefined;
  return roots.some((r) => within(p, resolve(r)) && within(real, realish(resolve(r)) ?? resolve(r))) ? real : undefined;
}

/** A git host allow-list entry (`host` or `host:port`) against a remote source: an entry without a port takes any. */
export function hostAllowed(src: { host: string; port?: string }, hosts: readonly string[]): boolean {
  return hosts.some((entry) => {
    const e = entry.toLowerCase();
    const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(e);
    return m !== null && m[1] === src.host && (m[2] === undefined || m[2] === src.port);
  });
}

/** Who may read what: the roots a local source must be under, and the hosts a git URL may name. */
export interface SourceRules {
  /** undefined: any local path (the operator's own jobs); []: none. */
  roots?: readonly string[];
  /** undefined: any host. */
  gitHosts?: readonly string[];
}

export type SourceVerdict =
  /** `repo`: the source to read, a local one at its checked real path. */
  | { ok: true; repo: { path: string } | { archive: string } | { git: string; ref?: string } }
  | { ok: false; field: SourceField; why: "local" | "host" | "unsupported"; detail?: string };

/**
 * A spec's repo against the rules: the source to read, or why it is refused ("local": not under
 * the roots, whatever the path and whether or not it exists; "host": a git host off the list;
 * "unsupported": a git value no worker clones, `detail` saying what it is).
 */
export function checkSource(repo: unknown, rules: SourceRules): SourceVerdict | undefined {
  const c = classifySource(repo);
  if (!c) return undefined;
  const ref = (repo as { ref?: unknown }).ref;
  const withRef = typeof ref === "string" ? { ref } : {};
  if (c.kind === "unsupported") return { ok: false, field: "git", why: "unsupported", detail: c.why };
  if (c.kind === "remote") {
    if (rules.gitHosts && !hostAllowed(c, rules.gitHosts))
      return { ok: false, field: "git", why: "host", detail: c.port ? `${c.host}:${c.port}` : c.host };
    return { ok: true, repo: { git: (repo as { git: string }).git, ...withRef } };
  }
  const real = rules.roots === undefined ? c.path : checkLocalPath(c.path, rules.roots);
  if (real === undefined) return { ok: false, field: c.field, why: "local" };
  return {
    ok: true,
    repo: c.field === "git" ? { git: real, ...withRef } : c.field === "path" ? { path: real } : { archive: real },
  };
}
