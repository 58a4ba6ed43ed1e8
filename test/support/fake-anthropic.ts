// A scripted, Anthropic-compatible Messages API on loopback, so the real
// @anthropic-ai/sdk (retries, SSE parsing, error classes) runs end to end in tests.
import { createHash, type Hash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}
export interface RecordedRequest {
  body: any;
  headers: Record<string, string | string[] | undefined>;
  stream: boolean;
  at: number;
}
export type Reply =
  | { kind: "message"; content: any[]; stop_reason?: string; usage?: Partial<Usage>; delayMs?: number }
  | { kind: "error"; status: number; type?: string; message?: string; headers?: Record<string, string> };
export type Policy = (req: { body: any; index: number; requests: RecordedRequest[] }) => Reply | Promise<Reply>;
export interface FakeAnthropic {
  url: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

// ---------------------------------------------------------------- builders
let toolSeq = 0;
let msgSeq = 0;
export const text = (s: string) => ({ type: "text" as const, text: s });
export const toolUse = (name: string, input: unknown, id?: string) => ({
  type: "tool_use" as const,
  id: id ?? `toolu_fake${String(++toolSeq).padStart(6, "0")}`,
  name,
  input,
});
export function reply(...blocks: any[]): Reply {
  const stop_reason = blocks.some((b) => b?.type === "tool_use") ? "tool_use" : "end_turn";
  return { kind: "message", content: blocks, stop_reason };
}
export const apiError = (status: number, message?: string, headers?: Record<string, string>): Reply => ({
  kind: "error",
  status,
  message,
  headers,
});

/** tool_result blocks of the newest message in a request (the user turn answering tool_use). */
export function toolResults(req: RecordedRequest | undefined): any[] {
  const content = req?.body?.messages?.at(-1)?.content;
  return Array.isArray(content) ? content.filter((b: any) => b?.type === "tool_result") : [];
}
export const lastToolResults = (fake: FakeAnthropic) => toolResults(fake.requests.at(-1));
/** Flattens a tool_result's content (string or text blocks) to one string. */
export function toolResultText(block: any): string {
  const c = block?.content;
  if (typeof c === "string") return c;
  return Array.isArray(c) ? c.map((b: any) => (b?.type === "text" ? b.text : "")).join("") : "";
}

// ------------------------------------------------------------------- usage
const tokens = (chars: number) => Math.ceil(chars / 4);
const ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  529: "overloaded_error",
};

/** Prompt-cache simulation: remembers hashes of prefixes that ended at a cache_control breakpoint. */
function makeCache() {
  const seen = new Set<string>(); // hashes of prefixes that ended at a breakpoint in an earlier request
  return (body: any): Omit<Usage, "output_tokens"> => {
    // Cache order is tools -> system -> messages; each block is one segment.
    // cache_control is stripped from the key so moving a breakpoint keeps earlier prefixes hittable.
    const segs: { json: string; bp: boolean }[] = [];
    const add = (tag: string, b: any) => {
      const { cache_control, ...rest } = b && typeof b === "object" ? b : { value: b };
      segs.push({ json: JSON.stringify([tag, rest]), bp: cache_control != null });
    };
    for (const t of body?.tools ?? []) add("tool", t);
    const sys = body?.system;
    for (const b of typeof sys === "string" ? [text(sys)] : (sys ?? [])) add("system", b);
    (body?.messages ?? []).forEach((m: any, i: number) => {
      const blocks = typeof m?.content === "string" ? [text(m.content)] : (m?.content ?? []);
      for (const b of blocks) add(`${i}:${m?.role}`, b);
    });
    const h: Hash = createHash("sha256").update(String(body?.model));
    const cum: number[] = []; // tokens of the prefix ending at segment i
    // A top-level cache_control (automatic caching) puts the breakpoint on the last block.
    if (body?.cache_control != null && segs.length) segs.at(-1)!.bp = true;
    let lastBp = -1;
    segs.forEach((s, i) => {
      if (s.bp) lastBp = i;
    });
    const fresh: string[] = [];
    let chars = 0,
      hit = -1;
    segs.forEach((s, i) => {
      h.update(s.json);
      chars += s.json.length;
      cum.push(tokens(chars));
      const key = h.copy().digest("hex");
      if (s.bp) fresh.push(key);
      // Lookups walk back from a breakpoint, so only hits at or before the newest one count; longest wins.
      if (seen.has(key) && i <= lastBp) hit = i;
    });
    for (const k of fresh) seen.add(k);
    const read = hit >= 0 ? cum[hit]! : 0;
    const creation = lastBp >= 0 ? cum[lastBp]! - read : 0;
    const total = tokens(chars);
    return {
      input_tokens: total - read - creation,
      cache_creation_input_tokens: creation,
      cache_read_input_tokens: read,
    };
  };
}

