// /metrics: queue-level metrics (waiting, active, completed, failed, ...) from BullMQ itself, in
// Prometheus' text format. A worker's own metrics are served by the worker (src/queue/metrics.ts).
import type { Queue } from "bullmq";
import type { FastifyPluginAsync } from "fastify";

export const metricsRoute: FastifyPluginAsync<{ queue: Queue }> = async (app, { queue }) => {
  app.get("/metrics", async (_req, reply) => {
    const text = await queue.exportPrometheusMetrics();
    return reply.type("text/plain; version=0.0.4; charset=utf-8").send(text.endsWith("\n") ? text : `${text}\n`);
  });
};
