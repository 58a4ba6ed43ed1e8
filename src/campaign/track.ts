// A campaign's changesets as they stand: `status` (every repository, recorded or not), `track`
// (each published one refreshed from its forge: state, CI checks, review) and `close` (open pull
// requests closed, their branches deleted, leased against what patchbay pushed). Track and close
// go changeset by changeset: gather, plan (plan.ts planTrack, planClose), execute (execute.ts).
import type { BatchJob, BatchStatus } from "../batch/batch-types.js";
import { redact } from "../git/credentials.js";
import { PatchbayError } from "../core/errors.js";
import { CHANGESET_STATES, isOpen, type Changeset, type ChangesetState } from "./changeset.js";
import type { CampaignDef } from "./store.js";
import { forgeOf, type PublishContext } from "./context.js";
import { remoteBranch } from "./publish-git.js";
import { execute, gitNet, reconcile, type Reader, type Target } from "./execute.js";
import { planClose, planTrack, type TrackState } from "./plan.js";
import { costPerMerged } from "./cost.js";

/** Where a campaign stands: its batch, and each repository's changeset with the counts by state. */
export interface CampaignStatus {
  /** The campaign's id (its name, and its batch's id). */
  campaignId: string;
  /** When the campaign was first submitted, epoch ms. */
  createdAt: number;
  /** The campaign's batch, with its jobs. */
  batch: BatchStatus;
  /** One per repository, in campaign order. */
  changesets: Changeset[];
  /** How many changesets are in each state, so that a summary can say how many merged of how many. */
  counts: Record<ChangesetState, number>;
  /** Open changesets by their CI checks. */
  checks: { passing: number; failing: number; pending: number };
  /** The batch's spend per merged changeset, USD (src/campaign/cost.ts); null while none merged. */
  costPerMergedUsd: number | null;
}

/** A line with no record yet: unpublished, and why (its job's state). */
function derived(repo: CampaignDef["repos"][number], job: BatchJob | undefined): Changeset {
  const r = job?.result;
  const reason = !job
    ? "not enqueued"
    : !r
      ? `its job is ${job.state}`
      : r.status !== "completed"
        ? `its job ended ${r.status}`
        : r.verified === false
          ? "its verify failed"
          : "not published yet";
  return {
    line: repo.line,
    repo: redact(repo.git),
    jobId: job?.jobId ?? "",
    state: "unpublished",
    reason,
    ...(r?.verified !== undefined ? { verified: r.verified } : {}),
    updatedAt: r?.finishedAt ?? 0,
  };
}

/** Every repository's changeset (recorded, else derived from its job), and the counts: Redis only. */
export async function campaignStatus(
  ctx: Pick<PublishContext, "store" | "batches">,
  id: string,
): Promise<CampaignStatus> {
  const def = await ctx.store.def(id);
  const [batch, recorded] = await Promise.all([ctx.batches.status(id, { jobs: true }), ctx.store.changesets(id)]);
  const changesets = def.repos.map((repo) => {
    const job = batch.jobs!.find((j) => j.line === repo.line);
    const c = recorded.get(repo.line);
    // A retried line whose job is newer than the record: the record stays (it is on the forge) but names the new job.
    return c ? { ...c, jobId: job?.jobId ?? c.jobId } : derived(repo, job);
  });
  const counts = Object.fromEntries(
    CHANGESET_STATES.map((s) => [s, changesets.filter((c) => c.state === s).length]),
  ) as Record<ChangesetState, number>;
  const open = changesets.filter(isOpen);
  const checks = {
    passing: open.filter((c) => c.checks === "passing").length,
    failing: open.filter((c) => c.checks === "failing").length,
    pending: open.filter((c) => c.checks === "pending").length,
  };
  const costPerMergedUsd = costPerMerged(batch.spentUsd, counts.merged);
  return { campaignId: id, createdAt: def.createdAt, batch, changesets, counts, checks, costPerMergedUsd };
}

/** What a track did to a campaign's changesets. */
export interface TrackReport {
  /** Changesets refreshed from their forge (or, on a plain remote, from their branch). */
  tracked: number;
  /** Changesets whose refresh failed; each one's reason says why. */
  errors: number;
  /** Changesets still draft or open after the refresh. */
  open: number;
}

/** The repository a recorded changeset is of, and its forge (a line the definition no longer lists has none: its plans do nothing). */
function targetOf(ctx: PublishContext, def: CampaignDef, c: Changeset): { t: Target; listed: boolean } {
  const repo = def.repos.find((r) => r.line === c.line);
  return {
    t: { campaignId: def.name, git: repo?.git ?? "", forge: repo ? forgeOf(ctx, repo.git) : { kind: "git" } },
    listed: Boolean(repo),
  };
}

/** Each published changeset refreshed from its forge (plain git remotes: whether the branch is still there). */
export async function trackCampaign(ctx: PublishContext, id: string): Promise<TrackReport> {
  const def = await ctx.store.def(id);
  const recorded = await ctx.store.changesets(id);
  const report: TrackReport = { tracked: 0, errors: 0, open: 0 };
  for (const c of recorded.values()) {
    const { t, listed } = targetOf(ctx, def, c);
    const state: TrackState = { changeset: c, listed, forge: { api: Boolean(t.forge.api) }, now: Date.now() };
    const x = await reconcile(ctx, t, state, planTrack, readForTrack(ctx, t));
    if (!x.saved) continue;
    if (x.failed) report.errors++;
    else report.tracked++;
    if (x.changeset && isOpen(x.changeset)) report.open++;
  }
  return report;
}

/** What the track planner asks to know: the pull request as the forge reports it, or the branch's tip on the remote. */
function readForTrack(ctx: PublishContext, t: Target): Reader<TrackState> {
  return async (need) => {
    if (need.need === "status") {
      const api = t.forge.api!;
      return { status: await api.forge.status(api.repo, need.number) };
    }
    if (need.need === "branch")
      return { tip: (await remoteBranch({ ...gitNet(ctx, t), branch: need.branch })) ?? null };
    throw new PatchbayError("internal", `the track planner asked for ${need.need}`);
  };
}

/** What a close did to a campaign's open changesets. */
export interface CloseReport {
  /** Changesets closed: their pull request closed and their branch deleted where patchbay left it. */
  closed: number;
  /** Changesets whose close failed; each one's reason says why, and it stays open. */
  errors: number;
}

/** Every open changeset closed on its forge and its branch deleted (only if still where patchbay left it). */
export async function closeCampaign(ctx: PublishContext, id: string): Promise<CloseReport> {
  const def = await ctx.store.def(id);
  const recorded = await ctx.store.changesets(id);
  const report: CloseReport = { closed: 0, errors: 0 };
  for (const c of recorded.values()) {
    const { t, listed } = targetOf(ctx, def, c);
    const x = await execute(
      ctx,
      t,
      planClose({ changeset: c, listed, forge: { api: Boolean(t.forge.api) }, now: Date.now() }),
    );
    if (!x.saved) continue;
    if (x.failed) report.errors++;
    else report.closed++;
  }
  return report;
}
