// A CONNECT tunnel the egress proxy terminates: the host has a credential of the job's
// (src/net/credential.ts), so the proxy answers 200, ends TLS itself with a leaf certificate for
// exactly that name from the job's CA (src/net/job-ca.ts), and reads HTTP/1.1 requests, each sent
// on over HTTPS to the checked address with the credential's header set. What holds the secret to
// its host:
// - The client's SNI must be the CONNECT host (no SNI or another name ends the handshake), ALPN
//   offers http/1.1 only (HTTP/2 is never spoken, so no connection is reused for another name),
//   and every request's Host must be the CONNECT host (421 otherwise, nothing sent); absolute-form
//   requests, CONNECT and protocol upgrades inside the tunnel are refused.
// - Upstream, the server's certificate is checked for the host against the system's store or the
//   credential's own CA; a redirect is relayed as it is and never followed here, so the header
//   goes to no other host (the client's next CONNECT to another host is a plain tunnel).
// - What comes back has every occurrence of the credential's secrets replaced by '*' of the same
//   length (src/net/scrub.ts), in headers and body. A body with Content-Encoding gzip, deflate or
//   br is decoded here, scrubbed, and sent without Content-Encoding and Content-Length (chunked):
//   a secret inside compressed bytes cannot be found otherwise. Upstream is asked for no other
//   encoding (Accept-Encoding keeps only those), and a response in one anyway is refused (502),
//   as is one with a transfer coding other than chunked. Range and If-Range are not sent: a part
//   of a response could end inside a secret. The bytes the client gets (decoded) are charged.
// Every request is an egress record (path without query, status, bytes, the credential's name).
import http from "node:http";
import https from "node:https";
import type net from "node:net";
import { Duplex, type Readable } from "node:stream";
import tls from "node:tls";
import zlib from "node:zlib";
import { normalizeHost } from "../core/allow.js";
import { count } from "../core/count.js";
import type { EgressCredential } from "./credential.js";
import { endToEnd, HOST_OVERRIDES } from "./headers.js";
import type { LeafCert } from "./job-ca.js";
import { bounded, type EgressRecord } from "./record.js";
import { ScrubStream, scrubHeader } from "./scrub.js";
import type { TunnelSession } from "./tunnel.js";

/** A CONNECT that passed the allow-list and DNS, and whose host:port has a credential. */
export interface TerminateTarget {
  host: string;
  port: number;
  /** The checked address: the only one connected to. */
  address: string;
  credential: EgressCredential;
  leaf: LeafCert;
  t0: number;
}

/** TLSSocket wants a server to report to; the terminated tunnels' own events are all on their sockets. */
let idleServer: tls.Server | undefined;

const ENCODINGS = new Set(["gzip", "x-gzip", "deflate", "br", "identity"]);
// Request headers that ask for a part of a response: a part may end inside an echoed secret and
// the next part begin there, so no one response would hold it whole for the scrub to find. They
// are not sent; the upstream answers with the whole body (RFC 9110 14.2 lets it ignore Range).
const PARTIAL = ["range", "if-range"];
/** The most requests one terminated tunnel holds at once (clients send one at a time; few pipeline). */
const MAX_IN_FLIGHT = 8;

/**
 * Terminated tunnels a job's session starts each second. Each is a TLS handshake the worker serves
 * (about a millisecond of its CPU), where a plain tunnel costs it next to nothing: a sandbox that
 * opens and drops tunnels in a loop would keep a core busy. More wait their turn (at most the
 * connection limit, 64, are waiting: about a second); a package manager opens a few and keeps them.
 */
export const HANDSHAKES_PER_SECOND = 50;
const nextTurn = new WeakMap<TunnelSession, number>();

export function runTerminated(session: TunnelSession, client: net.Socket, head: Buffer, t: TerminateTarget): void {
  const now = performance.now();
  const at = Math.max(now, nextTurn.get(session) ?? 0);
  nextTurn.set(session, at + 1000 / HANDSHAKES_PER_SECOND);
  const go = () => void (client.destroyed || new Terminated(session, client, t).start(head));
  if (at <= now) go();
  else setTimeout(go, at - now);
}

/** One terminated tunnel: its TLS server side, its HTTP parser, and an upstream agent of its own. */
class Terminated {
  private readonly agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly authority: string;
  private readonly held = new WeakSet<net.Socket>();
  private badName: string | undefined;
  /** Requests read and not yet answered in full: a client that pipelines more ends the tunnel. */
  private inFlight = 0;
  /** The client sent its FIN: no request comes after those in flight. */
  private clientDone = false;
  private ended = false;

