// The JobSpec flags of `run` and `enqueue`: parsed and checked here, so a mistake names the flag
// the user typed (--timeout, not timeoutSec) and exits 2 before anything connects to Redis.
import { readFileSync } from "node:fs";
import { choiceFlag, numberFlag, stringFlag, UsageError, type Values } from "./command.js";
import { EDITOR_TOOLS } from "../core/spec/names.js";

export const specFlags = {
  repo: { type: "string" },
  git: { type: "string" },
  ref: { type: "string" },
  archive: { type: "string" },
  task: { type: "string" },
  verify: { type: "string" },
  setup: { type: "string", multiple: true },
  model: { type: "string" },
  timeout: { type: "string" },
  "command-timeout": { type: "string" },
  "max-turns": { type: "string" },
  "verify-rounds": { type: "string" },
  "budget-usd": { type: "string" },
  tools: { type: "string" },
  spec: { type: "string" },
  "job-id": { type: "string" },
} as const;

export const SPEC_USAGE = `  --repo DIR | --git URL [--ref REF] | --archive FILE   the repository (exactly one; a local
                         DIR or FILE must exist)
  --task TEXT            what to do
  --verify CMD           a command run after the agent (its exit code and tail are in the result)
  --setup CMD            a command run before the agent (repeatable)
  --model M              model id (default $PATCHBAY_MODEL or claude-sonnet-5-5)
  --timeout SEC          wall clock for the whole job
  --command-timeout SEC  wall clock for each bash command
  --max-turns N          stop after N model turns
  --tools ${EDITOR_TOOLS.join("|")}  the agent's file editor
  --verify-rounds N      failed verifies sent back to the agent (0-10)
  --budget-usd X         stop the job once it has spent $X
  --spec FILE            a whole JobSpec as JSON; flags override it
  --job-id ID            idempotency key: the same id with the same spec runs once (the id is
                         printed again); the same id with another spec is an error`;

/** JobSpec field → the flag that sets it, to name flags in validation errors. */
const FLAG_OF: Record<string, string> = {
  task: "--task",
  repo: "--repo, --git or --archive",
  "repo.path": "--repo",
  "repo.git": "--git",
  "repo.ref": "--ref",
  "repo.archive": "--archive",
  verify: "--verify",
  setup: "--setup",
  model: "--model",
  tools: "--tools",
  jobId: "--job-id",
  timeoutSec: "--timeout",
  commandTimeoutSec: "--command-timeout",
  maxTurns: "--max-turns",
  verifyRounds: "--verify-rounds",
  "budget.usd": "--budget-usd",
};

/** Whether any flag that makes up a spec was given. */
export function hasSpecFlags(v: Values): boolean {
  return Object.keys(specFlags).some((f) => v[f] !== undefined);
}

/** A JobSpec from --spec and flags (flags win). Schema validation happens at enqueue. */
export function specFrom(v: Values): Record<string, unknown> {
  const sources = (["repo", "git", "archive"] as const).filter((f) => v[f] !== undefined);
  if (sources.length > 1)
    throw new UsageError(`${sources.map((f) => `--${f}`).join(" and ")}: give only one of --repo, --git and --archive`);
  if (v.ref !== undefined && v.git === undefined) throw new UsageError("--ref goes with --git");
  const specFile = stringFlag(v, "spec");
  const repo = stringFlag(v, "repo");
  const git = stringFlag(v, "git");
  const ref = stringFlag(v, "ref");
  const archive = stringFlag(v, "archive");
  const spec: Record<string, unknown> = specFile !== undefined ? readSpecFile(specFile) : {};
  if (repo !== undefined) spec.repo = { path: repo };
  if (git !== undefined) spec.repo = { git, ...(ref !== undefined ? { ref } : {}) };
  if (archive !== undefined) spec.repo = { archive };
  for (const [flag, key] of [
    ["task", "task"],
    ["verify", "verify"],
    ["setup", "setup"],
    ["model", "model"],
    ["job-id", "jobId"],
  ] as const) {
    if (v[flag] !== undefined) spec[key] = v[flag];
  }
  const tools = choiceFlag(v, "tools", EDITOR_TOOLS);
  // Over a spec file's { editor, custom }: the editor only.
  if (tools)
    spec.tools =
      spec.tools && typeof spec.tools === "object" && !Array.isArray(spec.tools)
        ? { ...spec.tools, editor: tools }
        : tools;
  const timeout = numberFlag(v, "timeout", { what: "seconds" });
  if (timeout !== undefined) spec.timeoutSec = timeout;
  const commandTimeout = numberFlag(v, "command-timeout", { what: "seconds" });
  if (commandTimeout !== undefined) spec.commandTimeoutSec = commandTimeout;
  const maxTurns = numberFlag(v, "max-turns", { integer: true });
  if (maxTurns !== undefined) spec.maxTurns = maxTurns;
  const rounds = numberFlag(v, "verify-rounds", { integer: true, min: 0 });
  if (rounds !== undefined) spec.verifyRounds = rounds;
  const usd = numberFlag(v, "budget-usd", { what: "dollars" });
  if (usd !== undefined) spec.budget = { ...(spec.budget as object | undefined), usd };
  const missing = [
    ...(spec.task === undefined ? ["--task"] : []),
    ...(spec.repo === undefined ? ["--repo (or --git, --archive)"] : []),
  ];
  if (missing.length) throw new UsageError(`missing ${missing.join(" and ")}`);
  return spec;
}

function readSpecFile(file: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new UsageError(`--spec ${file}: ${(err as Error).message}`);
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed))
    throw new UsageError(`--spec ${file}: not a JSON object`);
  return parsed as Record<string, unknown>;
}

/**
 * A JobSpec error in terms of flags: "invalid JobSpec: timeoutSec: ..." becomes "--timeout: ..."
 * for fields the user set by flag (a field that came from --spec keeps its JobSpec name).
 */
export function flagError(message: string, v: Values): string {
  return message.replace(
    /(^(?:spec #\d+: )?invalid JobSpec: |; )([A-Za-z]+(?:\.[A-Za-z]+)?)(?=[.:])/g,
    (all, lead: string, field: string) => {
      const flag = FLAG_OF[field];
      const fromFlag = flag && flag.split(/, | or /).some((f) => v[f.replace(/^--/, "")] !== undefined);
      return fromFlag ? `${lead}${flag}` : all;
    },
  );
}
