// Every knob and default of patchbay, parsed once from the environment: the only module that reads
// process.env. The CLI, a worker's start, the dashboard's start and the library client call
// loadConfig() once and pass the Config in.
import { envProblem } from "./env-issues.js";
import { z } from "zod";
import { isAbsolute, resolve } from "node:path";
import { inspect } from "node:util";
import { forgeSettings, parseForges, type ForgeHost } from "./forges.js";
import { PROVIDERS, providerOf } from "./provider.js";
import { isScriptedModel, SCRIPTED_PREFIX, scriptedModelOf, type ScriptedModelConfig } from "./scripted.js";
import { httpUrl, keyValues, telemetryOf, type TelemetryConfig } from "./otel.js";
import { loadEgressCredentials } from "./credentials.js";
import { parseRedisUrl } from "../../redis/target.js";
import { MAX_DURATION_MS, MAX_DURATION_SEC, MAX_DURATION_WORDS } from "../timeout.js";

/** The most candidates a job may ask for (a worker's PATCHBAY_MAX_CANDIDATES may cap it lower). */
export const MAX_CANDIDATES = 16;

export const DEFAULT_IMAGE = "patchbay-sandbox:latest";
// claude-sonnet-4-5 reaches end of life on 2026-11-30 (the SDK warns); Sonnet 5.5 is the current Sonnet.
export const DEFAULT_MODEL = "claude-sonnet-5-5";
export const DEFAULT_QUEUE = "patchbay";
export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";

// OpenTelemetry's standard variables (src/core/config/otel.ts, src/observability/telemetry.ts): traces go out over
// OTLP/HTTP (protobuf) only when an endpoint is set. The headers may hold secrets.
const OTEL_ENV = {
  OTEL_SDK_DISABLED: z.string().optional(),
  OTEL_TRACES_EXPORTER: z.string().optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl().optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: httpUrl().optional(),
  OTEL_EXPORTER_OTLP_HEADERS: keyValues(true),
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: keyValues(true),
  OTEL_EXPORTER_OTLP_PROTOCOL: z.literal("http/protobuf", { error: "only http/protobuf is supported" }).optional(),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z
    .literal("http/protobuf", { error: "only http/protobuf is supported" })
    .optional(),
  OTEL_SERVICE_NAME: z.string().min(1).max(255).optional(),
  OTEL_RESOURCE_ATTRIBUTES: keyValues(false),
  OTEL_BSP_SCHEDULE_DELAY: z.coerce.number().int().min(0).max(3_600_000).default(5000),
};

// Claude on Bedrock or Vertex (src/core/config/provider.ts): each platform's standard variables, as
// Anthropic's Bedrock and Vertex SDKs and the AWS and Google SDKs name them.
const PROVIDER_ENV = {
  PATCHBAY_PROVIDER: z.enum(PROVIDERS).default("anthropic"),
  /** The providers a JobSpec's `provider` may name, comma-separated (default: PATCHBAY_PROVIDER alone). */
  PATCHBAY_PROVIDERS: z
    .string()
    .optional()
    .transform((s, ctx) => {
      const list = (s ?? "")
        .split(",")
        .map((x) => x.trim())
        .filter(Boolean);
      const bad = list.find((x) => !(PROVIDERS as readonly string[]).includes(x));
      if (bad !== undefined)
        ctx.addIssue({
          code: "custom",
          message: `each must be one of ${PROVIDERS.join(", ")} (got ${JSON.stringify(bad.slice(0, 40))})`,
        });
      return list.length ? (list as (typeof PROVIDERS)[number][]) : undefined;
    }),
  AWS_REGION: z.string().optional(),
  AWS_DEFAULT_REGION: z.string().optional(),
  AWS_ACCESS_KEY_ID: z.string().optional(),
  AWS_SECRET_ACCESS_KEY: z.string().optional(),
  AWS_SESSION_TOKEN: z.string().optional(),
  AWS_PROFILE: z.string().optional(),
  AWS_SHARED_CREDENTIALS_FILE: z.string().optional(),
  AWS_CONFIG_FILE: z.string().optional(),
  AWS_BEARER_TOKEN_BEDROCK: z.string().optional(),
  ANTHROPIC_BEDROCK_BASE_URL: httpUrl().optional(),
  CLOUD_ML_REGION: z
    .string()
    .regex(/^[a-z0-9-]{0,40}$/, { error: "must be a Google Cloud region (us-east5, europe-west1, global, …)" })
    .optional(),
  ANTHROPIC_VERTEX_PROJECT_ID: z.string().optional(),
  ANTHROPIC_VERTEX_BASE_URL: httpUrl().optional(),
  GOOGLE_APPLICATION_CREDENTIALS: z.string().optional(),
  CLOUDSDK_CONFIG: z.string().optional(),
};

