// A JobSpec's MCP servers (mcp.servers, src/core/spec/tools.ts): each started in the job's sandbox as the
// agent (stdio: a process attached through Sandbox.spawn), driven by the MCP SDK's Client over a
// transport of our own (JSON-RPC lines on its stdin/stdout, bounded); its tools offered as
// mcp__SERVER__TOOL with their input schemas, each call through the client and back as a tool
// result (text and images as the Messages API takes them), bounded in time and output like bash.
import { count } from "../core/count.js";
import { createHash } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { defaults } from "../core/config/config.js";
import { kinded } from "../core/errors.js";
import type { Attached } from "../backend/types.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { MCP_PREFIX, type McpServer } from "../core/spec/tools.js";
import { HeadTail } from "../core/truncate.js";
import type { ToolOutput } from "./editor.js";

/** A server that cannot start (its command, its handshake, its tool list): the job fails, not retried. */
export class McpStartError extends kinded("setup") {}

// One JSON-RPC line at most (a server's tool list or answer); past it the server is cut off.
const MAX_LINE_BYTES = 8 * 1024 * 1024;
// What the Messages API takes as an image in a tool_result.
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const MAX_IMAGE_BASE64 = 5 * 1024 * 1024;
const START_TIMEOUT_MS = 60_000;
// A server's tools go to the model on every request: bounded in number and size.
const MAX_TOOLS = 128;
const MAX_SCHEMA_CHARS = 64 * 1024;

/** Its stdin and stdout as the SDK's Transport: a JSON-RPC message per line. */
class AttachedTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private readonly buffer = new ReadBuffer({ maxBufferSize: MAX_LINE_BYTES });
  readonly stderr = new HeadTail(4096);
  proc?: Attached;

  constructor(private readonly start_: (onData: (chunk: Buffer, stream: 1 | 2) => void) => Promise<Attached>) {}

  async start(): Promise<void> {
    this.proc = await this.start_((chunk, stream) => (stream === 2 ? this.stderr.push(chunk) : this.read(chunk)));
    void this.proc.ended.finally(() => this.onclose?.());
  }

  private read(chunk: Buffer): void {
    try {
      this.buffer.append(chunk);
      for (let m = this.buffer.readMessage(); m; m = this.buffer.readMessage()) this.onmessage?.(m);
    } catch (err) {
      // Not JSON-RPC, or a line past the bound: a server we cannot follow any more.
      this.onerror?.(err as Error);
      this.proc?.destroy();
    }
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (!this.proc?.alive) throw new Error("the server is not running");
    await this.proc.send(Buffer.from(serializeMessage(message)));
  }

  async close(): Promise<void> {
    this.proc?.destroy();
  }
}

/** The Messages API's name for a server's tool: mcp__SERVER__TOOL, mapped and cut to its rule, with a hash where it was. */
export function mcpToolName(server: string, tool: string): string {
  const plain = `${MCP_PREFIX}${server}__${tool}`;
  if (/^[a-zA-Z0-9_-]{1,64}$/.test(plain)) return plain;
  const hash = createHash("sha256").update(tool).digest("hex").slice(0, 8);
  return `${plain.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 55)}_${hash}`;
}

interface Offered {
  name: string;
  description?: string;
  input_schema: Record<string, unknown>;
}

/** One running server: its client, its tools, and why it is gone once it is. */
class McpConnection {
  gone?: string;
  readonly tools = new Map<string, { tool: string; definition: Offered }>();
  private client?: Client;
  transport?: AttachedTransport;

  private constructor(
    private readonly sandbox: Sandbox,
    readonly name: string,
    private readonly spec: McpServer,
  ) {}

  static async start(sandbox: Sandbox, name: string, spec: McpServer): Promise<McpConnection> {
    const conn = new McpConnection(sandbox, name, spec);
    await conn.open(true);
    return conn;
  }

