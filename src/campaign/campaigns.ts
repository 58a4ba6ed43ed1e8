// The campaign API for programs (and the CLI): submit a campaign file's jobs as a batch, then
// publish, track, close and retry its changesets. Publishing and tracking run where this client
// runs: the forge tokens in its Config never leave this process.
import type { ConnectionOptions } from "bullmq";
import type { Config } from "../core/config/config.js";
import type { PatchbayClient } from "../queue/client.js";
import type { SubmitBatchResult } from "../batch/batch-types.js";
import type { Campaign } from "./file.js";
import { publishContext, type PublishContext } from "./context.js";
import { defaultCacheDir, publishCampaign, type PublishOptions, type PublishReport } from "./publish.js";
import {
  campaignStatus,
  closeCampaign,
  trackCampaign,
  type CampaignStatus,
  type CloseReport,
  type TrackReport,
} from "./track.js";
import { writeCampaignSummary, type CampaignSummary } from "./summary.js";
import { planRetry } from "./plan.js";
import { scheduleTracking, startTracker, unscheduleTracking } from "./tracker.js";
import type { CampaignClientOptions, CampaignRetryOptions, TrackerHandle, TrackerOptions } from "./campaign-options.js";

export type { CampaignClientOptions, CampaignRetryOptions, TrackerHandle, TrackerOptions };

/**
 * The campaigns of one queue, for a program on the publishing host: it submits a campaign file's
 * jobs as a batch, then publishes, tracks, closes and retries the campaign's changesets. The forge
 * tokens in its Config are used here and never leave this process.
 */
export class CampaignClient {
  /** What publish, track and close share: the queue's client, the batch and campaign stores, the forges and the token scrubber. */
  readonly ctx: PublishContext;

  constructor(
    readonly c: PatchbayClient,
    readonly config: Config,
    private readonly opts: CampaignClientOptions = {},
  ) {
    this.ctx = publishContext(c, config, {
      cacheDir: opts.cacheDir ?? defaultCacheDir(config.hostEnv),
      ...(opts.onWait ? { onWait: opts.onWait } : {}),
    });
  }

  private get connection(): ConnectionOptions {
    return this.c.redis;
  }

  /** Enqueues the campaign's jobs (idempotent, as a batch named after it) and stores its settings. */
  async submit(campaign: Campaign): Promise<SubmitBatchResult> {
    const r = await this.ctx.batches.submit(campaign.lines, {
      name: campaign.name,
      ...(campaign.budgetUsd !== undefined ? { budgetUsd: campaign.budgetUsd } : {}),
      lines: campaign.lines.map((l) => l.line),
    });
    const createdAt = await this.ctx.store.def(campaign.name).then(
      (d) => d.createdAt,
      () => Date.now(),
    );
    await this.ctx.store.saveDef({
      name: campaign.name,
      createdAt,
      ...(campaign.budgetUsd !== undefined ? { budgetUsd: campaign.budgetUsd } : {}),
      publish: campaign.publish,
      repos: campaign.repos,
    });
    return r;
  }

  /** Every repository's changeset as it stands (recorded or derived from its job), with the counts by state and the open ones' checks. */
  status(id: string): Promise<CampaignStatus> {
    return this.c.hold(() => campaignStatus(this.ctx, id));
  }

  /** Publishes, then (unless a dry run or trackEveryMs is 0) schedules tracking while changesets are open. */
  async publish(id: string, opts: PublishOptions = {}): Promise<PublishReport> {
    const r = await this.c.hold(() =>
      opts.dryRun
        ? publishCampaign(this.ctx, id, opts)
        : this.ctx.store.withLock(id, "campaign publish", () => publishCampaign(this.ctx, id, opts)),
    );
    const every = this.opts.trackEveryMs ?? this.config.trackEveryMs;
    if (!opts.dryRun && every !== 0 && r.changesets.some((c) => c.state === "draft" || c.state === "open"))
      await scheduleTracking(this.connection, this.c.queueName, id, every);
    return r;
  }

  /**
   * Refreshes each published changeset from its forge (state, CI checks, review; on a plain remote,
   * whether the branch is still there), holding the campaign's lock so that no publish or close runs meanwhile.
   */
  track(id: string): Promise<TrackReport> {
    return this.c.hold(() => this.ctx.store.withLock(id, "campaign track", () => trackCampaign(this.ctx, id)));
  }

  /**
   * Closes every open pull request of the campaign and deletes its branch if it is still at the
   * commit patchbay pushed, then removes the campaign's tracking schedule, since nothing is left open.
   */
  async close(id: string): Promise<CloseReport> {
    const r = await this.c.hold(() => this.ctx.store.withLock(id, "campaign close", () => closeCampaign(this.ctx, id)));
    await unscheduleTracking(this.connection, this.c.queueName, id);
    return r;
  }

  /**
   * Runs again, as new jobs of the campaign's batch, the lines whose changeset is in one of
   * `states` (e.g. conflict: on the target's new tip) or whose latest job ended with one of `statuses`.
   */
  async retry(id: string, o: CampaignRetryOptions): Promise<{ ids: string[]; missing: number[] }> {
    const st = await this.status(id);
    const reruns = planRetry(st.changesets, st.batch.jobs ?? [], o);
    if (!reruns.length) return { ids: [], missing: [] };
    return this.ctx.batches.retry(id, { lines: reruns.map((r) => r.line) });
  }

  /** The ids of the queue's campaigns, newest first, at most `limit` of them (50 unless told). */
  async list(limit = 50): Promise<string[]> {
    return this.ctx.store.list(limit);
  }

  /** Writes DIR/summary.json and DIR/summary.md: the batch's summary with the changesets' table. */
  async writeSummary(id: string, dir: string): Promise<CampaignSummary> {
    const [batch, st] = await Promise.all([this.ctx.batches.summary(id), this.status(id)]);
    return writeCampaignSummary(dir, batch, st);
  }

  /**
   * Runs the tracker on this publishing host: it takes the track jobs that the campaigns queue's
   * schedules put there and refreshes those campaigns' changesets, until the returned handle is closed.
   */
  tracker(o: TrackerOptions = {}): TrackerHandle {
    return startTracker(this.ctx, this.connection, o);
  }
}
