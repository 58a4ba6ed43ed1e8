// The bounds of each worker's policy (src/job/policy.ts), published in its heartbeat so that a
// client refuses at once a spec every worker would refuse later (`enqueue --timeout 100000` was
// accepted, then failed by the worker): what a worker writes, what a client reads, and the check.
// A heartbeat with no bounds (an older worker) stands for no bound; no worker, no check.
import type { Redis } from "ioredis";
import { plural } from "../core/count.js";
import type { JobSpec } from "../core/spec/spec.js";
import { safeText } from "../core/term.js";
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

/** The heartbeat's value: when it beat, how often it beats, and the worker's bounds. */
export function heartbeatValue(policy: SandboxPolicy, everyMs: number): () => string {
  const bounds: WorkerBounds = {};
  for (const [field, [key]] of Object.entries(FIELDS) as [BoundField, (typeof FIELDS)[BoundField]][]) {
    const v = policy[key];
    if (typeof v === "number") bounds[field] = v;
  }
  return () => JSON.stringify({ at: Date.now(), everyMs, bounds });
}

/** The longest a heartbeat value is believed without a newer beat, whatever interval it claims. */
const MAX_AGE_MS = 10 * 60_000;

/**
 * The bounds a heartbeat's value publishes, or undefined when it publishes none a client should
 * believe: not JSON, a beat older than three of its intervals (a key left behind without its
 * expiry), or no bound that is a positive finite number. Any process that can write to Redis can
 * write such a key; Redis is trusted, but a stale or malformed key must not refuse every spec. Pure.
 */
export function publishedBounds(value: string | null, now: number): WorkerBounds | undefined {
  let v: { at?: unknown; everyMs?: unknown; bounds?: unknown };
  try {
    v = JSON.parse(value ?? "") as typeof v;
  } catch {
    return undefined; // a bare timestamp: a worker that publishes no bounds
  }
  if (!v || typeof v !== "object" || typeof v.at !== "number" || !v.bounds || typeof v.bounds !== "object")
    return undefined;
  const every = typeof v.everyMs === "number" && v.everyMs > 0 ? v.everyMs : MAX_AGE_MS;
  if (now - v.at > Math.min(3 * every, MAX_AGE_MS) || v.at - now > 60_000) return undefined;
  const out: WorkerBounds = {};
  for (const field of Object.keys(FIELDS) as BoundField[]) {
    const b = (v.bounds as Record<string, unknown>)[field];
    if (typeof b === "number" && Number.isFinite(b) && b > 0) out[field] = b;
  }
  return Object.keys(out).length ? out : undefined;
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
    const now = Date.now();
    found.forEach((key, i) => {
      const b = publishedBounds(values[i] ?? null, now);
      // The id is the key's suffix, which any writer chooses: it reaches a terminal only as safe text.
      if (b) out.set(safeText(key.slice(prefix.length), { oneLine: true }).slice(0, 100), b);
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
    const bound = over.reduce((m, [, b]) => Math.min(m, b[field]!), Infinity);
    const who = over
      .map(([id]) => id)
      .slice(0, 5)
      .join(", ");
    const more = over.length > 5 ? ` and ${over.length - 5} more` : "";
    out.push(
      `${field}: ${v} is over the bound of ${bound} that ${plural(over.length, "worker")} ${who}${more} of this queue ${plural(over.length, "publishes", "publish")} (${knob} on the worker raises it)`,
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
