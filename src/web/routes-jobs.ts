// Jobs: the /jobs and /jobs/:id pages, and their JSON API: the list (paged, lean rows:
// src/web/jobs-list.ts), one job with its patch when short, the whole patch as a download, cancel
// and retry (through the client: the dashboard touches no queue key itself). The live transcript is
// src/web/routes-events.ts.
import { findJob } from "../queue/find-job.js";
import type { FastifyInstance, FastifyPluginAsync } from "fastify";
import { JobNotFoundError, type JobData, type PatchbayClient } from "../queue/client.js";
import { keys } from "../queue/keys.js";
import type { JobResult } from "../core/spec/spec.js";
import { jobDetail } from "./data.js";
import { jobPage, jobsPage, notFoundPage } from "./html.js";
import { BadQuery, listJobsPage, parseJobsQuery } from "./jobs-list.js";
import { htmlPage, sendPage } from "./routes-static.js";
import { problem, sendProblem } from "./api/problem.js";

export interface JobsRoutesOptions {
  client: PatchbayClient;
  /** A spec's model when it names none, for the rows. */
  defaultModel: string;
}

/** A patch up to this size comes with the job page's data; a longer one is a download. */
export const DETAIL_PATCH_MAX = 1024 * 1024;

type ById = { Params: { id: string } };

/** A job id that names no job, as a problem naming where the ids are. */
const noJob = (id: string, queueName: string) =>
  problem(404, `no job ${id} in queue ${queueName}: the list at /jobs (or \`patchbay list\`) has the ids`, {
    kind: "not-found",
  });

function pages(app: FastifyInstance, client: PatchbayClient): void {
  app.get("/", (_req, reply) => reply.redirect("/jobs", 302));
  app.get("/jobs", htmlPage(jobsPage()));
  const page = jobPage();
  // The page is a shell that fetches the job; an id that names no job is a 404 page saying so.
  app.get<ById>("/jobs/:id", async (req, reply) =>
    (await jobExists(client, req.params.id))
      ? sendPage(reply, page)
      : sendPage(reply, notFoundPage("job", req.params.id, client.queueName), 404),
  );
}

/**
 * Whether a job's hash exists, whatever its state (by its `timestamp`, which BullMQ writes on add):
 * the queue's own keys under the same prefix (`meta`, `id`, `events`) are no job.
 */
async function jobExists(client: PatchbayClient, id: string): Promise<boolean> {
  try {
    return (await client.redis.hexists(client.queue.toKey(id), "timestamp")) === 1;
  } catch (err) {
    if (/WRONGTYPE/.test((err as Error).message)) return false; // `id` (a counter), `events` (a stream)
    throw err;
  }
}

function reads(app: FastifyInstance, { client, defaultModel }: JobsRoutesOptions): void {
  const k = keys(client.queueName);
  const jobOf = (id: string) => findJob<JobData, JobResult>(client.queue, id);

  app.get("/api/jobs", async (req, reply) => {
    try {
      return await listJobsPage(
        client.redis,
        client.queue,
        client.queueName,
        parseJobsQuery(req.query as Record<string, unknown>),
        defaultModel,
      );
    } catch (err) {
      if (err instanceof BadQuery) return sendProblem(reply, problem(400, err.message, { kind: "usage" }));
      throw err;
    }
  });

  app.get<ById>("/api/jobs/:id", async (req, reply) => {
    const state = await client.queue.getJobState(req.params.id); // before the job, so a finished one carries its result
    const job = await jobOf(req.params.id);
    if (!job) return sendProblem(reply, noJob(req.params.id, client.queueName));
    const stored = job.returnvalue?.patchStored;
    const patch =
      stored && stored.bytes <= DETAIL_PATCH_MAX
        ? ((await client.redis.get(k.patch(job.id!))) ?? undefined)
        : undefined;
    // canWrite: whether this viewer's Cancel and Retry would pass (tokenless reads cannot write)
    return { ...jobDetail(job, state, defaultModel, { patch }), canWrite: req.canWrite };
  });

  // The whole patch, as a file (a long one is not part of the job page's data).
  app.get<ById>("/api/jobs/:id/patch", async (req, reply) => {
    const job = await jobOf(req.params.id);
    const r = job?.returnvalue;
    if (!job || !r)
      return sendProblem(
        reply,
        problem(404, `no finished job ${req.params.id}: a job's patch is there once it has finished`, {
          kind: "not-found",
        }),
      );
    const patch = r.patchStored ? await client.redis.getBuffer(k.patch(job.id!)) : Buffer.from(r.patch);
    if (!patch)
      return sendProblem(
        reply,
        problem(
          410,
          `the patch of job ${job.id} is no longer kept: patches are kept PATCHBAY_RETENTION_SEC, raise it to keep them longer`,
          { kind: "not-found" },
        ),
      );
    const name = `${job.id!.replace(/[^A-Za-z0-9_.-]/g, "_")}.patch`;
    return reply
      .header("Content-Security-Policy", "default-src 'none'; sandbox")
      .header("Content-Disposition", `attachment; filename="${name}"`)
      .header("Cache-Control", "no-store")
      .type("text/plain; charset=utf-8")
      .send(patch);
  });
}

/** Cancel and retry: mutations, so the auth plugin wants the token and this origin. */
function actions(app: FastifyInstance, client: PatchbayClient): void {
  app.post<ById>("/api/jobs/:id/cancel", async (req, reply) => {
    try {
      return { result: await client.cancel(req.params.id) };
    } catch (err) {
      if (err instanceof JobNotFoundError) return sendProblem(reply, noJob(req.params.id, client.queueName));
      throw err;
    }
  });

  app.post<ById>("/api/jobs/:id/retry", async (req, reply) => {
    const id = req.params.id;
    try {
      const r = await client.retry(id);
      if (!r.retried)
        return sendProblem(
          reply,
          problem(409, `job ${id} is ${r.state}: only a finished job can be retried (cancel it first)`, {
            kind: "conflict",
          }),
        );
      return { result: "queued again" };
    } catch (err) {
      if (err instanceof JobNotFoundError) return sendProblem(reply, noJob(id, client.queueName));
      throw err;
    }
  });
}

export const jobsRoutes: FastifyPluginAsync<JobsRoutesOptions> = async (app, opts) => {
  pages(app, opts.client);
  reads(app, opts);
  actions(app, opts.client);
};