  /** Starts the server and its client; the first time, lists its tools. Throws McpStartError. */
  private async open(list: boolean): Promise<void> {
    const env = Object.entries(this.spec.env ?? {}).map(([k, v]) => `${k}=${v}`);
    const transport = new AttachedTransport((onData) =>
      this.sandbox.spawn([this.spec.command, ...(this.spec.args ?? [])], onData, { env }),
    );
    const client = new Client({ name: "patchbay", version: "1" });
    const why = () => `${transport.stderr.text().trim().slice(-600) || "no stderr"}`;
    try {
      await client.connect(transport, { timeout: START_TIMEOUT_MS });
      if (list) this.offer((await client.listTools(undefined, { timeout: START_TIMEOUT_MS })).tools);
    } catch (err) {
      await transport.close();
      throw new McpStartError(
        `MCP server ${JSON.stringify(this.name)} did not start: ${(err as Error).message.slice(0, 300)} (stderr: ${why()})`,
      );
    }
    // Said first, then the client's own close (which fails its calls in flight at once).
    const clientClose = transport.onclose;
    transport.onclose = () => {
      this.gone ??= transport.proc?.failure ?? `it exited (stderr: ${why()})`;
      clientClose?.();
    };
    this.client = client;
    this.transport = transport;
  }

  private offer(tools: { name: string; description?: string; inputSchema: Record<string, unknown> }[]): void {
    if (tools.length > MAX_TOOLS)
      throw new Error(`it lists ${count(tools.length, "tool")}, more than the ${MAX_TOOLS} a server may offer`);
    const big = tools.find((t) => JSON.stringify(t.inputSchema).length > MAX_SCHEMA_CHARS);
    if (big)
      throw new Error(
        `the input schema of its tool ${JSON.stringify(big.name.slice(0, 100))} is over ${count(MAX_SCHEMA_CHARS, "character")}`,
      );
    for (const t of tools) {
      const offered = mcpToolName(this.name, t.name);
      const said =
        offered === `${MCP_PREFIX}${this.name}__${t.name}`
          ? ""
          : ` (its MCP name: ${JSON.stringify(t.name.slice(0, 200))})`;
      const description = `${(t.description ?? "").slice(0, 4096)}${said}`.trim();
      this.tools.set(offered, {
        tool: t.name,
        definition: {
          name: offered,
          ...(description ? { description } : {}),
          input_schema: { ...t.inputSchema, type: "object" },
        },
      });
    }
  }

  /** A server that stopped (the end of an agent round kills the agent's processes) started again, for the next round. */
  async revive(): Promise<void> {
    if (!this.gone) return;
    try {
      await this.open(false);
      this.gone = undefined;
    } catch (err) {
      this.gone = `it stopped and could not be started again: ${(err as Error).message}`;
    }
  }

  close(): Promise<void> {
    return this.client?.close().catch(() => {}) ?? Promise.resolve();
  }

  async call(
    offered: string,
    input: unknown,
    opts: { timeoutSec: number; maxBytes: number; signal?: AbortSignal },
  ): Promise<ToolOutput> {
    const { tool } = this.tools.get(offered)!;
    const label = `MCP server ${JSON.stringify(this.name)}`;
    if (this.gone) return { content: `The ${label} is not running: ${this.gone}.`, isError: true };
    try {
      const r = await this.client!.callTool({ name: tool, arguments: input as Record<string, unknown> }, undefined, {
        timeout: opts.timeoutSec * 1000,
        signal: opts.signal,
      });
      return resultOf(r as { content?: unknown[]; isError?: boolean }, opts.maxBytes);
    } catch (err) {
      const msg = (err as Error).message;
      if (this.gone) return { content: `The ${label} stopped during the call: ${this.gone}.`, isError: true };
      if (/timed out/i.test(msg))
        return {
          content: `The ${label} did not answer ${tool} within ${opts.timeoutSec} s (the call was given up; the server still runs).`,
          isError: true,
        };
      return { content: `The ${label} failed on ${tool}: ${msg.slice(0, 2000)}`, isError: true };
    }
  }
}

/** A text item's text: a string as it is; anything else a server sends there, as JSON (never "[object Object]"). */
const textOf = (v: unknown): string =>
  typeof v === "string" ? v : v === undefined || v === null ? "" : (JSON.stringify(v) ?? "");