const Env = z
  .object({
    // One server, a Sentinel group or a Cluster (src/redis/target.ts), parsed here so a bad one stops the start.
    REDIS_URL: z
      .string()
      .default(DEFAULT_REDIS_URL)
      .superRefine((url, ctx) => {
        try {
          parseRedisUrl(url);
        } catch (err) {
          ctx.addIssue({ code: "custom", message: (err as Error).message });
        }
      }),
    /** TLS files for rediss:// (a URL's ca=, cert= and key= win): the CA that signed Redis's certificate, and a client certificate and key. */
    PATCHBAY_REDIS_TLS_CA: z.string().optional(),
    PATCHBAY_REDIS_TLS_CERT: z.string().optional(),
    PATCHBAY_REDIS_TLS_KEY: z.string().optional(),
    /** Replicas a result or an enqueue waits for (WAIT) before it counts: "auto" is 1 on Sentinel, 0 elsewhere. */
    PATCHBAY_REDIS_WAIT_REPLICAS: z.union([z.literal("auto"), z.coerce.number().int().min(0).max(16)]).default("auto"),
    /** Default: 2000, or a quarter of PATCHBAY_LOCK_MS when that is shorter (WAIT 0 would block for ever). */
    PATCHBAY_REDIS_WAIT_MS: z.coerce.number().int().min(1).max(60_000).optional(),
    PATCHBAY_QUEUE: z.string().min(1).default(DEFAULT_QUEUE),
    /** Forges beyond github.com and gitlab.com (src/core/config/forges.ts): HOST=github@API_URL,... */
    PATCHBAY_FORGES: z
      .string()
      .optional()
      .transform((s, ctx): ForgeHost[] => {
        const r = parseForges(s);
        if (typeof r === "string") ctx.addIssue({ code: "custom", message: r });
        return typeof r === "string" ? [] : r;
      }),
    PATCHBAY_IMAGE: z.string().min(1).default(DEFAULT_IMAGE),
    /** A model id, or scripted:FILE for the scripted model (src/core/config/scripted.ts). */
    PATCHBAY_MODEL: z
      .string()
      .min(1)
      .refine((s) => !isScriptedModel(s) || s.length > SCRIPTED_PREFIX.length, {
        error: "scripted: needs a file: scripted:FILE (e.g. scripted:examples/clamp/scripted.yaml)",
      })
      .default(DEFAULT_MODEL),
    /** The context window in tokens for every model (unset: by the model's id, src/agent/window.ts). */
    PATCHBAY_CONTEXT_WINDOW: z.coerce.number().int().min(1000).max(100_000_000).optional(),
    /** Past this fraction of the window the conversation is compacted (0.1 to 0.95). */
    PATCHBAY_COMPACT_AT: z.coerce.number().min(0.1).max(0.95).optional(),
    PATCHBAY_CONCURRENCY: z.coerce.number().int().positive().default(2),
    PATCHBAY_WORKER_ID: z.string().optional(),
    /** Warm sandboxes a worker keeps ready per kind (default: its concurrency); 0 turns the pool off. */
    PATCHBAY_POOL: z.coerce.number().int().min(0).optional(),
    /** Sandbox removals a worker runs at once, in the background (a job's result is handed back first). */
    PATCHBAY_REMOVALS: z.coerce.number().int().min(1).max(64).default(2),
    /** Removals that may wait for a slot (default: the concurrency); past that a finished job waits for room. */
    PATCHBAY_REMOVALS_QUEUE: z.coerce.number().int().min(0).max(1024).optional(),
    // Reliability timings; the defaults suit minute-long jobs, tests shorten them.
    // A dead worker's job is taken up again within LOCK_MS + STALLED_MS (25 s); the lock is renewed
    // every LOCK_RENEW_MS (default LOCK_MS / 4), so a worker must be stuck for 15 s to lose one.
    PATCHBAY_LOCK_MS: durationMs().default(20_000),
    PATCHBAY_LOCK_RENEW_MS: durationMs().optional(),
    PATCHBAY_STALLED_MS: durationMs().default(5_000),
    /** Checkpoints after each turn (resume instead of restart); "0" turns them off. */
    PATCHBAY_CHECKPOINTS: z.enum(["0", "1"]).default("1"),
    /** A checkpoint (conversation and patch, as JSON) over this many bytes is not stored; the last one that fit stays. */
    PATCHBAY_CHECKPOINT_MAX_BYTES: z.coerce
      .number()
      .int()
      .positive()
      .default(8 * 1024 * 1024),
    /**
     * A job with candidates keeps its workspace after setup (the seed) in Redis for its candidates'
     * workers; a seed over this many bytes fails the job, naming it (docs/jobspec.md#candidates).
     */
    PATCHBAY_SEED_MAX_BYTES: z.coerce
      .number()
      .int()
      .positive()
      .default(256 * 1024 * 1024),
    PATCHBAY_REAP_MS: durationMs().default(60_000),
    PATCHBAY_DRAIN_MS: durationMs().default(30_000),
    /** A job still running this long past its own timeout has its sandbox killed. */
    PATCHBAY_HARD_GRACE_MS: durationMs().default(120_000),
    /** How often a worker polls the cancel marks of its running jobs (the fallback for a lost pub/sub message). */
    PATCHBAY_CANCEL_POLL_MS: durationMs().default(2000),
    /** "0" turns the cancel channel off, leaving the poll alone (tests of each path). */
    PATCHBAY_CANCEL_PUBSUB: z.enum(["0", "1"]).default("1"),
    /** Heartbeat interval; the heartbeat lives three intervals. */
    PATCHBAY_HEARTBEAT_MS: durationMs().default(10_000),
    /** Health of a worker's engine and sandbox image: re-checked while unhealthy, from MIN to MAX ms (doubling); one check's time limit. */
    PATCHBAY_HEALTH_MIN_MS: durationMs().default(1000),
    PATCHBAY_HEALTH_MAX_MS: durationMs().default(30_000),
    PATCHBAY_HEALTH_TIMEOUT_MS: durationMs().default(10_000),
    /** An API 429/529 after the SDK's retries throttles the queue: for its retry-after, else THROTTLE_MS; at most THROTTLE_MAX_MS. */
    PATCHBAY_THROTTLE_MS: durationMs().default(10_000),
    PATCHBAY_THROTTLE_MAX_MS: durationMs().default(60_000),
    /** The backend, where boxes run: docker; local (no isolation) and memory (executes nothing) are for tests and simulations (src/backend/). */
    PATCHBAY_BACKEND: z.enum(["docker", "local", "memory"]).default("docker"),
    /** "1" lets a worker run on the local backend (tests only). */
    PATCHBAY_TEST_BACKENDS: z.enum(["0", "1"]).default("0"),
    /** Per-job directories of the setup egress proxy's sockets; must be the same path for the Docker engine. */
    PATCHBAY_EGRESS_DIR: z.string().min(1).optional(),
    /**
     * The credentials the egress proxy adds for a job's setup (src/core/config/credentials.ts): the
     * path of a JSON or YAML file, read once here; a JobSpec names which it uses. Unset: none.
     */
    PATCHBAY_EGRESS_CREDENTIALS: z.string().optional(),
    /** How long Redis keeps a finished job: its result, transcript and stored patch (seconds; default 7 days). */
    PATCHBAY_RETENTION_SEC: z.coerce
      .number()
      .int()
      .min(60)
      .default(7 * 24 * 3600),
    /** How often a published campaign with open changesets is tracked on the queue (campaign tracker). */
    PATCHBAY_TRACK_EVERY_MS: durationMs().default(10 * 60_000),
    /** The dashboard over HTTPS: PEM files of its certificate (chain) and key; both or neither. */
    PATCHBAY_DASHBOARD_TLS_CERT: z.string().min(1).optional(),
    PATCHBAY_DASHBOARD_TLS_KEY: z.string().min(1).optional(),
    /** Live transcripts (server-sent events) a dashboard serves at once; more get 503. */
    PATCHBAY_DASHBOARD_MAX_STREAMS: z.coerce.number().int().positive().default(64),
    /** The dashboard's token; empty is unset. Its length (16 or more) is checked by the dashboard alone, so no other command fails on it. */
    PATCHBAY_DASHBOARD_TOKEN: z.string().optional(),
    /** The HTTP API's tokens besides the dashboard's (docs/api.md): comma-separated `name:scope:token`, scope `read` or `write`. */
    PATCHBAY_API_TOKENS: z
      .string()
      .optional()
      .transform((s, ctx) => {
        const r = parseApiTokens(s ?? "");
        if (typeof r === "string")
          ctx.issues.push({ code: "custom", message: r, input: "(not shown: it holds secrets)" });
        return typeof r === "string" ? [] : r;
      }),
    /** Origins (scheme://host[:port], comma-separated) whose pages may call the HTTP API (CORS); unset: none. */
    PATCHBAY_API_CORS_ORIGINS: z
      .string()
      .optional()
      .transform((s, ctx) => {
        const r = parseOrigins(s ?? "");
        if (typeof r === "string") ctx.issues.push({ code: "custom", message: r, input: s });
        return typeof r === "string" ? [] : r;
      }),
    /** Directories (absolute, comma-separated) under which the HTTP API takes a { path } or { archive } repo; unset: none (git URLs only). */
    PATCHBAY_API_REPO_ROOTS: z
      .string()
      .optional()
      .transform((s, ctx) => {
        const roots = (s ?? "")
          .split(",")
          .map((x) => x.trim())
          .filter(Boolean);
        const bad = roots.find((r) => !isAbsolute(r));
        if (bad !== undefined)
          ctx.issues.push({
            code: "custom",
            message: `each must be an absolute directory (got ${JSON.stringify(bad.slice(0, 100))})`,
            input: s,
          });
        return roots.map((r) => resolve(r));
      }),
    /**
     * Directories (absolute, comma-separated) under which a worker reads a queued job's local repo
     * ({ path }, { archive }, a { git } path or file: URL); "none": no local repo at all. Unset: the
     * operator's own jobs (enqueued by the CLI or the library) read any path, and every other job
     * (the HTTP API's, or one that does not say) none (src/job/repo/source-check.ts).
     */
    PATCHBAY_LOCAL_REPO_ROOTS: z
      .string()
      .optional()
      .transform((s, ctx) => {
        if (s === undefined || s.trim() === "") return undefined;
        if (s.trim() === "none") return [] as string[];
        const roots = s
          .split(",")
          .map((x) => x.trim())
          .filter(Boolean);
        const bad = roots.find((r) => !isAbsolute(r));
        if (bad !== undefined)
          ctx.issues.push({
            code: "custom",
            message: `each must be an absolute directory, or the whole value "none" (got ${JSON.stringify(bad.slice(0, 100))})`,
            input: s,
          });
        return roots.map((r) => resolve(r));
      }),
    /** Hosts (host or host:port, comma-separated) a { git } URL of a job from the HTTP API may name, at the API and at the worker; unset: the forges' (PATCHBAY_FORGES). */
    PATCHBAY_API_GIT_HOSTS: z
      .string()
      .optional()
      .transform((s, ctx) => {
        if (s === undefined || s.trim() === "") return undefined;
        const hosts = s
          .split(",")
          .map((x) => x.trim().toLowerCase())
          .filter(Boolean);
        const bad = hosts.find((h) => !/^(\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?)(?::\d{1,5})?$/.test(h));
        if (bad !== undefined)
          ctx.issues.push({
            code: "custom",
            message: `each must be a host or host:port (got ${JSON.stringify(bad.slice(0, 100))})`,
            input: s,
          });
        return hosts;
      }),
    // The worker's policy (src/job/policy.ts): what a JobSpec may ask of a sandbox. Bridge network only
    // where allowed; bounds on limits and timeouts (never below what a spec gets by default); images.
    PATCHBAY_ALLOW_BRIDGE: z.enum(["0", "1"]).default("0"),
    // A spec's own tools (tools.custom): allowed by default, since they run in the job's sandbox as
    // the agent, under its limits and network, as setup commands already do; 0 keeps the model to
    // the built-in tools (a deployment that wants a fixed tool surface).
    PATCHBAY_ALLOW_CUSTOM_TOOLS: z.enum(["0", "1"]).default("1"),
    /** The same for a spec's MCP servers (mcp): started in the sandbox as the agent. */
    PATCHBAY_ALLOW_MCP: z.enum(["0", "1"]).default("1"),
    // ptrace and process_vm_readv/writev in the sandbox (src/backend/seccomp.ts): denied by default,
    // since every process of a job runs as one uid and could read or drive the others (the shell an
    // MCP server); 1 allows them (strace, gdb) on a worker that runs trusted repos only.
    PATCHBAY_ALLOW_PTRACE: z.enum(["0", "1"]).default("0"),
    PATCHBAY_MAX_MEMORY_MB: atLeastDefault(() => defaults.sandbox.memoryMb).default(8192),
    PATCHBAY_MAX_CPUS: atLeastDefault(() => defaults.sandbox.cpus, false).default(4),
    PATCHBAY_MAX_PIDS: atLeastDefault(() => defaults.sandbox.pids).default(1024),
    PATCHBAY_MAX_DISK_MB: atLeastDefault(() => defaults.sandbox.diskMb).default(10_240),
    PATCHBAY_MAX_TIMEOUT_SEC: atLeastDefault(() => defaults.job.timeoutSec, false, MAX_DURATION_SEC).default(4 * 3600),
    PATCHBAY_MAX_COMMAND_TIMEOUT_SEC: atLeastDefault(
      () => defaults.job.commandTimeoutSec,
      false,
      MAX_DURATION_SEC,
    ).default(3600),
    // What a spec may spend (src/job/policy.ts): a spec over a cap is refused; one that sets nothing gets the cap.
    /** The most a job's budget.usd may be, and the budget of a spec that sets none. */
    PATCHBAY_MAX_BUDGET_USD: z.coerce.number().positive().finite().optional(),
    /** The most turns a spec may ask for (maxTurns); a spec that sets none gets the lower of this and the default. */
    PATCHBAY_MAX_TURNS: z.coerce.number().int().positive().max(10_000).optional(),
    /** The most candidates a spec may ask for (best-of-N); a spec over it is refused. */
    PATCHBAY_MAX_CANDIDATES: z.coerce.number().int().min(1).max(MAX_CANDIDATES).default(MAX_CANDIDATES),
    /** The most output tokens per response a spec may ask for (maxTokens); the same. */
    PATCHBAY_MAX_TOKENS: z.coerce.number().int().positive().max(1_000_000).optional(),
    /** Models (comma-separated; an entry ending in `*` by prefix) a spec's `model` may name besides PATCHBAY_MODEL; unset: any. */
    PATCHBAY_MODELS: z.string().optional(),
    /** The OCI runtime of every sandbox, runc or runsc (a spec asking for another is refused); unset: the spec's, default runc. */
    PATCHBAY_RUNTIME: z.enum(["runc", "runsc"]).optional(),
    /** Comma-separated images a spec may name besides PATCHBAY_IMAGE (`@from`: those `image build --from` made); unset: `@from`. */
    PATCHBAY_IMAGES: z.string().optional(),
    /** A git-credentials store (`https://user:token@host` lines, mode 0600) for host-side clones. */
    PATCHBAY_GIT_CREDENTIALS: z.string().min(1).optional(),
    ANTHROPIC_API_KEY: z.string().optional(),
    /** The SDK's other credential (a bearer token): a worker with neither it nor a key (nor an SDK profile) takes no jobs. */
    ANTHROPIC_AUTH_TOKEN: z.string().optional(),
    ANTHROPIC_BASE_URL: z.string().optional(),
    /** Set: the CLI prints an error's stack. */
    PATCHBAY_DEBUG: z.string().optional(),
    // The Docker engine, as the docker CLI reads it (src/backend/docker.ts).
    DOCKER_HOST: z.string().optional(),
    DOCKER_TLS_VERIFY: z.string().optional(),
    DOCKER_TLS: z.string().optional(),
    DOCKER_CERT_PATH: z.string().optional(),
    // The host's own tools, read for the `pypi` preset and host-side clones.
    PIP_INDEX_URL: z.string().optional(),
    PIP_EXTRA_INDEX_URL: z.string().optional(),
    PIP_CONFIG_FILE: z.string().optional(),
    GIT_SSH_COMMAND: z.string().optional(),
    ...OTEL_ENV,
    ...PROVIDER_ENV,
  })
  .superRefine((e, ctx) => {
    // A result's WAIT outliving its job's lock would let the job stall back to the queue and run
    // again while the first attempt still waits to confirm (src/redis/connect.ts confirmWrites).
    if (e.PATCHBAY_REDIS_WAIT_MS !== undefined && e.PATCHBAY_REDIS_WAIT_MS * 2 > e.PATCHBAY_LOCK_MS)
      ctx.addIssue({
        code: "custom",
        path: ["PATCHBAY_REDIS_WAIT_MS"],
        message: `must be at most half of PATCHBAY_LOCK_MS (${e.PATCHBAY_LOCK_MS} ms; got ${e.PATCHBAY_REDIS_WAIT_MS})`,
      });
  });