  constructor(
    private readonly session: TunnelSession,
    private readonly client: net.Socket,
    private readonly t: TerminateTarget,
  ) {
    this.authority = t.port === 443 ? t.host : `${t.host}:${t.port}`;
  }

  start(head: Buffer): void {
    const { limits } = this.session;
    const { client, t } = this;
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    const sock = new tls.TLSSocket(head.length ? withHead(client, head) : client, {
      isServer: true,
      server: (idleServer ??= tls.createServer({})),
      secureContext: tls.createSecureContext({ key: t.leaf.key, cert: t.leaf.cert }),
      ALPNProtocols: ["http/1.1"],
      SNICallback: (name, cb) => {
        if (normalizeHost(name) === t.host) return cb(null, undefined);
        this.badName = name;
        cb(new Error("server name refused"), undefined);
      },
    });
    let secure = false;
    const handshake = setTimeout(() => this.refuse(`no TLS handshake within ${limits.helloMs} ms`), limits.helloMs);
    this.timers.push(
      handshake,
      setTimeout(() => this.end(), limits.totalMs),
    );
    sock.on("secure", () => {
      secure = true;
      clearTimeout(handshake);
      if (normalizeHost(sock.servername || "") !== t.host)
        return this.refuse(`the TLS client names no server (no SNI); it must name ${t.host}`);
      this.http().emit("connection", sock);
    });
    sock.on("error", (err: NodeJS.ErrnoException) => {
      if (secure) return this.end();
      this.refuse(
        this.badName !== undefined
          ? `the TLS server name ${this.badName} is not the CONNECT host ${t.host}`
          : `TLS handshake failed: ${err.code ?? err.message}`,
      );
    });
    sock.on("close", () =>
      secure ? this.end() : this.refuse("the client closed the tunnel before the TLS handshake ended"),
    );
    sock.setTimeout(limits.idleMs, () => this.end());
    // The proxy's side of the CONNECT stays half open when the client sends its FIN (an HTTP
    // server's sockets allow that), so the tunnel would hold its connection slot until the idle
    // limit. A client that has finished sending ends the tunnel once its requests are answered.
    const finished = () => {
      this.clientDone = true;
      if (this.inFlight === 0) this.end();
    };
    sock.on("end", finished);
    client.on("end", finished);
    client.on("close", () => this.end());
    client.on("error", () => this.end());
  }

