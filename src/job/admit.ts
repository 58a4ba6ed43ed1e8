// The checks runJob makes before a job starts (a worker makes them before runJob too). The worker's
// policy (policy.ts) decides whether the spec may ask for the sandbox it asks for, and fills in the
// caps of a spec that sets none. The credentials a spec's git URL carries are hidden here, so that
// no transcript event shows them.
import type { Config } from "../core/config/config.js";
import { priceKnown } from "../agent/prices.js";
import { jobModel } from "../core/config/scripted.js";
import { policyRefusal, imageVerdict, policyViolations, withCaps } from "./policy.js";
import { credentialProblems } from "./credentials.js";
import { docker } from "../backend/docker.js";
import { builtFrom } from "../sandbox/image-from.js";
import { JobSpecError, type JobSpec, type TranscriptEvent } from "../core/spec/spec.js";
import { redact, splitUrl } from "../git/credentials.js";

/** What the admission reads of the worker's settings (the credentials: none when left out). */
export type AdmitConfig = Pick<Config, "policy" | "image" | "model" | "scripted"> &
  Partial<Pick<Config, "egressCredentials">>;

/**
 * Why this worker refuses the spec (one line naming each bound it goes past and the knob that
 * raises it), or undefined. The engine is asked about the image only where the policy needs to
 * know whether `image build --from` made it; an engine that cannot answer throws (not the spec's fault).
 */
export async function policyProblem(spec: JobSpec, config: AdmitConfig): Promise<string | undefined> {
  const lookup = spec.image !== undefined && imageVerdict(spec.image, config.image, config.policy) === "lookup";
  const facts = lookup ? { builtFrom: await builtFrom(spec.image!) } : {};
  const violations = policyViolations(spec, config.policy, config.image, facts);
  // The credentials its setup names: configured on this worker, for hosts the spec allows (credentials.ts).
  violations.push(...credentialProblems(spec, config.egressCredentials));
  // A USD cap is held by the job's cost: a model whose price is unknown would spend nothing against it.
  const model = jobModel(spec, config);
  if (config.policy.maxBudgetUsd !== undefined && !priceKnown(model))
    violations.push(
      `model: the price of ${JSON.stringify(model.slice(0, 100))} is unknown, so this worker's cap on what a job spends (PATCHBAY_MAX_BUDGET_USD=${config.policy.maxBudgetUsd}) cannot be held; name a model with a known price`,
    );
  // The engine refuses more CPUs than its host has (at create, where it would look like the host's fault and be retried).
  const cpus = violations.some((v) => v.startsWith("limits.cpus")) ? undefined : spec.limits?.cpus;
  const have = cpus === undefined ? undefined : await engineCpus();
  if (cpus !== undefined && have !== undefined && cpus > have)
    violations.push(`limits.cpus: ${cpus} is more than the ${have} CPUs of this worker's Docker engine`);
  return violations.length ? policyRefusal(violations) : undefined;
}

let cpusOfEngine: Promise<number | undefined> | undefined;
/** The engine's CPU count, asked once (undefined when it cannot say: the create then decides). */
const engineCpus = () =>
  (cpusOfEngine ??= docker()
    .info()
    .then(
      (i: { NCPU?: number }) => i.NCPU,
      () => (cpusOfEngine = undefined),
    ));

/** The spec as the worker runs it (its caps applied: src/job/policy.ts withCaps); a JobSpecError (not retried) for a spec past the policy. */
export async function admitJob(spec: JobSpec, config: AdmitConfig): Promise<JobSpec> {
  const why = await policyProblem(spec, config);
  if (why) throw new JobSpecError(why);
  return withCaps(spec, config.policy);
}

// Secrets shorter than this are not searched for in every event's strings (they would match
// ordinary text); they can reach no event but job_started's spec, which is redacted whole.
const MIN_SCRUBBED = 8;

/**
 * The options with an onEvent that shows the spec's git URL without its credentials: redacted in
 * job_started's spec, and every string of every event scrubbed of the secrets (none should carry
 * them: the sandbox never has them and the clone's errors (src/git/run.ts) hide them; this holds if one ever did).
 * A spec without credentials gets its options back as they were.
 */
export function hideSecrets<O extends { onEvent?: (e: TranscriptEvent) => void }>(spec: JobSpec, opts: O): O {
  const git = "git" in spec.repo ? spec.repo.git : undefined;
  const onEvent = opts.onEvent;
  if (git === undefined || !onEvent) return opts;
  const split = splitUrl(git);
  if (split.url === git) return opts;
  const secrets = split.secrets.filter((s) => s.length >= MIN_SCRUBBED);
  const shown = redact(git);
  const clean = (v: unknown): unknown => {
    if (typeof v === "string") return secrets.reduce((s, x) => s.split(x).join("***"), v);
    if (Array.isArray(v)) return v.map(clean);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, clean(x)]));
    return v;
  };
  return {
    ...opts,
    onEvent: (e: TranscriptEvent) => {
      const shownEvent =
        e.type === "job_started" ? { ...e, spec: { ...e.spec, repo: { ...e.spec.repo, git: shown } } } : e;
      onEvent((secrets.length ? clean(shownEvent) : shownEvent) as TranscriptEvent);
    },
  };
}
