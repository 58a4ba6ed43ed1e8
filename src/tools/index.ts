// One entry point for the agent loop: the tool definitions for a flavor, and runTool for a
// tool_use block. A malformed call becomes an is_error result naming the bad field, never a throw.
import { defaults } from "../core/config/config.js";
import { DEFAULT_EDITOR_TOOL } from "../core/spec/names.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { BashTool } from "./bash-tool.js";
import { EditFileTool, editFileDefinition } from "./edit-file.js";
import { TextEditor, toolName, type EditorFlavor, type ToolOutput } from "./editor.js";
import { editorDefinition, SandboxFs } from "./editor-tool.js";
import { CustomToolRunner } from "./custom-tool.js";
import type { CustomTool } from "../core/spec/tools.js";
import type { McpHub } from "./mcp.js";

/** The file editing tool a job offers the model: one of Anthropic's text editors, or edit_file. */
export type ToolSet = EditorFlavor | "edit_file";

/** A tool_use block of the Messages API: the call to run. */
export interface ToolUseBlock {
  /** The call's id (the tool_result answers it). */
  id: string;
  /** The tool's name. */
  name: string;
  /** Its input, as the model wrote it (checked by the tool). */
  input: unknown;
}

/** A tool call's output and how long it took. */
export interface ToolRun extends ToolOutput {
  /** Its wall-clock time in ms. */
  durationMs: number;
}

/** What a Toolbox offers the model, and its bounds. */
export interface ToolboxOptions {
  /**
   * The file editing tool offered beside bash.
   * @default "text_editor_20250728"
   */
  tools?: ToolSet;
  /**
   * Seconds after which a bash command (or a custom tool's) is killed.
   * @default 120
   */
  commandTimeoutSec?: number;
  /**
   * What the editor shows the model (a view, an edit's snippet) is cut to this many characters.
   * @default 16000
   */
  maxCharacters?: number;
  /** The spec's own tools (tools.custom), after the built-in ones. */
  custom?: CustomTool[];
  /** The job's MCP servers, started (their tools after the spec's own). */
  mcp?: McpHub;
}

/** How runTool runs a call: a Toolbox's options, and a signal. */
export interface RunToolOptions extends ToolboxOptions {
  /** Aborting kills a running bash command. */
  signal?: AbortSignal;
}

/** How Toolbox.definitions describes the tools. */
export interface DefinitionsOptions {
  /**
   * The max_characters sent with the text editor tool that takes it.
   * @default 16000
   */
  maxCharacters?: number;
}

/** The tools of one job on one sandbox; holds the editor's undo history. */
export class Toolbox {
  /** The file editing tool it offers. */
  readonly tools: ToolSet;
  private handlers: Record<string, { run(input: unknown, signal?: AbortSignal): Promise<ToolOutput> }>;
  private readonly custom: CustomToolRunner[];
  private readonly mcp?: McpHub;

  constructor(sandbox: Sandbox, opts: ToolboxOptions = {}) {
    this.tools = opts.tools ?? DEFAULT_EDITOR_TOOL;
    const fs = new SandboxFs(sandbox);
    const bash = new BashTool(sandbox.shell, { timeoutSec: opts.commandTimeoutSec ?? defaults.job.commandTimeoutSec });
    const editor =
      this.tools === "edit_file"
        ? new EditFileTool(fs, { maxFileBytes: defaults.editor.maxFileBytes })
        : new TextEditor(fs, {
            flavor: this.tools,
            maxFileBytes: defaults.editor.maxFileBytes,
            maxCharacters: opts.maxCharacters ?? defaults.editor.maxCharacters,
          });
    const commandTimeoutSec = opts.commandTimeoutSec ?? defaults.job.commandTimeoutSec;
    this.custom = (opts.custom ?? []).map((t) => new CustomToolRunner(sandbox, t, { timeoutSec: commandTimeoutSec }));
    this.mcp = opts.mcp;
    this.handlers = {
      bash,
      [this.editorName]: editor,
      ...Object.fromEntries(this.custom.map((c) => [c.tool.name, c])),
      ...opts.mcp?.handlers(),
    };
  }

  /** The editor tool's name, as the model calls it. */
  get editorName(): string {
    return this.tools === "edit_file" ? "edit_file" : toolName(this.tools);
  }

  /** Tool definitions for the Messages API. Built-in tools are sent schema-less. */
  definitions(opts: DefinitionsOptions = {}): unknown[] {
    const own = [...this.custom.map((c) => c.definition), ...(this.mcp?.definitions() ?? [])];
    if (this.tools === "edit_file") return [BashTool.jsonDefinition, editFileDefinition, ...own];
    return [
      BashTool.definition,
      editorDefinition(this.tools, opts.maxCharacters ?? defaults.editor.maxCharacters),
      ...own,
    ];
  }

  /** Runs one tool_use block; never throws (an unknown tool, bad input or a failure is an is_error result). */
  async run(block: ToolUseBlock, signal?: AbortSignal): Promise<ToolRun> {
    const t0 = performance.now();
    const handler = this.handlers[block.name];
    let out: ToolOutput;
    if (!handler) {
      out = {
        content: `Unknown tool \`${block.name}\`. The available tools are: ${Object.keys(this.handlers).join(", ")}.`,
        isError: true,
      };
    } else if (typeof block.input !== "object" || block.input === null || Array.isArray(block.input)) {
      out = { content: `Invalid input for ${block.name}: it must be a JSON object.`, isError: true };
    } else {
      try {
        out = await handler.run(block.input, signal);
      } catch (err) {
        // The sandbox is gone or Docker failed: a tool failure the model is told about.
        out = { content: `The ${block.name} tool failed: ${(err as Error).message}`, isError: true };
      }
    }
    return { ...out, durationMs: Math.round((performance.now() - t0) * 10) / 10 };
  }
}

const boxes = new WeakMap<Sandbox, Map<ToolSet, Toolbox>>();

/** Runs one tool_use block on a sandbox (one Toolbox per sandbox and tool set, so undo works). */
export function runTool(sandbox: Sandbox, block: ToolUseBlock, opts: RunToolOptions = {}): Promise<ToolRun> {
  const tools = opts.tools ?? DEFAULT_EDITOR_TOOL;
  let perSandbox = boxes.get(sandbox);
  if (!perSandbox) boxes.set(sandbox, (perSandbox = new Map<ToolSet, Toolbox>()));
  let box = perSandbox.get(tools);
  if (!box) perSandbox.set(tools, (box = new Toolbox(sandbox, { ...opts, tools })));
  return box.run(block, opts.signal);
}

export { BashTool, CustomToolRunner, EditFileTool, TextEditor };
