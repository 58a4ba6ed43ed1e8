// The HTTP API's rule for a spec's repo (src/job/repo/source.ts), before anything looks at a path or
// anything reaches Redis. A local repo in any form ({ path }, { archive }, a { git } path or file:
// URL, relative or through a symlink) only under PATCHBAY_API_REPO_ROOTS: the workers read it on
// their own host, so without roots a write token could have them read any directory they can
// (/root, /etc, /proc/self: their environment) and the dashboard tell which paths exist. A git URL
// only on the hosts of PATCHBAY_API_GIT_HOSTS (default: the forges'): the workers clone with their
// own credentials and SSH keys, so an open list would reach private hosts, internal addresses and
// their ~/.ssh/config's aliases. The workers hold the same rule again (src/job/repo/source-check.ts).
import { checkSource } from "../../job/repo/source.js";

/** The HTTP API's rules: PATCHBAY_API_REPO_ROOTS and PATCHBAY_API_GIT_HOSTS. */
export interface ApiSourceRules {
  roots: readonly string[];
  gitHosts: readonly string[];
}

/** Why a spec's repo is refused ("repo.path: …"), or undefined; the same words for every refused local path. */
export function repoRootProblem(spec: unknown, rules: ApiSourceRules): string | undefined {
  if (typeof spec !== "object" || spec === null) return undefined;
  const v = checkSource((spec as { repo?: unknown }).repo, { roots: rules.roots, gitHosts: rules.gitHosts });
  if (!v || v.ok) return undefined; // no repo at all: the spec's parser says so
  const field = `repo.${v.field}`;
  if (v.why === "unsupported") return `${field}: not a git URL the workers clone: ${v.detail}`;
  if (v.why === "host")
    return `${field}: the HTTP API takes a git URL only on the hosts of PATCHBAY_API_GIT_HOSTS (${rules.gitHosts.join(", ")}); ${JSON.stringify(v.detail)} is not one of them`;
  if (!rules.roots.length)
    return `${field}: the HTTP API takes a local repo only under PATCHBAY_API_REPO_ROOTS, which this dashboard does not set; send { "git": URL }, or set it to the directories scripts may name`;
  return `${field}: the HTTP API takes a local repo only under PATCHBAY_API_REPO_ROOTS (${rules.roots.join(", ")}); send { "git": URL } for another`;
}

/**
 * Why the HTTP API refuses a spec that names egress credentials (network.setup.credentials), or
 * undefined: they are the operator's, for jobs of the operator's own client only. The workers hold
 * the same rule again for every job that does not say it is the operator's (src/job/credentials.ts).
 */
export function apiCredentialProblem(spec: unknown): string | undefined {
  const named = (spec as { network?: { setup?: { credentials?: unknown } } } | null)?.network?.setup?.credentials;
  if (!Array.isArray(named) || !named.length) return undefined;
  return "network.setup.credentials: the HTTP API takes no job that names the workers' egress credentials; the operator's own client (the CLI, the library) enqueues those";
}
