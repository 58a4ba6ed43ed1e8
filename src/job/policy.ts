// The worker's policy: what a JobSpec may ask of the sandbox it runs in. Whoever can enqueue writes
// the spec; the worker's own configuration (src/core/config/config.ts) sets the bounds. So a spec
// can narrow its sandbox but never widen it: no bridge network unless the worker allows it, no
// limit or timeout above the worker's bound, no image off the worker's list. This module is pure:
// the one fact it cannot know (whether `patchbay image build --from` built an image) is the
// caller's to look up.
import { defaults } from "../core/config/config.js";
import { customToolsOf, type JobSpec } from "../core/spec/spec.js";

export interface SandboxPolicy {
  allowBridge: boolean;
  /** Whether a spec may bring its own tools (tools.custom); undefined: yes. */
  allowCustomTools?: boolean;
  /** Whether a spec may run MCP servers (mcp); undefined: yes. */
  allowMcp?: boolean;
  /** The providers a spec's `provider` may name (the worker's own first); undefined: any. */
  providers?: readonly string[];
  maxMemoryMb: number;
  maxCpus: number;
  maxPids: number;
  maxDiskMb: number;
  maxTimeoutSec: number;
  maxCommandTimeoutSec: number;
  /** What a spec may spend: budget.usd, maxTurns and maxTokens at most these (a spec that sets none gets the cap); undefined: no cap. */
  maxBudgetUsd?: number;
  maxTurns?: number;
  maxTokens?: number;
  /** The most candidates a spec may ask for (best-of-N). */
  maxCandidates: number;
  /** Models a spec's `model` may name (the worker's own first; `*` at an entry's end matches by prefix); undefined: any. */
  models?: readonly string[];
  /** The OCI runtime every sandbox runs under, runc or runsc (a spec asking for another is refused); undefined: the spec's. */
  runtime?: "runc" | "runsc";
  /** Images a spec may name besides the sandbox image (FROM_BUILDS: those `image build --from` made); undefined: [FROM_BUILDS]. */
  images?: readonly string[];
}

/** The allow-list entry for every image `patchbay image build --from` made (its label says so). */
export const FROM_BUILDS = "@from";

/**
 * An image reference as the engine resolves it: `docker.io/library/` and `docker.io/` dropped,
 * `:latest` added where there is no tag or digest. Entries ending in `*` match by prefix.
 */
export function normalizeImage(ref: string): string {
  let r = ref.trim().replace(/^docker\.io\/(library\/)?/, "");
  const lastPart = r.slice(r.lastIndexOf("/") + 1);
  if (!r.endsWith("*") && !lastPart.includes(":") && !r.includes("@")) r += ":latest";
  return r;
}

const matches = (entry: string, image: string) => {
  const e = normalizeImage(entry);
  return e.endsWith("*") ? image.startsWith(e.slice(0, -1)) : e === image;
};

/**
 * Whether the spec's image is allowed as named ("allowed", "refused"), or only if it was built by
 * `image build --from` ("lookup": the caller inspects it and passes what it found to policyViolations).
 */
export function imageVerdict(
  image: string,
  sandboxImage: string,
  policy: SandboxPolicy,
): "allowed" | "refused" | "lookup" {
  const img = normalizeImage(image);
  if (img === normalizeImage(sandboxImage)) return "allowed";
  const list = policy.images ?? [FROM_BUILDS];
  if (list.some((e) => e !== FROM_BUILDS && matches(e, img))) return "allowed";
  return list.includes(FROM_BUILDS) ? "lookup" : "refused";
}

export interface ImageFacts {
  /** For a "lookup" image: whether it carries the `image build --from` label; undefined: not on the engine. */
  builtFrom?: boolean;
}

