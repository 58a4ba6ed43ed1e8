// Local stand-ins of Claude on Amazon Bedrock and Google Vertex AI, on 127.0.0.1. Each checks what
// the real endpoint checks where that is checkable offline (the URL shape and model path, a
// well-formed SigV4 Authorization for Bedrock, a bearer token it issued for Vertex, the request
// body), records what it saw, and answers with test/support/fake-anthropic.ts's scripted replies:
// the request goes on to a fake-anthropic upstream as a Messages API request, and its answer comes
// back in the platform's framing (Bedrock's streams in AWS event-stream binary frames).
import { createHash, createHmac } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { crc32 } from "node:zlib";
import { startFakeAnthropic, type FakeAnthropic, type Policy, type Reply } from "./fake-anthropic.js";

export interface SeenRequest {
  path: string;
  /** The model id from the URL (decoded). */
  model: string;
  stream: boolean;
  body: any;
  headers: Record<string, string | string[] | undefined>;
  /** What the real endpoint would refuse; empty for a valid request. */
  problems: string[];
}

export interface PlatformFake {
  url: string;
  seen: SeenRequest[];
  upstream: FakeAnthropic;
  close(): Promise<void>;
}

const VERSION = /^(?:bedrock-|vertex-)?\d{4}-\d{2}-\d{2}$/;

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function bodyProblems(body: any, problems: string[]): void {
  if (typeof body !== "object" || body === null) return void problems.push("the body is not a JSON object");
  if (typeof body.anthropic_version !== "string" || !VERSION.test(body.anthropic_version))
    problems.push(`anthropic_version missing or malformed: ${JSON.stringify(body.anthropic_version)}`);
  if ("model" in body) problems.push("the body names a model (the platform takes it from the URL)");
  if ("stream" in body && typeof body.stream !== "boolean") problems.push("stream is not a boolean");
  if (!Array.isArray(body.messages) || typeof body.max_tokens !== "number")
    problems.push("messages or max_tokens missing");
}

/** The Messages API request the upstream fake answers. */
async function upstreamCall(upstream: FakeAnthropic, body: any, model: string, stream: boolean): Promise<Response> {
  const { anthropic_version: _v, ...rest } = body ?? {};
  return fetch(`${upstream.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": "upstream" },
    body: JSON.stringify({ ...rest, model, stream }),
  });
}

async function relay(res: ServerResponse, up: Response): Promise<void> {
  res.writeHead(up.status, { "content-type": up.headers.get("content-type") ?? "application/json" });
  res.end(Buffer.from(await up.arrayBuffer()));
}

function serve(handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>) {
  return createServer((req, res) => {
    handle(req, res).catch((e) => {
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ message: String(e) }));
      } else res.destroy();
    });
  });
}

async function listen(server: ReturnType<typeof createServer>): Promise<string> {
  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(0, "127.0.0.1", ok);
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const closer = (server: ReturnType<typeof createServer>, upstream: FakeAnthropic) => async () => {
  await new Promise<void>((ok) => {
    server.close(() => ok());
    server.closeAllConnections();
  });
  await upstream.close();
};

// ------------------------------------------------------------------------------------ Bedrock

/** One AWS event-stream message: prelude (lengths, CRC), string headers, payload, CRC of all before. */
export function eventStreamFrame(headers: Record<string, string>, payload: Buffer): Buffer {
  const hs = Buffer.concat(
    Object.entries(headers).map(([k, v]) => {
      const name = Buffer.from(k),
        value = Buffer.from(v);
      const h = Buffer.alloc(1 + name.length + 1 + 2 + value.length);
      h.writeUInt8(name.length, 0);
      name.copy(h, 1);
      h.writeUInt8(7, 1 + name.length); // 7: string
      h.writeUInt16BE(value.length, 2 + name.length);
      value.copy(h, 4 + name.length);
      return h;
    }),
  );
  const total = 12 + hs.length + payload.length + 4;
  const prelude = Buffer.alloc(12);
  prelude.writeUInt32BE(total, 0);
  prelude.writeUInt32BE(hs.length, 4);
  prelude.writeUInt32BE(crc32(prelude.subarray(0, 8)), 8);
  const body = Buffer.concat([prelude, hs, payload]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body), 0);
  return Buffer.concat([body, crc]);
}

const SIGV4 =
  /^AWS4-HMAC-SHA256 Credential=([A-Z0-9]{16,128})\/(\d{8})\/([a-z0-9-]+)\/bedrock\/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$/;

const sha256 = (s: string | Buffer) => createHash("sha256").update(s).digest("hex");
const hmac = (key: string | Buffer, s: string) => createHmac("sha256", key).update(s).digest();
// RFC 3986 escaping of one path segment, as SigV4 wants it (encodeURIComponent leaves !'()* alone).
const escapeSegment = (s: string) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** The signature SigV4 gives this request with this secret (the canonical request AWS recomputes). */
export function sigv4Signature(
  req: { method: string; path: string; headers: IncomingMessage["headers"]; body: string },
  signed: string[],
  secret: string,
  scope: { date: string; region: string; service: string },
): string {
  const canonicalUri = req.path
    .split("/")
    .map((seg) => escapeSegment(decodeURIComponent(seg)))
    .join("/");
  const header = (name: string) =>
    String(req.headers[name] ?? "")
      .trim()
      .replace(/\s+/g, " ");
  const payload = String(req.headers["x-amz-content-sha256"] ?? sha256(req.body));
  const canonical = [
    req.method,
    canonicalUri,
    "",
    ...signed.map((n) => `${n}:${header(n)}`),
    "",
    signed.join(";"),
    payload,
  ].join("\n");
  const credentialScope = `${scope.date}/${scope.region}/${scope.service}/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", header("x-amz-date"), credentialScope, sha256(canonical)].join("\n");
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, scope.date), scope.region), scope.service), "aws4_request");
  return createHmac("sha256", key).update(toSign).digest("hex");
}

