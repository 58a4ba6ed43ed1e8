// The reaper: removes patchbay's boxes whose owner is gone or whose deadline passed, on any backend.
// Which owners are alive is the caller's to say (a worker asks Redis for heartbeats of its queue;
// by default a process on this host is judged by its pid and start time: backend/owner.ts).
import { LABEL, localOwnerAlive, type OwnerAlive } from "../backend/owner.js";
import type { ReapReport, Backend } from "../backend/types.js";
import { backendOf } from "../backend/index.js";

/**
 * Removes patchbay's boxes on `backend` whose owner `ownerAlive` says is gone, or whose deadline
 * passed, with their storage.
 */
export async function reap(
  ownerAlive: OwnerAlive = localOwnerAlive,
  backend: Backend = backendOf("docker"),
  now = Date.now(),
): Promise<ReapReport> {
  const verdicts = new Map<string, Promise<boolean>>();
  return backend.reap((labels) => {
    const deadline = Number(labels[LABEL.deadline] ?? 0);
    if (deadline && deadline * 1000 < now) return Promise.resolve(true);
    const owner = labels[LABEL.worker];
    if (!owner) return Promise.resolve(false);
    // The verdict may depend on the queue label too (a worker judges only its own queue's owners).
    const key = `${owner}\0${labels[LABEL.queue] ?? ""}`;
    if (!verdicts.has(key))
      verdicts.set(
        key,
        ownerAlive(owner, labels).then((a) => !a),
      );
    return verdicts.get(key)!;
  });
}
