// `patchbay worker`, `patchbay doctor`, `patchbay image build`: running and setting up.
import { choiceFlag, CONNECTION_USAGE, connectionFlags, numberFlag, type Command } from "./command.js";
import { METRICS_PORT_USAGE, metricsPortFlag } from "./web.js";

const LOG_FORMATS = ["text", "json"] as const;

const worker: Command = {
  summary: "run the daemon (takes jobs, one sandbox each)",
  usage: `patchbay worker [--concurrency N] [--log-format text|json]

Runs the daemon: takes jobs from the queue and runs each in its own sandbox. SIGTERM or SIGINT
drains (stops taking jobs, lets active ones finish until $PATCHBAY_DRAIN_MS, then abandons them
to another worker) and removes its containers. Logs go to stderr, one line per event with a
timestamp, the worker id and the job id.
  --concurrency N        jobs at once (default $PATCHBAY_CONCURRENCY or 2)
  --log-format FORMAT    text (default) or json (one JSON object a line, pino's format)
${METRICS_PORT_USAGE}
${CONNECTION_USAGE}
Exit status: 0 after a drain; 1 Redis unreachable at start; 2 usage.`,
  options: { ...connectionFlags, concurrency: { type: "string" }, "log-format": { type: "string" }, "metrics-port": { type: "string" } },
  async run({ values }) {
    const concurrency = numberFlag(values, "concurrency", { integer: true });
    const logFormat = choiceFlag(values, "log-format", LOG_FORMATS) ?? "text";
    const metricsPort = await metricsPortFlag(values);
    const { clientOptions, probeRedis } = await import("./client.js");
    const conn = clientOptions(values);
    await probeRedis(conn.redisUrl);
    const { startWorker } = await import("../queue/worker.js");
    const { workerLogger } = await import("../log.js");
    const h = await startWorker({ ...conn, logFormat, ...(concurrency ? { concurrency } : {}), ...(metricsPort ? { metricsPort } : {}) });
    const log = workerLogger(h.id, { format: logFormat });
    await new Promise<void>((done) => {
      const stop = (sig: string) => {
        log(`${sig}: shutting down`);
        void h.shutdown().then(done);
      };
      process.once("SIGTERM", () => stop("SIGTERM"));
      process.once("SIGINT", () => stop("SIGINT"));
    });
    return 0;
  },
};

const doctor: Command = {
  summary: "check Docker, Redis, the image, gVisor, the API key",
  usage: `patchbay doctor [--json]

Checks the Docker engine, Redis, the sandbox image, the gVisor runtime and the API key, and says
what to do about each miss. Exit status: 0 every required check passed; 1 one failed.
  --json                 the checks as an array of {name, ok, required, detail, fix}
  --redis-url URL        Redis (default $REDIS_URL or redis://127.0.0.1:6379)`,
  options: { json: { type: "boolean" }, "redis-url": { type: "string" } },
  async run({ values }) {
    const { doctor: check } = await import("../doctor.js");
    const checks = await check({ ...(values["redis-url"] !== undefined ? { redisUrl: String(values["redis-url"]) } : {}) });
    if (values.json) console.log(JSON.stringify(checks));
    else for (const c of checks) console.log(`${c.ok ? "ok  " : c.required ? "FAIL" : "warn"}  ${c.name}: ${c.detail}${c.fix && !c.ok ? `\n      → ${c.fix}` : ""}`);
    return checks.every((c) => c.ok || !c.required) ? 0 : 1;
  },
};

const imageBuild: Command = {
  summary: "build the sandbox image (online or offline)",
  usage: `patchbay image build [--tag IMAGE] [--force] [--json]

Builds the sandbox image from images/sandbox/Dockerfile where debian:bookworm-slim can be pulled,
and otherwise offline (debootstrap + docker import, needs root). Skipped when an image with the
same recipe hash exists. Default tag: $PATCHBAY_IMAGE or patchbay-sandbox:latest.
  --tag IMAGE            the image's tag
  --force                build even if an image with the same recipe exists
  --json                 print {"tag", "recipe", "how", "ms"} on stdout (how: cached|online|offline)`,
  options: { tag: { type: "string" }, force: { type: "boolean" }, json: { type: "boolean" } },
  async run({ values }) {
    const { loadConfig } = await import("../config.js");
    const { buildImage } = await import("../sandbox/image.js");
    const tag = (values.tag as string | undefined) ?? loadConfig().image;
    const t0 = Date.now();
    const r = await buildImage(tag, { force: Boolean(values.force) });
    const ms = Date.now() - t0;
    if (values.json) console.log(JSON.stringify({ tag: r.tag, recipe: r.recipe, how: r.how, ms }));
    else process.stderr.write(`[image] ${r.tag} (recipe ${r.recipe}) ${r.how === "cached" ? "is up to date" : `built (${r.how}) in ${(ms / 1000).toFixed(1)} s`}\n`);
    return 0;
  },
};

export const adminCommands: Record<string, Command> = { worker, doctor, "image build": imageBuild };
