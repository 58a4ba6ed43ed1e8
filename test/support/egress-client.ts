// Clients of an egress session's Unix socket, as the in-container bridge speaks to it: plain-HTTP
// absolute-form requests, CONNECT, and TLS (node:tls) through an open tunnel.
import http from "node:http";
import type net from "node:net";
import { Duplex } from "node:stream";
import tls from "node:tls";
import type { EgressSession } from "../../src/net/proxy.js";

/** A plain-HTTP absolute-form request through the socket. */
export function get(
  s: EgressSession,
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; location?: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath: s.socketPath, path: url, headers: { host: new URL(url).host, ...headers } },
      (res) => {
        let body = "";
        res.on("data", (c) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode!, body, location: res.headers.location }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

export type Tunnel = { ok: true; socket: net.Socket } | { ok: false; status: number; body: string };

/** CONNECT host:port; resolves with the tunnel socket or the refusal's status line and body. */
export function connect(s: EgressSession, target: string): Promise<Tunnel> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: s.socketPath, method: "CONNECT", path: target });
    req.on("connect", (res, socket, head) => {
      if (res.statusCode === 200) return resolve({ ok: true, socket });
      let body = head.toString();
      socket.on("data", (c: Buffer) => (body += c.toString()));
      socket.on("close", () => resolve({ ok: false, status: res.statusCode!, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Everything the peer sends until it closes. */
export function readAll(socket: net.Socket | tls.TLSSocket): Promise<string> {
  return new Promise((resolve) => {
    let out = "";
    socket.on("data", (c) => (out += c));
    socket.on("close", () => resolve(out));
    socket.on("error", () => resolve(out));
  });
}

export interface TlsOutcome {
  /** The HTTP response, when the TLS connection was made. */
  response?: string;
  /** Why it was not (the refusal's body for a CONNECT refused with a status). */
  error?: string;
}

/**
 * CONNECT `target`, then a real TLS client (node:tls) over the tunnel with `servername` ("" sends
 * no SNI) and one HTTP/1.1 request with `hostHeader`. `wrap` may stand between the TLS client and
 * the tunnel (to fragment what it sends).
 */
export async function tlsRequest(
  s: EgressSession,
  target: string,
  servername: string,
  opts: {
    ca: string;
    hostHeader?: string;
    path?: string;
    tls?: tls.ConnectionOptions;
    wrap?: (sock: net.Socket) => Duplex;
  },
): Promise<TlsOutcome> {
  const t = await connect(s, target);
  if (!t.ok) return { error: `${t.status} ${t.body}` };
  return new Promise((resolve) => {
    const sock = tls.connect({
      socket: opts.wrap ? opts.wrap(t.socket) : t.socket,
      servername,
      ca: opts.ca,
      ...opts.tls,
    });
    let out = "";
    let secure = false;
    sock.on("secureConnect", () => {
      secure = true;
      sock.write(
        `GET ${opts.path ?? "/"} HTTP/1.1\r\nHost: ${opts.hostHeader ?? servername}\r\nConnection: close\r\n\r\n`,
      );
    });
    sock.on("data", (c) => (out += c));
    sock.on("error", (e) => resolve(secure ? { response: out, error: e.message } : { error: e.message }));
    sock.on("close", () => resolve(secure ? { response: out } : { error: "closed before the TLS handshake ended" }));
  });
}

/**
 * Stands between a TLS client and a tunnel: the client's first write (its ClientHello, one record)
 * goes out re-fragmented into records of `size` bytes, each written in two pieces on separate
 * turns of the event loop; the rest passes unchanged.
 */
export function fragmenting(sock: net.Socket, size: number): Duplex {
  let first = true;
  const turn = () => new Promise((r) => setImmediate(r));
  const d = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, cb) {
      if (!first) return void sock.write(chunk, cb);
      first = false;
      const hs = chunk.subarray(5, 5 + chunk.readUInt16BE(3));
      void (async () => {
        for (let i = 0; i < hs.length; i += size) {
          const f = hs.subarray(i, i + size);
          const rec = Buffer.concat([Buffer.from([0x16, 3, 1, f.length >> 8, f.length & 255]), f]);
          sock.write(rec.subarray(0, 3));
          await turn();
          sock.write(rec.subarray(3));
          await turn();
        }
        if (chunk.length > 5 + hs.length) sock.write(chunk.subarray(5 + hs.length));
        cb();
      })();
    },
    final(cb) {
      sock.end();
      cb();
    },
    destroy(err, cb) {
      sock.destroy();
      cb(err);
    },
  });
  sock.on("data", (c) => d.push(c));
  sock.on("end", () => d.push(null));
  sock.on("close", () => d.destroy());
  return d;
}

/** What node's TLS client sends first (its ClientHello), captured in memory. */
export function captureHello(opts: tls.ConnectionOptions): Promise<Buffer> {
  return new Promise((resolve) => {
    const sink = new Duplex({
      read() {},
      write(chunk: Buffer, _enc, cb) {
        resolve(Buffer.from(chunk));
        cb();
        setImmediate(() => t.destroy()); // t is set by then: tls.connect below returns first
      },
    });
    const t = tls.connect({ socket: sink, ...opts });
    t.on("error", () => {});
  });
}

export async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 20));
}
