// `patchbay worker`, `patchbay doctor`, `patchbay image build`: running and setting up.
import {
  choiceFlag,
  CliError,
  CONNECTION_USAGE,
  connectionFlags,
  numberFlag,
  stringFlag,
  UsageError,
  type Command,
  type Values,
} from "./command.js";
import type { Config } from "../core/config/config.js";
import { METRICS_PORT_USAGE, metricsPortFlag } from "./web.js";

const LOG_FORMATS = ["text", "json"] as const;

const worker: Command = {
  summary: "run the daemon (takes jobs, one sandbox each)",
  usage: `patchbay worker [--concurrency N] [--log-format text|json] [--scripted FILE]

Runs the daemon: takes jobs from the queue and runs each in its own sandbox. SIGTERM or SIGINT
drains (stops taking jobs, lets active ones finish until $PATCHBAY_DRAIN_MS, then abandons them
to another worker) and removes its containers, within $PATCHBAY_DRAIN_MS + 10 s whatever Redis does. Logs go to stderr, one line per event with a
timestamp, the worker id and the job id.
  --concurrency N        jobs at once (default $PATCHBAY_CONCURRENCY or 2)
  --log-format FORMAT    text (default) or json (one JSON object a line, pino's format)
  --scripted FILE        answer every job from FILE, a script of turns or a recorded transcript.jsonl:
                         no API, no key, nothing priced (as PATCHBAY_MODEL=scripted:FILE; the format:
                         docs/operations.md#trying-patchbay-without-a-key)
${METRICS_PORT_USAGE}
${CONNECTION_USAGE}
Exit status: 0 after a drain; 1 Redis unreachable at start, or a drain that could not hand a job
back (Redis unreachable: the job comes back as stalled once its lock expires); 2 usage.`,
  options: {
    ...connectionFlags,
    concurrency: { type: "string" },
    "log-format": { type: "string" },
    "metrics-port": { type: "string" },
    scripted: { type: "string" },
  },
  async run({ values, config: envConfig }) {
    const concurrency = numberFlag(values, "concurrency", { integer: true });
    const logFormat = choiceFlag(values, "log-format", LOG_FORMATS) ?? "text";
    const metricsPort = await metricsPortFlag(values);
    const cfg = await workerConfig(values, envConfig);
    const config = () => cfg;
    const { clientOptions, probeRedis } = await import("./queue-connect.js");
    const conn = clientOptions({ values, config });
    await probeRedis(conn.redisUrl, config());
    await loadAllNow();
    const { startWorker } = await import("../queue/worker.js");
    const { workerLogger } = await import("../observability/log.js");
    const h = await startWorker({
      ...conn,
      config: config(),
      logFormat,
      ...(concurrency ? { concurrency } : {}),
      ...(metricsPort ? { metricsPort } : {}),
    });
    const log = workerLogger(h.id, { format: logFormat });
    const report = await new Promise<Awaited<ReturnType<typeof h.shutdown>>>((done) => {
      const stop = (sig: string) => {
        log(`${sig}: shutting down`);
        void h.shutdown().then(done);
      };
      process.once("SIGTERM", () => stop("SIGTERM"));
      process.once("SIGINT", () => stop("SIGINT"));
    });
    return report.notHandedBack.length ? 1 : 0; // the drain's last line named them
  },
};

/**
 * The worker's Config: the environment's, with `--scripted FILE`'s model when given. A scripted
 * model's file is read and checked here, so a bad one stops the worker before it takes a job.
 */
async function workerConfig(values: Values, envConfig: () => Config): Promise<Config> {
  const file = stringFlag(values, "scripted");
  if (file !== undefined && !file.trim())
    throw new UsageError("--scripted needs a file (a script or a transcript.jsonl)");
  const { withScriptedModel } = await import("../core/config/scripted.js");
  const config = file === undefined ? envConfig() : withScriptedModel(envConfig(), file, process.cwd());
  if (!config.scripted) return config;
  const { loadScript } = await import("../agent/scripted.js");
  const { ScriptFileError } = await import("../agent/script-file.js");
  try {
    loadScript(config.scripted.file);
  } catch (err) {
    if (!(err instanceof ScriptFileError)) throw err;
    const msg = `the scripted model's file cannot be used:\n${err.message}`;
    throw file === undefined ? new CliError(`PATCHBAY_MODEL: ${msg}`) : new UsageError(`--scripted: ${msg}`);
  }
  return config;
}

/**
 * What a worker would otherwise load from dist/ on its first job, loaded at start: the assets (Lua,
 * the sandbox's scripts) and the repo reader threads' modules. A `npm run build` in the same
 * checkout while it runs (dist/ rewritten under it) then cannot hand it half of another build.
 */
async function loadAllNow(): Promise<void> {
  const { preloadAssets } = await import("../core/assets.js");
  const { readerThreads } = await import("../job/repo/read-pool.js");
  preloadAssets();
  readerThreads();
}

