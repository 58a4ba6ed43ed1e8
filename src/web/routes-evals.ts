// Eval runs: the /evals page and /api/evals (the newest runs: resolved of total, cost, cost per
// resolved, pass@1 and pass@K), /evals/<name> (the summary and a row per instance, from
// /api/evals/<name>), or a 404 page for a name that is no run's. Read from Redis alone (the eval
// store, src/eval/store.ts, which `patchbay eval run` writes): the dashboard never reads a run's files.
import type { FastifyPluginAsync } from "fastify";
import { EvalNotFoundError, EvalStore } from "../eval/store.js";
import type { PatchbayClient } from "../queue/client.js";
import { evalRowView, evalView } from "./evals-data.js";
import { evalPage, evalsPage, notFoundPage } from "./html.js";
import { htmlPage, sendPage } from "./routes-static.js";
import { problem, sendProblem } from "./api/problem.js";

/** The newest runs the list shows. */
export const EVALS_SHOWN = 200;

export const evalsRoutes: FastifyPluginAsync<{ client: PatchbayClient }> = async (app, { client }) => {
  const store = new EvalStore(client.redis, client.queueName, client.retentionSec);

  app.get("/evals", htmlPage(evalsPage()));
  const page = evalPage();
  app.get<{ Params: { name: string } }>("/evals/:name", async (req, reply) =>
    (await store.has(req.params.name))
      ? sendPage(reply, page)
      : sendPage(reply, notFoundPage("eval", req.params.name, client.queueName), 404),
  );
  app.get("/api/evals", async () => ({ evals: (await store.list({ limit: EVALS_SHOWN })).map(evalRowView) }));
  app.get<{ Params: { name: string } }>("/api/evals/:name", async (req, reply) => {
    const name = req.params.name;
    const rec = await store.get(name).catch((err: unknown) => {
      if (err instanceof EvalNotFoundError) return undefined;
      throw err;
    });
    if (!rec)
      return sendProblem(
        reply,
        problem(404, `no eval run ${name.slice(0, 200)}: the list at /evals has the names`, { kind: "not-found" }),
      );
    return evalView(rec);
  });
};