/** One of the HTTP API's tokens (PATCHBAY_API_TOKENS): `read` may GET, `write` may also enqueue and cancel. */
export interface ApiToken {
  name: string;
  scope: "read" | "write";
  token: string;
}

/**
 * `name:scope:token,…` (whitespace around entries ignored). A name is 1-64 of A-Z a-z 0-9 _ . -,
 * unique; a token at least 16 characters, without commas, unique. The message of a bad list
 * names the entry by its position and name, never a token.
 */
export function parseApiTokens(text: string): ApiToken[] | string {
  const out: ApiToken[] = [];
  const entries = text
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);
  for (const [i, entry] of entries.entries()) {
    const [name = "", scope = "", ...rest] = entry.split(":");
    const token = rest.join(":"); // a token may hold colons
    const where = `entry ${i + 1}${/^[A-Za-z0-9_.-]{1,64}$/.test(name) ? ` (${name})` : ""}`;
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name))
      return `${where}: must be name:scope:token, the name 1-64 characters from A-Z a-z 0-9 _ . -`;
    if (scope !== "read" && scope !== "write") return `${where}: the scope must be read or write`;
    if (token.length < 16) return `${where}: the token must be at least 16 characters`;
    if (out.some((t) => t.name === name)) return `${where}: the name is used twice`;
    if (out.some((t) => t.token === token)) return `${where}: the token is used twice`;
    out.push({ name, scope, token });
  }
  return out;
}

