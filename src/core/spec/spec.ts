// The public contract (docs/jobspec.md): JobSpec in, JobResult out, Transcript events
// along the way. Pure: schemas, types and small helpers, no I/O.
//
// Input (JobSpec) is untrusted and hand-written, so it is strict (a typo such as `verfiy` is an
// error, not a silently ignored key) and every failure becomes one readable line that names the
// field. Outputs (JobResult, TranscriptEvent) are produced by patchbay itself; their schemas exist
// so readers can validate what they load.
import { count } from "../count.js";
import { PROVIDERS } from "../config/provider.js";
import { isScriptedModel } from "../config/scripted.js";
import { z } from "zod";
import { MAX_CANDIDATES, pidsProblem } from "../config/config.js";
export { MAX_CANDIDATES };
import { isPresetName, MAX_ALLOW_ENTRIES, parseAllowEntry } from "../allow.js";
import { CREDENTIAL_NAME_RE } from "../config/credentials.js";
import {
  REQUIRED,
  show,
  expected,
  genericMessage,
  nonEmpty,
  positiveNumber,
  positiveInt,
  intRange,
  nonNegInt,
  nonNegNumber,
} from "./fields.js";
import { EDITOR_TOOLS, JOB_STATUSES } from "./names.js";
import { kinded } from "../errors.js";
import { suggest } from "../suggest.js";
import { isLineJobId } from "../line-id.js";
import { isCandidateJobId } from "../candidate-id.js";
import { MAX_DURATION_SEC, MAX_DURATION_WORDS } from "../timeout.js";
import { CustomTools, Mcp, type CustomTool } from "./tools.js";

// ---------------------------------------------------------------------------------------------
// JobSpec
// ---------------------------------------------------------------------------------------------

const REPO_KINDS = ["path", "git", "archive"] as const;
const REPO_SHAPES = "{ path }, { git, ref? }, { archive }";

/** Exactly one source. Strict objects, so `{ path, git }` matches no branch instead of either. */
export const RepoSpec = z.union(
  [
    z.strictObject({ path: nonEmpty("a non-empty path") }),
    z.strictObject({ git: nonEmpty("a non-empty git URL"), ref: nonEmpty("a non-empty git ref").optional() }),
    z.strictObject({ archive: nonEmpty("a non-empty path to a tar or tar.gz") }),
  ],
  {
    error: (iss) => {
      const input = iss.input;
      if (input === undefined) return REQUIRED;
      const base = `must be exactly one of ${REPO_SHAPES}`;
      if (typeof input !== "object" || input === null || Array.isArray(input)) return `${base} (got ${show(input)})`;
      const kinds = REPO_KINDS.filter((k) => k in input);
      return kinds.length === 0 ? `${base} (got none of them)` : `${base} (got ${kinds.join(" and ")})`;
    },
  },
);
export type RepoSpec = z.infer<typeof RepoSpec>;

export { DEFAULT_EDITOR_TOOL, EDITOR_TOOLS, JOB_STATUSES } from "./names.js";
/** `text_editor_20250124` adds `undo_edit`; `edit_file` is a plain JSON-schema tool for models without built-in tools. */
export const EditorTool = z.enum(EDITOR_TOOLS);
export type EditorTool = z.infer<typeof EditorTool>;

/** `tools`: the editor's name alone, or the editor and the spec's own tools (src/core/spec/tools.ts). */
export const Tools = z.union(
  [EditorTool, z.strictObject({ editor: EditorTool.optional(), custom: CustomTools.optional() })],
  {
    error: (iss) =>
      iss.input === undefined
        ? REQUIRED
        : `must be one of ${EDITOR_TOOLS.join(", ")}${typeof iss.input === "string" ? "" : " or { editor?, custom? }"} (got ${show(iss.input)})`,
  },
);
export type Tools = z.infer<typeof Tools>;
/** The editor a spec asked for (undefined: the default). */
export const editorToolOf = (tools: Tools | undefined): EditorTool | undefined =>
  typeof tools === "object" ? tools.editor : tools;
/** The spec's own tools. */
export const customToolsOf = (tools: Tools | undefined): CustomTool[] =>
  typeof tools === "object" ? (tools.custom ?? []) : [];