const doctor: Command = {
  summary: "check the engine, Redis, the image, gVisor, the API key",
  usage: `patchbay doctor [--json]

Checks the engine (Docker or Podman), Redis (redis: reachable; redis tls; redis auth; redis
eviction; redis sentinel or redis cluster), the sandbox image, the gVisor runtime and the API key,
and says what to do about each miss. Exit status: 0 every required check passed; 1 one failed.
  --json                 the checks as an array of {name, ok, required, detail, fix}
  --redis-url URL        Redis (default $REDIS_URL or redis://127.0.0.1:6379; forms: docs/redis.md)`,
  options: { json: { type: "boolean" }, "redis-url": { type: "string" } },
  async run({ values, config }) {
    const { doctor: check } = await import("./doctor.js");
    const redisUrl = stringFlag(values, "redis-url");
    const checks = await check(config(), { ...(redisUrl !== undefined ? { redisUrl } : {}) });
    if (values.json) console.log(JSON.stringify(checks));
    else
      for (const c of checks)
        console.log(
          `${c.ok ? "ok  " : c.required ? "FAIL" : "warn"}  ${c.name}: ${c.detail}${c.fix && !c.ok ? `\n      → ${c.fix}` : ""}`,
        );
    return checks.every((c) => c.ok || !c.required) ? 0 : 1;
  },
};

const imageBuild: Command = {
  summary: "build the sandbox image (online or offline), or a per-repo image with --from",
  usage: `patchbay image build [--tag IMAGE] [--force] [--json]
patchbay image build --from DIR --tag IMAGE [--network NAME] [--force] [--json]

Builds the sandbox image from images/sandbox/Dockerfile where debian:bookworm-slim can be pulled,
and otherwise offline (debootstrap + docker import, needs root). Skipped when an image with the
same recipe hash exists. Default tag: $PATCHBAY_IMAGE or patchbay-sandbox:latest.

With --from, builds DIR/Dockerfile (DIR is the build context) into IMAGE, for a JobSpec's "image":
a prebuilt environment for a repo. Each FROM image must be on the engine or pullable; offline, use
FROM patchbay-sandbox:latest (built here first when missing). The result is checked by starting a
sandbox from it with the usual hardening (it needs bash, coreutils and git). Skipped when IMAGE was
built from the same context (paths, sizes, modes, mtimes) and network.
The build has no network: RUN steps see only lo, and an ADD of a URL (which the engine fetches from
its own host, loopback services included) is refused; COPY files from DIR instead.
  --from DIR             build a per-repo image from DIR/Dockerfile
  --tag IMAGE            the image's tag (required with --from)
  --network NAME         give the --from build this network (host, or a network of the engine's):
                         RUN reaches it and ADD may fetch URLs. Only for Dockerfiles you trust
  --force                build even if an image with the same recipe exists
  --json                 print {"tag", "recipe", "how", "ms"} on stdout (how: cached|online|offline|built)`,
  options: {
    tag: { type: "string" },
    force: { type: "boolean" },
    json: { type: "boolean" },
    from: { type: "string" },
    network: { type: "string" },
  },
  async run({ values, config }) {
    const t0 = Date.now();
    if (values.network !== undefined && values.from === undefined)
      throw new UsageError("--network is for --from builds (the sandbox image's own build uses the engine's)");
    const from = stringFlag(values, "from");
    const tag = stringFlag(values, "tag");
    if (from !== undefined) {
      if (!tag) throw new UsageError("--from needs --tag IMAGE");
      const { networkProblem } = await import("../sandbox/build-network.js");
      const network = stringFlag(values, "network");
      const bad = network === undefined ? undefined : networkProblem(network);
      if (bad) throw new UsageError(`--network ${bad}`);
      const { buildImageFrom, ImageFromError } = await import("../sandbox/image-from.js");
      try {
        const r = await buildImageFrom(from, tag, {
          force: Boolean(values.force),
          sandboxImage: config().image,
          ...(network ? { network } : {}),
        });
        const ms = Date.now() - t0;
        if (values.json)
          console.log(
            JSON.stringify({ tag: r.tag, recipe: r.context, how: r.how, ms, bases: r.bases, check: r.check }),
          );
        else
          process.stderr.write(
            `[image] ${r.tag} ${r.how === "cached" ? "is up to date" : `built in ${(ms / 1000).toFixed(1)} s`}; runs as uid ${r.check.uid}${r.check.python3 ? "" : " (no python3: each file operation is a slower docker exec)"}\n`,
          );
        return 0;
      } catch (err) {
        if (err instanceof ImageFromError) throw new CliError(err.message);
        throw err;
      }
    }
    const { buildImage } = await import("../sandbox/image.js");
    const r = await buildImage(tag ?? config().image, { force: Boolean(values.force) });
    const ms = Date.now() - t0;
    if (values.json) console.log(JSON.stringify({ tag: r.tag, recipe: r.recipe, how: r.how, ms }));
    else
      process.stderr.write(
        `[image] ${r.tag} (recipe ${r.recipe}) ${r.how === "cached" ? "is up to date" : `built (${r.how}) in ${(ms / 1000).toFixed(1)} s`}\n`,
      );
    return 0;
  },
};

export const adminCommands: Record<string, Command> = { worker, doctor, "image build": imageBuild };