function sigv4Problems(
  h: IncomingMessage["headers"],
  expect: BedrockExpect,
  req: { method: string; path: string; body: string },
): string[] {
  const problems: string[] = [];
  const auth = String(h.authorization ?? "");
  const m = SIGV4.exec(auth);
  const date = String(h["x-amz-date"] ?? "");
  if (!m) return [`Authorization is not a well-formed SigV4 header: ${auth.slice(0, 60)}`];
  if (m[1] !== expect.accessKeyId) problems.push(`the credential names access key ${m[1]}`);
  if (m[3] !== expect.region) problems.push(`the credential's region is ${m[3]}, not ${expect.region}`);
  if (!/^\d{8}T\d{6}Z$/.test(date) || date.slice(0, 8) !== m[2])
    problems.push(`x-amz-date ${date} does not match the credential's date ${m[2]}`);
  const signed = m[4]!.split(";");
  for (const need of ["host", "x-amz-date", ...(expect.sessionToken ? ["x-amz-security-token"] : [])])
    if (!signed.includes(need)) problems.push(`SignedHeaders lacks ${need}`);
  if ([...signed].sort().join(";") !== m[4]) problems.push("SignedHeaders is not sorted");
  for (const s of signed) if (h[s] === undefined) problems.push(`signed header ${s} was not sent`);
  if (expect.sessionToken && h["x-amz-security-token"] !== expect.sessionToken)
    problems.push("x-amz-security-token is not the session token");
  if (
    !problems.length &&
    sigv4Signature({ ...req, headers: h }, signed, expect.secretAccessKey, {
      date: m[2]!,
      region: m[3]!,
      service: "bedrock",
    }) !== m[5]
  )
    problems.push("the signature does not match the request (SignatureDoesNotMatch)");
  return problems;
}

export interface BedrockExpect {
  accessKeyId: string;
  /** The stand-in recomputes each signature with it, as AWS does. */
  secretAccessKey: string;
  region: string;
  sessionToken?: string;
}

/** Bedrock Runtime's InvokeModel and InvokeModelWithResponseStream. */
export async function startBedrockFake(script: Reply[] | Policy, expect: BedrockExpect): Promise<PlatformFake> {
  const upstream = await startFakeAnthropic(script);
  const seen: SeenRequest[] = [];
  const server = serve(async (req, res) => {
    const raw = await readBody(req);
    const path = (req.url ?? "").split("?")[0]!;
    const m = /^\/model\/([^/]+)\/(invoke|invoke-with-response-stream)$/.exec(path);
    let body: any;
    try {
      body = JSON.parse(raw);
    } catch {
      body = raw;
    }
    const problems = req.method === "POST" && m ? [] : [`no route ${req.method} ${path}`];
    const model = m ? decodeURIComponent(m[1]!) : "";
    const stream = m?.[2] === "invoke-with-response-stream";
    if (m && !/^(?:(?:us|eu|apac|global)\.)?anthropic\.[a-z0-9.:-]+$/.test(model))
      problems.push(`${model} is not a Bedrock model id`);
    problems.push(...sigv4Problems(req.headers, expect, { method: req.method ?? "", path, body: raw }));
    bodyProblems(body, problems);
    if (body && typeof body === "object" && "stream" in body)
      problems.push("stream in the body (Bedrock takes it from the URL)");
    seen.push({ path, model, stream, body, headers: { ...req.headers }, problems });
    if (problems.length) {
      res.writeHead(m ? 403 : 404, { "content-type": "application/json", "x-amzn-errortype": "AccessDeniedException" });
      return void res.end(JSON.stringify({ message: problems.join("; ") }));
    }
    const up = await upstreamCall(upstream, body, model, stream);
    if (!stream || !up.ok) return relay(res, up);
    res.writeHead(200, {
      "content-type": "application/vnd.amazon.eventstream",
      "x-amzn-bedrock-content-type": "application/json",
    });
    for (const block of (await up.text()).split("\n\n")) {
      const data = block
        .split("\n")
        .find((l) => l.startsWith("data: "))
        ?.slice(6);
      if (!data) continue;
      const payload = Buffer.from(JSON.stringify({ bytes: Buffer.from(data).toString("base64") }));
      res.write(
        eventStreamFrame(
          { ":event-type": "chunk", ":content-type": "application/json", ":message-type": "event" },
          payload,
        ),
      );
    }
    res.end();
  });
  const url = await listen(server);
  return { url, seen, upstream, close: closer(server, upstream) };
}