// Sanity caps on the free texts (a spec goes to Redis and into job_started events whole).
export const MAX_TASK_CHARS = 256 * 1024;
export const MAX_COMMAND_CHARS = 64 * 1024;
const MAX_SETUP_COMMANDS = 64;
const capped = (what: string, max: number) =>
  z
    .string({ error: expected(what) })
    .max(max, {
      error: (iss) =>
        `must be at most ${count(max, "character")} (got ${typeof iss.input === "string" ? iss.input.length : "?"})`,
    })
    .refine((s) => s.trim() !== "", { error: expected(what) });
const Command = capped("a non-empty command", MAX_COMMAND_CHARS);

export const Budget = z.strictObject({
  usd: positiveNumber().optional(),
  inputTokens: positiveInt().optional(),
  outputTokens: positiveInt().optional(),
});
export type Budget = z.infer<typeof Budget>;

// Absolute sanity caps, whatever the worker: what Docker, the kernel and Node's timers take at all
// (a worker's own bounds, src/job/policy.ts, are far lower). Memory and disk are whole MiB: Docker's
// byte counts and tmpfs sizes are integers.
const atLeast = (lo: number, why: string) => ({
  error: (iss: { input?: unknown }) => `must be at least ${lo}, ${why} (got ${show(iss.input)})`,
});
const atMost = (hi: number, words?: string) => ({
  error: (iss: { input?: unknown }) => `must be at most ${hi}${words ? ` (${words})` : ""} (got ${show(iss.input)})`,
});
// Every duration is at most 7 days (src/core/timeout.ts): Node's timers overflow past ~24.8 days and fire at once.
const MAX_SEC = MAX_DURATION_SEC;

export const Limits = z.strictObject({
  memoryMb: positiveInt().min(6, atLeast(6, "Docker's minimum")).max(1_048_576, atMost(1_048_576)).optional(),
  cpus: positiveNumber().min(0.01, atLeast(0.01, "Docker's minimum")).max(1024, atMost(1024)).optional(),
  pids: positiveInt().max(4_194_304, atMost(4_194_304)).optional(),
  diskMb: positiveInt().max(16_777_216, atMost(16_777_216)).optional(),
  network: z.enum(["none", "bridge"]).optional(),
});
export type Limits = z.infer<typeof Limits>;

/** A host (`registry.example.org`, `*.example.org`, optionally `:port`) or a preset name (`npm`, `pypi`, `debian`, `go`). */
const AllowEntry = z.string({ error: expected("a host name or preset") }).check((ctx) => {
  if (isPresetName(ctx.value)) return;
  const r = parseAllowEntry(ctx.value);
  if (typeof r === "string") ctx.issues.push({ code: "custom", message: r, input: ctx.value });
});

/** The most credentials a spec's setup may name. */
export const MAX_SETUP_CREDENTIALS = 16;

/** The names of credentials the worker's operator configured (PATCHBAY_EGRESS_CREDENTIALS): names only, never a value. */
const CredentialNames = z
  .array(
    z
      .string({ error: expected("a credential's name") })
      .regex(CREDENTIAL_NAME_RE, { error: expected("a credential's name: 1-64 characters from a-z 0-9 . _ -") }),
    { error: expected("an array of credential names") },
  )
  .max(MAX_SETUP_CREDENTIALS, {
    error: (iss) =>
      `must name at most ${count(MAX_SETUP_CREDENTIALS, "credential")} (got ${(iss.input as unknown[]).length})`,
  })
  .refine((names) => new Set(names).size === names.length, {
    error: (iss) => {
      const names = iss.input as string[];
      return `names ${JSON.stringify(names.find((n, i) => names.indexOf(n) !== i))} twice`;
    },
  });

/** Network by phase; the default is none at any phase. */
/** The refused hosts a result names (src/net/proxy.ts keeps as many). */
export const MAX_EGRESS_REFUSALS = 20;

export const Network = z.strictObject({
  /** During setup only, HTTP(S) to these hosts through the worker's egress proxy. */
  setup: z
    .strictObject({
      allow: z
        .array(AllowEntry, { error: expected("an array of host names or presets") })
        .max(MAX_ALLOW_ENTRIES, { error: `at most ${count(MAX_ALLOW_ENTRIES, "entry", "entries")}` }),
      /**
       * Credentials of the worker's (PATCHBAY_EGRESS_CREDENTIALS) the egress proxy adds to this
       * setup's requests, by name; each one's host must be on `allow` (docs/operations.md, "The credentials file").
       */
      credentials: CredentialNames.optional(),
    })
    .check((ctx) => {
      if (ctx.value.credentials?.length && !ctx.value.allow.length)
        ctx.issues.push({
          code: "custom",
          message:
            "names credentials but network.setup.allow is empty: a credential is added only for a host the allow-list names",
          input: ctx.value.credentials,
          path: ["credentials"],
        });
    })
    .optional(),
});
export type Network = z.infer<typeof Network>;

