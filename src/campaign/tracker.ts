// Tracking on the queue: while a campaign has open changesets, a BullMQ job scheduler puts a
// `track` job on the campaigns queue (`<queue>-campaigns`) every interval; `patchbay campaign
// tracker`, run where the forge tokens are, takes them and refreshes the changesets. When none is
// open any more, the scheduler of that campaign is removed.
import { Queue, Worker, type ConnectionOptions } from "bullmq";
import type { PublishContext } from "./context.js";
import { trackCampaign } from "./track.js";
import { CampaignBusyError } from "./store.js";
import type { TrackerHandle, TrackerOptions } from "./campaign-options.js";

export const DEFAULT_TRACK_EVERY_MS = 10 * 60_000;
export const trackQueueName = (queueName: string) => `${queueName}-campaigns`;
const schedulerId = (campaignId: string) => `track:${campaignId}`;

/** Tracks the campaign every `everyMs` (an existing schedule is updated, not doubled). */
export async function scheduleTracking(
  connection: ConnectionOptions,
  queueName: string,
  campaignId: string,
  everyMs = DEFAULT_TRACK_EVERY_MS,
): Promise<void> {
  const q = new Queue(trackQueueName(queueName), { connection });
  try {
    await q.upsertJobScheduler(
      schedulerId(campaignId),
      { every: everyMs },
      { name: "track", data: { campaignId }, opts: { removeOnComplete: 100, removeOnFail: 100 } },
    );
  } finally {
    await q.close();
  }
}

/** Removes the campaign's tracking schedule, once nothing of it is open or it is closed, so that no more track jobs are put. */
export async function unscheduleTracking(
  connection: ConnectionOptions,
  queueName: string,
  campaignId: string,
): Promise<void> {
  const q = new Queue(trackQueueName(queueName), { connection });
  try {
    await q.removeJobScheduler(schedulerId(campaignId));
  } finally {
    await q.close();
  }
}

/** Takes the campaigns queue's track jobs until closed; `onTracked` hears each campaign's report. */
export function startTracker(
  ctx: PublishContext,
  connection: ConnectionOptions,
  o: TrackerOptions = {},
): TrackerHandle {
  const w = new Worker<{ campaignId: string }>(
    trackQueueName(ctx.client.queueName),
    async (job) => {
      const id = job.data.campaignId;
      // A publish, track or close holds the campaign: this round is skipped, the next one tracks.
      const r = await ctx.store
        .withLock(id, "campaign tracker", () => trackCampaign(ctx, id))
        .catch((err: unknown) => {
          if (err instanceof CampaignBusyError) return undefined;
          throw err;
        });
      if (!r) return { skipped: "busy" };
      o.onTracked?.(id, r);
      if (r.open === 0) await unscheduleTracking(connection, ctx.client.queueName, id);
      return r;
    },
    { connection, concurrency: 1 },
  );
  w.on("error", () => {}); // a Redis blip: the worker reconnects; the next run tracks again
  return { close: () => w.close() };
}
