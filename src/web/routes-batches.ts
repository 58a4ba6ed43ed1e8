// Batches: the /batches page and /api/batches, from the batch index (src/batch/batches.ts): progress,
// counts by status, spend. /batches/<id> is the batch's jobs (the list filtered by it, where the
// batch links go), or a 404 page for an id that names no batch.
import type { FastifyPluginAsync } from "fastify";
import { BatchClient } from "../batch/batches.js";
import { BatchNotFoundError, checkBatchName } from "../batch/batch-types.js";
import type { PatchbayClient } from "../queue/client.js";
import { batchRow } from "./data.js";
import { batchesPage, notFoundPage } from "./html.js";
import { htmlPage, sendPage } from "./routes-static.js";

/** The newest batches the list shows. */
const BATCHES_SHOWN = 100;

/** Whether `id` can be a batch's (checkBatchName's rule): anything else names no batch, unread. */
function validBatchId(id: string): boolean {
  try {
    checkBatchName(id);
    return true;
  } catch {
    return false;
  }
}

export const batchesRoutes: FastifyPluginAsync<{ client: PatchbayClient }> = async (app, { client }) => {
  const batches = new BatchClient(client);
  app.get("/batches", htmlPage(batchesPage()));
  app.get<{ Params: { id: string } }>("/batches/:id", async (req, reply) => {
    const id = req.params.id;
    const known =
      validBatchId(id) &&
      (await batches.status(id).then(
        () => true,
        (err: unknown) => {
          if (err instanceof BatchNotFoundError) return false;
          throw err;
        },
      ));
    if (!known) return sendPage(reply, notFoundPage("batch", id, client.queueName), 404);
    return reply.redirect(`/jobs?batch=${encodeURIComponent(id)}`, 302);
  });
  app.get("/api/batches", async () => {
    const list = await batches.list({ limit: BATCHES_SHOWN });
    const rows = await Promise.all(list.map((b) => batches.status(b.batchId).catch(() => undefined)));
    return { batches: rows.filter((b) => b !== undefined).map(batchRow) };
  });
};
