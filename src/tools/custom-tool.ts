// A JobSpec's own tool (tools.custom, src/core/spec/tools.ts): the call's input is checked against the
// tool's JSON Schema, then its command runs in the sandbox as the agent (a fresh bash, not the
// agent's shell) with the input as JSON on stdin; stdout is the result. Bounded like bash: the
// command timeout, and the output bound.
import { count } from "../core/count.js";
import { Ajv, type ValidateFunction } from "ajv";
import { defaults } from "../core/config/config.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { CustomTool } from "../core/spec/tools.js";
import type { ToolOutput } from "./editor.js";

// Not strict: a schema's unknown keywords (e.g. an MCP-style `title` elsewhere) are the spec's business.
const ajv = new Ajv({ strict: false, allErrors: true });

export class CustomToolRunner {
  private readonly check: ValidateFunction | string;

  constructor(
    private readonly sandbox: Sandbox,
    readonly tool: CustomTool,
    private readonly opts: { timeoutSec?: number; maxOutputBytes?: number } = {},
  ) {
    try {
      this.check = ajv.compile(tool.input_schema);
    } catch (err) {
      // e.g. a $ref to nowhere: every call fails saying so, the job's other tools go on.
      this.check = `the tool's input_schema cannot be used: ${(err as Error).message.slice(0, 300)}`;
    }
  }

  /** As the Messages API takes a client tool. */
  get definition(): { name: string; description?: string; input_schema: Record<string, unknown> } {
    const { name, description, input_schema } = this.tool;
    return { name, ...(description ? { description } : {}), input_schema };
  }

  async run(input: unknown, signal?: AbortSignal): Promise<ToolOutput> {
    const name = this.tool.name;
    if (typeof this.check === "string") return { content: `The ${name} tool failed: ${this.check}`, isError: true };
    if (!this.check(input))
      return {
        content: `Invalid input for ${name}: ${ajv.errorsText(this.check.errors, { dataVar: "input" }).slice(0, 2000)}. Nothing was run.`,
        isError: true,
      };
    const timeoutSec = this.opts.timeoutSec ?? defaults.job.commandTimeoutSec;
    const maxBytes = this.opts.maxOutputBytes ?? defaults.shell.maxOutputBytes;
    // A job that ends (timeout, cancel) stops the command with every process of the agent's uid.
    const onAbort = () => void this.sandbox.killAgentProcesses({ keepShell: true });
    signal?.addEventListener("abort", onAbort, { once: true });
    const t0 = performance.now();
    let r: Awaited<ReturnType<Sandbox["exec"]>>;
    try {
      r = await this.sandbox.exec(["bash", "--noprofile", "--norc", "-c", this.tool.command], {
        stdin: JSON.stringify(input),
        timeoutSec,
        maxBytes,
      });
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
    const lines = [r.stdout.toString("utf8").replace(/\n$/, "")];
    if (r.truncated) lines.push(`[output cut at ${count(maxBytes, "byte")}]`);
    if (signal?.aborted) {
      lines.push("[the command was stopped: the job is ending (timeout or cancellation)]");
      return { content: lines.join("\n"), isError: true };
    }
    if (r.exitCode === 0)
      return { content: lines[0] === "" && lines.length === 1 ? "(no output)" : lines.join("\n"), isError: false };
    // A kill at the timeout reads as 137 (SIGKILL) from both of Sandbox.exec's lanes.
    const timedOut = r.exitCode === 137 && performance.now() - t0 >= timeoutSec * 1000 - 50;
    if (r.stderr.trim()) lines.push(`[stderr]\n${r.stderr.replace(/\n$/, "")}`);
    lines.push(timedOut ? `[the command timed out after ${timeoutSec} s and was killed]` : `[exit code ${r.exitCode}]`);
    return { content: lines.filter((l, i) => l !== "" || i > 0).join("\n"), isError: true };
  }
}