  /** The HTTP/1.1 parser for the decrypted stream: requests go to `request`, anything else is refused. */
  private http(): http.Server {
    const { limits } = this.session;
    const server = http.createServer({
      maxHeaderSize: limits.headerBytes,
      requestTimeout: 0,
      headersTimeout: limits.idleMs,
      keepAliveTimeout: 5_000,
    });
    server.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => this.request(req, res));
    const raw = (req: http.IncomingMessage, s: net.Socket, why: string) => {
      this.record({ method: req.method ?? "?", allowed: false, reason: why });
      s.end(`HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\npatchbay egress: ${why}\n`);
    };
    server.on("connect", (req, s: net.Socket) => raw(req, s, "CONNECT inside a terminated tunnel is refused"));
    server.on("upgrade", (req, s: net.Socket) => raw(req, s, "protocol upgrades are not proxied"));
    server.on("clientError", (err: NodeJS.ErrnoException, s: net.Socket) => {
      // Parser errors are the client's requests refused; a reset between requests is no request.
      if (!err.code?.startsWith("HPE_")) return void s.destroy();
      const big = err.code === "HPE_HEADER_OVERFLOW";
      this.record({
        method: "?",
        allowed: false,
        reason: big ? "request head too large" : `bad request (${err.code})`,
      });
      if (s.writable) s.end(`HTTP/1.1 ${big ? 431 : 400} Bad Request\r\nConnection: close\r\n\r\n`);
      else s.destroy();
    });
    return server;
  }

  private record(r: Partial<EgressRecord> & Pick<EgressRecord, "method" | "allowed">, t0 = this.t.t0): void {
    const { host, port, address, credential } = this.t;
    this.session.record({
      host,
      port,
      address,
      credential: credential.name,
      bytesUp: 0,
      bytesDown: 0,
      ...r,
      ms: Math.round(performance.now() - t0),
    });
  }

  private refuse(reason: string): void {
    if (this.ended) return;
    this.record({ method: "CONNECT", allowed: false, reason });
    this.end();
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    for (const t of this.timers) clearTimeout(t);
    this.client.destroy();
    this.agent.destroy();
  }

  /** Whether a Host header names the CONNECT host (with its port, which may be left out only for 443). */
  private hostMatches(value: string | undefined): boolean {
    const m = /^([^:]*)(?::(\d{1,5}))?$/.exec(value ?? "");
    if (!m || normalizeHost(m[1]!) !== this.t.host) return false;
    return m[2] === undefined ? this.t.port === 443 : Number(m[2]) === this.t.port;
  }

  private request(req: http.IncomingMessage, res: http.ServerResponse): void {
    const t0 = performance.now();
    const url = req.url ?? "";
    const method = req.method ?? "?";
    const refuse = (status: number, reason: string, path?: string) => {
      this.record({ method, allowed: false, reason, status, ...(path !== undefined ? { path } : {}) }, t0);
      res
        .writeHead(status, { "content-type": "text/plain", connection: "close" })
        .end(`patchbay egress: ${bounded(reason, 400, true)}\n`);
      req.resume();
    };
    // Each request read is objects, a timer and an upstream request with the credential: a client
    // that pipelines thousands in one write would have them all at once. Beyond a few the tunnel
    // ends; and a request's head is charged to the job's budget like every byte of a plain tunnel.
    if (this.ended) return void res.destroy();
    if (++this.inFlight > MAX_IN_FLIGHT) {
      this.record({
        method,
        allowed: false,
        reason: `more than ${count(MAX_IN_FLIGHT, "request")} in flight (pipelined)`,
      });
      return this.end();
    }
    res.once("close", () => {
      if (--this.inFlight === 0 && this.clientDone) this.end();
    });
    if (!this.session.charge(headBytes(req))) return refuse(429, "byte limit for the job");
    if (!url.startsWith("/")) return refuse(400, "only requests for a path (origin-form) inside a terminated tunnel");
    const path = url.replace(/[?#].*$/s, "");
    if (!this.hostMatches(req.headers.host))
      return refuse(
        421,
        `the request's Host ${JSON.stringify(req.headers.host ?? "")} is not the CONNECT host ${this.authority}`,
        path,
      );
    const rec: EgressRecord = { ...this.base(), method, path, allowed: true, bytesUp: 0, bytesDown: 0, ms: 0 };
    this.forward(req, res, rec, t0);
  }

  private base() {
    const { host, port, address, credential } = this.t;
    return { host, port, address, credential: credential.name };
  }

  /** The request sent on to the checked address over HTTPS, with the credential's header set. */
  private forward(req: http.IncomingMessage, res: http.ServerResponse, rec: EgressRecord, t0: number): void {
    const { session, t } = this;
    const cred = t.credential;
    let done = false;
    const finish = (reason?: string) => {
      if (done) return;
      done = true;
      clearTimeout(total);
      if (reason) rec.reason = reason;
      rec.ms = Math.round(performance.now() - t0);
      session.record(rec);
    };
    const total = setTimeout(() => upReq.destroy(new Error("total time limit")), session.limits.totalMs);
    const headers = endToEnd(
      req.headers,
      new Set([...HOST_OVERRIDES, ...PARTIAL, "host", "accept-encoding", cred.header]),
    );
    const accept = acceptEncoding(req.headers["accept-encoding"]);
    const upReq = https.request({
      host: t.address,
      port: t.port,
      servername: t.host,
      ...(cred.ca !== undefined ? { ca: cred.ca } : {}),
      rejectUnauthorized: true,
      checkServerIdentity: (_name, cert) => tls.checkServerIdentity(t.host, cert),
      method: req.method,
      path: req.url,
      headers: {
        ...headers,
        host: this.authority,
        ...(accept ? { "accept-encoding": accept } : {}),
        [cred.header]: cred.value,
      },
      setHost: false,
      agent: this.agent,
      maxHeaderSize: session.limits.headerBytes,
      timeout: session.limits.connectMs,
    });
    upReq.on("socket", (s) => {
      // The agent reuses its socket for the next request: it is held once, and only a new one
      // waits for its handshake (a listener per reuse piled up on the socket, and its request with it).
      if (this.held.has(s)) return upReq.setTimeout(session.limits.idleMs);
      this.held.add(s);
      session.hold(s);
      s.once("secureConnect", () => upReq.setTimeout(session.limits.idleMs));
    });
    upReq.on("timeout", () => upReq.destroy(new Error("upstream timed out")));
    upReq.on("error", (e: NodeJS.ErrnoException) => {
      const why = `upstream error: ${e.code ?? e.message}`;
      finish(why);
      if (res.headersSent) return void res.destroy();
      res.writeHead(502, { "content-type": "text/plain", connection: "close" }).end(`patchbay egress: ${why}\n`);
    });
    req.on("data", (c: Buffer) => {
      if (!session.charge(c.length)) return upReq.destroy(new Error("byte limit for the job"));
      rec.bytesUp += c.length;
    });
    req.pipe(upReq);
    upReq.on("response", (up) => this.relay(up, req, res, rec, finish));
    res.on("close", () => {
      if (!done) {
        upReq.destroy();
        finish("client closed");
      }
    });
  }

  /** The upstream's answer to the client, scrubbed of the credential's secrets; bytes charged to the job. */
  private relay(
    up: http.IncomingMessage,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    rec: EgressRecord,
    finish: (reason?: string) => void,
  ): void {
    const secrets = this.t.credential.secrets;
    const status = up.statusCode ?? 502;
    rec.status = status;
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(endToEnd(up.headers)))
      headers[scrubHeader(k, secrets)] = Array.isArray(v)
        ? v.map((x) => scrubHeader(x, secrets))
        : scrubHeader(String(v), secrets);
    const hasBody = req.method !== "HEAD" && status !== 204 && status !== 304 && status >= 200;
    const encoding = String(up.headers["content-encoding"] ?? "identity")
      .trim()
      .toLowerCase();
    const framing = String(up.headers["transfer-encoding"] ?? "chunked")
      .trim()
      .toLowerCase();
    // A transfer coding other than chunked (gzip, chunked) reaches here still coded: Node undoes
    // chunked only. Its bytes cannot be scrubbed, so such a response is refused like an unknown
    // content coding. Both names are the upstream's text: scrubbed before they are recorded.
    const unreadable = framing !== "chunked" ? "transfer-encoding" : undefined;
    const decoder = hasBody && encoding !== "identity" ? decoderFor(encoding) : undefined;
    const what = unreadable ?? (hasBody && encoding !== "identity" && !decoder ? "content-encoding" : undefined);
    if (what) {
      up.destroy();
      rec.allowed = false;
      // Scrubbed as the upstream sent it: a lower-cased secret would no longer match.
      const named = String(up.headers[what] ?? "").trim();
      finish(`${what} ${bounded(scrubHeader(named, secrets), 40)} cannot be scrubbed`);
      return void res
        .writeHead(502, { "content-type": "text/plain", connection: "close" })
        .end(`patchbay egress: the upstream's ${what} cannot be scrubbed\n`);
    }
    let body: Readable = up;
    if (decoder) {
      delete headers["content-encoding"];
      delete headers["content-length"];
      body = up.pipe(decoder);
      decoder.on("error", (e: NodeJS.ErrnoException) => {
        finish(`upstream body could not be decoded: ${e.code ?? e.message}`);
        res.destroy();
      });
    }
    // What the client gets is charged (the decoded bytes when decoding: a small compressed body
    // may decode to any size), so the job's byte budget bounds what a tunnel can deliver.
    body.on("data", (c: Buffer) => {
      if (!this.session.charge(c.length)) {
        finish("byte limit for the job");
        up.destroy();
        return res.destroy();
      }
      rec.bytesDown += c.length;
    });
    up.on("error", (e: NodeJS.ErrnoException) => {
      finish(`upstream error: ${e.code ?? e.message}`);
      res.destroy();
    });
    res.writeHead(status, headers);
    body.pipe(new ScrubStream(secrets)).pipe(res);
    res.on("finish", () => finish());
  }
}

