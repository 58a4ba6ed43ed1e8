// The `patchbay` command. Each subcommand: a usage text and a handler; --help everywhere.
import { parseArgs, type ParseArgsConfig } from "node:util";
import { loadConfig } from "./config.js";
import { commands as jobCommands } from "./cli-jobs.js";
import { buildImage } from "./sandbox/image.js";

export interface Command {
  /** One line for `patchbay --help`. */
  summary: string;
  usage: string;
  options?: ParseArgsConfig["options"];
  positionals?: boolean;
  run(args: { values: Record<string, unknown>; positionals: string[] }): Promise<number>;
}

const commands: Record<string, Command> = {
  ...jobCommands,
  "image build": {
    summary: "build the sandbox image (online or offline)",
    usage: `patchbay image build [--tag IMAGE] [--force]

Builds the sandbox image from images/sandbox/Dockerfile where debian:bookworm-slim can be pulled,
and otherwise offline (debootstrap + docker import, needs root). Skipped when an image with the
same recipe hash exists. Default tag: $PATCHBAY_IMAGE or patchbay-sandbox:latest.`,
    options: { tag: { type: "string" }, force: { type: "boolean" } },
    async run({ values }) {
      const tag = (values.tag as string | undefined) ?? loadConfig().image;
      const t0 = Date.now();
      const r = await buildImage(tag, { force: Boolean(values.force) });
      process.stderr.write(`[image] ${r.tag} (recipe ${r.recipe}) ${r.how === "cached" ? "is up to date" : `built (${r.how}) in ${((Date.now() - t0) / 1000).toFixed(1)} s`}\n`);
      return 0;
    },
  },
};

function mainHelp(): string {
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(14)} ${c.summary}`);
  return `patchbay — run coding agents on untrusted repositories, safely and in bulk

Usage: patchbay <command> [options]      (patchbay <command> --help for details)

Commands:
${lines.join("\n")}

Environment: REDIS_URL, DOCKER_HOST, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, PATCHBAY_QUEUE,
PATCHBAY_IMAGE, PATCHBAY_MODEL, PATCHBAY_CONCURRENCY.`;
}

export async function main(argv: string[]): Promise<number> {
  const name = argv[0] === "image" ? `image ${argv[1] ?? ""}`.trim() : argv[0];
  const rest = argv.slice(name?.includes(" ") ? 2 : 1);
  if (!name || name === "--help" || name === "-h" || name === "help") {
    console.log(mainHelp());
    return name ? 0 : 2;
  }
  const cmd = commands[name];
  if (!cmd) {
    console.error(`patchbay: unknown command '${name}'. Run patchbay --help.`);
    return 2;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: { ...cmd.options, help: { type: "boolean", short: "h" } }, allowPositionals: true, strict: true });
  } catch (err) {
    console.error(`patchbay ${name}: ${(err as Error).message}\n\n${cmd.usage}`);
    return 2;
  }
  if (parsed.values.help) {
    console.log(cmd.usage);
    return 0;
  }
  return cmd.run(parsed as { values: Record<string, unknown>; positionals: string[] });
}

// Exit once stdout is flushed: a client's pooled sockets must not keep a finished command alive.
const exit = (code: number) => process.stdout.write("", () => process.exit(code));
main(process.argv.slice(2)).then(exit, (err) => {
  console.error(`patchbay: ${err instanceof Error ? err.message : String(err)}`);
  exit(1);
});
