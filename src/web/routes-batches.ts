// Batches: the /batches page and /api/batches, from the batch index (src/queue/batch.ts): progress,
// counts by status, spend.
import type { FastifyPluginAsync } from "fastify";
import { BatchClient } from "../queue/batch.js";
import type { PatchbayClient } from "../queue/client.js";
import { batchRow } from "./data.js";
import { batchesPage } from "./html.js";
import { htmlPage } from "./routes-static.js";

/** The newest batches the list shows. */
const BATCHES_SHOWN = 100;

export const batchesRoutes: FastifyPluginAsync<{ client: PatchbayClient }> = async (app, { client }) => {
  const batches = new BatchClient(client);
  app.get("/batches", htmlPage(batchesPage()));
  app.get("/api/batches", async () => {
    const list = await batches.list({ limit: BATCHES_SHOWN });
    const rows = await Promise.all(list.map((b) => batches.status(b.batchId).catch(() => undefined)));
    return { batches: rows.filter((b) => b !== undefined).map(batchRow) };
  });
};
