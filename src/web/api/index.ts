// The HTTP API (docs/api.md), one plugin on the dashboard's server: the same process, client, token
// and guard (src/web/auth.ts: scopes, the API's CORS). This file puts it together:
//   problem.ts  errors as application/problem+json, by the errors' kinds
//   schemas.ts  the routes' zod schemas: the contract's own (src/core/spec/spec.ts) and the wrappers
//   openapi.ts  the OpenAPI 3.1 document from those schemas, at /api/openapi.json
//   jobs.ts     /api/v1/jobs: enqueue, list, status and result, patch, transcript, cancel
//   events.ts   /api/v1/jobs/{id}/events: the dashboard's live transcript (SSE)
//   batches.ts  /api/v1/batches: submit, list, status, summary, cancel, retry
//   evals.ts    /api/v1/evals: eval runs, read-only (the list, one run's summary)
//
// The schemas document the routes; the requests are checked by patchbay's own parsers (the
// client's JobSpec check, the batch file's, the list's query), so a bad request gets the CLI's
// words, and the responses are plain JSON (the tests hold each against the document).
import type { FastifyPluginAsync } from "fastify";
import type { PatchbayClient } from "../../queue/client.js";
import type { EventStreams } from "../routes-events.js";
import { batchesApi } from "./batches.js";
import { eventsApi } from "./events.js";
import { evalsApi } from "./evals.js";
import { jobsApi } from "./jobs.js";
import { openApiRoute, registerOpenApi } from "./openapi.js";
import { sendProblem } from "./problem.js";
import { problemFor, requestContext } from "../errors.js";
import type { ApiSourceRules } from "./repo-roots.js";

export interface ApiOptions {
  client: PatchbayClient;
  streams: EventStreams;
  /** A spec's model when it names none, for the list's rows. */
  defaultModel: string;
  /** PATCHBAY_API_REPO_ROOTS (empty: no local repo) and PATCHBAY_API_GIT_HOSTS (repo-roots.ts). */
  sources: ApiSourceRules;
}

const v1: FastifyPluginAsync<ApiOptions> = async (app, { client, streams, defaultModel, sources }) => {
  // A path no route has (404) or another method's (405): the root's handler (src/web/errors.ts).
  // each without `prefix` in its options: it would be added again
  await app.register(jobsApi, { client, defaultModel, sources });
  await app.register(eventsApi, { streams });
  await app.register(batchesApi, { client, sources });
  await app.register(evalsApi, { client });
};

export const apiRoutes: FastifyPluginAsync<ApiOptions> = async (app, opts) => {
  // Pass-through: the handlers check what they take with patchbay's parsers (see the header).
  app.setValidatorCompiler(() => (data: unknown) => ({ value: data }));
  app.setSerializerCompiler(() => (data: unknown) => JSON.stringify(data));
  app.setErrorHandler((err, req, reply) => sendProblem(reply, problemFor(err, requestContext(req))));
  await registerOpenApi(app);
  await app.register(v1, { ...opts, prefix: "/api/v1" });
  openApiRoute(app);
};
