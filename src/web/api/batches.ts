// /api/v1/batches: submit (the lines of a tasks.jsonl, checked as `patchbay batch submit` checks
// its file), list, status, cancel, retry and the summary, through the CLI's BatchClient.
import type { FastifyInstance, FastifyPluginAsync } from "fastify";
import { z } from "zod";
import { BatchClient, checkBatchName, summaryMarkdown } from "../../batch/batches.js";
import { parseBatchFileYielding } from "../../batch/batch-file.js";
import type { PatchbayClient } from "../../queue/client.js";
import { JOB_STATUSES, JobSpecError, type JobStatus } from "../../core/spec/spec.js";
import {
  BatchCancelBody,
  BatchCreated,
  BatchId,
  BatchList,
  BatchRetryBody,
  BatchRetryRequest,
  BatchStatusBody,
  BatchSubmitQuery,
  BatchSummaryBody,
  json,
  located,
  problems,
} from "./schemas.js";
import { BadRequest } from "./problem.js";
import { apiCredentialProblem, repoRootProblem, type ApiSourceRules } from "./repo-roots.js";
import { apiRegistry } from "./registry.js";

/** A batch's body may be bigger than a job's: many lines of up to a few KiB each. */
export const BATCH_BODY_LIMIT = 8 * 1024 * 1024;
const NDJSON = ["application/x-ndjson", "application/jsonl", "text/plain"];

type ById = { Params: { id: string } };

function submitOptions(q: Record<string, unknown>): { name?: string; budgetUsd?: number } {
  const name = typeof q.name === "string" && q.name !== "" ? checkBatchName(q.name) : undefined;
  const raw = q.budgetUsd;
  const budgetUsd = raw === undefined || raw === "" ? undefined : Number(raw);
  if (budgetUsd !== undefined && !(Number.isFinite(budgetUsd) && budgetUsd > 0))
    throw new JobSpecError(`budgetUsd must be a positive number (got ${JSON.stringify(String(raw).slice(0, 40))})`);
  return { ...(name !== undefined ? { name } : {}), ...(budgetUsd !== undefined ? { budgetUsd } : {}) };
}

function submitRoute(app: FastifyInstance, batches: BatchClient, sources: ApiSourceRules): void {
  const schema = {
    operationId: "submitBatch",
    tags: ["batches"],
    summary: "Submit a batch",
    description:
      "The body is a tasks.jsonl: one JobSpec as JSON per line, blank lines skipped (`patchbay batch submit`'s file). Every line is checked first; one bad line enqueues nothing and `errors` names each (`body:3: invalid JobSpec: …`), up to 100: the lines past the 100th bad one are not read, and a last error says from which line. Line N's job is <batch>-L<N>. The same body again under the same name enqueues nothing new (200).",
    consumes: NDJSON,
    body: z.string().register(apiRegistry, { description: "one JobSpec per line" }),
    querystring: BatchSubmitQuery,
    response: {
      201: located(BatchCreated, "enqueued", "batch"),
      200: located(BatchCreated, "the same batch was there already", "batch"),
      ...problems(400, 401, 403, 409, 413, 415),
    },
  };
  app.post("/batches", { schema, bodyLimit: BATCH_BODY_LIMIT }, async (req, reply) => {
    const opts = submitOptions(req.query as Record<string, unknown>);
    if (typeof req.body !== "string")
      throw new BadRequest(
        `the body came as application/json: send the lines (one JobSpec per line) with Content-Type: ${NDJSON.join(", ")}`,
      );
    // Each line's repo is held to the API's rules before its spec is checked: no path outside them is looked at.
    const lines = await parseBatchFileYielding(req.body, "body", {
      check: (spec) => repoRootProblem(spec, sources) ?? apiCredentialProblem(spec),
    });
    const r = await batches.submit(lines, opts);
    return reply
      .code(r.added ? 201 : 200)
      .header("Location", `/api/v1/batches/${encodeURIComponent(r.batchId)}`)
      .send(r);
  });
}