/** How a job's candidates are ordered after verified-first (docs/jobspec.md#candidates). */
export const PICKS = ["smaller-patch", "lower-cost"] as const;

// BullMQ rejects custom ids containing ':' and ids that are plain integers (its own auto ids).
// '.' and '..' are refused too, because a job id may end up as a directory name.
const JOB_ID_RE = /^[A-Za-z0-9_.-]{1,128}$/;
/**
 * BullMQ keeps a job's hash at <prefix>:<queue>:<id>, beside its own keys of the queue: an id that
 * names one of them would write a hash over its wait list (every later add then fails WRONGTYPE)
 * or read its meta as a job. test/integration/api-attacks.test.ts holds this against BullMQ's own list.
 */
const BULLMQ_KEY_NAMES: readonly string[] = [
  "active",
  "wait",
  "waiting-children",
  "paused",
  "id",
  "delayed",
  "prioritized",
  "stalled-check",
  "completed",
  "failed",
  "stalled",
  "repeat",
  "limiter",
  "meta",
  "events",
  "pc",
  "marker",
  "de",
  "metrics",
];
const JobId = z
  .string({ error: expected("a string") })
  .regex(JOB_ID_RE, { error: expected('1-128 characters from A-Z a-z 0-9 _ . - (no ":")') })
  .refine((s) => `${parseInt(s, 10)}` !== s, {
    error: (iss) => `must not be a plain integer, BullMQ reserves those for its own ids (got ${show(iss.input)})`,
  })
  .refine((s) => s !== "." && s !== "..", { error: (iss) => `must not be "." or ".." (got ${show(iss.input)})` })
  .refine((s) => !BULLMQ_KEY_NAMES.includes(s), {
    error: (iss) => `must not be the name of one of BullMQ's own keys of the queue (got ${show(iss.input)})`,
  })
  // The ids of batch lines are the batches' own (src/core/line-id.ts): a job planted under one would be taken for the line's.
  .refine((s) => !isLineJobId(s), {
    error: (iss) =>
      `must not end in -L<n> or -L<n>-r<k>: those are the ids of batch lines, which only a batch makes (got ${show(iss.input)})`,
  })
  .refine((s) => !isCandidateJobId(s), {
    error: (iss) =>
      `must not end in -C<n>: those are the ids of a job's candidates, which only its worker makes (got ${show(iss.input)})`,
  });

