// The bounds of each worker's policy (src/job/policy.ts), published in its heartbeat so that a
// client refuses at once a spec every worker would refuse later (`enqueue --timeout 100000` was
// accepted, then failed by the worker): what a worker writes, what a client reads, and the check.
// A heartbeat with no bounds (an older worker) stands for no bound; no worker, no check.
import type { Redis } from "ioredis";
import type { JobSpec } from "../core/spec/spec.js";
import { JobSpecError } from "../core/spec/spec.js";
import type { SandboxPolicy } from "../job/policy.js";
import type { keys } from "./keys.js";

/** The numeric bounds a worker publishes: a spec's field over one is refused by that worker. */
export type WorkerBounds = Partial<Record<BoundField, number>>;

/** A spec field, its policy's bound, and the worker's knob that raises it. */
const FIELDS = {
  timeoutSec: ["maxTimeoutSec", "PATCHBAY_MAX_TIMEOUT_SEC"],
  commandTimeoutSec: ["maxCommandTimeoutSec", "PATCHBAY_MAX_COMMAND_TIMEOUT_SEC"],
  "limits.memoryMb": ["maxMemoryMb", "PATCHBAY_MAX_MEMORY_MB"],
  "limits.cpus": ["maxCpus", "PATCHBAY_MAX_CPUS"],
  "limits.pids": ["maxPids", "PATCHBAY_MAX_PIDS"],
  "limits.diskMb": ["maxDiskMb", "PATCHBAY_MAX_DISK_MB"],
  "budget.usd": ["maxBudgetUsd", "PATCHBAY_MAX_BUDGET_USD"],
  maxTurns: ["maxTurns", "PATCHBAY_MAX_TURNS"],
} as const satisfies Record<string, readonly [keyof SandboxPolicy, string]>;
type BoundField = keyof typeof FIELDS;

/** The heartbeat's value: when it beat, and the worker's bounds. */
export function heartbeatValue(policy: SandboxPolicy): () => string {
  const bounds: WorkerBounds = {};
  for (const [field, [key]] of Object.entries(FIELDS) as [BoundField, (typeof FIELDS)[BoundField]][]) {
    const v = policy[key];
    if (typeof v === "number") bounds[field] = v;
  }
  return () => JSON.stringify({ at: Date.now(), bounds });
}

/** Each live worker's published bounds, by worker id (a heartbeat without bounds is left out). */
export async function readWorkerBounds(redis: Redis, k: ReturnType<typeof keys>): Promise<Map<string, WorkerBounds>> {
  const out = new Map<string, WorkerBounds>();
  const prefix = k.heartbeat("");
  let cursor = "0";
  do {
    const [next, found] = await redis.scan(cursor, "MATCH", k.heartbeat("*"), "COUNT", 1000);
    cursor = next;
    if (!found.length) continue;
    const values = await redis.mget(...found);
    found.forEach((key, i) => {
      try {
        const b = (JSON.parse(values[i] ?? "") as { bounds?: unknown }).bounds;
        if (b && typeof b === "object") out.set(key.slice(prefix.length), b);
      } catch {
        /* a bare timestamp: a worker that publishes no bounds */
      }
    });
  } while (cursor !== "0");
  return out;
}

const valueOf = (spec: JobSpec, field: BoundField): number | undefined => {
  const l = spec.limits ?? {};
  if (field.startsWith("limits.")) return l[field.slice(7) as "memoryMb" | "cpus" | "pids" | "diskMb"];
  if (field === "budget.usd") return spec.budget?.usd;
  return spec[field as "timeoutSec" | "commandTimeoutSec" | "maxTurns"];
};

/**
 * Each way `spec` goes past the bounds that live workers published, naming the bound, the workers
 * and the knob ([] when within, or when no worker published any). Pure.
 */
export function boundsViolations(spec: JobSpec, workers: ReadonlyMap<string, WorkerBounds>): string[] {
  const out: string[] = [];
  for (const [field, [, knob]] of Object.entries(FIELDS) as [BoundField, (typeof FIELDS)[BoundField]][]) {
    const v = valueOf(spec, field);
    if (v === undefined) continue;
    const over = [...workers].filter(([, b]) => typeof b[field] === "number" && v > b[field]);
    if (!over.length) continue;
    const bound = Math.min(...over.map(([, b]) => b[field]!));
    const who = over
      .map(([id]) => id)
      .slice(0, 5)
      .join(", ");
    const more = over.length > 5 ? ` and ${over.length - 5} more` : "";
    out.push(
      `${field}: ${v} is over the bound of ${bound} that worker${over.length === 1 ? "" : "s"} ${who}${more} of this queue publish${over.length === 1 ? "es" : ""} (${knob} on the worker raises it)`,
    );
  }
  return out;
}

/** A spec past the bounds the queue's live workers published: refused before it is enqueued. */
export class WorkerBoundsError extends JobSpecError {}

/** Throws a WorkerBoundsError naming every spec's every violation; `index` names the spec among several. */
export function checkWorkerBounds(specs: readonly JobSpec[], workers: ReadonlyMap<string, WorkerBounds>): void {
  if (!workers.size) return;
  const problems = specs.flatMap((s, i) => {
    const v = boundsViolations(s, workers);
    return v.length ? [`${specs.length > 1 ? `spec #${i}: ` : ""}invalid JobSpec: ${v.join("; ")}`] : [];
  });
  if (problems.length) throw new WorkerBoundsError(problems.join("\n"));
}