/** `https://app.example.org,http://localhost:3000`: each an origin exactly (no path, no `*`). */
export function parseOrigins(text: string): string[] | string {
  const out: string[] = [];
  for (const o of text
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean)) {
    let url: URL | undefined;
    try {
      url = new URL(o);
    } catch {
      url = undefined;
    }
    if (!url || !/^https?:$/.test(url.protocol) || url.origin !== o)
      return `${JSON.stringify(o.slice(0, 100))} is not an origin (scheme://host[:port], nothing after it)`;
    out.push(o);
  }
  return out;
}

/** How the Docker client reaches its engine (DOCKER_HOST; TLS from DOCKER_TLS_VERIFY or DOCKER_TLS, certificates in DOCKER_CERT_PATH). */
export interface EngineEnv {
  host?: string;
  tls: boolean;
  certPath?: string;
}

/**
 * The engine's settings alone. The Docker client is one per process (src/backend/docker.ts), like
 * the docker CLI's: it is made from these on first use, read here, from the process's environment.
 */
export function engineEnv(env: NodeJS.ProcessEnv = process.env): EngineEnv {
  return {
    host: env.DOCKER_HOST || undefined,
    tls: Boolean(env.DOCKER_TLS_VERIFY || env.DOCKER_TLS),
    certPath: env.DOCKER_CERT_PATH || undefined,
  };
}

