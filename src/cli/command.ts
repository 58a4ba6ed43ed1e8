// What every CLI command shares: its shape, usage errors (exit 2), failures (exit 1), and the small
// flag parsers. Only node: built-ins here: `patchbay --help` loads this and nothing heavy.
import type { ParseArgsConfig } from "node:util";
import type { Config } from "../core/config/config.js";
import { kinded, PatchbayError, type ErrorKind } from "../core/errors.js";
import { parseRedisUrl } from "../redis/target.js";

export type Values = Record<string, unknown>;

export interface Command {
  /** One line for `patchbay --help`. */
  summary: string;
  usage: string;
  options?: ParseArgsConfig["options"];
  /** Positional arguments the command takes; none when absent. */
  positionals?: { min: number; max?: number; name: string };
  run(args: RunArgs): Promise<number>;
}

/** What a command runs with: its flags, its arguments, and the environment's Config (parsed once, when first asked for). */
export interface RunArgs {
  values: Values;
  positionals: string[];
  config: () => Config;
}

/** What a command that talks to Redis passes on: its flags and the Config. */
export type ClientArgs = Pick<RunArgs, "values" | "config">;

/** A mistake in how the command was called: exit 2, with the command's usage. */
export class UsageError extends kinded("usage") {}

/** A failure to report in one line, no stack: exit 1. */
export class CliError extends PatchbayError {
  constructor(message: string, kind: ErrorKind = "failed") {
    super(kind, message);
  }
}

export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/** --queue and --redis-url: every command that talks to Redis takes them (defaults from the environment). */
export const connectionFlags = {
  queue: { type: "string" },
  "redis-url": { type: "string" },
} as const;

export const CONNECTION_USAGE = `  --queue NAME           the queue (default $PATCHBAY_QUEUE or patchbay)
  --redis-url URL        Redis: redis[s]://, redis+sentinel://… or redis+cluster://… (default $REDIS_URL or redis://127.0.0.1:6379)`;

export function connection(values: Values): { queueName?: string; redisUrl?: string } {
  const url = values["redis-url"] !== undefined ? nonEmpty(values, "redis-url") : undefined;
  if (url !== undefined) {
    try {
      parseRedisUrl(url);
    } catch (err) {
      throw new UsageError(`--redis-url: ${(err as Error).message}`);
    }
  }
  return {
    ...(values.queue !== undefined ? { queueName: nonEmpty(values, "queue") } : {}),
    ...(url !== undefined ? { redisUrl: url } : {}),
  };
}

function nonEmpty(values: Values, flag: string): string {
  const v = String(values[flag]);
  if (!v.trim()) throw new UsageError(`--${flag} must not be empty`);
  return v;
}

/**
 * A `type: "string"` flag's value, or undefined when absent. parseArgs (strict) gives such a flag a
 * string and nothing else, so any other value is a command reading a flag it declared with another
 * type: a bug, thrown as one rather than printed as "[object Object]".
 */
export function stringFlag(values: Values, flag: string): string | undefined {
  const raw = values[flag];
  if (raw === undefined || typeof raw === "string") return raw;
  throw new TypeError(`--${flag} is read as a string flag but holds a ${typeof raw}`);
}

/** A positive number flag, or undefined when absent; `what` says what the number counts. */
export function numberFlag(
  values: Values,
  flag: string,
  opts: { integer?: boolean; what?: string; min?: 0 } = {},
): number | undefined {
  const raw = stringFlag(values, flag);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  const ok =
    raw.trim() !== "" &&
    Number.isFinite(n) &&
    (opts.min === 0 ? n >= 0 : n > 0) &&
    (!opts.integer || Number.isInteger(n));
  const kind = `${opts.min === 0 ? "non-negative" : "positive"} ${opts.integer ? "integer" : "number"}`;
  if (!ok) throw new UsageError(`--${flag} takes a ${kind}${opts.what ? ` (${opts.what})` : ""}, not '${raw}'`);
  return n;
}

/** One choice of several, or undefined when absent. */
export function choiceFlag<T extends string>(values: Values, flag: string, choices: readonly T[]): T | undefined {
  const raw = stringFlag(values, flag);
  if (raw === undefined) return undefined;
  if (!choices.includes(raw as T)) throw new UsageError(`--${flag} takes one of ${choices.join(", ")}, not '${raw}'`);
  return raw as T;
}

/** A list flag that may be repeated or comma-separated. */
export function listFlag(values: Values, flag: string): string[] | undefined {
  const raw = values[flag];
  if (raw === undefined) return undefined;
  return (Array.isArray(raw) ? raw : [raw])
    .flatMap((x) => String(x).split(","))
    .map((x) => x.trim())
    .filter(Boolean);
}

/** Seconds or ms as a short human duration: 850ms, 12s, 3m05s, 2h10m, 3d. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  return `${Math.floor(s / 86400)}d`;
}
