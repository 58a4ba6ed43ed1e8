// The worker's check of the credentials a JobSpec's setup names (network.setup.credentials): each
// must be one this worker's operator configured (PATCHBAY_EGRESS_CREDENTIALS), and its host and
// port one the spec's own allow-list lets setup reach by CONNECT. Whoever can enqueue writes the
// names; the worker's file decides what they mean, so a spec can only pick among the operator's
// credentials, and only for hosts it already allows. And only the operator's own client may: a job
// from the HTTP API (or one planted in Redis that does not say who sent it) naming any is refused,
// as its git URL is held to PATCHBAY_API_GIT_HOSTS. Pure: names and hosts, never a value.
import { parseAllowEntry, refusal, type AllowRule } from "../core/allow.js";
import type { Config } from "../core/config/config.js";
import type { EgressCredential } from "../core/config/credentials.js";
import { JobSpecError, type JobSpec } from "../core/spec/spec.js";
import { policyRefusal } from "./policy.js";

/** The most configured names a refusal lists (names are not secret; a long list is noise). */
const MAX_NAMES_SHOWN = 20;

/** The spec's own allow-list entries that name hosts (a preset names none until the worker reads it). */
function hostRules(spec: JobSpec): AllowRule[] {
  return (spec.network?.setup?.allow ?? [])
    .map((e) => parseAllowEntry(e))
    .filter((r): r is AllowRule => typeof r !== "string");
}

/** What this worker has, for a refusal: its configured names, or that it has none. */
function configuredNames(configured: ReadonlyMap<string, EgressCredential>): string {
  const names = [...configured.keys()].sort();
  if (!names.length) return "this worker has none";
  const shown = names.slice(0, MAX_NAMES_SHOWN).join(", ");
  return `this worker has ${shown}${names.length > MAX_NAMES_SHOWN ? ` and ${names.length - MAX_NAMES_SHOWN} more` : ""}`;
}

/**
 * One line per credential the spec names that this worker cannot add: not configured here, or for
 * a host and port the spec's allow-list does not let setup reach by CONNECT. [] when all can be.
 */
export function credentialProblems(
  spec: JobSpec,
  configured: ReadonlyMap<string, EgressCredential> | undefined,
): string[] {
  const names = spec.network?.setup?.credentials ?? [];
  if (!names.length) return [];
  const have = configured ?? new Map<string, EgressCredential>();
  const rules = hostRules(spec);
  const out: string[] = [];
  for (const name of names) {
    const c = have.get(name);
    if (!c) {
      out.push(
        `network.setup.credentials: "${name}" is not a credential of this worker's (${configuredNames(have)}); the worker's operator configures them in PATCHBAY_EGRESS_CREDENTIALS`,
      );
      continue;
    }
    const why = refusal(rules, c.host, c.port, "connect");
    if (why)
      out.push(
        `network.setup.credentials: "${name}" is for ${c.host}:${c.port}, which network.setup.allow does not allow (${why}); name the host there (${c.port === 443 ? c.host : `${c.host}:${c.port}`}; a preset does not count)`,
      );
  }
  return out;
}

/**
 * The credentials the egress proxy adds to this job's setup, in the spec's order: the configured
 * ones it names. Throws a JobSpecError (the job fails, not retried) naming each that this worker
 * cannot add; [] for a spec that names none.
 */
export function credentialsFor(spec: JobSpec, config: Partial<Pick<Config, "egressCredentials">>): EgressCredential[] {
  const problems = credentialProblems(spec, config.egressCredentials);
  if (problems.length) throw new JobSpecError(policyRefusal(problems));
  return (spec.network?.setup?.credentials ?? []).map((n) => config.egressCredentials!.get(n)!);
}

/**
 * Why a job from `origin` (JobData.origin) cannot name credentials, or undefined. A credential is
 * the operator's: a job's setup commands choose what is fetched or sent with it (a private
 * package's contents into the transcript, a publish with a token that can write), so only a job
 * the operator's own client enqueued (the CLI, the library: "operator") may name one. A job from
 * the HTTP API, or one that does not say, is refused, whatever the names.
 */
export function credentialOriginProblem(spec: JobSpec, origin: unknown): string | undefined {
  const names = spec.network?.setup?.credentials ?? [];
  if (!names.length || origin === "operator") return undefined;
  return `network.setup.credentials: a job from the HTTP API (or one that does not say who enqueued it) cannot name this worker's egress credentials (${names.length} named); the operator's own client (the CLI, the library) enqueues jobs that use them`;
}
