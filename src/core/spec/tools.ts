// The JobSpec's extra tools (docs/jobspec.md "Custom tools" and "MCP servers"): commands the spec
// offers the model as tools of their own, and MCP servers run in the sandbox. Pure: schemas and
// name rules, no I/O (the runners are src/tools/custom-tool.ts and src/tools/mcp.ts).
import { count } from "../count.js";
import { Ajv } from "ajv";
import { z } from "zod";
import { expected, nonEmpty, show } from "./fields.js";

/** The Messages API's rule for a tool's name. */
export const TOOL_NAME_RE = /^[a-zA-Z0-9_-]{1,64}$/;
/** The built-in tools' names (every editor flavor's): a custom tool may not take one. */
export const BUILTIN_TOOL_NAMES: readonly string[] = [
  "bash",
  "str_replace_based_edit_tool",
  "str_replace_editor",
  "edit_file",
];
/** MCP tools are offered as mcp__SERVER__TOOL: a custom tool may not look like one. */
export const MCP_PREFIX = "mcp__";
export const MAX_CUSTOM_TOOLS = 32;
export const MAX_MCP_SERVERS = 8;
// A tool's schema goes to the model on every request: bounded like the other free texts of a spec.
const MAX_SCHEMA_CHARS = 16 * 1024;
const MAX_DESCRIPTION_CHARS = 4096;
const MAX_COMMAND_CHARS = 64 * 1024;

// Only the meta-schema check here (is it a JSON Schema at all); the runner compiles it.
const ajv = new Ajv({ strict: false });

const ToolName = z
  .string({ error: expected("a tool name") })
  .regex(TOOL_NAME_RE, {
    error: (iss) =>
      `must be 1-64 characters from a-z A-Z 0-9 _ - (the Messages API's rule for tool names) (got ${show(iss.input)})`,
  })
  .refine((s) => !BUILTIN_TOOL_NAMES.includes(s), {
    error: (iss) => `must not be a built-in tool's name (${BUILTIN_TOOL_NAMES.join(", ")}) (got ${show(iss.input)})`,
  })
  .refine((s) => !s.startsWith(MCP_PREFIX), {
    error: `must not start with "${MCP_PREFIX}" (the MCP servers' tools are named so)`,
  });

/** A JSON Schema for an object, as the Messages API takes a tool's input_schema. */
const InputSchema = z.record(z.string(), z.unknown(), { error: expected("a JSON Schema object") }).check((ctx) => {
  const s = ctx.value;
  const problem =
    s.type !== "object"
      ? `must have "type": "object" (the Messages API's rule for input_schema) (got ${show(s.type)})`
      : JSON.stringify(s).length > MAX_SCHEMA_CHARS
        ? `must be at most ${count(MAX_SCHEMA_CHARS, "character")} as JSON`
        : !safeValidSchema(s)
          ? `is not a valid JSON Schema: ${ajv.errorsText(ajv.errors).slice(0, 300)}`
          : undefined;
  if (problem) ctx.issues.push({ code: "custom", message: problem, input: s });
});

function safeValidSchema(s: unknown): boolean {
  try {
    return ajv.validateSchema(s as object) === true;
  } catch {
    return false;
  }
}

export const CustomTool = z.strictObject({
  name: ToolName,
  description: z
    .string({ error: expected("a string") })
    .max(MAX_DESCRIPTION_CHARS, { error: `must be at most ${count(MAX_DESCRIPTION_CHARS, "character")}` })
    .optional(),
  input_schema: InputSchema,
  /** Run with `bash -c` in the sandbox as the agent, the call's input as JSON on stdin; its stdout is the result. */
  command: z
    .string({ error: expected("a non-empty command") })
    .max(MAX_COMMAND_CHARS, { error: `must be at most ${count(MAX_COMMAND_CHARS, "character")}` })
    .refine((s) => s.trim() !== "", { error: expected("a non-empty command") }),
});
export type CustomTool = z.infer<typeof CustomTool>;

export const CustomTools = z
  .array(CustomTool, { error: expected("an array of tools") })
  .max(MAX_CUSTOM_TOOLS, { error: `must be at most ${count(MAX_CUSTOM_TOOLS, "tool")}` })
  .check((ctx) => {
    const seen = new Set<string>();
    ctx.value.forEach((t, i) => {
      if (seen.has(t.name))
        ctx.issues.push({
          code: "custom",
          message: `the name ${JSON.stringify(t.name)} is taken by an earlier tool`,
          input: t.name,
          path: [i, "name"],
        });
      seen.add(t.name);
    });
  });

/** An MCP server's name: part of its tools' names (mcp__NAME__TOOL), so no "__" in it. */
export const MCP_SERVER_NAME_RE = /^[a-zA-Z0-9-]+(_[a-zA-Z0-9-]+)*$/;

const EnvName = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
export const McpServer = z.strictObject({
  command: nonEmpty("a non-empty command (a program: run with its args, no shell)"),
  args: z
    .array(z.string({ error: expected("a string") }).max(4096), { error: expected("an array of strings") })
    .max(64)
    .optional(),
  env: z
    .record(z.string(), z.string({ error: expected("a string") }).max(4096), {
      error: expected("an object of strings"),
    })
    .check((ctx) => {
      for (const k of Object.keys(ctx.value))
        if (!EnvName.test(k))
          ctx.issues.push({
            code: "custom",
            message: "must be an environment variable's name as the key",
            input: k,
            path: [k],
          });
    })
    .optional(),
});
export type McpServer = z.infer<typeof McpServer>;

export const Mcp = z.strictObject({
  servers: z.record(z.string(), McpServer, { error: expected("an object of servers by name") }).check((ctx) => {
    const names = Object.keys(ctx.value);
    if (names.length > MAX_MCP_SERVERS)
      ctx.issues.push({
        code: "custom",
        message: `must be at most ${count(MAX_MCP_SERVERS, "server")} (got ${names.length})`,
        input: names.length,
      });
    for (const n of names) {
      if (n.length > 32 || !MCP_SERVER_NAME_RE.test(n))
        ctx.issues.push({
          code: "custom",
          message: "a server's name must be 1-32 letters, digits, - and single _ (no __: it separates mcp__NAME__TOOL)",
          input: n,
          path: [n],
        });
    }
  }),
});
export type Mcp = z.infer<typeof Mcp>;

/** The server an offered tool name belongs to, for its tool_call event ({} for any other tool). */
export function mcpServerOf(toolName: string): { server?: string } {
  const m = /^mcp__([a-zA-Z0-9-]+(?:_[a-zA-Z0-9-]+)*)__/.exec(toolName);
  return m ? { server: m[1]! } : {};
}
