// `patchbay dashboard` and `patchbay view`: the window onto jobs. Only node: built-ins, the CLI's
// shared helpers and the optional-package loader at the top: the server and renderer load when the
// command runs.
import { count } from "../core/count.js";
import { basename, dirname, join } from "node:path";
import { loadOptional, OPTIONAL } from "../core/optional.js";
import {
  CliError,
  CONNECTION_USAGE,
  connectionFlags,
  numberFlag,
  stringFlag,
  UsageError,
  type ClientArgs,
  type Command,
  type Values,
} from "./command.js";

const DASHBOARD_USAGE = `patchbay dashboard [--host 127.0.0.1] [--port 7474] [--loopback-reads]

Serves the web dashboard: jobs (filters by state, status and batch), batches, each job's
transcript live with its patch, cancel and retry buttons, bull-board at /queues and the queue's
Prometheus metrics at /metrics. It binds 127.0.0.1 unless --host says otherwise.
Every request, reads too, needs the token $PATCHBAY_DASHBOARD_TOKEN (at least 16 characters;
on loopback one is made up when it is unset, and the URL printed carries it); on any other host
the variable must be set. Open the URL with ?token=… once (an HttpOnly cookie keeps it), or
send Authorization: Bearer … (scrapers).
  --host HOST            the address to bind (default 127.0.0.1)
  --port PORT            the port (default 7474; 0 picks a free one)
  --loopback-reads       serve reads without a token to loopback clients whose requests carry
                         no proxy header (Forwarded, X-Forwarded-*, X-Real-IP, Via); loopback
                         binds only. Never with a reverse proxy on this host: one that sends no
                         such header makes every client it forwards a tokenless reader.
${CONNECTION_USAGE}
Exit status: 0 after SIGINT/SIGTERM; 1 Redis unreachable or the port taken; 2 usage.`;

const VIEW_USAGE = `patchbay view TRANSCRIPT.jsonl [-o FILE.html] [--patch FILE]

Writes one self-contained HTML page of a transcript (the events of watch --json, or run --out's
transcript.jsonl), rendered like the dashboard's job page: no network request, nothing from the
transcript runs. The patch is shown as a diff from --patch, or from patch.diff next to a file
named transcript.jsonl.
  -o, --out FILE         where to write (default: the transcript's name with .html; - for stdout)
  --patch FILE           the job's patch to show
Exit status: 0 written; 1 the file cannot be read or written; 2 usage.`;

/** `patchbay worker --metrics-port [HOST:]PORT`: the value for WorkerOptions.metricsPort, checked; undefined when absent. */
export async function metricsPortFlag(values: Values): Promise<string | undefined> {
  const raw = stringFlag(values, "metrics-port");
  if (raw === undefined) return undefined;
  const { parseListen } = await import("../core/listen.js");
  try {
    parseListen(raw);
  } catch {
    throw new UsageError(`--metrics-port takes PORT or HOST:PORT, not '${raw}'`);
  }
  return raw;
}

export const METRICS_PORT_USAGE =
  "  --metrics-port [HOST:]PORT  serve Prometheus metrics at /metrics (HOST default 127.0.0.1; off by default)";

