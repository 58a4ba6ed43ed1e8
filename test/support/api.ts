// The HTTP API's tests' two helpers: a raw request (the headers exactly as the test says: Host,
// Origin, Authorization, Content-Type) and the check of a response against the OpenAPI document the
// server serves: the route's documented response for that status and content type, its schema
// ($refs resolved by @readme/openapi-parser) turned into a validator by zod's fromJSONSchema.
import { dereference } from "@readme/openapi-parser";
import { request } from "node:http";
import { z } from "zod";

export interface Res {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The body parsed as JSON, when it is JSON. */
  json: any;
  /** The request, for the document check. */
  method: string;
  path: string;
}

export function http(
  base: string,
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: string | Buffer; token?: string } = {},
): Promise<Res> {
  const headers = { ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}), ...(opts.headers ?? {}) };
  return new Promise((resolve, reject) => {
    const req = request(base + path, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (d: Buffer) => chunks.push(d));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let json: unknown;
        if (/^application\/(?:[\w.-]+\+)?json\b/.test(String(res.headers["content-type"] ?? "")))
          json = JSON.parse(text); // not NDJSON
        resolve({ status: res.statusCode!, headers: res.headers, text, json, method, path: path.split("?")[0]! });
      });
    });
    // a server that refuses a big body may close before reading it all: its answer still counts
    req.on("error", reject);
    req.end(opts.body);
  });
}

/** JSON in, with its content type. */
export const jsonBody = (v: unknown) => ({ body: JSON.stringify(v), headers: { "content-type": "application/json" } });

export interface ApiDocument {
  /** As served. */
  raw: any;
  /** Every $ref resolved. */
  deref: any;
}

/** The document as served; `token` for a dashboard whose reads need one (the default). */
export async function fetchDocument(base: string, token?: string): Promise<ApiDocument> {
  const res = await http(base, "GET", "/api/openapi.json", token ? { token } : {});
  if (res.status !== 200) throw new Error(`GET /api/openapi.json: ${res.status} ${res.text}`);
  return { raw: res.json, deref: await dereference(structuredClone(res.json)) };
}

/** The document's path template a concrete path matches: /api/v1/jobs/abc → /api/v1/jobs/{id}. */
export function templateOf(doc: ApiDocument, path: string): string {
  const found = Object.keys(doc.deref.paths).filter((t) =>
    new RegExp(`^${t.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}]+\}/g, "[^/]+")}$`).test(path),
  );
  // a literal segment wins over a parameter (none of the API's paths are ambiguous, but say so)
  found.sort((a, b) => (a.match(/\{/g)?.length ?? 0) - (b.match(/\{/g)?.length ?? 0));
  if (!found.length) throw new Error(`${path}: not a path of the document`);
  return found[0]!;
}

/**
 * Throws unless the response is documented: its status under the route's responses, its content
 * type under that response's content, and its body valid against that schema (NDJSON: each line).
 */
export function expectDocumented(doc: ApiDocument, res: Res): void {
  const where = `${res.method} ${res.path} → ${res.status}`;
  const op = doc.deref.paths[templateOf(doc, res.path)]?.[res.method.toLowerCase()];
  if (!op) throw new Error(`${where}: the method is not in the document`);
  const documented = op.responses?.[String(res.status)];
  if (!documented)
    throw new Error(
      `${where}: the status is not in the document (it has ${Object.keys(op.responses ?? {}).join(", ")})`,
    );
  const type = String(res.headers["content-type"] ?? "")
    .split(";")[0]!
    .trim();
  const media = documented.content?.[type];
  if (!media)
    throw new Error(
      `${where}: content type ${type} is not in the document (it has ${Object.keys(documented.content ?? {}).join(", ")})`,
    );
  const schema = z.fromJSONSchema(media.schema);
  const bodies =
    type === "application/x-ndjson"
      ? res.text
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l))
      : [res.json !== undefined ? res.json : res.text];
  for (const body of bodies) {
    const r = schema.safeParse(body);
    if (!r.success)
      throw new Error(
        `${where}: the body does not match the document's schema: ${z.prettifyError(r.error)}\n${JSON.stringify(body).slice(0, 2000)}`,
      );
  }
}

export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/** Server-sent events until the server ends the stream (the API sends `end` and closes). */
export function sse(
  base: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; type: string; messages: SseMessage[] }> {
  return new Promise((resolve, reject) => {
    const req = request(base + path, { headers: { accept: "text/event-stream", ...headers } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => {
        const messages: SseMessage[] = [];
        for (const block of text.split("\n\n")) {
          const m: SseMessage = { data: "" };
          let any = false;
          for (const line of block.split("\n")) {
            const i = line.indexOf(":");
            if (i <= 0) continue;
            const [k, v] = [line.slice(0, i), line.slice(i + 1).replace(/^ /, "")];
            if (k === "id") m.id = v;
            else if (k === "event") m.event = v;
            else if (k === "data") m.data += v;
            else continue;
            any = true;
          }
          if (any && (m.data || m.event)) messages.push(m);
        }
        resolve({ status: res.statusCode!, type: String(res.headers["content-type"] ?? ""), messages });
      });
    });
    req.on("error", reject);
    req.end();
  });
}