/** Whether the CLI prints stacks; read apart from loadConfig, which may be what failed. */
export const debugWanted = (env: NodeJS.ProcessEnv = process.env): boolean => Boolean(env.PATCHBAY_DEBUG);

/** What host-side child processes (git, npm, go, pip) run with: the environment loadConfig was given, as it was then. */
export type HostEnv = Readonly<Record<string, string | undefined>>;

/**
 * The environment host-side child processes get, frozen. It holds whatever the worker was given,
 * secrets too (an egress credential's `env:` variable), so printed (util.inspect) or serialized
 * (JSON.stringify) it shows its variables' names only; a spawn or a spread reads every value.
 */
function hostEnvOf(env: NodeJS.ProcessEnv): HostEnv {
  const copy = { ...env };
  const shown = () => `(the environment: ${Object.keys(copy).sort().join(", ")})`;
  Object.defineProperty(copy, "toJSON", { value: shown });
  Object.defineProperty(copy, inspect.custom, { value: shown });
  return Object.freeze(copy);
}

/** A bound on a spec's field: a spec that sets nothing gets the default, so the bound is never below it (and, for a duration, never above 7 days). */
function atLeastDefault(dflt: () => number, int = true, max = Infinity) {
  return (int ? z.coerce.number().int() : z.coerce.number())
    .refine((n) => Number.isFinite(n) && n >= dflt(), {
      error: () => `must be a number of at least ${dflt()} (the default a spec gets)`,
    })
    .refine((n) => n <= max, {
      error: (iss) => `must be at most ${max} (${MAX_DURATION_WORDS}; got ${String(iss.input)})`,
    });
}

