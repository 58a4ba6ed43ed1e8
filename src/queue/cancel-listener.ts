// Cancellation from any host: `patchbay cancel` sets the job's cancel key and publishes its id on
// the queue's channel. A worker aborts the job if it runs here, on the message (when the channel is
// on) or at the next poll of the cancel keys of its running jobs: pub/sub is not durable (a message
// sent during a Redis blip is lost). A job that starts after the cancel sees the key itself
// (src/queue/attempt.ts).
import type { Redis } from "ioredis";
import type { keys } from "./keys.js";
import { parseCandidateJobId } from "../core/candidate-id.js";
import { cancelKeys } from "./candidates.js";

type Keys = ReturnType<typeof keys>;

export interface CancelListenerOptions {
  /** A connection for the subscription only (a subscribed connection runs no other command). */
  sub: Redis;
  redis: Redis;
  k: Keys;
  /** Listen on the channel (PATCHBAY_CANCEL_PUBSUB); the poll runs either way. */
  pubSub: boolean;
  pollMs: number;
  /** The jobs running here, by id. */
  active: ReadonlyMap<string, { ctl: AbortController }>;
}

export async function listenForCancels(o: CancelListenerOptions): Promise<{ stop(): void }> {
  if (o.pubSub) {
    await o.sub.subscribe(o.k.cancelChannel);
    // A job's cancel stops its candidates too (src/queue/candidates.ts): each one running here.
    o.sub.on("message", (_channel, jobId: string) => {
      for (const [id, a] of o.active)
        if (id === jobId || parseCandidateJobId(id)?.jobId === jobId) a.ctl.abort("cancelled");
    });
  }
  const poll = setInterval(() => {
    for (const [jobId, a] of o.active) {
      if (!a.ctl.signal.aborted)
        void o.redis.exists(...cancelKeys(o.k, jobId)).then(
          (n) => n && a.ctl.abort("cancelled"),
          () => {},
        );
    }
  }, o.pollMs);
  return { stop: () => clearInterval(poll) };
}
