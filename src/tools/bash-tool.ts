// The bash_20250124 tool on the sandbox's persistent shell. Unlike the reference: stdout and
// stderr interleaved, the exit status reported, a timeout kills only the command.
import { z } from "zod";
import { defaults } from "../core/config/config.js";
import type { Shell } from "../sandbox/shell.js";
import type { ToolOutput } from "./editor.js";

const Input = z.object({
  command: z.string().nullish(),
  restart: z.boolean().nullish(),
});

/** How BashTool runs commands. */
export interface BashToolOptions {
  /**
   * Seconds after which a command is killed (the shell survives).
   * @default 120
   */
  timeoutSec?: number;
  /**
   * Bytes of a command's output kept for the model (head and tail).
   * @default 30000
   */
  maxOutputBytes?: number;
}

/** The bash tool on a sandbox's persistent shell. */
export class BashTool {
  /** Its definition for the Messages API, schema-less (the model knows the built-in tool). */
  static readonly definition = { type: "bash_20250124", name: "bash" } as const;
  /** For models without built-in tools (the edit_file tool set). */
  static readonly jsonDefinition = {
    name: "bash",
    description:
      "Run a command in a persistent bash shell (cwd, environment and functions persist between calls). " +
      "stdout and stderr are interleaved; a non-zero exit status is reported on the last line. " +
      "Long-running commands are killed after a timeout. Set restart to true for a fresh shell.",
    input_schema: {
      type: "object" as const,
      properties: {
        command: { type: "string", description: "The bash command to run." },
        restart: { type: "boolean" },
      },
    },
  };

  constructor(
    private shell: Shell,
    private opts: BashToolOptions = {},
  ) {}

  /** Runs one call ({ command } or { restart: true }); never throws. `signal` kills the command. */
  async run(input: unknown, signal?: AbortSignal): Promise<ToolOutput> {
    const parsed = Input.safeParse(input ?? {});
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      return {
        content: `Invalid input for bash: \`${issue.path.join(".") || "input"}\` ${issue.message.toLowerCase()}. Expected {"command": string} or {"restart": true}.`,
        isError: true,
      };
    }
    const { command, restart } = parsed.data;
    if (restart) {
      await this.shell.restart();
      return { content: "tool has been restarted.", isError: false };
    }
    if (command == null || command.trim() === "") return { content: "no command provided.", isError: true };
    const timeoutSec = this.opts.timeoutSec ?? defaults.shell.timeoutSec;
    const r = await this.shell.run(command, { timeoutSec, maxOutputBytes: this.opts.maxOutputBytes, signal });
    const lines = [r.output.endsWith("\n") ? r.output.slice(0, -1) : r.output];
    if (r.aborted) {
      lines.push("[the command was stopped: the job is ending (timeout or cancellation)]");
    } else if (r.timedOut) {
      const after = r.shellRestarted ? "" : "; the shell is still usable";
      lines.push(
        `[the command timed out after ${(r.durationMs / 1000).toFixed(1)} s (limit ${timeoutSec} s) and was killed with its child processes${after}]`,
      );
    } else if (r.exitCode !== 0) {
      lines.push(`[exit code ${r.exitCode}]`);
    }
    if (r.shellRestarted) lines.push("[the shell was restarted: cwd, environment and functions were reset]");
    const content = lines.filter((l, i) => l !== "" || i > 0).join("\n");
    return {
      content: content === "" ? "(no output)" : content,
      isError: r.timedOut || Boolean(r.aborted),
      ...(r.shellExited ? { processLost: true } : {}),
    };
  }
}
