// /api/v1/evals: eval runs, read-only, from the eval store in Redis (src/eval/store.ts, which
// `patchbay eval run` writes): the list, newest first, and one run's summary with its instances,
// each as the dashboard's eval pages get them (src/web/evals-data.ts: every text inert and bounded).
import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import { EVAL_RUNS_MAX, EvalStore } from "../../eval/store.js";
import type { PatchbayClient } from "../../queue/client.js";
import { evalRowView, evalView } from "../evals-data.js";
import { BadRequest } from "./problem.js";
import { apiRegistry } from "./registry.js";
import { json, problems } from "./schemas.js";

const EvalName = z.object({
  name: z.string().register(apiRegistry, { description: "an eval run's name (`patchbay eval run --name`)" }),
});

const rate = () =>
  z.number().nullable().register(apiRegistry, { description: "0 to 1; null where the run did not say" });

/** A run in the list: the dashboard's (src/web/evals-data.ts EvalRowView). */
export const EvalRowBody = z.object({
  name: z.string(),
  model: z.string(),
  set: z.string().register(apiRegistry, { description: "the task set's file" }),
  batchId: z.string().register(apiRegistry, { description: "the batch its jobs ran in" }),
  candidates: z.int().register(apiRegistry, { description: "candidates per instance (K)" }),
  total: z.int(),
  resolved: z.int(),
  costUsd: z.number(),
  costPerResolvedUsd: z
    .number()
    .nullable()
    .register(apiRegistry, { description: "costUsd / resolved; null when none resolved" }),
  passAt1: rate(),
  passAtK: rate(),
  bestOfK: z.number().nullable().register(apiRegistry, {
    description: "0 to 1: judged instances whose picked candidate resolved; null where no verify judged",
  }),
  startedAt: z.number().register(apiRegistry, { description: "epoch milliseconds" }),
  savedAt: z.number().register(apiRegistry, { description: "epoch milliseconds of the run's last save" }),
});

/** A run's summary and instances: the dashboard's (src/web/evals-data.ts EvalView). */
export const EvalBody = EvalRowBody.extend({
  counts: z.object({
    submitted: z.int(),
    completed: z.int(),
    resolved: z.int(),
    unresolved: z.int(),
    emptyPatch: z.int(),
    error: z.int(),
  }),
  inputTokens: z.number(),
  outputTokens: z.number(),
  wallMs: z.number(),
  harnessMs: z.object({ median: z.number(), total: z.number() }),
  instances: z.array(
    z.object({
      id: z.string(),
      outcome: z.enum(["resolved", "unresolved", "empty_patch", "patch_failed", "error", "pending"]),
      candidates: z.int(),
      resolvedCandidates: z.int(),
      costUsd: z.number(),
      inputTokens: z.number(),
      outputTokens: z.number(),
      harnessMs: z.number().register(apiRegistry, { description: "wall time not spent waiting on the model, ms" }),
      jobIds: z.array(z.string()),
      picked: z.int().nullable().register(apiRegistry, {
        description: "the candidate (from 1) the job's verify picked; null when none, or no verify judged",
      }),
    }),
  ),
  instancesCut: z.int().register(apiRegistry, {
    description: "instances left out to keep the run's record under 4 MiB (the run's files have them all)",
  }),
});

export const evalsApi: FastifyPluginAsync<{ client: PatchbayClient }> = async (app, { client }) => {
  const store = new EvalStore(client.redis, client.queueName, client.retentionSec);
  const listQuery = z.object({
    limit: z
      .string()
      .optional()
      .register(apiRegistry, { description: `1 to ${EVAL_RUNS_MAX}; default 50` }),
  });
  app.get(
    "/evals",
    {
      schema: {
        operationId: "listEvals",
        tags: ["evals"],
        summary: "Eval runs, newest first",
        querystring: listQuery,
        response: { 200: json(z.object({ evals: z.array(EvalRowBody) }), "the runs"), ...problems(400, 401) },
      },
    },
    async (req) => {
      const text = (req.query as { limit?: unknown }).limit;
      const limit = text === undefined ? 50 : Number(text);
      if (!Number.isInteger(limit) || limit < 1 || limit > EVAL_RUNS_MAX)
        throw new BadRequest(`bad limit "${String(text).slice(0, 40)}": 1 to ${EVAL_RUNS_MAX}`);
      return { evals: (await store.list({ limit })).map(evalRowView) };
    },
  );
  app.get<{ Params: { name: string } }>(
    "/evals/:name",
    {
      schema: {
        operationId: "getEval",
        tags: ["evals"],
        summary: "An eval run's summary: resolved, cost per resolved, pass@k, and each instance",
        params: EvalName,
        response: { 200: json(EvalBody, "the run"), ...problems(401, 404) },
      },
    },
    async (req) => evalView(await store.get(req.params.name)),
  );
};
