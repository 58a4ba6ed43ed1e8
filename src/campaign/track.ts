// A campaign's changesets as they stand: `status` (every repository, recorded or not), `track`
// (each published one refreshed from its forge: state, CI checks, review) and `close` (open pull
// requests closed, their branches deleted, leased against what patchbay pushed).
import type { BatchJob, BatchStatus } from "../batch/batch-types.js";
import { redact } from "../git/auth.js";
import { PatchbayError, kindOf } from "../core/errors.js";
import { CHANGESET_STATES, isOpen, type Changeset, type ChangesetState } from "./changeset.js";
import type { CampaignDef } from "./store.js";
import { forgeOf, type PublishContext } from "./context.js";
import { deleteBranch, remoteBranch } from "./publish-git.js";

export interface CampaignStatus {
  campaignId: string;
  createdAt: number;
  batch: BatchStatus;
  /** One per repository, in campaign order. */
  changesets: Changeset[];
  counts: Record<ChangesetState, number>;
  /** Open changesets by their CI checks. */
  checks: { passing: number; failing: number; pending: number };
}

/** A line with no record yet: unpublished, and why (its job's state). */
function derived(repo: CampaignDef["repos"][number], job: BatchJob | undefined): Changeset {
  const r = job?.result;
  const reason = !job ? "not enqueued" : !r ? `its job is ${job.state}` : r.status !== "completed" ? `its job ended ${r.status}` : r.verified === false ? "its verify failed" : "not published yet";
  return { line: repo.line, repo: redact(repo.git), jobId: job?.jobId ?? "", state: "unpublished", reason, ...(r?.verified !== undefined ? { verified: r.verified } : {}), updatedAt: r?.finishedAt ?? 0 };
}

/** Every repository's changeset (recorded, else derived from its job), and the counts: Redis only. */
export async function campaignStatus(ctx: Pick<PublishContext, "store" | "batches">, id: string): Promise<CampaignStatus> {
  const def = await ctx.store.def(id);
  const [batch, recorded] = await Promise.all([ctx.batches.status(id, { jobs: true }), ctx.store.changesets(id)]);
  const changesets = def.repos.map((repo) => {
    const job = batch.jobs!.find((j) => j.line === repo.line);
    const c = recorded.get(repo.line);
    // A retried line whose job is newer than the record: the record stays (it is on the forge) but names the new job.
    return c ? { ...c, jobId: job?.jobId ?? c.jobId } : derived(repo, job);
  });
  const counts = Object.fromEntries(CHANGESET_STATES.map((s) => [s, changesets.filter((c) => c.state === s).length])) as Record<ChangesetState, number>;
  const open = changesets.filter(isOpen);
  const checks = { passing: open.filter((c) => c.checks === "passing").length, failing: open.filter((c) => c.checks === "failing").length, pending: open.filter((c) => c.checks === "pending").length };
  return { campaignId: id, createdAt: def.createdAt, batch, changesets, counts, checks };
}

export interface TrackReport {
  tracked: number;
  errors: number;
  /** Changesets still draft or open after the refresh. */
  open: number;
}

/** Each published changeset refreshed from its forge (plain git remotes: whether the branch is still there). */
export async function trackCampaign(ctx: PublishContext, id: string): Promise<TrackReport> {
  const def = await ctx.store.def(id);
  const recorded = await ctx.store.changesets(id);
  const report: TrackReport = { tracked: 0, errors: 0, open: 0 };
  for (const c of recorded.values()) {
    if (!isOpen(c) && !(c.state === "closed" && c.number)) continue; // a closed PR may be reopened; merged is final
    const repo = def.repos.find((r) => r.line === c.line);
    if (!repo) continue;
    try {
      const next = await refresh(ctx, repo.git, c);
      await ctx.store.saveChangeset(id, next);
      report.tracked++;
      if (isOpen(next)) report.open++;
    } catch (err) {
      report.errors++;
      if (isOpen(c)) report.open++;
      await ctx.store.saveChangeset(id, { ...c, reason: `track failed: ${ctx.scrub(err instanceof PatchbayError ? err.message : `${kindOf(err)}: ${(err as Error).message}`).slice(0, 500)}`, updatedAt: Date.now() });
    }
  }
  return report;
}

async function refresh(ctx: PublishContext, gitUrl: string, c: Changeset): Promise<Changeset> {
  const forge = forgeOf(ctx, gitUrl);
  if (forge.api && c.number) {
    const s = await forge.api.forge.status(forge.api.repo, c.number);
    const { reason: _, ...rest } = c;
    return { ...rest, state: s.state, checks: s.checks, review: s.review, url: s.url, updatedAt: Date.now() };
  }
  const at = c.branch ? await remoteBranch({ url: gitUrl, branch: c.branch, env: ctx.config.hostEnv, ...(forge.credential ? { credential: forge.credential } : {}) }) : undefined;
  return at === undefined ? { ...c, state: "closed", reason: "the branch is gone from the remote", updatedAt: Date.now() } : { ...c, updatedAt: Date.now() };
}

export interface CloseReport {
  closed: number;
  errors: number;
}

/** Every open changeset closed on its forge and its branch deleted (only if still where patchbay left it). */
export async function closeCampaign(ctx: PublishContext, id: string): Promise<CloseReport> {
  const def = await ctx.store.def(id);
  const recorded = await ctx.store.changesets(id);
  const report: CloseReport = { closed: 0, errors: 0 };
  for (const c of recorded.values()) {
    if (!isOpen(c)) continue;
    const repo = def.repos.find((r) => r.line === c.line);
    if (!repo) continue;
    const forge = forgeOf(ctx, repo.git);
    try {
      if (forge.api && c.number) await forge.api.forge.close(forge.api.repo, c.number);
      let note: string | undefined;
      if (c.branch && c.headSha) {
        const d = await deleteBranch({ url: repo.git, branch: c.branch, expect: c.headSha, env: ctx.config.hostEnv, ...(forge.credential ? { credential: forge.credential } : {}) });
        if (d.kind === "foreign") note = `branch ${c.branch} kept: it has commits patchbay did not push (at ${d.remoteSha.slice(0, 12)})`;
      }
      await ctx.store.saveChangeset(id, { ...c, state: "closed", reason: note ?? "closed by campaign close", updatedAt: Date.now() });
      report.closed++;
    } catch (err) {
      report.errors++;
      await ctx.store.saveChangeset(id, { ...c, reason: `close failed: ${ctx.scrub(err instanceof PatchbayError ? err.message : (err as Error).message).slice(0, 500)}`, updatedAt: Date.now() });
    }
  }
  return report;
}