// ------------------------------------------------------------------ server
/**
 * A request's input tokens as the context-window check counts them: the UTF-8 bytes of
 * JSON.stringify({ system, tools, messages }) / 3.5, rounded up (the loop's estimate,
 * src/agent/window.ts, uses the same rule).
 */
export const countInput = (body: any): number =>
  Math.ceil(
    Buffer.byteLength(JSON.stringify({ system: body?.system, tools: body?.tools, messages: body?.messages }), "utf8") /
      3.5,
  );

/**
 * opts.host: loopback unless a test serves other containers (the compose test binds its container's 0.0.0.0).
 * opts.contextWindow: a request whose countInput is over it is refused as the real API does (400
 * invalid_request_error "prompt is too long: N tokens > M maximum"), before the script sees it (it is still recorded).
 */
export async function startFakeAnthropic(
  script: Reply[] | Policy,
  opts: { port?: number; host?: string; contextWindow?: number } = {},
): Promise<FakeAnthropic> {
  const requests: RecordedRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const cacheUsage = makeCache();
  let cursor = 0;

  const nextReply = async (body: any, index: number): Promise<Reply> => {
    if (typeof script === "function") return script({ body, index, requests });
    if (cursor >= script.length) {
      return {
        kind: "error",
        status: 500,
        type: "api_error",
        headers: { "x-should-retry": "false" },
        message: `fake-anthropic: script exhausted after ${script.length} requests (request #${index + 1} has no scripted reply)`,
      };
    }
    return script[cursor++]!;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const path = (req.url ?? "").split("?")[0];
    if (req.method !== "POST" || path !== "/v1/messages") {
      return sendError(res, {
        kind: "error",
        status: 404,
        message: `fake-anthropic: no route ${req.method} ${req.url}`,
      });
    }
    const raw = Buffer.concat(chunks).toString("utf8");
    let body: any;
    try {
      body = JSON.parse(raw);
    } catch {
      body = raw;
    }
    const rec: RecordedRequest = { body, headers: { ...req.headers }, stream: body?.stream === true, at: Date.now() };
    const index = requests.push(rec) - 1;
    if (typeof body !== "object" || body === null) {
      return sendError(res, { kind: "error", status: 400, message: "fake-anthropic: request body is not JSON" });
    }
    const counted = countInput(body);
    if (opts.contextWindow !== undefined && counted > opts.contextWindow) {
      return sendError(res, {
        kind: "error",
        status: 400,
        message: `prompt is too long: ${counted} tokens > ${opts.contextWindow} maximum`,
      });
    }
    let r: Reply;
    try {
      r = await nextReply(body, index);
    } catch (e) {
      // A throwing policy is a test bug: fail once, loudly, without SDK retries hiding it.
      r = {
        kind: "error",
        status: 500,
        message: `fake-anthropic: policy threw: ${String(e)}`,
        headers: { "x-should-retry": "false" },
      };
    }
    if (r.kind === "error") return sendError(res, r);
    if (r.delayMs) {
      await new Promise<void>((ok) => {
        const t = setTimeout(() => {
          timers.delete(t);
          ok();
        }, r.delayMs);
        timers.add(t);
      });
      if (res.destroyed) return; // client gave up (timeout/abort) or server closed
    }
    const usage: Usage = { ...cacheUsage(body), output_tokens: tokens(JSON.stringify(r.content).length), ...r.usage };
    const message = {
      id: `msg_fake${String(++msgSeq).padStart(6, "0")}`,
      type: "message",
      role: "assistant",
      model: body.model,
      content: r.content,
      stop_reason: r.stop_reason ?? "end_turn",
      stop_sequence: null,
      stop_details: null,
      container: null,
      usage,
    };
    const requestId = `req_fake_${index}`; // surfaces as msg._request_id / APIError.requestID
    if (rec.stream) sendStream(res, message, requestId);
    else send(res, 200, message, { "request-id": requestId });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e) => {
      if (!res.headersSent) send(res, 500, errBody("api_error", String(e)));
      else res.destroy();
    });
  });
  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", ok);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${opts.host ?? "127.0.0.1"}:${port}`,
    requests,
    close: () =>
      new Promise<void>((ok) => {
        for (const t of timers) clearTimeout(t);
        timers.clear();
        server.close(() => ok());
        server.closeAllConnections(); // SDK keeps sockets alive; delayed replies hold them open too
      }),
  };
}