/**
 * A duration knob in ms: a positive integer of at most 7 days. Node's timers overflow past ~24.8
 * days and fire at once, so a bigger value would make the wait it sets no wait at all.
 */
function durationMs() {
  return z.coerce
    .number()
    .int({ error: (iss) => `must be a whole number of ms (got ${String(iss.input)})` })
    .positive({ error: (iss) => `must be a positive number of ms (got ${String(iss.input)})` })
    .max(MAX_DURATION_MS, {
      error: (iss) => `must be at most ${MAX_DURATION_MS} ms (${MAX_DURATION_WORDS}; got ${String(iss.input)})`,
    });
}

/** The worker's policy (src/job/policy.ts) from the parsed environment. */
function policyOf(e: z.infer<typeof Env>) {
  return {
    allowBridge: e.PATCHBAY_ALLOW_BRIDGE === "1",
    allowCustomTools: e.PATCHBAY_ALLOW_CUSTOM_TOOLS === "1",
    allowMcp: e.PATCHBAY_ALLOW_MCP === "1",
    allowPtrace: e.PATCHBAY_ALLOW_PTRACE === "1",
    providers: [...new Set([e.PATCHBAY_PROVIDER, ...(e.PATCHBAY_PROVIDERS ?? [])])],
    maxMemoryMb: e.PATCHBAY_MAX_MEMORY_MB,
    maxCpus: e.PATCHBAY_MAX_CPUS,
    maxPids: e.PATCHBAY_MAX_PIDS,
    maxDiskMb: e.PATCHBAY_MAX_DISK_MB,
    maxTimeoutSec: e.PATCHBAY_MAX_TIMEOUT_SEC,
    maxCommandTimeoutSec: e.PATCHBAY_MAX_COMMAND_TIMEOUT_SEC,
    images:
      e.PATCHBAY_IMAGES === undefined
        ? undefined
        : e.PATCHBAY_IMAGES.split(",")
            .map((s) => s.trim())
            .filter(Boolean),
    maxBudgetUsd: e.PATCHBAY_MAX_BUDGET_USD,
    maxTurns: e.PATCHBAY_MAX_TURNS,
    maxCandidates: e.PATCHBAY_MAX_CANDIDATES,
    maxTokens: e.PATCHBAY_MAX_TOKENS,
    models:
      e.PATCHBAY_MODELS === undefined
        ? undefined
        : [
            e.PATCHBAY_MODEL,
            ...e.PATCHBAY_MODELS.split(",")
              .map((s) => s.trim())
              .filter(Boolean),
          ],
    runtime: e.PATCHBAY_RUNTIME,
  };
}

/**
 * The model a job runs with when its spec names none (`scripted:<basename>` for a scripted model),
 * and the scripted model (PATCHBAY_MODEL=scripted:FILE, `worker --scripted FILE`): every job's model then.
 */
function modelSettings(setting: string): { model: string; scripted?: ScriptedModelConfig } {
  const scripted = scriptedModelOf(setting, process.cwd());
  return scripted ? { model: scripted.name, scripted } : { model: setting };
}

