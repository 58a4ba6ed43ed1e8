// The worker's reaper loop: every `everyMs`, and each time the health gate turns healthy, it asks the
// backend to retry removals that failed, reaps the boxes whose owner is gone (src/sandbox/reaper.ts,
// judged by src/queue/heartbeat.ts's ownerAliveFor) and sweeps verify snapshots of dead workers.
// While the worker is unhealthy it does nothing: the health gate checks the engine meanwhile.
import { count } from "../core/count.js";
import { sweepSnapshots } from "../job/verify.js";
import type { Log } from "../observability/log.js";
import type { OwnerAlive } from "../backend/owner.js";
import type { Backend } from "../backend/types.js";
import { reap } from "../sandbox/reaper.js";

export interface ReaperLoopOptions {
  backend: Backend;
  ownerAlive: OwnerAlive;
  /** The worker's health gate (src/queue/health.ts): read before a round, asked again when one fails. */
  health: { readonly ok: boolean | undefined; check(): Promise<boolean> };
  log: Log;
  everyMs: number;
  /** Verify snapshots of workers that are gone (default: src/job/verify.ts's, in the host's tmpdir). */
  sweep?: () => Promise<number>;
}

export interface ReaperLoop {
  /** One round now (never rejects: a failure is logged). */
  run(): Promise<void>;
  stop(): void;
}

export function startReaperLoop(o: ReaperLoopOptions): ReaperLoop {
  const sweep = o.sweep ?? (() => sweepSnapshots());
  const run = async () => {
    if (o.health.ok === false) return; // the gate checks the engine meanwhile
    try {
      const again = await o.backend.retryRemovals();
      if (again) o.log(`removed ${count(again, "sandbox", "sandboxes")} whose removal had failed`);
      const r = await reap(o.ownerAlive, o.backend);
      if (r.containers.length || r.volumes.length)
        o.log(`reaped ${count(r.containers.length, "container")}, ${count(r.volumes.length, "volume")}`);
      const snapshots = await sweep();
      if (snapshots) o.log(`removed ${count(snapshots, "verify snapshot")} of workers that are gone`);
    } catch (err) {
      o.log(`reaper: ${(err as Error).message}`, { level: "warn" });
      void o.health.check(); // the engine gone while idle: pause now rather than at the next job
    }
  };
  const timer = setInterval(() => void run(), o.everyMs);
  return { run, stop: () => clearInterval(timer) };
}