// ------------------------------------------------------------------------------------- Vertex

export interface VertexFake extends PlatformFake {
  /** An `external_account_authorized_user` ADC file's JSON whose token_url is this stand-in's. */
  adc: Record<string, string>;
  tokensIssued: number;
}

/** Vertex AI's rawPredict / streamRawPredict for Anthropic's models, and an OAuth token endpoint for ADC. */
export async function startVertexFake(
  script: Reply[] | Policy,
  expect: { project: string; region: string },
): Promise<VertexFake> {
  const upstream = await startFakeAnthropic(script);
  const seen: SeenRequest[] = [];
  const client = { id: "patchbay-test-client", secret: "client-secret-1", refresh: "refresh-token-1" };
  const tokens = new Set<string>();
  const server = serve(async (req, res) => {
    const raw = await readBody(req);
    const path = (req.url ?? "").split("?")[0]!;
    if (req.method === "POST" && path === "/token") {
      const form = new URLSearchParams(raw);
      const basic = `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString("base64")}`;
      if (
        form.get("grant_type") !== "refresh_token" ||
        form.get("refresh_token") !== client.refresh ||
        req.headers.authorization !== basic
      ) {
        res.writeHead(400, { "content-type": "application/json" });
        return void res.end(JSON.stringify({ error: "invalid_grant" }));
      }
      const token = `ya29.fake-${tokens.size + 1}`;
      tokens.add(token);
      res.writeHead(200, { "content-type": "application/json" });
      return void res.end(JSON.stringify({ access_token: token, expires_in: 3600, token_type: "Bearer" }));
    }
    const m =
      /^\/v1\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/anthropic\/models\/([^/:]+):(rawPredict|streamRawPredict)$/.exec(
        path,
      );
    let body: any;
    try {
      body = JSON.parse(raw);
    } catch {
      body = raw;
    }
    const problems = req.method === "POST" && m ? [] : [`no route ${req.method} ${path}`];
    const model = m ? decodeURIComponent(m[3]!) : "";
    const stream = m?.[4] === "streamRawPredict";
    if (m && (m[1] !== expect.project || m[2] !== expect.region))
      problems.push(`project/location ${m[1]}/${m[2]}, not ${expect.project}/${expect.region}`);
    if (m && !/^claude-[a-z0-9-]+(?:@\d{8})?$/.test(model)) problems.push(`${model} is not a Vertex model id`);
    const bearer = /^Bearer (\S+)$/.exec(String(req.headers.authorization ?? ""))?.[1];
    if (!bearer || !tokens.has(bearer)) problems.push("Authorization is not a bearer token this stand-in issued");
    bodyProblems(body, problems);
    if (body && typeof body === "object" && body.stream !== stream)
      problems.push(`stream ${body.stream} in the body but ${m?.[4]} in the URL`);
    seen.push({ path, model, stream, body, headers: { ...req.headers }, problems });
    if (problems.length) {
      res.writeHead(m ? 401 : 404, { "content-type": "application/json" });
      return void res.end(
        JSON.stringify({ error: { code: m ? 401 : 404, message: problems.join("; "), status: "UNAUTHENTICATED" } }),
      );
    }
    await relay(res, await upstreamCall(upstream, body, model, stream)); // Vertex streams SSE, as the first-party API does
  });
  const url = await listen(server);
  const adc = {
    type: "external_account_authorized_user",
    audience: "//iam.googleapis.com/locations/global/workforcePools/p/providers/q",
    client_id: client.id,
    client_secret: client.secret,
    refresh_token: client.refresh,
    token_url: `${url}/token`,
    token_info_url: `${url}/tokeninfo`,
  };
  const fake: VertexFake = { url, seen, upstream, adc, tokensIssued: 0, close: closer(server, upstream) };
  Object.defineProperty(fake, "tokensIssued", { get: () => tokens.size });
  return fake;
}
