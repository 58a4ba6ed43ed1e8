// `patchbay dashboard`: a fastify server with bull-board at /queues, patchbay's own pages (jobs,
// batches, a job's live transcript over server-sent events), cancel and retry, and the queue's
// Prometheus metrics (BullMQ's exportPrometheusMetrics) at /metrics.
//
// Security: it binds 127.0.0.1 unless told otherwise. Every action (cancel, retry, bull-board's
// mutations: any method but GET/HEAD) needs the token; on any other bind every request does.
// The token comes from PATCHBAY_DASHBOARD_TOKEN (or is made up at start on loopback and printed in
// the URL) and is given once as ?token=…, which sets an HttpOnly SameSite=Strict cookie, or on
// each request as `Authorization: Bearer …` (scrapers, scripts). On loopback the Host header must
// name loopback (no DNS rebinding), and a mutation's Origin, when sent, must be this origin.
import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { FastifyAdapter } from "@bull-board/fastify";
import { Job } from "bullmq";
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";
import { BatchClient } from "../queue/batch.js";
import { loadConfig } from "../config.js";
import { keys } from "../queue/keys.js";
import { PatchbayClient, type JobData, type ListState } from "../queue/client.js";
import type { JobResult, TranscriptEvent } from "../spec.js";
import { batchRow, jobDetail, listJobs, parseFilter } from "./data.js";
import { prepareEvent } from "./escape.js";
import { batchesPage, jobPage, jobsPage, PAGE_CSP, STATIC_ASSETS } from "./html.js";

export interface DashboardOptions {
  host?: string;
  port?: number;
  redisUrl?: string;
  queueName?: string;
  /** Default: PATCHBAY_DASHBOARD_TOKEN; on loopback a random one when that is unset. */
  token?: string;
}

export interface Dashboard {
  /** e.g. http://127.0.0.1:7474 */
  url: string;
  token: string;
  /** Whether the token was made up here (then the caller should show it). */
  generatedToken: boolean;
  close(): Promise<void>;
}

export class DashboardConfigError extends Error {
  override name = "DashboardConfigError";
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);
export const isLoopback = (host: string) => LOOPBACK.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
const COOKIE = "patchbay_dashboard";
const SAFE_METHODS = new Set(["GET", "HEAD"]);
const STREAM_ID = /^\d+-\d+$/;

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