/** A job: the task, the repo, and what it may use (docs/jobspec.md); the schema that checks one. */
export const JobSpec = z
  .strictObject({
    task: capped("a non-empty string", MAX_TASK_CHARS),
    /**
     * The operator's own instructions for the agent (trusted, like the task): in the system prompt,
     * before the repository's instructions (docs/jobspec.md#instructions).
     */
    instructions: capped("a non-empty string", MAX_TASK_CHARS).optional(),
    /** false: the repository's AGENTS.md, CLAUDE.md and .github/copilot-instructions.md are not offered to the model. */
    repoInstructions: z.boolean({ error: expected("true or false") }).optional(),
    repo: RepoSpec,
    image: nonEmpty("a non-empty image name").optional(),
    /** Commands run in the sandbox before the agent, e.g. `npm ci`. */
    setup: z
      .union([Command, z.array(Command).max(MAX_SETUP_COMMANDS)], {
        error: (iss) => {
          if (iss.input === undefined) return REQUIRED;
          if (Array.isArray(iss.input)) {
            const items: unknown[] = iss.input;
            const i = items.findIndex((c) => typeof c !== "string" || c.trim() === "");
            if (i >= 0) return `must be a command or an array of commands (item ${i} is ${show(items[i])})`;
            const lengths = items.map((c) => (typeof c === "string" ? c.length : 0)); // all strings by now
            const long = lengths.findIndex((n) => n > MAX_COMMAND_CHARS);
            if (long >= 0)
              return `item ${long} must be at most ${count(MAX_COMMAND_CHARS, "character")} (got ${lengths[long]})`;
            if (items.length > MAX_SETUP_COMMANDS)
              return `must be at most ${count(MAX_SETUP_COMMANDS, "command")} (got ${items.length})`;
          } else if (typeof iss.input === "string" && iss.input.length > MAX_COMMAND_CHARS) {
            return `must be at most ${count(MAX_COMMAND_CHARS, "character")} (got ${iss.input.length})`;
          }
          return `must be a command or an array of commands (got ${show(iss.input)})`;
        },
      })
      .optional(),
    /** Run after the agent, in a fresh process; its exit code and output tail go into the result. */
    verify: Command.optional(),
    /** How many more times a failed verify is fed back to the model (default 2; 0 = verify once and report). */
    verifyRounds: intRange(0, 10).optional(),
    /**
     * Best-of-N: this many agent runs from one setup, each in a sandbox of its own and verified; the
     * best is the job's result (docs/jobspec.md#candidates). Needs `verify`, the judge. Default 1.
     */
    candidates: intRange(1, MAX_CANDIDATES).optional(),
    /** With candidates: the others are cancelled once this many verified. */
    stopAfterVerified: intRange(1, MAX_CANDIDATES).optional(),
    /** With candidates: the order among the verified (then among the rest): the smaller patch first (default), or the lower cost. */
    pick: z.enum(PICKS, { error: (iss) => `must be one of ${PICKS.join(", ")} (got ${show(iss.input)})` }).optional(),
    /** The model id; never `scripted:…`, which a worker's own setting chooses (a spec naming it would be priced at 0 by no worker's budget). */
    model: nonEmpty("a non-empty model id")
      .refine((m) => !isScriptedModel(m.trim()), {
        error:
          "a JobSpec cannot choose the scripted model: a worker runs it when started with --scripted FILE or PATCHBAY_MODEL=scripted:FILE",
      })
      .optional(),
    /** Where this job's model is reached (anthropic, bedrock, vertex); default and allowed ones: the worker's (PATCHBAY_PROVIDER, PATCHBAY_PROVIDERS). */
    provider: z
      .enum(PROVIDERS, { error: (iss) => `must be one of ${PROVIDERS.join(", ")} (got ${show(iss.input)})` })
      .optional(),
    maxTurns: positiveInt().max(10_000, atMost(10_000)).optional(),
    /** Output tokens per model response. */
    maxTokens: positiveInt().max(1_000_000, atMost(1_000_000)).optional(),
    budget: Budget.optional(),
    /** Wall clock for the whole job. */
    timeoutSec: positiveNumber()
      .max(MAX_SEC, atMost(MAX_SEC, `seconds, ${MAX_DURATION_WORDS}`))
      .optional(),
    /** Per bash command. */
    commandTimeoutSec: positiveNumber()
      .max(MAX_SEC, atMost(MAX_SEC, `seconds, ${MAX_DURATION_WORDS}`))
      .optional(),
    tools: Tools.optional(),
    /** MCP servers run in the sandbox, their tools offered as mcp__NAME__TOOL. */
    mcp: Mcp.optional(),
    limits: Limits.optional(),
    network: Network.optional(),
    /** The OCI runtime: runc, or gVisor's runsc. */
    runtime: z.enum(["runc", "runsc"]).optional(),
    /** Optional idempotency key (the BullMQ job id). */
    jobId: JobId.optional(),
    /** BullMQ's range: 1 (highest) .. 2^21. */
    priority: intRange(1, 2_097_152).optional(),
    attempts: intRange(1, 20).optional(),
  })
  .check((ctx) => {
    const pids = ctx.value.limits?.pids;
    const why = pids === undefined ? undefined : pidsProblem(pids);
    if (why) ctx.issues.push({ code: "custom", message: why, input: pids, path: ["limits", "pids"] });
    for (const [path, message] of candidateProblems(ctx.value))
      ctx.issues.push({ code: "custom", message, input: ctx.value[path], path: [path] });
  });

/** What is wrong with a spec's candidates, stopAfterVerified and pick together (each alone is checked by its schema). */
function candidateProblems(s: {
  candidates?: number;
  stopAfterVerified?: number;
  pick?: string;
  verify?: string;
}): ["candidates" | "stopAfterVerified" | "pick", string][] {
  const n = s.candidates ?? 1;
  const out: ["candidates" | "stopAfterVerified" | "pick", string][] = [];
  if (n > 1 && s.verify === undefined)
    out.push(["candidates", `${count(n, "candidate")} need a verify command: verify is what judges them`]);
  if (s.stopAfterVerified !== undefined && s.stopAfterVerified > n)
    out.push(["stopAfterVerified", `must be at most candidates (${n}; got ${s.stopAfterVerified})`]);
  if (n === 1 && s.stopAfterVerified !== undefined)
    out.push(["stopAfterVerified", "applies only with candidates over 1"]);
  if (n === 1 && s.pick !== undefined) out.push(["pick", "applies only with candidates over 1"]);
  return out;
}
/** A job, as its schema checks it (docs/jobspec.md). */
export type JobSpec = z.infer<typeof JobSpec>;

