// The worker's rule for a queued job's repo, before anything on the host is read or cloned: the
// one rule of src/job/repo/source.ts, with the worker's own roots and git hosts. Who enqueued the job
// decides which apply. A job the operator's own client enqueued (the CLI, the library:
// JobData.origin "operator") reads any local path unless the worker sets PATCHBAY_LOCAL_REPO_ROOTS,
// and clones from any host. Every other job (the HTTP API's, or one planted in Redis that does not
// say) reads a local repo only under PATCHBAY_LOCAL_REPO_ROOTS (unset: none) and clones only from
// PATCHBAY_API_GIT_HOSTS (default: the forges' hosts). "none" refuses every local repo, whoever sent it.
import type { Config } from "../../core/config/config.js";
import { checkSource, type SourceRules } from "./source.js";
import type { JobSpec } from "../../core/spec/spec.js";

/** Who enqueued a job (JobData.origin): the operator's own client, or the HTTP API. */
export type JobOrigin = "operator" | "api";

type SourceConfig = Pick<Config, "localRepoRoots" | "apiGitHosts">;

/** The rules for a job of this origin on this worker; anything but "operator" is the API's. */
export function workerSourceRules(origin: unknown, config: SourceConfig): SourceRules {
  const operator = origin === "operator";
  return {
    roots: config.localRepoRoots ?? (operator ? undefined : []),
    gitHosts: operator ? undefined : config.apiGitHosts,
  };
}

/**
 * The spec with its repo as the worker is to read it (a local one at its checked real path), or
 * the one-line refusal. The refusal of a local repo is the same for every path, there or not.
 */
export function admitSource(
  spec: JobSpec,
  origin: unknown,
  config: SourceConfig,
): { spec: JobSpec } | { refused: string } {
  const rules = workerSourceRules(origin, config);
  const v = checkSource(spec.repo, rules);
  if (!v) return { refused: "repo: expected exactly one of { path }, { git, ref? }, { archive }" };
  if (v.ok) return { spec: { ...spec, repo: v.repo } };
  const field = `repo.${v.field}`;
  if (v.why === "unsupported") return { refused: `${field}: not a git URL a worker clones: ${v.detail}` };
  if (v.why === "host")
    return {
      refused: `${field}: this worker clones a job from the HTTP API only from the hosts of PATCHBAY_API_GIT_HOSTS (${rules.gitHosts!.join(", ")}); ${JSON.stringify(v.detail)} is not one of them`,
    };
  const roots = config.localRepoRoots;
  if (roots === undefined)
    return {
      refused: `${field}: this worker reads the local repo of a job from the HTTP API (or of one that does not say who enqueued it) only under PATCHBAY_LOCAL_REPO_ROOTS, which it does not set; send { "git": URL }`,
    };
  if (!roots.length)
    return {
      refused: `${field}: this worker reads no local repo (PATCHBAY_LOCAL_REPO_ROOTS=none); send { "git": URL }`,
    };
  return {
    refused: `${field}: this worker reads a local repo only under PATCHBAY_LOCAL_REPO_ROOTS (${roots.join(", ")}); send { "git": URL } for another`,
  };
}