export async function startDashboard(opts: DashboardOptions = {}): Promise<Dashboard> {
  const config = loadConfig();
  const host = opts.host ?? "127.0.0.1";
  const port = opts.port ?? 7474;
  const loopback = isLoopback(host);
  const envToken = opts.token ?? (process.env.PATCHBAY_DASHBOARD_TOKEN || undefined); // empty: unset
  if (!loopback && !envToken) throw new DashboardConfigError(`binding ${host} (not loopback) needs a token: set PATCHBAY_DASHBOARD_TOKEN`);
  if (envToken !== undefined && envToken.length < 16) throw new DashboardConfigError("PATCHBAY_DASHBOARD_TOKEN must be at least 16 characters");
  const token = envToken ?? randomBytes(24).toString("base64url");
  const client = new PatchbayClient({ ...(opts.redisUrl ? { redisUrl: opts.redisUrl } : {}), ...(opts.queueName ? { queueName: opts.queueName } : {}) });
  const k = keys(client.queueName);
  const defaultModel = config.model;

  const app = Fastify({ logger: false, trustProxy: false, bodyLimit: 1 << 20, forceCloseConnections: true });
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
      reply.header("Set-Cookie", `${COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/`);
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

  const getJobs = (states: ListState[], start: number, end: number) => client.queue.getJobs(states, start, end);
  app.get("/api/jobs", async (req) => ({ jobs: await listJobs(getJobs, parseFilter(req.query as Record<string, unknown>), defaultModel) }));
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
    return jobDetail(job, state, defaultModel);
  });

  app.post<{ Params: { id: string } }>("/api/jobs/:id/cancel", async (req, reply) => {
    try {
      return { result: await client.cancel(req.params.id) };
    } catch (err) {
      return reply.code(404).send({ error: (err as Error).message });
    }
  });

  app.post<{ Params: { id: string } }>("/api/jobs/:id/retry", async (req, reply) => {
    const job = await findJob(req.params.id);
    if (!job) return reply.code(404).send({ error: `no job ${req.params.id}` });
    const state = await job.getState();
    if (state !== "completed" && state !== "failed") return reply.code(409).send({ error: `job ${job.id} is ${state}: only a finished job can be retried` });
    // Else the retried job would be cancelled at once, or (a result record left by a worker that
    // died just after finishing) return its old result.
    await client.redis.del(k.cancel(job.id!), k.result(job.id!));
    await job.retry(state);
    return { result: "queued again" };
  });

  // The transcript, live: each message is a JSON array of events (inert strings, a cost on each
  // model response), its id the Redis stream id of the last one, so a reconnect goes on from there.
  // An `end` event says the job is over and everything was sent.
  app.get<{ Params: { id: string }; Querystring: { after?: string } }>("/api/jobs/:id/events", async (req, reply) => {
    const id = req.params.id;
    if (!(await findJob(id))) return reply.code(404).send({ error: `no job ${id}` });
    const from = String(req.headers["last-event-id"] ?? req.query.after ?? "0");
    let last = STREAM_ID.test(from) ? from : "0";
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      "Content-Type": "text/event-stream; charset=utf-8",
      "Cache-Control": "no-store",
      Connection: "keep-alive",
      "X-Content-Type-Options": "nosniff",
      "X-Accel-Buffering": "no",
    });
    res.write("retry: 2000\n\n");
    const reader = client.redis.duplicate();
    reader.on("error", () => {});
    let closed = false;
    req.raw.on("close", () => {
      closed = true;
      reader.disconnect();
    });
    const streamKey = k.events(id);
    let idle = 0;
    let sent = 0;
    try {
      while (!closed) {
        // a small first message, so the page paints the start of a long transcript at once
        const r = (await reader.xread("COUNT", sent === 0 ? 100 : 1000, "BLOCK", 1000, "STREAMS", streamKey, last)) as [string, [string, string[]][]][] | null;
        const entries = r?.[0]?.[1] ?? [];
        if (entries.length) {
          idle = 0;
          const events = entries.map(([entryId, fields]) => {
            last = entryId;
            try {
              return prepareEvent(JSON.parse(fields[1] ?? "null") as TranscriptEvent);
            } catch {
              return { type: "unparsed" };
            }
          });
          res.write(`id: ${last}\ndata: ${JSON.stringify(events)}\n\n`);
          sent += events.length;
          continue;
        }
        const job = await findJob(id);
        const state = job ? await job.getState() : "unknown";
        if (!job || state === "completed" || state === "failed") {
          // the job is over: whatever was written just before the end, then `end`
          const tail = (await reader.xread("COUNT", 2000, "STREAMS", streamKey, last)) as [string, [string, string[]][]][] | null;
          const rest = (tail?.[0]?.[1] ?? []).map(([entryId, fields]) => ((last = entryId), prepareEvent(JSON.parse(fields[1] ?? "null") as TranscriptEvent)));
          if (rest.length) res.write(`id: ${last}\ndata: ${JSON.stringify(rest)}\n\n`);
          res.write(`event: end\ndata: ${JSON.stringify({ state })}\n\n`);
          break;
        }
        if (++idle % 15 === 0) res.write(": keep-alive\n\n");
      }
    } catch {
      // the client went away (the reader was disconnected) or Redis did: the browser reconnects
    } finally {
      reader.disconnect();
      res.end();
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
    await client.close();
    throw err;
  }
  const addr = app.server.address();
  const boundPort = typeof addr === "object" && addr ? addr.port : port;
  const urlHost = isIP(host) === 6 ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${boundPort}`,
    token,
    generatedToken: envToken === undefined,
    async close() {
      await app.close();
      await client.close();
    },
  };
}