function readRoutes(app: FastifyInstance, batches: BatchClient): void {
  const listQuery = z.object({
    limit: z.string().optional().register(apiRegistry, { description: "1 to 500; default 50" }),
  });
  app.get(
    "/batches",
    {
      schema: {
        operationId: "listBatches",
        tags: ["batches"],
        summary: "Batches, newest first",
        querystring: listQuery,
        response: { 200: json(BatchList, "the batches"), ...problems(400, 401) },
      },
    },
    async (req) => {
      const text = (req.query as { limit?: unknown }).limit;
      const limit = text === undefined ? 50 : Number(text);
      if (!Number.isInteger(limit) || limit < 1 || limit > 500)
        throw new BadRequest(`bad limit "${String(text).slice(0, 40)}": 1 to 500`);
      return { batches: await batches.list({ limit }) };
    },
  );

  const statusQuery = z.object({
    jobs: z.enum(["0", "1"]).optional().register(apiRegistry, { description: "1: each line's latest job too" }),
  });
  app.get<ById>(
    "/batches/:id",
    {
      schema: {
        operationId: "getBatch",
        tags: ["batches"],
        summary: "A batch's counts by status, spend and budget",
        params: BatchId,
        querystring: statusQuery,
        response: { 200: json(BatchStatusBody, "the batch"), ...problems(401, 404) },
      },
    },
    async (req) => batches.status(req.params.id, { jobs: (req.query as { jobs?: unknown }).jobs === "1" }),
  );

  const summary = {
    description: "the summary",
    content: {
      "application/json": { schema: BatchSummaryBody },
      "text/markdown": { schema: z.string().register(apiRegistry, { description: "summary.md" }) },
    },
  };
  app.get<ById>(
    "/batches/:id/summary",
    {
      schema: {
        operationId: "getBatchSummary",
        tags: ["batches"],
        summary: "A batch's summary (summary.json, or summary.md with Accept: text/markdown)",
        params: BatchId,
        response: { 200: summary, ...problems(401, 404) },
      },
    },
    async (req, reply) => {
      const s = await batches.summary(req.params.id);
      if (/text\/markdown/.test(req.headers.accept ?? ""))
        return reply.type("text/markdown; charset=utf-8").send(summaryMarkdown(s));
      return s;
    },
  );
}

function actionRoutes(app: FastifyInstance, batches: BatchClient): void {
  app.post<ById>(
    "/batches/:id/cancel",
    {
      schema: {
        operationId: "cancelBatch",
        tags: ["batches"],
        summary: "Cancel a batch: running jobs stop, the others will not run",
        params: BatchId,
        response: { 200: json(BatchCancelBody, "what the cancel did"), ...problems(401, 403, 404) },
      },
    },
    async (req) => ({
      batchId: req.params.id,
      ...(await batches.cancel(req.params.id)),
    }),
  );

  app.post<ById>(
    "/batches/:id/retry",
    {
      schema: {
        operationId: "retryBatch",
        tags: ["batches"],
        summary: "Run again the lines whose latest job ended with some statuses",
        params: BatchId,
        body: BatchRetryRequest,
        response: { 200: json(BatchRetryBody, "the new jobs"), ...problems(400, 401, 403, 404) },
      },
    },
    async (req) => {
      const statuses = retryStatuses(req.body);
      return { batchId: req.params.id, ...(await batches.retry(req.params.id, statuses ? { statuses } : {})) };
    },
  );
}

/** The body's statuses, checked with the CLI's words for `--status`. */
function retryStatuses(body: unknown): JobStatus[] | undefined {
  if (body === undefined || body === null) return undefined;
  const s = (body as { statuses?: unknown }).statuses;
  if (typeof body !== "object" || Array.isArray(body) || Object.keys(body).some((k) => k !== "statuses"))
    throw new BadRequest('the body is { "statuses"?: [status, …] }');
  if (s === undefined) return undefined;
  const bad = Array.isArray(s) ? s.filter((x) => !JOB_STATUSES.includes(x as JobStatus)) : [s];
  if (bad.length)
    throw new BadRequest(
      `statuses takes ${JOB_STATUSES.join(", ")}, not '${bad.map((x) => String(x).slice(0, 40)).join(", ")}'`,
    );
  return s as JobStatus[];
}

export const batchesApi: FastifyPluginAsync<{ client: PatchbayClient; sources: ApiSourceRules }> = async (
  app,
  { client, sources },
) => {
  app.addContentTypeParser(NDJSON, { parseAs: "string" }, (_req, body, done) => done(null, body));
  const batches = new BatchClient(client);
  submitRoute(app, batches, sources);
  readRoutes(app, batches);
  actionRoutes(app, batches);
};