function send(res: ServerResponse, status: number, json: unknown, headers: Record<string, string> = {}) {
  if (res.destroyed) return;
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(json));
}
const errBody = (type: string, message: string) => ({ type: "error", error: { type, message } });

function sendError(res: ServerResponse, r: Extract<Reply, { kind: "error" }>) {
  const type = r.type ?? ERROR_TYPES[r.status] ?? "api_error";
  const headers: Record<string, string> = { ...r.headers };
  const has = (h: string) => Object.keys(headers).some((k) => k.toLowerCase() === h);
  const retryable = [408, 409, 429].includes(r.status) || r.status >= 500;
  // The SDK waits retry-after-ms, else retry-after (seconds); a value <= 0 falls back to
  // ~0.5s-8s exponential backoff. Default to 1 ms so retry tests stay fast.
  if (retryable && !has("retry-after-ms") && !has("retry-after")) {
    headers["retry-after-ms"] = "1";
    if (r.status === 429) headers["retry-after"] = "0";
  }
  send(res, r.status, errBody(type, r.message ?? `fake-anthropic: scripted ${r.status} ${type}`), headers);
}

/** Splits into up to 3 pieces on code-point boundaries, so deltas look like real incremental output. */
function pieces(s: string): string[] {
  const cps = Array.from(s);
  const size = Math.max(1, Math.ceil(cps.length / 3));
  const out: string[] = [];
  for (let i = 0; i < cps.length; i += size) out.push(cps.slice(i, i + size).join(""));
  return out.length ? out : [""];
}

function sendStream(res: ServerResponse, message: any, requestId: string) {
  if (res.destroyed) return;
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", "request-id": requestId });
  const ev = (type: string, data: object) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  const { usage, content } = message;
  ev("message_start", {
    message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } },
  });
  ev("ping", {});
  content.forEach((block: any, index: number) => {
    const delta = (d: object) => ev("content_block_delta", { index, delta: d });
    if (block.type === "text") {
      ev("content_block_start", { index, content_block: { ...block, text: "" } });
      for (const p of pieces(block.text)) delta({ type: "text_delta", text: p });
    } else if (block.type === "tool_use" || block.type === "server_tool_use") {
      ev("content_block_start", { index, content_block: { ...block, input: {} } });
      for (const p of pieces(JSON.stringify(block.input ?? {}))) delta({ type: "input_json_delta", partial_json: p });
    } else if (block.type === "thinking") {
      ev("content_block_start", { index, content_block: { ...block, thinking: "", signature: "" } });
      for (const p of pieces(block.thinking)) delta({ type: "thinking_delta", thinking: p });
      delta({ type: "signature_delta", signature: block.signature ?? "" });
    } else {
      ev("content_block_start", { index, content_block: block }); // other block types arrive whole
    }
    ev("content_block_stop", { index });
  });
  // The real API repeats cumulative input/cache counts here; the SDK overwrites with them.
  ev("message_delta", {
    delta: { stop_reason: message.stop_reason, stop_sequence: null, stop_details: null },
    usage: {
      input_tokens: usage.input_tokens,
      output_tokens: usage.output_tokens,
      cache_creation_input_tokens: usage.cache_creation_input_tokens,
      cache_read_input_tokens: usage.cache_read_input_tokens,
    },
  });
  ev("message_stop", {});
  res.end();
}
