// `patchbay dashboard`: a fastify server with bull-board at /queues, patchbay's own pages (jobs,
// batches, campaigns, a job's live transcript over server-sent events), cancel and retry, and the
// queue's Prometheus metrics (BullMQ's exportPrometheusMetrics) at /metrics. This file puts it
// together:
//   settings.ts          options and Config resolved and checked (token, TLS files, the stream cap)
//   auth.ts              the guard, a plugin on every route: token, cookie, Bearer, Host, Origin
//   routes-bull-board.ts bull-board under /queues
//   routes-static.ts     the browser's files under /static/
//   routes-jobs.ts       /jobs pages, /api/jobs (list, one job, patch, cancel, retry)
//   routes-batches.ts    /batches, /api/batches
//   routes-campaigns.ts  /campaigns, /api/campaigns (from Redis: the dashboard never calls a forge)
//   routes-evals.ts      /evals, /api/evals (eval runs, from the eval store in Redis)
//   routes-events.ts     /api/jobs/:id/events, the live transcript (sse.ts, transcript-hub.ts)
//   routes-metrics.ts    /metrics
//   errors.ts            every error answer as application/problem+json, naming the fix (404, 405, 415, …)
//   api/                 the HTTP API: /api/v1 and its OpenAPI document at /api/openapi.json (api/index.ts)
//
// Security: it binds 127.0.0.1 unless told otherwise; see auth.ts for the rules. Every request
// needs the token, reads too, unless the caller opens tokenless reads on loopback (loopbackReads).
// The token comes from PATCHBAY_DASHBOARD_TOKEN (through the Config) or is made up at start on
// loopback and printed in the URL; HTTPS with PATCHBAY_DASHBOARD_TLS_*.
//
// Bounded: /api/jobs pages lean rows (src/web/jobs-list.ts); the live transcripts of every open
// page share one Redis connection, at most PATCHBAY_DASHBOARD_MAX_STREAMS at once; a long patch is
// only sent as a download (/api/jobs/:id/patch).
import Fastify, { type FastifyInstance } from "fastify";
import { randomBytes } from "node:crypto";
import { isIP } from "node:net";
import { loadConfig, type Config } from "../core/config/config.js";
import { PatchbayClient } from "../queue/client.js";
import { authPlugin, frameworkError } from "./auth.js";
import { problemHandlers } from "./errors.js";
import { batchesRoutes } from "./routes-batches.js";
import { campaignsRoutes } from "./routes-campaigns.js";
import { evalsRoutes } from "./routes-evals.js";
import { bullBoardRoutes } from "./routes-bull-board.js";
import { apiRoutes } from "./api/index.js";
import { EventStreams, eventsRoute } from "./routes-events.js";
import { jobsRoutes } from "./routes-jobs.js";
import { metricsRoute } from "./routes-metrics.js";
import { staticRoutes } from "./routes-static.js";
import { dashboardSettings, type DashboardOptions, type DashboardSettings } from "./settings.js";

export { needsToken } from "./auth.js";
export { DashboardConfigError, type DashboardOptions } from "./settings.js";

export interface Dashboard {
  /** e.g. http://127.0.0.1:7474 */
  url: string;
  token: string;
  /** Whether the token was made up here (then the caller should show it). */
  generatedToken: boolean;
  /** The CLIENT SETNAME of its Redis connections: this, and this + "-sse" for the one the live transcripts share. */
  connectionName: string;
  close(): Promise<void>;
}

/** The guard first: its hook covers only the routes registered after it. */
async function registerAll(
  app: FastifyInstance,
  s: DashboardSettings,
  config: Config,
  client: PatchbayClient,
  connectionName: string,
): Promise<void> {
  problemHandlers(app); // before the routes: it indexes them as they are added
  await app.register(authPlugin, {
    token: s.token,
    loopback: s.loopback,
    openReads: s.openReads,
    api: { tokens: config.apiTokens, corsOrigins: config.apiCorsOrigins },
  });
  // the live transcripts of the pages and of the API share one hub and one cap
  const streams = new EventStreams({ client, connectionName: `${connectionName}-sse`, maxStreams: s.maxStreams });
  app.addHook("onClose", () => streams.close());
  await app.register(bullBoardRoutes, { queue: client.queue });
  await app.register(staticRoutes);
  await app.register(jobsRoutes, { client, defaultModel: s.defaultModel });
  await app.register(batchesRoutes, { client });
  await app.register(campaignsRoutes, { client });
  await app.register(evalsRoutes, { client });
  await app.register(eventsRoute, { streams });
  await app.register(apiRoutes, {
    client,
    streams,
    defaultModel: s.defaultModel,
    sources: { roots: config.apiRepoRoots, gitHosts: config.apiGitHosts },
  });
  await app.register(metricsRoute, { queue: client.queue });
}

export async function startDashboard(opts: DashboardOptions = {}): Promise<Dashboard> {
  const config = opts.config ?? loadConfig();
  const s = dashboardSettings(opts, config);
  const connectionName = `patchbay-dashboard-${randomBytes(4).toString("hex")}`;
  // Every job it enqueues is marked as the API's: the workers hold it to their roots and git hosts (src/job/repo/source-check.ts).
  const client = new PatchbayClient({
    redisUrl: s.redisUrl,
    queueName: s.queueName,
    connectionName,
    config,
    origin: "api",
  });
  const app = Fastify({
    logger: false,
    trustProxy: false,
    bodyLimit: 1 << 20,
    frameworkErrors: frameworkError,
    forceCloseConnections: true,
    routerOptions: { maxParamLength: 256 },
    ...(s.tls ? { https: s.tls } : {}),
  }); // a job id is up to 128 characters
  try {
    await registerAll(app, s, config, client, connectionName);
    await app.listen({ host: s.host, port: s.port });
  } catch (err) {
    await app.close().catch(() => {}); // the hub's connection too (its onClose hook)
    await client.close();
    throw err;
  }
  const addr = app.server.address();
  const boundPort = typeof addr === "object" && addr ? addr.port : s.port;
  const urlHost = isIP(s.host) === 6 ? `[${s.host}]` : s.host;
  return {
    url: `${s.tls ? "https" : "http"}://${urlHost}:${boundPort}`,
    token: s.token,
    generatedToken: s.generatedToken,
    connectionName,
    async close() {
      await app.close();
      await client.close();
    },
  };
}
