// /api/v1/jobs: enqueue (a JobSpec, checked by the client as the CLI's enqueue is, idempotent with
// its jobId), the list (the dashboard's lean pages, src/web/jobs-list.ts), one job's status and
// result, its patch (text/x-diff), its transcript (a JSON array or NDJSON) and cancel. Every write
// goes through PatchbayClient; the reads are the dashboard's.
import type { FastifyInstance, FastifyPluginAsync } from "fastify";
import { Readable } from "node:stream";
import { z } from "zod";
import { JobNotFoundError, type JobData, type PatchbayClient } from "../../queue/client.js";
import { findJob } from "../../queue/find-job.js";
import { keys } from "../../queue/keys.js";
import { JobResult, JobSpec, JobSpecError, TranscriptEvent } from "../../core/spec/spec.js";
import { listJobsPage, parseJobsQuery } from "../jobs-list.js";
import { kinded } from "../../core/errors.js";
import { BadRequest } from "./problem.js";
import { apiCredentialProblem, repoRootProblem, type ApiSourceRules } from "./repo-roots.js";
import { apiRegistry } from "./registry.js";
import {
  CancelBody,
  JobCreated,
  JobId,
  JobsPage,
  JobsQuery,
  JobStatusBody,
  json,
  located,
  problems,
  TranscriptQuery,
} from "./schemas.js";

export interface JobsApiOptions {
  client: PatchbayClient;
  /** A spec's model when it names none, for the list's rows. */
  defaultModel: string;
  /** PATCHBAY_API_REPO_ROOTS (empty: no local repo) and PATCHBAY_API_GIT_HOSTS. */
  sources: ApiSourceRules;
}

/** A job asked for what it does not have yet (its patch while it runs). */
export class NotFinishedError extends kinded("conflict") {}

type ById = { Params: { id: string } };
const CHUNK = 200;

/** The jobId a body asks for, if it names one (the spec itself is checked by the client). */
const jobIdOf = (body: unknown) =>
  typeof body === "object" && body !== null && typeof (body as { jobId?: unknown }).jobId === "string"
    ? (body as { jobId: string }).jobId
    : undefined;

function enqueueRoute(app: FastifyInstance, client: PatchbayClient, sources: ApiSourceRules): void {
  const schema = {
    operationId: "enqueueJob",
    tags: ["jobs"],
    summary: "Enqueue a job",
    description:
      "Checks the JobSpec as `patchbay enqueue` does (a bad spec is a 400 naming each field in `errors`). With a `jobId`, enqueueing is idempotent: the same spec again returns the same id with 200; another spec under a used id is a 409.",
    body: JobSpec,
    response: {
      201: located(JobCreated, "enqueued", "job"),
      200: located(JobCreated, "the job with this jobId and this spec was there already", "job"),
      ...problems(400, 401, 403, 409, 413, 415),
    },
  };
  app.post("/jobs", { schema }, async (req, reply) => {
    // Before anything looks at the path; egress credentials are the operator's jobs' alone (the workers hold both again).
    const refused = repoRootProblem(req.body, sources) ?? apiCredentialProblem(req.body);
    if (refused) throw new JobSpecError(`invalid JobSpec: ${refused}`);
    const wanted = jobIdOf(req.body);
    const existed =
      wanted !== undefined && (await client.queue.getJobState(wanted).catch(() => "unknown")) !== "unknown";
    const id = await client.enqueue(req.body);
    return reply
      .code(existed ? 200 : 201)
      .header("Location", `/api/v1/jobs/${encodeURIComponent(id)}`)
      .send({ id, queue: client.queueName });
  });
}

function readRoutes(app: FastifyInstance, { client, defaultModel }: JobsApiOptions): void {
  const found = async (id: string) => {
    const state = await client.queue.getJobState(id); // before the job, so a finished one carries its result
    const job = await findJob<JobData, JobResult>(client.queue, id);
    if (!job) throw new JobNotFoundError(id, client.queueName);
    return { job, state };
  };

  app.get(
    "/jobs",
    {
      schema: {
        operationId: "listJobs",
        tags: ["jobs"],
        summary: "Jobs, a page at a time",
        description: "Queued jobs first, then finished ones newest first (the dashboard's list).",
        querystring: JobsQuery,
        response: { 200: json(JobsPage, "a page"), ...problems(400, 401) },
      },
    },
    async (req) =>
      listJobsPage(
        client.redis,
        client.queue,
        client.queueName,
        parseJobsQuery(req.query as Record<string, unknown>),
        defaultModel,
      ),
  );

  app.get<ById>(
    "/jobs/:id",
    {
      schema: {
        operationId: "getJob",
        tags: ["jobs"],
        summary: "A job's state and result",
        params: JobId,
        response: { 200: json(JobStatusBody, "the job"), ...problems(401, 404) },
      },
    },
    async (req) => {
      const { job, state } = await found(req.params.id);
      const r = job.returnvalue ?? undefined;
      return {
        id: job.id!,
        state,
        ...(r?.status ? { status: r.status } : state === "failed" ? { status: "failed" } : {}),
        attemptsMade: job.attemptsMade,
        ...(job.failedReason ? { failedReason: job.failedReason } : {}),
        createdAt: job.data?.enqueuedAt ?? job.timestamp,
        ...(job.processedOn ? { startedAt: job.processedOn } : {}),
        ...(job.finishedOn ? { finishedAt: job.finishedOn } : {}),
        ...(r && state === "completed" ? { result: r } : {}),
      };
    },
  );

  patchRoute(app, client);
  transcriptRoute(app, client, found);
}