/** A call's MCP content as a tool_result's: text and images the API takes; the rest said in text. Every item counts toward `maxBytes`. */
function resultOf(r: { content?: unknown[]; isError?: boolean }, maxBytes: number): ToolOutput {
  const blocks: { type: string; [k: string]: unknown }[] = [];
  const shown: string[] = [];
  const items = (Array.isArray(r.content) ? r.content : []) as {
    type?: string;
    text?: unknown;
    data?: unknown;
    mimeType?: unknown;
    resource?: { text?: unknown; uri?: unknown };
  }[];
  let left = maxBytes;
  for (let i = 0; i < items.length; i++) {
    if (left <= 0) {
      const t = `[output cut at ${count(maxBytes, "byte")}: ${count(items.length - i, "more item")} not shown]`;
      blocks.push({ type: "text", text: t });
      shown.push(t);
      break;
    }
    const c = items[i]!;
    const text =
      c.type === "text"
        ? textOf(c.text)
        : c.type === "resource" && typeof c.resource?.text === "string"
          ? c.resource.text
          : undefined;
    if (text !== undefined) {
      const kept = Buffer.from(text).subarray(0, Math.max(0, left)).toString("utf8");
      left -= Buffer.byteLength(text) + 1; // (and the line between it and the next)
      const t = kept.length < text.length ? `${kept}\n[output cut at ${count(maxBytes, "byte")}]` : kept;
      blocks.push({ type: "text", text: t });
      shown.push(t);
    } else if (
      c.type === "image" &&
      typeof c.data === "string" &&
      IMAGE_TYPES.has(String(c.mimeType)) &&
      c.data.length <= MAX_IMAGE_BASE64
    ) {
      blocks.push({ type: "image", source: { type: "base64", media_type: c.mimeType, data: c.data } });
      // (its data is bounded by MAX_IMAGE_BASE64 and the message's line: it counts as its line here)
      const t = `[image ${String(c.mimeType)}, ${count(Buffer.byteLength(c.data, "base64"), "byte")}]`;
      shown.push(t);
      left -= Buffer.byteLength(t) + 1;
    } else {
      const t = `[${String(c.type).slice(0, 40)} content not passed on: ${c.type === "image" ? "an image type or size the Messages API does not take" : "not text or an image"}]`;
      blocks.push({ type: "text", text: t });
      shown.push(t);
      left -= Buffer.byteLength(t) + 1;
    }
  }
  const content = shown.join("\n") || "(no output)";
  const isError = r.isError === true;
  return blocks.some((b) => b.type === "image") ? { content, isError, blocks } : { content, isError };
}

/** The job's MCP servers, started in its sandbox. */
export class McpHub {
  private constructor(
    private readonly conns: McpConnection[],
    private readonly opts: { timeoutSec: number; maxBytes: number },
  ) {}

  /** Starts every server (at once); one that cannot start fails the job (McpStartError) and stops the others. */
  static async start(
    sandbox: Sandbox,
    servers: Record<string, McpServer>,
    opts: { timeoutSec?: number; maxBytes?: number } = {},
  ): Promise<McpHub> {
    const started = await Promise.allSettled(
      Object.entries(servers).map(([name, s]) => McpConnection.start(sandbox, name, s)),
    );
    const failed = started.find((s) => s.status === "rejected");
    const conns = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
    if (failed) {
      await Promise.all(conns.map((c) => c.close()));
      throw failed.reason;
    }
    return new McpHub(conns, {
      timeoutSec: opts.timeoutSec ?? defaults.job.commandTimeoutSec,
      maxBytes: opts.maxBytes ?? defaults.shell.maxOutputBytes,
    });
  }

  definitions(): Offered[] {
    return this.conns.flatMap((c) => [...c.tools.values()].map((t) => t.definition));
  }

  /** A handler per offered tool name, for the Toolbox. */
  handlers(): Record<string, { run(input: unknown, signal?: AbortSignal): Promise<ToolOutput> }> {
    return Object.fromEntries(
      this.conns.flatMap((c) =>
        [...c.tools.keys()].map((name) => [
          name,
          { run: (input: unknown, signal?: AbortSignal) => c.call(name, input, { ...this.opts, signal }) },
        ]),
      ),
    );
  }

  /** Starts again the servers that stopped (between verify rounds: see src/job/rounds.ts). */
  async revive(): Promise<void> {
    await Promise.all(this.conns.map((c) => c.revive()));
  }

  async close(): Promise<void> {
    await Promise.all(this.conns.map((c) => c.close()));
  }
}
