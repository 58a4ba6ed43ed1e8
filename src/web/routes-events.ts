// /api/jobs/:id/events: a job's transcript, live, over server-sent events (src/web/sse.ts), at
// most `maxStreams` at once (more get 503 with Retry-After).
//
// Why not PatchbayClient.watch: watch() duplicates the client's Redis connection for each call and
// blocks an XREAD on it, so every open page would hold a connection of its own, which is the
// unbounded cost issue 23 removed (test/integration/web-bounds.test.ts counts them). It also starts from the
// beginning and yields events without their stream ids, which SSE needs as message ids so a browser
// that reconnects goes on from the last one. So every page reads with non-blocking XREADs on the
// dashboard's command connection and waits on one TranscriptHub (one blocking connection for all
// pages, named by the caller; closed with the server).
import { count } from "../core/count.js";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { PatchbayClient } from "../queue/client.js";
import { keys } from "../queue/keys.js";
import { streamTranscript } from "./sse.js";
import { TranscriptHub } from "./transcript-hub.js";
import { problem, sendProblem } from "./api/problem.js";

export interface EventStreamsOptions {
  client: PatchbayClient;
  /** The CLIENT SETNAME of the hub's connection. */
  connectionName: string;
  /** Live transcripts served at once. */
  maxStreams: number;
}

/** How a route says no (404, 503) in its own format: the dashboard's `{ error }`, the API's problem+json. */
export type Refuse = (
  reply: FastifyReply,
  status: 404 | 503,
  message: string,
  headers?: Record<string, string>,
) => FastifyReply;

/** The live transcripts of a dashboard: one hub and one cap, shared by the dashboard's route and the HTTP API's. */
export class EventStreams {
  private readonly hub: TranscriptHub;
  private streams = 0;
  constructor(private readonly o: EventStreamsOptions) {
    this.hub = new TranscriptHub(o.client.redis, o.connectionName);
  }

  /** Streams job `id`'s events from Last-Event-ID (or ?after=), or refuses: an unknown job, or the cap reached. */
  async serve(
    id: string,
    req: FastifyRequest<{ Querystring: { after?: string } }>,
    reply: FastifyReply,
    refuse: Refuse,
  ): Promise<FastifyReply | undefined> {
    const { client, maxStreams } = this.o;
    if (this.streams >= maxStreams)
      return refuse(
        reply,
        503,
        `this dashboard serves at most ${count(maxStreams, "live transcript")} at once (PATCHBAY_DASHBOARD_MAX_STREAMS); try again shortly`,
        { "Retry-After": "5" },
      );
    this.streams++; // counted before the first await, so concurrent requests cannot pass the cap together
    try {
      if ((await client.queue.getJobState(id)) === "unknown")
        return refuse(
          reply,
          404,
          `no job ${id} in queue ${client.queueName}` /* the CLI's words, as the API's other routes */,
        );
      // headers set so far (the guard's, CORS) would be lost with fastify's reply: onto the raw one
      for (const [name, value] of Object.entries(reply.getHeaders()))
        if (value !== undefined) reply.raw.setHeader(name, value);
      reply.hijack();
      const from = String(req.headers["last-event-id"] ?? req.query.after ?? "0");
      await streamTranscript(
        {
          redis: client.redis,
          hub: this.hub,
          streamKey: keys(client.queueName).events(id),
          state: () => client.queue.getJobState(id),
        },
        req.raw,
        reply.raw,
        from,
      );
      return undefined;
    } finally {
      this.streams--;
    }
  }

  close(): Promise<void> {
    return this.hub.close();
  }
}

const refuseJson: Refuse = (reply, status, message, headers = {}) =>
  sendProblem(reply, problem(status, message, { kind: status === 404 ? "not-found" : "infra" }), headers);

export const eventsRoute: FastifyPluginAsync<{ streams: EventStreams }> = async (app, { streams }) => {
  app.get<{ Params: { id: string }; Querystring: { after?: string } }>("/api/jobs/:id/events", (req, reply) =>
    streams.serve(req.params.id, req, reply, refuseJson),
  );
};