function patchRoute(app: FastifyInstance, client: PatchbayClient): void {
  const response = {
    description: "the patch (git diff --binary; empty when nothing changed)",
    content: { "text/x-diff": { schema: z.string().register(apiRegistry, { description: "a unified diff" }) } },
  };
  app.get<ById>(
    "/jobs/:id/patch",
    {
      schema: {
        operationId: "getJobPatch",
        tags: ["jobs"],
        summary: "A finished job's patch",
        params: JobId,
        response: { 200: response, ...problems(401, 404, 409, 410) },
      },
    },
    async (req, reply) => {
      const r = await client.result(req.params.id); // the CLI's: a failed job is JobFailedError, a long patch put back whole
      if (!r)
        throw new NotFinishedError(
          `job ${req.params.id} has not finished yet (GET /api/v1/jobs/${req.params.id}/events follows it)`,
        );
      return reply.header("Cache-Control", "no-store").type("text/x-diff; charset=utf-8").send(r.patch);
    },
  );
}

function transcriptRoute(app: FastifyInstance, client: PatchbayClient, found: (id: string) => Promise<unknown>): void {
  const response = {
    description: "every event so far, oldest first",
    content: {
      "application/json": { schema: TranscriptEvent.array() },
      "application/x-ndjson": { schema: TranscriptEvent },
    },
  };
  app.get<ById & { Querystring: { format?: string } }>(
    "/jobs/:id/transcript",
    {
      schema: {
        operationId: "getJobTranscript",
        tags: ["jobs"],
        summary: "A job's transcript",
        description:
          "A JSON array, or NDJSON with ?format=ndjson or Accept: application/x-ndjson. The strings are the job's own (the model's and the repo's): escape them before showing them.",
        params: JobId,
        querystring: TranscriptQuery,
        response: { 200: response, ...problems(400, 401, 404) },
      },
    },
    async (req, reply) => {
      const id = req.params.id;
      const format = req.query.format ?? (/application\/x-ndjson/.test(req.headers.accept ?? "") ? "ndjson" : "json");
      if (format !== "json" && format !== "ndjson")
        throw new BadRequest(`bad format "${String(format).slice(0, 40)}": json or ndjson`);
      await found(id);
      const key = keys(client.queueName).events(id);
      const redis = client.redis;
      // Read in chunks as the socket takes them: a transcript of 10,000 events is never held whole.
      async function* events(): AsyncGenerator<string> {
        let from = "-";
        let first = true;
        if (format === "json") yield "[";
        for (;;) {
          const batch = (await redis.xrange(key, from, "+", "COUNT", CHUNK)) as [string, string[]][];
          for (const [, fields] of batch) {
            const text = eventText(fields[1]);
            if (text === undefined) continue;
            yield format === "json" ? `${first ? "" : ","}${text}` : `${text}\n`;
            first = false;
          }
          if (batch.length < CHUNK) break;
          from = `(${batch.at(-1)![0]}`;
        }
        if (format === "json") yield "]";
      }
      return reply
        .header("Cache-Control", "no-store")
        .type(format === "json" ? "application/json; charset=utf-8" : "application/x-ndjson; charset=utf-8")
        .send(Readable.from(events()));
    },
  );
}

/** An event as the worker stored it, re-serialized (one that does not parse is left out). */
function eventText(raw: string | undefined): string | undefined {
  try {
    return JSON.stringify(JSON.parse(raw ?? ""));
  } catch {
    return undefined;
  }
}

function cancelRoute(app: FastifyInstance, client: PatchbayClient): void {
  app.post<ById>(
    "/jobs/:id/cancel",
    {
      schema: {
        operationId: "cancelJob",
        tags: ["jobs"],
        summary: "Cancel a job",
        description:
          "As `patchbay cancel`: a running job stops within seconds (status cancelled, its patch so far kept); a waiting one does not run.",
        params: JobId,
        response: { 200: json(CancelBody, "what the cancel did"), ...problems(401, 403, 404) },
      },
    },
    async (req) => ({ id: req.params.id, result: await client.cancel(req.params.id) }),
  );
}

export const jobsApi: FastifyPluginAsync<JobsApiOptions> = async (app, opts) => {
  enqueueRoute(app, opts.client, opts.sources);
  readRoutes(app, opts);
  cancelRoute(app, opts.client);
};