/** Where Redis is and how a write is confirmed. */
function redisSettings(e: z.infer<typeof Env>) {
  return {
    redisUrl: e.REDIS_URL,
    redisTls: {
      ca: e.PATCHBAY_REDIS_TLS_CA || undefined,
      cert: e.PATCHBAY_REDIS_TLS_CERT || undefined,
      key: e.PATCHBAY_REDIS_TLS_KEY || undefined,
    },
    redisWait: {
      replicas: e.PATCHBAY_REDIS_WAIT_REPLICAS,
      timeoutMs: e.PATCHBAY_REDIS_WAIT_MS ?? Math.max(1, Math.min(2000, Math.floor(e.PATCHBAY_LOCK_MS / 4))),
    },
  };
}

/** Every setting of patchbay, as loadConfig parsed it. */
export type Config = ReturnType<typeof loadConfig>;

/** Parses every setting from `env` (docs/operations.md lists them); throws naming each bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const parsed = Env.safeParse(env);
  if (!parsed.success) {
    throw new Error(envProblem(parsed.error.issues));
  }
  const e = parsed.data;
  return {
    ...redisSettings(e),
    queueName: e.PATCHBAY_QUEUE,
    image: e.PATCHBAY_IMAGE,
    ...modelSettings(e.PATCHBAY_MODEL),
    contextWindow: e.PATCHBAY_CONTEXT_WINDOW,
    compactAt: e.PATCHBAY_COMPACT_AT ?? defaults.job.compactAt,
    concurrency: e.PATCHBAY_CONCURRENCY,
    workerId: e.PATCHBAY_WORKER_ID,
    poolSize: e.PATCHBAY_POOL,
    removals: e.PATCHBAY_REMOVALS,
    removalsQueued: e.PATCHBAY_REMOVALS_QUEUE,
    lockDurationMs: e.PATCHBAY_LOCK_MS,
    lockRenewMs: Math.min(e.PATCHBAY_LOCK_RENEW_MS ?? Math.floor(e.PATCHBAY_LOCK_MS / 4), e.PATCHBAY_LOCK_MS),
    checkpoints: e.PATCHBAY_CHECKPOINTS === "1",
    checkpointMaxBytes: e.PATCHBAY_CHECKPOINT_MAX_BYTES,
    seedMaxBytes: e.PATCHBAY_SEED_MAX_BYTES,
    stalledIntervalMs: e.PATCHBAY_STALLED_MS,
    reapEveryMs: e.PATCHBAY_REAP_MS,
    drainDeadlineMs: e.PATCHBAY_DRAIN_MS,
    hardDeadlineGraceMs: e.PATCHBAY_HARD_GRACE_MS,
    cancelPollMs: e.PATCHBAY_CANCEL_POLL_MS,
    cancelPubSub: e.PATCHBAY_CANCEL_PUBSUB === "1",
    heartbeatEveryMs: e.PATCHBAY_HEARTBEAT_MS,
    healthMinMs: e.PATCHBAY_HEALTH_MIN_MS,
    healthMaxMs: Math.max(e.PATCHBAY_HEALTH_MIN_MS, e.PATCHBAY_HEALTH_MAX_MS),
    healthTimeoutMs: e.PATCHBAY_HEALTH_TIMEOUT_MS,
    throttleMs: e.PATCHBAY_THROTTLE_MS,
    throttleMaxMs: e.PATCHBAY_THROTTLE_MAX_MS,
    egressDir: e.PATCHBAY_EGRESS_DIR,
    /** The credentials a job's setup may name (PATCHBAY_EGRESS_CREDENTIALS), by name; each prints without its secrets. */
    egressCredentials: loadEgressCredentials(e.PATCHBAY_EGRESS_CREDENTIALS, env),
    backend: e.PATCHBAY_BACKEND,
    testBackends: e.PATCHBAY_TEST_BACKENDS === "1",
    retentionSec: e.PATCHBAY_RETENTION_SEC,
    trackEveryMs: e.PATCHBAY_TRACK_EVERY_MS,
    dashboardTls:
      e.PATCHBAY_DASHBOARD_TLS_CERT || e.PATCHBAY_DASHBOARD_TLS_KEY
        ? { cert: e.PATCHBAY_DASHBOARD_TLS_CERT, key: e.PATCHBAY_DASHBOARD_TLS_KEY }
        : undefined,
    dashboardMaxStreams: e.PATCHBAY_DASHBOARD_MAX_STREAMS,
    dashboardToken: e.PATCHBAY_DASHBOARD_TOKEN || undefined,
    apiTokens: e.PATCHBAY_API_TOKENS,
    apiCorsOrigins: e.PATCHBAY_API_CORS_ORIGINS,
    apiRepoRoots: e.PATCHBAY_API_REPO_ROOTS,
    /** PATCHBAY_LOCAL_REPO_ROOTS: undefined when unset, [] for "none". */
    localRepoRoots: e.PATCHBAY_LOCAL_REPO_ROOTS,
    /** The hosts a { git } URL from the HTTP API may name (PATCHBAY_API_GIT_HOSTS, else the forges' hosts). */
    apiGitHosts: e.PATCHBAY_API_GIT_HOSTS ?? e.PATCHBAY_FORGES.map((f) => f.host),
    policy: policyOf(e),
    gitCredentials: e.PATCHBAY_GIT_CREDENTIALS,
    anthropicApiKey: e.ANTHROPIC_API_KEY,
    anthropicAuthToken: e.ANTHROPIC_AUTH_TOKEN || undefined,
    anthropicBaseUrl: e.ANTHROPIC_BASE_URL,
    provider: providerOf(e),
    debug: debugWanted(env),
    engine: engineEnv(env),
    pip: {
      indexUrl: e.PIP_INDEX_URL,
      extraIndexUrls: (e.PIP_EXTRA_INDEX_URL ?? "").split(/\s+/).filter(Boolean),
      configFile: e.PIP_CONFIG_FILE,
    },
    hostEnv: hostEnvOf(env),
    telemetry: telemetryOf(e),
    forges: forgeSettings(e.PATCHBAY_FORGES, env),
  };
}