// Known keys per object path, for "did you mean" hints on unknown keys.
const KNOWN_KEYS: Record<string, readonly string[]> = {
  "": Object.keys(JobSpec.shape),
  budget: Object.keys(Budget.shape),
  limits: Object.keys(Limits.shape),
  network: Object.keys(Network.shape),
  "network.setup": ["allow", "credentials"],
  repo: ["path", "git", "ref", "archive"],
  tools: ["editor", "custom"],
  mcp: ["servers"],
};

function pathString(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out === "" ? String(p) : `.${String(p)}`;
  return out;
}

type Issue = z.core.$ZodIssue;

/** One line per problem: "<path>: <message>". */
function describe(issues: readonly Issue[], prefix: readonly PropertyKey[] = []): string[] {
  const out: string[] = [];
  for (const iss of issues) {
    const path = [...prefix, ...iss.path];
    if (iss.code === "unrecognized_keys") {
      const known = KNOWN_KEYS[pathString(path)] ?? [];
      for (const key of iss.keys) {
        const where = pathString([...path, key]);
        if (known.includes(key)) {
          // a real key in the wrong company, e.g. `ref` next to `path`
          out.push(`${where}: ${where === "repo.ref" ? "only allowed with git" : "not allowed here"}`);
          continue;
        }
        const hint = suggest(key, known);
        out.push(`${where}: unknown key${hint ? ` (did you mean "${hint}"?)` : ""}`);
      }
      continue;
    }
    if (iss.code === "invalid_union" && iss.errors.length > 0) {
      // If exactly one branch has everything it requires (e.g. repo `{ path: 5 }`), that is the
      // branch the user meant: report its precise problems instead of the generic union message.
      // `tools` as an object means its object branch, whatever its problems (not the editor's name).
      const ofType =
        pathString(path) !== "tools"
          ? []
          : iss.errors.filter(
              (branch) =>
                !branch.some((b) => b.path.length === 0 && (b.code === "invalid_type" || b.code === "invalid_value")),
            );
      const plausible = iss.errors.filter((branch) => !branch.some((b) => b.message === REQUIRED));
      const meant = ofType.length === 1 ? ofType : plausible;
      if (meant.length === 1) {
        out.push(...describe(meant[0]!, path));
        continue;
      }
    }
    out.push(path.length > 0 ? `${pathString(path)}: ${iss.message}` : iss.message);
  }
  return [...new Set(out)];
}

export type ParseJobSpecResult = { ok: true; spec: JobSpec } | { ok: false; error: string };

