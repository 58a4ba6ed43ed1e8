// `patchbay dashboard`: a fastify server with bull-board at /queues, patchbay's own pages (jobs,
// batches, a job's live transcript over server-sent events), cancel and retry, and the queue's
// Prometheus metrics (BullMQ's exportPrometheusMetrics) at /metrics.
//
// Security: it binds 127.0.0.1 unless told otherwise. Every action (cancel, retry, bull-board's
// mutations: any method but GET/HEAD) needs the token; on any other bind every request does.
// The token comes from PATCHBAY_DASHBOARD_TOKEN (or is made up at start on loopback and printed in
// the URL) and is given once as ?token=…, which sets an HttpOnly SameSite=Strict cookie (Secure
// when the request came over TLS: served with PATCHBAY_DASHBOARD_TLS_*, or through a proxy that
// says `X-Forwarded-Proto: https`), or on each request as `Authorization: Bearer …` (scrapers,
// scripts). On loopback the Host header must name loopback (no DNS rebinding), and a mutation's
// Origin, when sent, must be this origin.
//
// Bounded: /api/jobs pages lean rows (src/web/jobs-list.ts); the live transcripts of every open
// page share one Redis connection (src/web/transcript-hub.ts), at most PATCHBAY_DASHBOARD_MAX_STREAMS
// at once; a long patch is only sent as a download (/api/jobs/:id/patch).
import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { FastifyAdapter } from "@bull-board/fastify";
import { Job } from "bullmq";
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import type { TLSSocket } from "node:tls";
import { BatchClient } from "../queue/batch.js";
import { loadConfig } from "../config.js";
import { keys } from "../queue/keys.js";
import { JobNotFoundError, PatchbayClient, type JobData } from "../queue/client.js";
import type { JobResult } from "../spec.js";
import { batchRow, jobDetail } from "./data.js";
import { batchesPage, jobPage, jobsPage, PAGE_CSP, STATIC_ASSETS } from "./html.js";
import { BadQuery, listJobsPage, parseJobsQuery } from "./jobs-list.js";
import { streamTranscript } from "./sse.js";
import { TranscriptHub } from "./transcript-hub.js";

export interface DashboardOptions {
  host?: string;
  port?: number;
  redisUrl?: string;
  queueName?: string;
  /** Default: PATCHBAY_DASHBOARD_TOKEN; on loopback a random one when that is unset. */
  token?: string;
  /** Serve HTTPS with this certificate and key (PEM); default: the files PATCHBAY_DASHBOARD_TLS_CERT/_KEY name. */
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** Live transcripts served at once; default PATCHBAY_DASHBOARD_MAX_STREAMS (64). */
  maxStreams?: number;
}

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

export class DashboardConfigError extends Error {
  override name = "DashboardConfigError";
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);
const isLoopback = (host: string) => LOOPBACK.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
const COOKIE = "patchbay_dashboard";
const SAFE_METHODS = new Set(["GET", "HEAD"]);
/** A patch up to this size comes with the job page's data; a longer one is a download. */
const DETAIL_PATCH_MAX = 1024 * 1024;

/** Whether a request needs the token: every mutation, and on a bind that is not loopback every request. */
export const needsToken = (method: string, loopbackBind: boolean) => !loopbackBind || !SAFE_METHODS.has(method.toUpperCase());

