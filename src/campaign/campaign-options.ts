// The option bags and handles of the campaign API (campaigns.ts, tracker.ts), apart so that each
// member can say what it does and what it defaults to without burying the client.
import type { JobStatus } from "../core/spec/spec.js";
import type { ForgeWait } from "./forge/forge.js";
import type { TrackReport } from "./track.js";

/** How a CampaignClient publishes and tracks on this publishing host: every member is optional. */
export interface CampaignClientOptions {
  /**
   * Where the bare clones of the campaign's repositories are kept between publishes.
   * @default $XDG_CACHE_HOME/patchbay/publish, else ~/.cache/patchbay/publish
   */
  cacheDir?: string;
  /** Told of each wait on a forge's rate limit, so that a CLI can say why it pauses. */
  onWait?: (w: ForgeWait) => void;
  /**
   * How often, in ms, the open changesets are tracked on the campaigns queue after a publish; 0
   * schedules no tracking.
   * @default the Config's PATCHBAY_TRACK_EVERY_MS (10 minutes)
   */
  trackEveryMs?: number;
}

/** Which lines CampaignClient.retry runs again; a line that matches either is run once. */
export interface CampaignRetryOptions {
  /**
   * The changeset states whose lines run again: `conflict` runs the job again on the target
   * branch's new tip.
   * @default none
   */
  states?: readonly "conflict"[];
  /**
   * The job statuses whose lines run again (a line's latest job counts).
   * @default none
   */
  statuses?: readonly JobStatus[];
}

/** How the tracker tells its caller what it did. */
export interface TrackerOptions {
  /** Told of each campaign the tracker tracked, with its report, so that a CLI can show it. */
  onTracked?: (campaignId: string, r: TrackReport) => void;
}

/** A running tracker: it takes the campaigns queue's track jobs until it is closed. */
export interface TrackerHandle {
  /** Stops taking track jobs, and resolves once the one in progress has finished. */
  close(): Promise<void>;
}
