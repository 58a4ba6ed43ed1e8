// Campaigns: the /campaigns page and /api/campaigns (the newest: changesets by state, merged of
// total, jobs and spend), /campaigns/<id> (the burndown and a row per repository, from
// /api/campaigns/<id>), or a 404 page for an id that names no campaign. Read from Redis alone
// (src/campaign/track.ts campaignStatus): the dashboard never talks to a forge.
import type { FastifyPluginAsync } from "fastify";
import { CampaignNotFoundError, CampaignStore } from "../campaign/store.js";
import { campaignStatus } from "../campaign/track.js";
import { BatchClient } from "../batch/batches.js";
import { BatchNotFoundError, checkBatchName } from "../batch/batch-types.js";
import type { PatchbayClient } from "../queue/client.js";
import { campaignRow, campaignView, countByState, type CampaignRow } from "./data.js";
import { campaignPage, campaignsPage, notFoundPage } from "./html.js";
import { htmlPage, sendPage } from "./routes-static.js";
import { problem, sendProblem } from "./api/problem.js";

/** The newest campaigns the list shows. */
const CAMPAIGNS_SHOWN = 100;

/** Whether `id` can be a campaign's (its batch's name rule): anything else names no campaign, unread. */
function validCampaignId(id: string): boolean {
  try {
    checkBatchName(id);
    return true;
  } catch {
    return false;
  }
}

/** A campaign (or, past the retention, its batch) that is not there: undefined; anything else is thrown. */
const notFound = (err: unknown) => {
  if (err instanceof CampaignNotFoundError || err instanceof BatchNotFoundError) return undefined;
  throw err;
};

export const campaignsRoutes: FastifyPluginAsync<{ client: PatchbayClient }> = async (app, { client }) => {
  const ctx = {
    store: new CampaignStore(client.redis, client.queueName, client.retentionSec),
    batches: new BatchClient(client),
  };

  /** A list row without reading each line's job: a line with no changeset recorded is unpublished. */
  async function row(id: string): Promise<CampaignRow | undefined> {
    const def = await ctx.store.def(id).catch(notFound);
    if (!def) return undefined; // expired between the list and here
    const [recorded, batch] = await Promise.all([
      ctx.store.changesets(id),
      ctx.batches.status(id).catch(() => undefined),
    ]);
    const lines = def.repos.map((r) => r.line);
    return campaignRow(id, def.createdAt, countByState(lines, recorded), batch, lines.length);
  }

  app.get("/campaigns", htmlPage(campaignsPage()));
  const page = campaignPage();
  app.get<{ Params: { id: string } }>("/campaigns/:id", async (req, reply) => {
    const id = req.params.id;
    const known =
      validCampaignId(id) &&
      (await ctx.store.def(id).then(
        () => true,
        (err: unknown) => notFound(err) ?? false,
      ));
    return known ? sendPage(reply, page) : sendPage(reply, notFoundPage("campaign", id, client.queueName), 404);
  });
  app.get("/api/campaigns", async () => {
    const ids = await ctx.store.list(CAMPAIGNS_SHOWN);
    const rows = await Promise.all(ids.map(row));
    return { campaigns: rows.filter((r) => r !== undefined) };
  });
  app.get<{ Params: { id: string } }>("/api/campaigns/:id", async (req, reply) => {
    const id = req.params.id;
    const st = validCampaignId(id) ? await campaignStatus(ctx, id).catch(notFound) : undefined;
    if (!st)
      return sendProblem(
        reply,
        problem(
          404,
          `no campaign ${id.slice(0, 200)}: the list at /campaigns (or \`patchbay campaign list\`) has the ids`,
          {
            kind: "not-found",
          },
        ),
      );
    return campaignView(st);
  });
};
