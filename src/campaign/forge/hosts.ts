// Which forge a repository's git URL is on, and its API client. A URL whose host is not one of the
// configured forge hosts, or whose path is not a repository's, is a plain git remote: it gets the
// branch only. Userinfo in a URL is dropped here; tokens come from the Config, per host.
import type { ForgeHost } from "../../core/config/forges.js";
import type { Forge, ForgeClientOptions, ForgeGit, ForgeKind, ForgeRepo } from "./forge.js";
import { loadOptional, OPTIONAL } from "../../core/optional.js";
import { LazyForge } from "./lazy.js";
import { githubGit, gitlabGit } from "./push.js";

/** The host's API client; its packages (optional: Octokit, gitbeaker) load on its first call. */
export function makeForge(host: ForgeHost, token: string | undefined, opts: ForgeClientOptions = {}): Forge {
  return new LazyForge(host.kind, async () =>
    host.kind === "github"
      ? new (await loadOptional(OPTIONAL.github, () => import("./github.js"))).GitHubForge(host, token, opts)
      : new (await loadOptional(OPTIONAL.gitlab, () => import("./gitlab.js"))).GitLabForge(host, token, opts),
  );
}

/** What the host of `kind` does for git itself (its file's ForgeGit). */
export function forgeGit(kind: ForgeKind): ForgeGit {
  return kind === "github" ? githubGit : gitlabGit;
}

const SEGMENT = /^[A-Za-z0-9_.-]+$/;

/** owner/name (GitHub) or group/…/name (GitLab) from a URL's path, `.git` and slashes around it dropped; undefined if it is no repository's. */
function repoPath(path: string, kind: ForgeHost["kind"]): string | undefined {
  const parts = path
    .replace(/^\/+/, "")
    .replace(/(?<!\/)\/+$/, "") // a run's first slash only: linear
    .replace(/\.git$/, "")
    .split("/");
  if (parts.some((p) => !SEGMENT.test(p) || p === "." || p === ".." || p.endsWith(".git"))) return undefined;
  if (kind === "github" ? parts.length !== 2 : parts.length < 2 || parts.length > 20) return undefined;
  return parts.join("/");
}

/** scheme, host (lower case, with a port if given), path; undefined for what is not a URL git reads as remote. */
function splitUrl(
  gitUrl: string,
): { scheme: "http" | "ssh" | "scp"; host: string; bareHost: string; path: string } | undefined {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(gitUrl)) {
    let u: URL;
    try {
      u = new URL(gitUrl);
    } catch {
      return undefined;
    }
    const scheme = /^https?:$/.test(u.protocol)
      ? "http"
      : u.protocol === "ssh:" || u.protocol === "git+ssh:"
        ? "ssh"
        : undefined;
    if (!scheme || u.search || u.hash || !u.hostname) return undefined;
    let path: string;
    try {
      path = decodeURIComponent(u.pathname);
    } catch {
      return undefined;
    }
    return { scheme, host: u.host.toLowerCase(), bareHost: u.hostname.toLowerCase(), path };
  }
  // scp-like: [user@]host:path, where no slash comes before the first colon (git's own rule).
  const m = /^(?:[^@/:]+@)?([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(?!\/\/)(.+)$/.exec(gitUrl);
  if (!m) return undefined;
  return { scheme: "scp", host: m[1]!.toLowerCase(), bareHost: m[1]!.toLowerCase(), path: m[2]! };
}

/**
 * The forge host and repository of a git URL: https://host[:port]/owner/name(.git),
 * ssh://[user@]host[:port]/owner/name(.git), scp-like [user@]host:owner/name(.git); GitLab's
 * group/sub/name too. An SSH port is the SSH server's, so an ssh:// URL matches its host with the
 * port first, then without. Undefined: a plain git remote.
 */
export function forgeRepoOf(
  gitUrl: string,
  hosts: readonly ForgeHost[],
): { host: ForgeHost; repo: ForgeRepo } | undefined {
  const u = splitUrl(gitUrl.trim());
  if (!u) return undefined;
  const byName = (name: string) => hosts.find((h) => h.host.toLowerCase() === name);
  const host = byName(u.host) ?? (u.scheme === "ssh" ? byName(u.bareHost) : undefined);
  if (!host) return undefined;
  const path = repoPath(u.path, host.kind);
  return path ? { host, repo: { host: host.host, path } } : undefined;
}