/** Validate untrusted input. `error` is one human-readable line listing every bad field by path. */
export function parseJobSpec(input: unknown): ParseJobSpecResult {
  let result: ReturnType<typeof JobSpec.safeParse>;
  try {
    result = JobSpec.safeParse(input, { error: genericMessage });
  } catch (err) {
    // e.g. a getter or Proxy that throws; still one line, no stack
    return { ok: false, error: `invalid JobSpec: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (result.success) return { ok: true, spec: result.data };
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    return { ok: false, error: `invalid JobSpec: must be an object (got ${show(input)})` };
  }
  return { ok: false, error: `invalid JobSpec: ${describe(result.error.issues).join("; ")}` };
}

/** A bad JobSpec: the job fails without retry. The message is the one from parseJobSpec. */
export class JobSpecError extends kinded("spec") {}

/** The spec, checked; throws a JobSpecError naming every problem (parseJobSpec's message). */
export function assertJobSpec(input: unknown): JobSpec {
  const r = parseJobSpec(input);
  if (!r.ok) throw new JobSpecError(r.error);
  return r.spec;
}

// ---------------------------------------------------------------------------------------------
// Usage and JobResult
// ---------------------------------------------------------------------------------------------

export const JobStatus = z.enum(JOB_STATUSES);
export type JobStatus = z.infer<typeof JobStatus>;

export const Usage = z.object({
  inputTokens: nonNegInt(),
  outputTokens: nonNegInt(),
  cacheReadTokens: nonNegInt(),
  cacheWriteTokens: nonNegInt(),
});
export type Usage = z.infer<typeof Usage>;

export function emptyUsage(): Usage {
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
}

export function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheReadTokens: a.cacheReadTokens + b.cacheReadTokens,
    cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens,
  };
}

/** Exit codes are integers; a command killed by its timeout reports 124 (as coreutils `timeout`). */
const ExitCode = z.int();

/** One candidate of a job with candidates, as its result (docs/jobspec.md#candidates) shows it. */
export const CandidateOutcome = z.object({
  /** Its number, from 1. */
  n: positiveInt(),
  /** Its own job: `<job>-C<n>` (its transcript and whole result are there). */
  jobId: z.string(),
  status: JobStatus,
  verified: z.boolean().optional(),
  costUsd: nonNegNumber(),
  turns: nonNegInt(),
  /** Its patch's bytes and how many files it changes. */
  patchBytes: nonNegInt(),
  filesChanged: nonNegInt(),
  error: z.string().optional(),
});
export type CandidateOutcome = z.infer<typeof CandidateOutcome>;

/** What a job ended with: its status, its patch, verify, cost and timings (docs/jobspec.md); the schema. */
export const JobResult = z.object({
  status: JobStatus,
  /** `git diff --binary` against the starting tree; "" when nothing changed (or, with `patchStored`, kept under its own key). */
  patch: z.string(),
  diffstat: z.string(),
  filesChanged: z.array(z.string()),
  // Set only where the queue bounded the result (src/queue/result-bounds.ts): how many files changed
  // in all and how many names were left out of `filesChanged`; diffstat lines left out (its summary
  // line is kept); a patch over the inline bound, kept once under its own Redis key (`patch` is then
  // "" in Redis; result(), waitForResult and the CLI put it back and drop this field).
  filesChangedTotal: nonNegInt().optional(),
  filesChangedCut: nonNegInt().optional(),
  diffstatCut: nonNegInt().optional(),
  patchStored: z.object({ bytes: nonNegInt(), sha256: z.string() }).optional(),
  /** The final verify: the one that judged `patch`. */
  verify: z.object({ exitCode: ExitCode, outputTail: z.string() }).optional(),
  /** Set when a verify ran: whether it passed (exit 0). */
  verified: z.boolean().optional(),
  /** The last model stop_reason, null if the model was never called. */
  stopReason: z.string().nullable(),
  turns: nonNegInt(),
  usage: Usage,
  /** USD, by the model's price; 0 for a model whose price is unknown (`priceUnknown`). */
  costUsd: nonNegNumber(),
  /** The model id the job ran with (its spec's, else the worker's default). */
  model: z.string().optional(),
  /** Set when the model's price is unknown: `costUsd` counts nothing (not a guess). */
  priceUnknown: z.literal(true).optional(),
  /** Set when a scripted model answered (`model` is `scripted:<file>`): nothing was priced, `costUsd` is 0. */
  scripted: z.literal(true).optional(),
  timings: z.object({
    queuedMs: nonNegNumber(),
    sandboxMs: nonNegNumber(),
    agentMs: nonNegNumber(),
    totalMs: nonNegNumber(),
  }),
  error: z.string().optional(),
  /** The model's last text: what it says it did. */
  summary: z.string().optional(),
  /**
   * Setup-phase egress through the proxy: connections allowed and refused, bytes each way, and
   * what was refused ("host:port (reason)", the first 20 distinct), which a campaign's pull request names.
   */
  egress: z
    .object({
      allowed: nonNegInt(),
      refused: nonNegInt(),
      bytesUp: nonNegInt(),
      bytesDown: nonNegInt(),
      refusals: z.array(z.string()).max(MAX_EGRESS_REFUSALS).optional(),
    })
    .optional(),
  jobId: z.string().optional(),
  /** A `{ git }` repo's commit the job started from: what `patch` applies to (a campaign publishes onto it). */
  baseCommit: z
    .string()
    .regex(/^[0-9a-f]{40,64}$/)
    .optional(),
  /** 1-based attempt that produced this result. */
  attempt: positiveInt().optional(),
  /** A job with candidates: each one's outcome, in order (the picked one's patch and verify are this result's). */
  candidates: z.array(CandidateOutcome).max(MAX_CANDIDATES).optional(),
  /** A job with candidates: the number of the one picked (from 1); unset when none could be. */
  picked: positiveInt().optional(),
});
/** What a job ended with (docs/jobspec.md). */
export type JobResult = z.infer<typeof JobResult>;

/** How many files a result or patch event changed, whether or not its list was cut. */
export const filesChangedCount = (r: { filesChanged: string[]; filesChangedTotal?: number }): number =>
  r.filesChangedTotal ?? r.filesChanged.length;

/** The result of a job that ended before the agent did anything: no patch, no usage. */
export function emptyResult(status: JobStatus, error: string, extra: Partial<JobResult> = {}): JobResult {
  return {
    status,
    patch: "",
    diffstat: "",
    filesChanged: [],
    stopReason: null,
    turns: 0,
    usage: emptyUsage(),
    costUsd: 0,
    timings: { queuedMs: 0, sandboxMs: 0, agentMs: 0, totalMs: 0 },
    error,
    ...extra,
  };
}

// ---------------------------------------------------------------------------------------------
// Transcript: one event per line of transcript.jsonl
// ---------------------------------------------------------------------------------------------

const eventBase = {
  ts: z.iso.datetime({ offset: true }),
  jobId: z.string().min(1),
  /** 1-based: the first attempt is 1 (BullMQ's attemptsMade + 1). */
  attempt: positiveInt(),
};

const event = <T extends string, S extends z.ZodRawShape>(type: T, shape: S) =>
  z.object({ ...eventBase, type: z.literal(type), ...shape });

const Ms = nonNegNumber();

/** One event of a job's transcript, by its `type` (docs/jobspec.md); the schema. */
export const TranscriptEvent = z.discriminatedUnion("type", [
  // `model`: the model the job runs with; `scripted`: a scripted model (src/agent/scripted.ts), never priced.
  event("job_started", { spec: JobSpec, model: z.string().optional(), scripted: z.literal(true).optional() }),
  event("sandbox_ready", { container: z.string(), ms: Ms }),
  event("setup", { command: z.string(), exitCode: ExitCode, outputTail: z.string(), ms: Ms }),
  // `newMessages`: the messages appended since the previous request (the task on turn 1, then each
  // turn's tool results), and `system` on turn 1, so the events alone rebuild what was sent.
  event("model_request", {
    turn: nonNegInt(),
    messagesCount: nonNegInt(),
    newMessages: z.array(z.unknown()).optional(),
    system: z.string().optional(),
  }),
  // Full assistant content blocks as the API returned them: replaying these rebuilds the conversation.
  event("model_response", {
    turn: nonNegInt(),
    content: z.array(z.unknown()),
    stopReason: z.string().nullable(),
    usage: Usage,
    ms: Ms,
    model: z.string(),
  }),
  // `server`: the MCP server of an mcp__SERVER__TOOL call.
  event("tool_call", {
    turn: nonNegInt(),
    toolUseId: z.string(),
    name: z.string(),
    input: z.unknown(),
    server: z.string().optional(),
  }),
  event("tool_result", {
    turn: nonNegInt(),
    toolUseId: z.string(),
    name: z.string(),
    output: z.string(),
    isError: z.boolean(),
    ms: Ms,
  }),
  // `round` is 1 for the first verify; each failed one that is fed back to the model starts another.
  event("verify", {
    command: z.string(),
    exitCode: ExitCode,
    outputTail: z.string(),
    ms: Ms,
    round: positiveInt().optional(),
  }),
  // As in JobResult: filesChanged and diffstat bounded where the event enters Redis, with counts of what was cut.
  event("patch", {
    filesChanged: z.array(z.string()),
    diffstat: z.string(),
    bytes: nonNegInt(),
    filesChangedTotal: nonNegInt().optional(),
    filesChangedCut: nonNegInt().optional(),
    diffstatCut: nonNegInt().optional(),
  }),
  event("job_finished", {
    status: JobStatus,
    error: z.string().optional(),
    costUsd: nonNegNumber(),
    turns: nonNegInt(),
    scripted: z.literal(true).optional(),
  }),

  // Beyond the steps of a job, so a reader can see why a run was slow, shorter, or stopped:
  // a retried model call (429/5xx/overloaded). `retry` is the retry number (1 = first retry); it is
  // not called `attempt` because that name is the job attempt on every event. `status` is the HTTP status.
  event("model_retry", { retry: positiveInt(), error: z.string(), status: z.int().optional(), delayMs: Ms.optional() }),
  // older tool output elided to keep the conversation within the context window
  event("context_trimmed", { removedChars: nonNegInt(), keptTurns: nonNegInt() }),
  // Older turns replaced by a summary the model wrote (its request's usage counts in the job's), at
  // the compaction threshold or after the API refused a prompt as too long; tokens estimated (src/agent/window.ts).
  event("context_compacted", {
    turn: nonNegInt(),
    reason: z.enum(["threshold", "prompt_too_long"]),
    turnsDropped: nonNegInt(),
    messagesKept: nonNegInt(),
    tokensBefore: nonNegInt(),
    tokensAfter: nonNegInt(),
    summary: z.string(),
    usage: Usage,
  }),
  // The repository's instruction files offered to the model (src/job/instructions.ts): their paths
  // in the order given, their bytes together, whether the 32 KiB bound cut them, and the files left
  // out and why (a symlink, not a regular file, too large). Repo text: the paths are shown escaped.
  event("instructions_loaded", {
    files: z.array(z.string()),
    bytes: nonNegInt(),
    cut: z.boolean(),
    refused: z.array(z.object({ path: z.string(), reason: z.string() })).optional(),
  }),
  // A job with candidates: setup done, its workspace kept (the seed, `seedBytes`) and the candidates
  // added as the job's children, each under its own job id; then the one picked, and why.
  event("candidates_started", { jobIds: z.array(z.string()).max(MAX_CANDIDATES), seedBytes: nonNegInt() }),
  event("candidate_picked", {
    picked: positiveInt().optional(),
    why: z.string(),
    candidates: z.array(CandidateOutcome).max(MAX_CANDIDATES),
  }),
  // one connection or request through the setup phase's egress proxy (allowed, or refused and why)
  event("egress", {
    host: z.string(),
    port: nonNegInt(),
    method: z.string(),
    allowed: z.boolean(),
    reason: z.string().optional(),
    address: z.string().optional(),
    status: z.int().optional(),
    // a request inside a tunnel the proxy terminated: its path without the query, and the name of
    // the credential it added (never the value)
    path: z.string().optional(),
    credential: z.string().optional(),
    bytesUp: nonNegInt(),
    bytesDown: nonNegInt(),
    ms: Ms,
  }),
  // a budget limit was reached (the job then finishes with status budget_exceeded)
  event("budget", { limit: z.enum(["usd", "inputTokens", "outputTokens"]), max: nonNegNumber(), used: nonNegNumber() }),
  // An attempt that took up an earlier attempt's checkpoint (restored: true: the workspace and the
  // conversation after turn `turns`, whose usage and cost count on), or could not and starts afresh (reason).
  event("resume", {
    restored: z.boolean(),
    fromAttempt: positiveInt().optional(),
    turns: nonNegInt(),
    patchBytes: nonNegInt(),
    costUsd: nonNegNumber(),
    reason: z.string().optional(),
  }),
  // A checkpoint that was not stored (too big, the store away): the last one stored stays.
  event("checkpoint", { turn: nonNegInt(), saved: z.boolean(), reason: z.string().optional() }),
]);
/** One event of a job's transcript (docs/jobspec.md). */
export type TranscriptEvent = z.infer<typeof TranscriptEvent>;
export type EventType = TranscriptEvent["type"];
export const EVENT_TYPES: EventType[] = TranscriptEvent.options.map((o) => o.shape.type.value);

/** The event of one type, e.g. `EventOf<"tool_result">`. */
export type EventOf<T extends EventType> = Extract<TranscriptEvent, { type: T }>;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
/** What an emitter supplies; the transcript writer adds ts, jobId and attempt. */
export type EventInput = DistributiveOmit<TranscriptEvent, "ts" | "jobId" | "attempt">;

/** An event with its time, job and attempt: what goes into the transcript. */
export const stamped = (e: EventInput, jobId: string, attempt: number): TranscriptEvent => ({
  ts: new Date().toISOString(),
  jobId,
  attempt,
  ...e,
});

/** The job_finished event that ends a transcript: the result's status, cost, turns and error (the one place it is built). */
export function finishedEvent(r: Pick<JobResult, "status" | "costUsd" | "turns" | "error" | "scripted">): EventInput {
  return {
    type: "job_finished",
    status: r.status,
    costUsd: r.costUsd,
    turns: r.turns,
    ...(r.error ? { error: r.error } : {}),
    ...(r.scripted ? { scripted: true as const } : {}),
  };
}
