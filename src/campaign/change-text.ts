// What one repository's change says: the values the campaign's templates may use (the job's
// outcome, its model-written parts made inert), and the branch name. The planner (plan.ts) renders
// the title, body and commit message from these. Pure.
import type { JobResult } from "../core/spec/spec.js";
import { PatchbayError } from "../core/errors.js";
import type { CampaignDef } from "./store.js";
import { repoValues } from "./file.js";
import { render } from "./template.js";
import { inert, plainText } from "./inert-text.js";
import { branchProblem } from "./publish-settings.js";

type Repo = CampaignDef["repos"][number];

/**
 * The values a body or commit message template may use; with `shown` = inertTitle, those of a
 * title (each model-written value made inert as a title needs, without invisible characters).
 */
export function outcomeValues(
  def: CampaignDef,
  repo: Repo,
  jobId: string,
  r: JobResult,
  spec: { task: string; verify?: string },
  shown: (text: string) => string = inert,
): Record<string, string> {
  const plain = plainText(r.summary?.trim() || "(the model left no summary)");
  const summary = shown(plain);
  const transcript = def.publish.transcriptUrl
    ? render(def.publish.transcriptUrl, { ...repo.vars, ...repoValues(repo, def.name), jobId })
    : `\`patchbay result ${jobId} --out DIR\` (DIR/transcript.html)`;
  const verify = r.verify ? `exit ${r.verify.exitCode} (${r.verified ? "passed" : "failed"})` : "no verify ran";
  return {
    ...repo.vars,
    ...repoValues(repo, def.name),
    task: shown(spec.task.trim()).slice(0, 2000),
    summary: summary.slice(0, 20_000),
    summaryLine: shown(plain.split("\n")[0]!).slice(0, 120),
    verify: spec.verify ?? "(none)",
    verifyResult: r.verified === undefined ? verify : r.verified ? verify : `${verify} — published unverified`,
    diffstat: shown(r.diffstat).slice(0, 20_000),
    costUsd: r.costUsd.toFixed(4),
    jobId,
    transcript,
    verified: String(r.verified === true),
    egressRefused: egressRefused(r, shown),
  };
}

/**
 * The hosts setup's egress proxy refused, or "none". The sandbox chose them (hostile): made inert,
 * with `|` escaped so that the default body's table cell holds them (the proxy's records are one
 * line of printable ASCII).
 */
function egressRefused(r: JobResult, shown: (text: string) => string): string {
  const refusals = r.egress?.refusals ?? [];
  return refusals.length ? shown(refusals.join("; ")).slice(0, 4000).replaceAll("|", "\\|") : "none";
}

/** The repository's branch: the campaign's template with its values; a name git would refuse, or the target's, is an error. */
export function branchName(def: CampaignDef, repo: Repo, target = def.publish.base ?? repo.ref): string {
  const name = render(def.publish.branch, { ...repo.vars, ...repoValues(repo, def.name) });
  const bad = branchProblem(name, target);
  if (bad) throw new PatchbayError("usage", `publish.branch: ${bad} (for ${repo.git.slice(0, 200)})`);
  return name;
}