const digest = (s: string) => createHash("sha256").update(s).digest();
const sameSecret = (a: string, b: string) => timingSafeEqual(digest(a), digest(b));

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const i = part.indexOf("=");
    if (i > 0 && part.slice(0, i).trim() === name) {
      try {
        return decodeURIComponent(part.slice(i + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/**
 * Whether a request reached us over TLS: our own HTTPS, or a proxy in front that says so. The header
 * is trusted for one thing only, adding `Secure` to the cookie: a client that forges it only keeps
 * its own cookie off plain HTTP.
 */
function overTls(encrypted: boolean, headers: Record<string, string | string[] | undefined>): boolean {
  if (encrypted) return true;
  const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v)?.split(",")[0]?.trim().toLowerCase();
  if (first(headers["x-forwarded-proto"]) === "https") return true;
  return /(^|;)\s*proto="?https"?\s*(;|$)/i.test(first(headers.forwarded) ?? "");
}

/** The cookie the token sets: Secure over TLS (see overTls). */
const tokenCookie = (token: string, secure: boolean) => `${COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/${secure ? "; Secure" : ""}`;

function tlsOptions(opts: DashboardOptions, config: ReturnType<typeof loadConfig>): { cert: string | Buffer; key: string | Buffer } | undefined {
  if (opts.tls) return opts.tls;
  const t = config.dashboardTls;
  if (!t) return undefined;
  if (!t.cert || !t.key) throw new DashboardConfigError("HTTPS needs both PATCHBAY_DASHBOARD_TLS_CERT and PATCHBAY_DASHBOARD_TLS_KEY (PEM files); one of them is unset");
  try {
    return { cert: readFileSync(t.cert), key: readFileSync(t.key) };
  } catch (err) {
    throw new DashboardConfigError(`cannot read the dashboard's TLS files: ${(err as Error).message}`);
  }
}

export async function startDashboard(opts: DashboardOptions = {}): Promise<Dashboard> {
  const config = loadConfig();
  const host = opts.host ?? "127.0.0.1";
  const port = opts.port ?? 7474;
  const loopback = isLoopback(host);
  const envToken = opts.token ?? (process.env.PATCHBAY_DASHBOARD_TOKEN || undefined); // empty: unset
  if (!loopback && !envToken) throw new DashboardConfigError(`binding ${host} (not loopback) needs a token: set PATCHBAY_DASHBOARD_TOKEN`);
  if (envToken !== undefined && envToken.length < 16) throw new DashboardConfigError("PATCHBAY_DASHBOARD_TOKEN must be at least 16 characters");
  const token = envToken ?? randomBytes(24).toString("base64url");
  const tls = tlsOptions(opts, config);
  const maxStreams = opts.maxStreams ?? config.dashboardMaxStreams;
  const connectionName = `patchbay-dashboard-${randomBytes(4).toString("hex")}`;
  const redisUrl = opts.redisUrl ?? config.redisUrl;
  const client = new PatchbayClient({ redisUrl, connectionName, ...(opts.queueName ? { queueName: opts.queueName } : {}) });
  const k = keys(client.queueName);
  const defaultModel = config.model;
  const hub = new TranscriptHub(client.redis, redisUrl, `${connectionName}-sse`);

  const app = Fastify({ logger: false, trustProxy: false, bodyLimit: 1 << 20, forceCloseConnections: true, ...(tls ? { https: tls } : {}) });
  const authorized = (req: FastifyRequest) => {
    const h = req.headers.authorization;
    if (typeof h === "string" && h.startsWith("Bearer ") && sameSecret(h.slice(7).trim(), token)) return true;
    const c = cookieValue(req.headers.cookie, COOKIE);
    return c !== undefined && sameSecret(c, token);
  };

  app.addHook("onRequest", async (req, reply) => {
    reply.header("X-Content-Type-Options", "nosniff");
    reply.header("Referrer-Policy", "no-referrer");
    reply.header("X-Frame-Options", "DENY");
    const hostHeader = req.headers.host ?? "";
    if (loopback) {
      // DNS rebinding: a page of another site resolving its name to 127.0.0.1 sends its own Host.
      const name = hostHeader.replace(/:\d+$/, "").replace(/^\[(.*)\]$/, "$1");
      if (!isLoopback(name)) return reply.code(403).type("text/plain").send("forbidden host\n");
    }
    const url = new URL(req.url, "http://x");
    const given = url.searchParams.get("token");
    if (given !== null && SAFE_METHODS.has(req.method)) {
      if (!sameSecret(given, token)) return reply.code(401).type("text/plain").send("wrong token\n");
      url.searchParams.delete("token");
      reply.header("Set-Cookie", tokenCookie(token, overTls((req.raw.socket as TLSSocket).encrypted === true, req.headers)));
      return reply.redirect(`${url.pathname.replace(/^[/\\]+/, "/")}${url.search}`, 303); // always this origin
    }
    const mutation = !SAFE_METHODS.has(req.method);
    if (needsToken(req.method, loopback) && !authorized(req)) {
      return reply.code(401).type("application/json").send({ error: "this needs the dashboard token (PATCHBAY_DASHBOARD_TOKEN): open the page once with ?token=…, or send Authorization: Bearer …" });
    }
    if (mutation) {
      const origin = req.headers.origin;
      if (origin !== undefined && origin !== `http://${hostHeader}` && origin !== `https://${hostHeader}`) {
        return reply.code(403).type("application/json").send({ error: "cross-origin request refused" });
      }
    }
  });

  // bull-board: queue administration, its own UI (React) and API under /queues.
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath("/queues");
  createBullBoard({ queues: [new BullMQAdapter(client.queue)], serverAdapter });
  await app.register(serverAdapter.registerPlugin(), { prefix: "/queues" });

  const page = (html: string) => (_req: FastifyRequest, reply: FastifyReply) =>
    reply.header("Content-Security-Policy", PAGE_CSP).header("Cache-Control", "no-store").type("text/html; charset=utf-8").send(html);
  app.get("/", (_req, reply) => reply.redirect("/jobs", 302));
  app.get("/jobs", page(jobsPage()));
  app.get("/batches", page(batchesPage()));
  app.get("/jobs/:id", page(jobPage()));
  app.get<{ Params: { name: string } }>("/static/:name", (req, reply) => {
    const a = STATIC_ASSETS[req.params.name];
    if (!a) return reply.code(404).type("text/plain").send("not found\n");
    return reply.header("Cache-Control", "no-cache").type(a.type).send(a.body);
  });

  app.get("/api/jobs", async (req, reply) => {
    try {
      return await listJobsPage(client.redis, client.queue, client.queueName, parseJobsQuery(req.query as Record<string, unknown>), defaultModel);
    } catch (err) {
      if (err instanceof BadQuery) return reply.code(400).send({ error: err.message });
      throw err;
    }
  });
  // Batches from the batch index (src/queue/batch.ts): progress, counts by status, spend.
  const batches = new BatchClient(client);
  app.get("/api/batches", async () => {
    const list = await batches.list({ limit: 100 });
    const rows = await Promise.all(list.map((b) => batches.status(b.batchId).catch(() => undefined)));
    return { batches: rows.filter((b) => b !== undefined).map(batchRow) };
  });

  const findJob = async (id: string) => (await Job.fromId<JobData, JobResult>(client.queue, id)) ?? undefined;
  app.get<{ Params: { id: string } }>("/api/jobs/:id", async (req, reply) => {
    const state = await client.queue.getJobState(req.params.id); // before the job, so a finished one carries its result
    const job = await findJob(req.params.id);
    if (!job) return reply.code(404).send({ error: `no job ${req.params.id}` });
    const stored = job.returnvalue?.patchStored;
    const patch = stored && stored.bytes <= DETAIL_PATCH_MAX ? ((await client.redis.get(k.patch(job.id!))) ?? undefined) : undefined;
    return jobDetail(job, state, defaultModel, { patch });
  });

  // The whole patch, as a file (a long one is not part of the job page's data).
  app.get<{ Params: { id: string } }>("/api/jobs/:id/patch", async (req, reply) => {
    const job = await findJob(req.params.id);
    const r = job?.returnvalue;
    if (!job || !r) return reply.code(404).send({ error: `no finished job ${req.params.id}` });
    const patch = r.patchStored ? await client.redis.getBuffer(k.patch(job.id!)) : Buffer.from(r.patch);
    if (!patch) return reply.code(410).send({ error: `the patch of job ${job.id} is no longer kept (PATCHBAY_RETENTION_SEC)` });
    const name = `${job.id!.replace(/[^A-Za-z0-9_.-]/g, "_")}.patch`;
    return reply.header("Content-Security-Policy", "default-src 'none'; sandbox").header("Content-Disposition", `attachment; filename="${name}"`).header("Cache-Control", "no-store").type("text/plain; charset=utf-8").send(patch);
  });

  app.post<{ Params: { id: string } }>("/api/jobs/:id/cancel", async (req, reply) => {
    try {
      return { result: await client.cancel(req.params.id) };
    } catch (err) {
      return reply.code(404).send({ error: (err as Error).message });
    }
  });

  app.post<{ Params: { id: string } }>("/api/jobs/:id/retry", async (req, reply) => {
    const id = req.params.id;
    try {
      const r = await client.retry(id);
      if (!r.retried) return reply.code(409).send({ error: `job ${id} is ${r.state}: only a finished job can be retried` });
      return { result: "queued again" };
    } catch (err) {
      if (err instanceof JobNotFoundError) return reply.code(404).send({ error: `no job ${id}` });
      throw err;
    }
  });

  // The transcript, live (src/web/sse.ts): every open page on the hub's one Redis connection.
  let streams = 0;
  app.get<{ Params: { id: string }; Querystring: { after?: string } }>("/api/jobs/:id/events", async (req, reply) => {
    const id = req.params.id;
    if (streams >= maxStreams) return reply.code(503).header("Retry-After", "5").send({ error: `this dashboard serves at most ${maxStreams} live transcripts at once (PATCHBAY_DASHBOARD_MAX_STREAMS); try again shortly` });
    streams++; // counted before the first await, so concurrent requests cannot pass the cap together
    try {
      if ((await client.queue.getJobState(id)) === "unknown") return reply.code(404).send({ error: `no job ${id}` });
      reply.hijack();
      await streamTranscript({ redis: client.redis, hub, streamKey: k.events(id), state: () => client.queue.getJobState(id) }, req.raw, reply.raw, String(req.headers["last-event-id"] ?? req.query.after ?? "0"));
    } finally {
      streams--;
    }
  });

  // Queue-level metrics (waiting, active, completed, failed, ...) from BullMQ itself.
  app.get("/metrics", async (_req, reply) => {
    const text = await client.queue.exportPrometheusMetrics();
    return reply.type("text/plain; version=0.0.4; charset=utf-8").send(text.endsWith("\n") ? text : `${text}\n`);
  });

  try {
    await app.listen({ host, port });
  } catch (err) {
    await hub.close();
    await client.close();
    throw err;
  }
  const addr = app.server.address();
  const boundPort = typeof addr === "object" && addr ? addr.port : port;
  const urlHost = isIP(host) === 6 ? `[${host}]` : host;
  return {
    url: `${tls ? "https" : "http"}://${urlHost}:${boundPort}`,
    token,
    generatedToken: envToken === undefined,
    connectionName,
    async close() {
      await app.close();
      await hub.close();
      await client.close();
    },
  };
}
