// /api/v1/jobs/{id}/events: the dashboard's live transcript (src/web/routes-events.ts: the same hub,
// the same cap, the same stream), with the API's problems for an unknown job or a full house.
import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import type { EventStreams, Refuse } from "../routes-events.js";
import { problem, sendProblem } from "./problem.js";
import { EventsHeaders, EventsQuery, JobId, problems } from "./schemas.js";

const refuseProblem: Refuse = (reply, status, message, headers = {}) =>
  sendProblem(reply, problem(status, message, { kind: status === 404 ? "not-found" : "infra" }), headers);

const DESCRIPTION = `Server-sent events: each message's \`data\` is a JSON array of TranscriptEvents (their strings made
inert, a \`costUsd\` on each model_response), its \`id\` the stream id of the last one. Send that id
back as \`Last-Event-ID\` (or \`?after=\`) to go on from there; without one the stream starts at the
beginning. An \`end\` event (\`data: {"state": …}\`) says the job is over and everything was sent.`;

export const eventsApi: FastifyPluginAsync<{ streams: EventStreams }> = async (app, { streams }) => {
  const response = { description: "the stream", content: { "text/event-stream": { schema: z.string() } } };
  app.get<{ Params: { id: string }; Querystring: { after?: string } }>(
    "/jobs/:id/events",
    {
      schema: {
        operationId: "followJobEvents",
        tags: ["jobs"],
        summary: "A job's transcript, live",
        description: DESCRIPTION,
        params: JobId,
        querystring: EventsQuery,
        headers: EventsHeaders,
        response: { 200: response, ...problems(401, 404, 503) },
      },
    },
    (req, reply) => streams.serve(req.params.id, req, reply, refuseProblem),
  );
};