/** The size of a request's head as it came (request line, header lines, the blank line). */
function headBytes(req: http.IncomingMessage): number {
  let n = (req.method ?? "").length + (req.url ?? "").length + 13;
  for (const f of req.rawHeaders) n += Buffer.byteLength(f, "latin1") + 2;
  return n;
}

/** The client socket with the bytes it sent behind its CONNECT (read with it) put back in front. */
function withHead(socket: net.Socket, head: Buffer): Duplex {
  const d = new Duplex({
    read: () => void socket.resume(),
    write: (chunk: Buffer, _enc, cb) => void socket.write(chunk, cb),
    final: (cb) => void socket.end(cb),
    destroy: (err, cb) => {
      socket.destroy();
      cb(err);
    },
  });
  d.push(head);
  socket.on("data", (c: Buffer) => void (d.push(c) || socket.pause()));
  socket.on("end", () => d.push(null));
  return d;
}

/** The client's Accept-Encoding with only the encodings this proxy can decode to scrub (undefined: none). */
export function acceptEncoding(value: string | undefined): string | undefined {
  const kept = (value ?? "")
    .split(",")
    .map((x) => x.trim())
    .filter((x) => ENCODINGS.has(x.split(";")[0]!.trim().toLowerCase()));
  return kept.length ? kept.join(", ") : undefined;
}

function decoderFor(encoding: string): zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress | undefined {
  if (encoding === "gzip" || encoding === "x-gzip") return zlib.createGunzip();
  if (encoding === "deflate") return zlib.createInflate();
  if (encoding === "br") return zlib.createBrotliDecompress();
  return undefined;
}