/** Defaults that are not environment knobs but belong in one place. */
export const defaults = {
  sandbox: {
    memoryMb: 2048,
    cpus: 1,
    pids: 256,
    diskMb: 1024,
    tmpMb: 256,
    network: "none" as "none" | "bridge",
    runtime: "runc" as "runc" | "runsc",
    /**
     * The lowest pids limit a sandbox works with, under either runtime: its own processes (init,
     * shell, supervisor, file agent, git's pipelines) need some.
     */
    minPids: 32,
    /**
     * Under gVisor the engine's pids limit counts the runtime's own host threads, not the guest's
     * processes: each guest task costs Debian 12's runsc (ptrace platform) 8 to 10 host threads, on
     * top of about 40 of its own. A runsc sandbox's container is given this many threads per pid
     * of its limit, plus the base, so that `limits.pids` counts (about) the guest's processes under
     * both runtimes; the supervisor counts them against it there. A plain job once reached 232
     * host threads, and under load the whole sandbox died at an engine limit of 256. More per pid
     * would hold the guest's exact count, but a fork bomb under runsc takes all it is given from
     * the host's pid_max (32,768 on many hosts): 256 pids cost up to 2,112 host threads.
     */
    gvisorThreadsPerPid: 8,
    gvisorBaseThreads: 64,
    /** A container whose deadline passed is reaped even if its worker still beats. */
    deadlineSec: 6 * 3600,
  },
  shell: {
    timeoutSec: 120,
    /** Output kept for the model: head + tail of this many bytes in all. */
    maxOutputBytes: 30_000,
  },
  files: {
    maxReadBytes: 16 * 1024 * 1024,
  },
  editor: {
    /** Files above this are refused by the editor (view and edits). */
    maxFileBytes: 5 * 1024 * 1024,
    maxCharacters: 16_000,
  },
  job: {
    maxTurns: 50,
    maxTokens: 8192,
    timeoutSec: 1800,
    commandTimeoutSec: 120,
    setupTimeoutSec: 600,
    verifyTimeoutSec: 600,
    /** A failed verify is fed back to the model this many more times. */
    verifyRounds: 2,
    /** Tool results older than the newest few are shortened past this many characters of context. */
    contextCharsBeforeShortening: 400_000,
    /** Past this fraction of the model's context window, older turns are compacted into a summary (PATCHBAY_COMPACT_AT). */
    compactAt: 0.8,
  },
  worker: {
    /** Out of reach: the worker counts stalls against the job's attempts itself (src/queue/worker.ts). */
    maxStalledCount: 1_000,
    attempts: 3,
    backoffMs: 2_000,
    /** A job handed back without counting an attempt (its worker turned unhealthy) waits this long before another worker takes it. */
    requeueMs: 1_000,
    /** A throttle shorter than this (retry-after: 0) is raised to it. */
    throttleMinMs: 1_000,
  },
  checkpoint: {
    /** How long a turn waits for the store before it goes on without that checkpoint. */
    saveWaitMs: 5_000,
  },
  transcript: {
    maxLen: 10_000,
  },
} as const;

/** Why a sandbox's pids limit cannot work; undefined when it can. */
export function pidsProblem(pids: number): string | undefined {
  const min = defaults.sandbox.minPids;
  return pids >= min ? undefined : `must be at least ${min} (the sandbox's own processes and git need some)`;
}

/** The pids limit the engine applies to a sandbox's container: under runsc, room for gVisor's own threads. */
export function enginePidsLimit(pids: number, runtime: "runc" | "runsc"): number {
  const s = defaults.sandbox;
  return runtime === "runsc" ? s.gvisorBaseThreads + pids * s.gvisorThreadsPerPid : pids;
}

export type { TelemetryConfig };

/** The OTEL_* variables alone, for a command that wants traces before (or without) the rest of loadConfig. */
export function telemetryConfig(env: NodeJS.ProcessEnv = process.env): TelemetryConfig {
  const parsed = z.object(OTEL_ENV).safeParse(env);
  if (!parsed.success) throw new Error(envProblem(parsed.error.issues));
  return telemetryOf(parsed.data);
}