/** One line per way the spec goes past the policy, each naming the bound and the knob that raises it; [] when it is within. */
export function policyViolations(
  spec: JobSpec,
  policy: SandboxPolicy,
  sandboxImage: string,
  facts: ImageFacts = {},
): string[] {
  const out: string[] = [];
  const l = spec.limits ?? {};
  if (l.network === "bridge" && !policy.allowBridge)
    out.push(
      'limits.network: "bridge" (the full network in every phase) is not allowed by this worker; its sandboxes have none (PATCHBAY_ALLOW_BRIDGE=1 on the worker allows it; for setup, network.setup.allow names hosts instead)',
    );
  if (customToolsOf(spec.tools).length && policy.allowCustomTools === false)
    out.push(
      "tools.custom: a spec's own tools are not allowed by this worker (PATCHBAY_ALLOW_CUSTOM_TOOLS=1 on the worker allows them)",
    );
  if (spec.provider && policy.providers && !policy.providers.includes(spec.provider))
    out.push(
      `provider: "${spec.provider}" is not allowed by this worker, which reaches Claude through ${policy.providers.join(", ")} (PATCHBAY_PROVIDERS=${[...policy.providers, spec.provider].join(",")} on the worker allows it, with that platform's credentials there)`,
    );
  if (spec.mcp && Object.keys(spec.mcp.servers).length && policy.allowMcp === false)
    out.push("mcp: MCP servers are not allowed by this worker (PATCHBAY_ALLOW_MCP=1 on the worker allows them)");
  const over = (field: string, value: number | undefined, max: number, knob: string) => {
    if (value !== undefined && value > max)
      out.push(`${field}: ${value} is over this worker's bound of ${max} (${knob} on the worker raises it)`);
  };
  over("limits.memoryMb", l.memoryMb, policy.maxMemoryMb, "PATCHBAY_MAX_MEMORY_MB");
  over("limits.cpus", l.cpus, policy.maxCpus, "PATCHBAY_MAX_CPUS");
  over("limits.pids", l.pids, policy.maxPids, "PATCHBAY_MAX_PIDS");
  over("limits.diskMb", l.diskMb, policy.maxDiskMb, "PATCHBAY_MAX_DISK_MB");
  over("timeoutSec", spec.timeoutSec, policy.maxTimeoutSec, "PATCHBAY_MAX_TIMEOUT_SEC");
  over("commandTimeoutSec", spec.commandTimeoutSec, policy.maxCommandTimeoutSec, "PATCHBAY_MAX_COMMAND_TIMEOUT_SEC");
  out.push(...spendViolations(spec, policy));
  if (spec.image !== undefined) {
    const verdict = imageVerdict(spec.image, sandboxImage, policy);
    if (verdict === "refused" || (verdict === "lookup" && facts.builtFrom !== true)) {
      const list = policy.images ?? [FROM_BUILDS];
      const allowed = [
        `the sandbox image ${sandboxImage}`,
        ...list.map((e) => (e === FROM_BUILDS ? "images built by patchbay image build --from" : e)),
      ].join(", ");
      const why =
        verdict === "lookup" && facts.builtFrom === undefined ? " (and no such image is on this worker's engine)" : "";
      out.push(
        `image: ${JSON.stringify(spec.image.slice(0, 200))} is not in this worker's image allow-list${why}; allowed: ${allowed} (PATCHBAY_IMAGES on the worker sets the list)`,
      );
    }
  }
  return out;
}

/** The message a refused spec fails with: one line, every violation in it. */
export const policyRefusal = (violations: readonly string[]) =>
  `JobSpec refused by this worker's policy: ${violations.join("; ")}`;

/** What the spec may spend and what it runs on: the caps, the models, the forced OCI runtime. */
function spendViolations(spec: JobSpec, policy: SandboxPolicy): string[] {
  const out: string[] = [];
  const over = (field: string, value: number | undefined, max: number | undefined, knob: string) => {
    if (value !== undefined && max !== undefined && value > max)
      out.push(`${field}: ${value} is over this worker's bound of ${max} (${knob} on the worker raises it)`);
  };
  over("budget.usd", spec.budget?.usd, policy.maxBudgetUsd, "PATCHBAY_MAX_BUDGET_USD");
  over("maxTurns", spec.maxTurns, policy.maxTurns, "PATCHBAY_MAX_TURNS");
  over("maxTokens", spec.maxTokens, policy.maxTokens, "PATCHBAY_MAX_TOKENS");
  over("candidates", spec.candidates, policy.maxCandidates, "PATCHBAY_MAX_CANDIDATES");
  if (
    spec.model !== undefined &&
    policy.models &&
    !policy.models.some((m) => (m.endsWith("*") ? spec.model!.startsWith(m.slice(0, -1)) : m === spec.model))
  )
    out.push(
      `model: ${JSON.stringify(spec.model.slice(0, 100))} is not in this worker's model allow-list; allowed: ${policy.models.join(", ")} (PATCHBAY_MODELS on the worker sets the list)`,
    );
  if (policy.runtime && spec.runtime && spec.runtime !== policy.runtime)
    out.push(
      `runtime: "${spec.runtime}" is not allowed by this worker, which runs every sandbox under ${policy.runtime} (PATCHBAY_RUNTIME on the worker)`,
    );
  return out;
}

/**
 * The spec as this worker runs it, once within the policy: a cap is what a spec that sets nothing
 * gets (a cap a spec could escape by leaving the field out would be none), and the forced runtime
 * is its runtime. The job's transcript (job_started) shows the spec so completed.
 */
export function withCaps(spec: JobSpec, policy: SandboxPolicy): JobSpec {
  const lower = (cap: number | undefined, dflt: number) => (cap !== undefined && cap < dflt ? cap : undefined);
  const turns = spec.maxTurns === undefined ? lower(policy.maxTurns, defaults.job.maxTurns) : undefined;
  const tokens = spec.maxTokens === undefined ? lower(policy.maxTokens, defaults.job.maxTokens) : undefined;
  return {
    ...spec,
    ...(policy.maxBudgetUsd !== undefined && spec.budget?.usd === undefined
      ? { budget: { ...spec.budget, usd: policy.maxBudgetUsd } }
      : {}),
    ...(turns !== undefined ? { maxTurns: turns } : {}),
    ...(tokens !== undefined ? { maxTokens: tokens } : {}),
    ...(policy.runtime && !spec.runtime ? { runtime: policy.runtime } : {}),
  };
}
