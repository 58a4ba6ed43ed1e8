// Who owns a sandbox, and is it alive: the worker's heartbeat (a key with a TTL of three beats), the
// deployment's id (one per Redis), and the verdict the reaper (src/queue/reaper-loop.ts) asks of an
// owner. The reaper on any host treats the sandboxes of a worker of this queue without a heartbeat
// as orphans.
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { LABEL, localOwnerAlive, ownerIsLocal, type OwnerAlive } from "../backend/owner.js";
import type { keys } from "./keys.js";

type Keys = ReturnType<typeof keys>;

export interface Heartbeat {
  /** Stops beating (the key lapses by itself after its TTL). */
  stop(): void;
  /** Deletes the key at once: a clean exit leaves no owner for the reaper to wait on. */
  remove(): Promise<void>;
}

/**
 * Beats once (awaited), then every `everyMs`; a beat that fails (Redis away) is left to the next.
 * `value` is what each beat writes (the worker's: the time and its policy's bounds, worker-bounds.ts).
 */
export async function startHeartbeat(
  redis: Redis,
  key: string,
  everyMs: number,
  value: () => string = () => String(Date.now()),
): Promise<Heartbeat> {
  const ttlSec = Math.ceil((3 * everyMs) / 1000);
  const beat = () => redis.set(key, value(), "EX", ttlSec).catch(() => {});
  await beat();
  const timer = setInterval(() => void beat(), everyMs);
  return {
    stop: () => clearInterval(timer),
    remove: () =>
      redis.del(key).then(
        () => {},
        () => {},
      ),
  };
}

/**
 * This Redis's id: a sandbox labelled with another belongs to a deployment sharing this engine
 * under the same queue name (a compose stack beside a host's workers), whose heartbeats are not here.
 * The first worker to ask sets it; every later one reads the same.
 */
export async function deploymentId(redis: Redis, k: Keys): Promise<string> {
  await redis.set(k.deployment, randomBytes(8).toString("hex"), "NX");
  return (await redis.get(k.deployment)) ?? "";
}

/**
 * The reaper's verdict on a sandbox's owner, for worker `id` of `queueName`. In this boot and pid
 * namespace a process's pid tells (not by hostname: hosts can share one); elsewhere a worker of this
 * queue lives while it beats. Sandboxes of other owners (library users, other queues or deployments)
 * are left to their deadline. Workers in containers have pid namespaces of their own, so those of
 * one engine go by heartbeat.
 */
export function ownerAliveFor(o: {
  id: string;
  queueName: string;
  deployment: string;
  redis: Redis;
  k: Keys;
}): OwnerAlive {
  return async (owner, labels) => {
    if (owner === o.id) return true;
    if (ownerIsLocal(owner, labels)) return localOwnerAlive(owner, labels);
    if (labels[LABEL.queue] !== o.queueName) return true;
    if (labels[LABEL.redis] && labels[LABEL.redis] !== o.deployment) return true;
    return (await o.redis.exists(o.k.heartbeat(owner))) === 1;
  };
}
