// bull-board at /queues: queue administration, its own UI (React) and API. Its mutations are
// guarded like every other by the auth plugin (src/web/auth.ts), registered before it.
import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { FastifyAdapter } from "@bull-board/fastify";
import type { Queue } from "bullmq";
import type { FastifyPluginAsync } from "fastify";

export const BULL_BOARD_PATH = "/queues";

export const bullBoardRoutes: FastifyPluginAsync<{ queue: Queue }> = async (app, { queue }) => {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(BULL_BOARD_PATH);
  createBullBoard({ queues: [new BullMQAdapter(queue)], serverAdapter });
  await app.register(serverAdapter.registerPlugin(), { prefix: BULL_BOARD_PATH });
};
