// /api/jobs/:id/events: a job's transcript, live, over server-sent events (src/web/sse.ts), at
// most `maxStreams` at once (more get 503 with Retry-After).
//
// Why not PatchbayClient.watch: watch() duplicates the client's Redis connection for each call and
// blocks an XREAD on it, so every open page would hold a connection of its own, which is the
// unbounded cost issue 23 removed (test/web-bounds.test.ts counts them). It also starts from the
// beginning and yields events without their stream ids, which SSE needs as message ids so a browser
// that reconnects goes on from the last one. So every page reads with non-blocking XREADs on the
// dashboard's command connection and waits on one TranscriptHub (one blocking connection for all
// pages, named by the caller; closed with the server).
import type { FastifyPluginAsync } from "fastify";
import type { PatchbayClient } from "../queue/client.js";
import { keys } from "../queue/keys.js";
import { streamTranscript } from "./sse.js";
import { TranscriptHub } from "./transcript-hub.js";

export interface EventsRouteOptions {
  client: PatchbayClient;
  redisUrl: string;
  /** The CLIENT SETNAME of the hub's connection. */
  connectionName: string;
  /** Live transcripts served at once. */
  maxStreams: number;
}

export const eventsRoute: FastifyPluginAsync<EventsRouteOptions> = async (app, { client, redisUrl, connectionName, maxStreams }) => {
  const k = keys(client.queueName);
  const hub = new TranscriptHub(client.redis, redisUrl, connectionName);
  app.addHook("onClose", () => hub.close());
  let streams = 0;
  app.get<{ Params: { id: string }; Querystring: { after?: string } }>("/api/jobs/:id/events", async (req, reply) => {
    const id = req.params.id;
    if (streams >= maxStreams) return reply.code(503).header("Retry-After", "5").send({ error: `this dashboard serves at most ${maxStreams} live transcripts at once (PATCHBAY_DASHBOARD_MAX_STREAMS); try again shortly` });
    streams++; // counted before the first await, so concurrent requests cannot pass the cap together
    try {
      if ((await client.queue.getJobState(id)) === "unknown") return reply.code(404).send({ error: `no job ${id}` });
      reply.hijack();
      const from = String(req.headers["last-event-id"] ?? req.query.after ?? "0");
      await streamTranscript({ redis: client.redis, hub, streamKey: k.events(id), state: () => client.queue.getJobState(id) }, req.raw, reply.raw, from);
    } finally {
      streams--;
    }
  });
};
