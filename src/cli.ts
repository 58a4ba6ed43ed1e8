// The `patchbay` command: parses argv, dispatches to a command, maps errors to exit codes
// (0 ok, 1 failure, 2 usage). It loads only what the chosen command needs: `patchbay --help`
// imports no BullMQ, Docker or SDK code.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { adminCommands } from "./cli/admin.js";
import { debugWanted, loadConfig, telemetryConfig, type Config } from "./core/config/config.js";
import { EXIT, UsageError, type Command, type Values } from "./cli/command.js";
import { suggest } from "./core/suggest.js";
import { safeText } from "./core/term.js";
import { helpTable, layoutUsage } from "./cli/help.js";
import { inspectCommands } from "./cli/inspect.js";
import { submitCommands } from "./cli/submit.js";
import { batchCommands } from "./cli/batch-command.js";
import { campaignCommands } from "./cli/campaign-command.js";
import { evalCommands } from "./cli/eval-command.js";
import { webCommands } from "./cli/web.js";

export type { Command } from "./cli/command.js";

const commands: Record<string, Command> = {
  ...submitCommands,
  ...inspectCommands,
  ...adminCommands,
  ...batchCommands,
  ...campaignCommands,
  ...evalCommands,
  ...webCommands,
};

/** `patchbay image` and friends: a group whose subcommands are `<group> <sub>` entries. */
const groups = [
  ...new Set(
    Object.keys(commands)
      .filter((n) => n.includes(" "))
      .map((n) => n.split(" ")[0]!),
  ),
];

function version(): string {
  return (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version;
}

function commandLines(prefix = ""): string {
  return helpTable(
    Object.entries(commands)
      .filter(([name]) => name.startsWith(prefix))
      .map(([name, c]) => [name, c.summary]),
  ).join("\n");
}

function mainHelp(): string {
  return `patchbay ${version()} — run coding agents on untrusted repositories, safely and in bulk

Usage: patchbay <command> [options]      (patchbay <command> --help for details)

Commands:
${commandLines()}

Options: --help, -h (also after a command), --version, -V, -v. Commands that use Redis take
--queue NAME and --redis-url URL.
Exit status: 0 ok; 1 failure (a job failed, an unknown job id, Redis unreachable); 2 usage
error. run, watch and batch wait: 3 verify_failed, 4 budget_exceeded / max_turns / timeout,
5 cancelled.
Environment (defaults for the flags): REDIS_URL, PATCHBAY_QUEUE, DOCKER_HOST, ANTHROPIC_API_KEY,
ANTHROPIC_BASE_URL, PATCHBAY_IMAGE, PATCHBAY_MODEL, PATCHBAY_CONCURRENCY.`;
}

function groupHelp(group: string): string {
  return `Usage: patchbay ${group} <subcommand> [options]      (patchbay ${group} <subcommand> --help)

Subcommands:
${commandLines(`${group} `)}`;
}

function parse(cmd: Command, name: string, args: string[]): { values: Values; positionals: string[] } {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options: { ...cmd.options, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError(
      didYouMean(
        (err as Error).message.replace(/\. To specify a positional argument.*$/s, ""),
        Object.keys(cmd.options ?? {}),
      ),
    );
  }
  if (parsed.values.help) return parsed;
  const p = cmd.positionals;
  const n = parsed.positionals.length;
  if (!p && n) throw new UsageError(`unexpected argument '${parsed.positionals[0]}'`);
  const where =
    { jobId: " (patchbay list shows job ids)", batch: " (patchbay batch list shows batch ids)" }[p?.name ?? ""] ?? "";
  if (p && n < p.min) throw new UsageError(`missing <${p.name}>${where}`);
  if (p?.max !== undefined && n > p.max)
    throw new UsageError(`takes ${p.max === 1 ? "one" : p.max} <${p.name}>, got ${n}`);
  return parsed;
}

/** Traces when OTEL_* asks for them (src/observability/telemetry.ts, loaded only then): the spans of what the command does. */
async function cliTelemetry() {
  const t = telemetryConfig();
  return t.enabled ? (await import("./observability/telemetry.js")).startTelemetry(t) : undefined;
}

/** parseArgs' "Unknown option '--verfiy'" with the flag it probably meant. */
function didYouMean(message: string, flags: string[]): string {
  const m = /^Unknown option '--([^']+)'/.exec(message);
  const hint = m ? suggest(m[1]!, [...flags, "help"]) : undefined;
  return hint ? `${message} (did you mean --${hint}?)` : message;
}

// Warnings (an unknown model id, PATCHBAY_UNKNOWN_MODEL) as the CLI's own lines, not Node's "(node:123) Warning:".
process.removeAllListeners("warning");
process.on("warning", (w) => process.stderr.write(`patchbay: warning: ${w.message}\n`));

export async function main(argv: string[]): Promise<number> {
  const [first, second] = argv;
  if (first === "--version" || first === "-V" || first === "-v" || first === "version") {
    console.log(version());
    return EXIT.ok;
  }
  if (first === undefined || first === "--help" || first === "-h" || first === "help") {
    (first === undefined ? console.error : console.log)(mainHelp());
    return first === undefined ? EXIT.usage : EXIT.ok;
  }
  const isGroup = groups.includes(first);
  if (isGroup && (second === undefined || second.startsWith("-"))) {
    const help = second === "--help" || second === "-h";
    (help ? console.log : console.error)(groupHelp(first));
    return help ? EXIT.ok : EXIT.usage;
  }
  const name = isGroup ? `${first} ${second}` : first;
  const cmd = commands[name];
  if (!cmd) {
    console.error(`patchbay: unknown command '${name}'. Run patchbay ${isGroup ? `${first} ` : ""}--help.`);
    return EXIT.usage;
  }
  try {
    const parsed = parse(cmd, name, argv.slice(isGroup ? 2 : 1));
    if (parsed.values.help) {
      console.log(layoutUsage(cmd.usage));
      return EXIT.ok;
    }
    let config: Config | undefined;
    const telemetry = await cliTelemetry();
    try {
      return await cmd.run({ ...parsed, config: () => (config ??= loadConfig()) });
    } finally {
      await telemetry?.release(); // its spans exported before the process exits
    }
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`patchbay ${name}: ${safeText(err.message)}\n(patchbay ${name} --help for usage)`);
      return EXIT.usage;
    }
    throw err;
  }
}

// Exit once stdout is flushed: a client's pooled sockets must not keep a finished command alive.
const exit = (code: number) => process.stdout.write("", () => process.exit(code));
main(process.argv.slice(2)).then(exit, (err: unknown) => {
  // Expected failures (CliError, job errors) are one line; only a bug shows a stack (PATCHBAY_DEBUG=1).
  const e = err instanceof Error ? err : new Error(String(err));
  // Every message may quote what a server, a repo or a file said: printed as safe text, whatever its source.
  console.error(`patchbay: ${safeText((debugWanted() ? e.stack : e.message) ?? e.message)}`);
  exit(EXIT.failure);
});