/** Runs the dashboard until SIGINT or SIGTERM. */
async function runDashboard({ values, config }: ClientArgs): Promise<number> {
  const rawPort = stringFlag(values, "port");
  const port =
    rawPort === undefined
      ? 7474
      : rawPort === "0"
        ? 0
        : numberFlag(values, "port", { integer: true, what: "a TCP port" })!;
  if (port > 65535) throw new UsageError(`--port takes a TCP port, not '${rawPort}'`);
  const host = (stringFlag(values, "host") ?? "127.0.0.1").trim();
  if (!host) throw new UsageError("--host must not be empty");
  const { clientOptions, probeRedis } = await import("./queue-connect.js");
  const conn = clientOptions({ values, config });
  await probeRedis(conn.redisUrl, config());
  // fastify and the rest of the dashboard's packages are optional: the error names the `npm i` that adds them.
  const { startDashboard, DashboardConfigError } = await loadOptional(
    OPTIONAL.dashboard,
    () => import("../web/server.js"),
  );
  let d;
  try {
    d = await startDashboard({
      host,
      port,
      ...conn,
      config: config(),
      loopbackReads: values["loopback-reads"] === true,
    });
  } catch (err) {
    if (err instanceof DashboardConfigError) throw new UsageError(err.message);
    throw new CliError(`dashboard: ${(err as Error).message}`);
  }
  // A token of the operator's own is not echoed (stderr often lands in a log); a made-up one is, in the URL to open.
  const shown = d.generatedToken
    ? `${d.url}/?token=${d.token}  (a token made up for this run: set PATCHBAY_DASHBOARD_TOKEN to choose one)`
    : `${d.url}/?token=<PATCHBAY_DASHBOARD_TOKEN>  (open it once with the token)`;
  process.stderr.write(`[dashboard] ${shown}\n`);
  if (values["loopback-reads"] === true)
    process.stderr.write(
      "[dashboard] reads need no token from loopback clients without a proxy header (--loopback-reads)\n",
    );
  await new Promise<void>((done) => {
    const stop = () => void d.close().then(done, done);
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
  return 0;
}

/** Writes the static HTML view of a transcript file; returns the path written ("-": stdout). */
async function runView(file: string, opts: { out?: string; patch?: string } = {}): Promise<string> {
  const { existsSync, readFileSync } = await import("node:fs");
  const { OutputLinkError, writeOwn } = await import("../core/out-files.js");
  const { parseTranscriptJsonl } = await import("../web/escape.js");
  const { renderTranscriptHtml } = await import("../web/html.js");
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const sibling = basename(file) === "transcript.jsonl" ? join(dirname(file), "patch.diff") : undefined;
  const patchFile = opts.patch ?? (sibling && existsSync(sibling) ? sibling : undefined);
  let patch: string | undefined;
  if (patchFile !== undefined) {
    try {
      patch = readFileSync(patchFile, "utf8");
    } catch (err) {
      throw new CliError(`cannot read ${patchFile}: ${(err as Error).message}`);
    }
  }
  const events = parseTranscriptJsonl(text);
  const { TranscriptEvent } = await import("../core/spec/spec.js");
  if (events.length > 0 && !events.some((e) => TranscriptEvent.safeParse(e).success)) {
    throw new CliError(
      `${file} is not a transcript: none of its ${count(events.length, "line")} is a transcript event (a transcript is what \`patchbay watch ID --json\` prints, or run --out's transcript.jsonl)`,
    );
  }
  const html = renderTranscriptHtml(events, patch !== undefined ? { patch } : {});
  const out = opts.out ?? file.replace(/\.jsonl?$/i, "") + ".html";
  if (out === "-") {
    process.stdout.write(html);
    return out;
  }
  try {
    writeOwn(out, html); // never through a link planted beside the transcript
  } catch (err) {
    if (err instanceof OutputLinkError) throw err;
    throw new CliError(`cannot write ${out}: ${(err as Error).message}`);
  }
  return out;
}

const dashboard: Command = {
  summary: "serve the web dashboard (jobs, live transcripts, bull-board, metrics)",
  usage: DASHBOARD_USAGE,
  options: {
    ...connectionFlags,
    host: { type: "string" },
    port: { type: "string" },
    "loopback-reads": { type: "boolean" },
  },
  run: ({ values, config }) => runDashboard({ values, config }),
};

const view: Command = {
  summary: "write a transcript as one self-contained HTML page",
  usage: VIEW_USAGE,
  options: { out: { type: "string", short: "o" }, patch: { type: "string" } },
  positionals: { min: 0, max: 1, name: "transcript.jsonl" },
  async run({ values, positionals }) {
    if (!positionals[0])
      throw new UsageError("missing <transcript.jsonl> (patchbay watch ID --json > transcript.jsonl, or run --out's)");
    const out = stringFlag(values, "out");
    const patch = stringFlag(values, "patch");
    const written = await runView(positionals[0], {
      ...(out !== undefined ? { out } : {}),
      ...(patch !== undefined ? { patch } : {}),
    });
    if (written !== "-") process.stderr.write(`[view] wrote ${written}\n`);
    return 0;
  },
};

/** The two commands, for src/cli.ts's table. */
export const webCommands: Record<string, Command> = { dashboard, view };
