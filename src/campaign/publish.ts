// `campaign publish`: on the publishing host (where the credentials are), each repository's job
// result becomes a branch (pushed with git) and, on a forge, a draft pull request; its changeset
// record says what happened. Each repository is gathered, planned (plan.ts planPublish) and executed
// (execute.ts) on its own: one repository's failure is its own changeset's reason, never the
// others'. Credentials come from the Config (forge tokens) or git's own helpers and SSH agent; they
// are never written to disk, Redis, a changeset or a message.
import os from "node:os";
import { join } from "node:path";
import type { BatchJob } from "../batch/batch-types.js";
import { LineProvenanceError } from "../queue/batch-provenance.js";
import { PatchbayError } from "../core/errors.js";
import type { Changeset } from "./changeset.js";
import type { CampaignDef } from "./store.js";
import { prepareChange } from "./publish-git.js";
import { forgeOf, type PublishContext } from "./context.js";
import { gitNet, reconcile, type Executed, type Reader, type Target } from "./execute.js";
import { planPublish, type PlannedChange, type PublishState } from "./plan.js";

export type { PlannedChange } from "./plan.js";

/** How CampaignClient.publish publishes a campaign's changesets: every member is optional. */
export interface PublishOptions {
  /**
   * Also publish the lines whose job completed but whose verify failed or was not given; their
   * changesets say `verified: false`.
   * @default false: only a verified patch is published
   */
  includeUnverified?: boolean;
  /**
   * Also publish the lines whose job a scripted model answered (`patchbay worker --scripted`): a
   * replayed script, not a model's work, so left out unless asked for (e.g. to try publishing).
   * @default false
   */
  includeScripted?: boolean;
  /**
   * List what would be pushed (the report's `planned`) and push, open and record nothing.
   * @default false
   */
  dryRun?: boolean;
  /**
   * Push over a branch holding commits patchbay did not push, which is otherwise refused so that
   * no one else's work is lost.
   * @default false
   */
  force?: boolean;
  /**
   * Repositories published at once.
   * @default 4
   */
  concurrency?: number;
  /** Told of each repository's changeset as it is done, with how many are done of the total, so that a CLI can show progress. */
  onProgress?: (p: { done: number; total: number; changeset: Changeset }) => void;
}

/** What a publish did: each repository's changeset, and what a dry run would have pushed. */
export interface PublishReport {
  /** Each repository's changeset as this publish left it, in campaign order. */
  changesets: Changeset[];
  /** With dryRun: what would be pushed (nothing is). */
  planned: PlannedChange[];
  /** Repositories whose publish failed (their changesets say why). */
  errors: number;
}

export async function publishCampaign(
  ctx: PublishContext,
  id: string,
  opts: PublishOptions = {},
): Promise<PublishReport> {
  const def = await ctx.store.def(id);
  const st = await ctx.batches.status(id, { jobs: true });
  const prev = await ctx.store.changesets(id);
  const report: PublishReport = { changesets: [], planned: [], errors: 0 };
  const queue = [...def.repos];
  let done = 0;
  const one = async (repo: CampaignDef["repos"][number]) => {
    const x = await publishOne(
      ctx,
      def,
      repo,
      st.jobs!.find((j) => j.line === repo.line),
      prev.get(repo.line),
      opts,
    );
    if (x.failed) report.errors++;
    if (x.planned) report.planned.push(x.planned);
    if (!x.changeset) return;
    report.changesets.push(x.changeset);
    opts.onProgress?.({ done: ++done, total: def.repos.length, changeset: x.changeset });
  };
  await Promise.all(
    Array.from({ length: Math.min(opts.concurrency ?? 4, queue.length) }, async () => {
      for (let r = queue.shift(); r; r = queue.shift()) await one(r);
    }),
  );
  report.changesets.sort((a, b) => a.line - b.line);
  report.planned.sort((a, b) => a.line - b.line);
  return report;
}

/** One repository: gather what its plan needs, plan, execute. */
function publishOne(
  ctx: PublishContext,
  def: CampaignDef,
  repo: CampaignDef["repos"][number],
  job: BatchJob | undefined,
  prev: Changeset | undefined,
  opts: PublishOptions,
): Promise<Executed> {
  const forge = forgeOf(ctx, repo.git);
  const t: Target = { campaignId: def.name, git: repo.git, forge };
  const options = {
    includeUnverified: Boolean(opts.includeUnverified),
    includeScripted: Boolean(opts.includeScripted),
    dryRun: Boolean(opts.dryRun),
    force: Boolean(opts.force),
  };
  const state: PublishState = {
    def,
    repo,
    job,
    prev,
    forge: { kind: forge.kind, api: Boolean(forge.api) },
    options,
    now: Date.now(),
    scrub: (text) => ctx.scrub(text),
  };
  return reconcile(ctx, t, state, planPublish, readForPublish(ctx, t, job));
}

/** What the publish planner asks to know: the job's provenance and result (Redis), the change (host git), the open pull request (the forge). */
function readForPublish(ctx: PublishContext, t: Target, job: BatchJob | undefined): Reader<PublishState> {
  return async (need) => {
    if (!job) throw new PatchbayError("internal", `the publish planner asked for ${need.need} of a line with no job`);
    switch (need.need) {
      case "provenance":
        // Only the line's own job is published: one put under its id by other means is this repository's error.
        return {
          refused: await ctx.batches.checkLine(t.campaignId, job).then(
            () => null,
            (err: unknown) => {
              if (err instanceof LineProvenanceError) return err.message;
              throw err;
            },
          ),
        };
      case "result":
        return {
          outcome: {
            result: (await ctx.client.result(job.jobId)) ?? undefined,
            spec: (await ctx.specOf(job.jobId)) ?? { task: "" },
          },
        };
      case "change": {
        const { date, ...change } = need.change;
        return {
          change: await prepareChange({ ...gitNet(ctx, t), ...change, date: new Date(date), cacheDir: ctx.cacheDir }),
        };
      }
      case "pull-request": {
        const api = t.forge.api!;
        return { open: (await api.forge.findOpen(api.repo, need.head, need.base)) ?? null };
      }
      default:
        throw new PatchbayError("internal", `the publish planner asked for ${need.need}`);
    }
  };
}

/** Where a publishing host keeps its bare clones between publishes. */
export function defaultCacheDir(env: Readonly<Record<string, string | undefined>>): string {
  return join(env.XDG_CACHE_HOME || join(env.HOME || os.homedir(), ".cache"), "patchbay", "publish");
}
