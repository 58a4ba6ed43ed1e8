// The worker's egress proxy for the setup phase. One session per job listens on a Unix socket in
// a per-job host directory (bind-mounted into the sandbox) and forwards to the hosts on the job's
// allow-list: CONNECT tunnels (TLS only, whose ClientHello must name the CONNECT host: see
// tunnel.ts) and plain-HTTP absolute-form requests (sent with the URL's Host; their redirects are
// checked too). Names are resolved here; an address that is not public is refused, and the
// connection goes to exactly the address that was checked (no second lookup: DNS rebinding gains
// nothing). Everything is bounded: connections, bytes, header size, idle and total time, and every
// field of the records.
import { count } from "../core/count.js";
import { lookup } from "node:dns/promises";
import { mkdtempSync, rmSync } from "node:fs";
import { chmod } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  addressClass,
  cidrMatcher,
  isIpLiteral,
  normalizeHost,
  refusal,
  type AllowRule,
  type Via,
} from "../core/allow.js";
import type { EgressCredential } from "./credential.js";
import { createJobCa, JobCaError, writeCaFiles, type JobCa } from "./job-ca.js";
import { ensurePrivateDir } from "./private-dir.js";
import {
  bounded,
  boundRecord,
  DEFAULT_EGRESS_LIMITS,
  RECORD_BOUNDS,
  type EgressLimits,
  type EgressRecord,
} from "./record.js";
import { endToEnd, HOST_OVERRIDES } from "./headers.js";
import { runTerminated } from "./terminate.js";
import { runTunnel } from "./tunnel.js";
import { withTimeout } from "../core/timeout.js";

export { DEFAULT_EGRESS_LIMITS, type EgressLimits, type EgressRecord } from "./record.js";

export interface EgressStats {
  allowed: number;
  refused: number;
  bytesUp: number;
  bytesDown: number;
}

export interface EgressProxyOptions {
  limits?: Partial<EgressLimits>;
  /**
   * Where per-job directories are made (must be visible to the Docker engine at the same path).
   * It must be the worker's own (ensurePrivateDir): made with mode 0700, or checked.
   */
  baseDir?: string;
  /**
   * Test-only: resolve names with this instead of DNS, and treat these private CIDR ranges as
   * public. Only code can set them (the worker never does); a JobSpec has no way to.
   */
  resolve?: (host: string) => Promise<string[]>;
  allowPrivate?: string[];
}

type Verdict = { address: string; host: string } | { reason: string };

export class EgressProxy {
  readonly limits: EgressLimits;
  private readonly exempt: (ip: string) => boolean;

  constructor(private readonly opts: EgressProxyOptions = {}) {
    this.limits = { ...DEFAULT_EGRESS_LIMITS, ...opts.limits };
    this.exempt = cidrMatcher(opts.allowPrivate ?? []);
  }

  /**
   * A job's session: its directory exists at once (to be mounted); `listen()` opens the socket,
   * and with `credentials` first makes the job's CA and writes `ca.pem` and `ca-bundle.pem` there.
   * A CONNECT to a credential's host:port is then terminated (src/net/terminate.ts).
   */
  session(
    rules: readonly AllowRule[],
    onRecord: (r: EgressRecord) => void = () => {},
    credentials: readonly EgressCredential[] = [],
  ): EgressSession {
    const baseDir = this.opts.baseDir ?? join(tmpdir(), "patchbay-egress");
    return new EgressSession(this, rules, onRecord, baseDir, credentials);
  }

  /** The allow-list (name and port, for this way of reaching it), then DNS, then the address class. */
  async check(rules: readonly AllowRule[], rawHost: string, port: number, via: Via): Promise<Verdict> {
    if (isIpLiteral(rawHost)) return { reason: "IP literals are not allowed" };
    const host = normalizeHost(rawHost);
    if (!host) return { reason: "not a valid host name" };
    if (!Number.isInteger(port) || port < 1 || port > 65535) return { reason: `bad port ${port}` };
    const refused = refusal(rules, host, port, via);
    if (refused) return { reason: refused };
    let addresses: string[];
    try {
      addresses = await withTimeout(
        this.opts.resolve ? this.opts.resolve(host) : lookup(host, { all: true }).then((a) => a.map((x) => x.address)),
        this.limits.dnsMs,
        "DNS lookup timed out",
      );
    } catch (err) {
      return { reason: `DNS lookup failed: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
    }
    const ok = addresses.find((a) => addressClass(a) === undefined || this.exempt(a));
    if (ok) return { address: ok, host };
    const first = addresses[0];
    return {
      reason: first ? `resolves to a ${addressClass(first)} address (${first})` : "DNS lookup found no address",
    };
  }
}

export class EgressSession {
  readonly dir: string;
  readonly socketPath: string;
  readonly stats: EgressStats = { allowed: 0, refused: 0, bytesUp: 0, bytesDown: 0 };
  /** Distinct "host:port (reason)" of refused connections, for the setup failure message. */
  readonly refusals = new Set<string>();
  private server?: http.Server;
  private readonly sockets = new Set<net.Socket>();
  private closed = false;
  private used = 0;
  /** Client-side connections open now (the limit counts these; `sockets` holds upstreams too). */
  private clients = 0;
  /** The job's CA, made by `listen()` when the session has credentials. */
  private ca?: JobCa;
  /** The job CA's certificate, a file name in `dir` (the sandbox's /patchbay-egress/); none without credentials. */
  readonly caPath: string | undefined;
  /** The system's roots and the job CA's certificate, a file name in `dir`; none without credentials. */
  readonly caBundlePath: string | undefined;

  constructor(
    private readonly proxy: EgressProxy,
    private readonly rules: readonly AllowRule[],
    private readonly onRecord: (r: EgressRecord) => void,
    baseDir: string,
    private readonly credentials: readonly EgressCredential[] = [],
  ) {
    const seen = new Set<string>();
    for (const c of credentials) {
      const key = `${c.host}:${c.port}`;
      if (seen.has(key)) throw new JobCaError(`two credentials for ${key}: a host:port can have one only`);
      seen.add(key);
    }
    // The engine (root) needs no permission on the parent to mount the job's directory by path.
    ensurePrivateDir(baseDir);
    this.dir = mkdtempSync(join(baseDir, "job-"));
    this.socketPath = join(this.dir, "proxy.sock");
    this.caPath = credentials.length ? "ca.pem" : undefined;
    this.caBundlePath = credentials.length ? "ca-bundle.pem" : undefined;
  }

  /** Sockets open now, client and upstream sides. */
  get openSockets(): number {
    return this.sockets.size;
  }

  get limits(): EgressLimits {
    return this.proxy.limits;
  }

  /** Opens the socket (mode 0600: only root in the sandbox, i.e. patchbay's bridge, can connect). */
  async listen(): Promise<void> {
    if (this.credentials.length) {
      this.ca = await createJobCa(this.credentials.map((c) => c.host));
      await writeCaFiles(this.dir, this.ca.caPem);
    }
    const server = http.createServer({
      maxHeaderSize: this.limits.headerBytes,
      requestTimeout: 0,
      headersTimeout: this.limits.idleMs,
      keepAliveTimeout: 5_000,
    });
    server.on("connection", (s: net.Socket) => this.track(s));
    server.on("connect", (req: http.IncomingMessage, s: net.Socket, head: Buffer) => void this.tunnel(req, s, head));
    server.on("request", (req, res) => void this.forward(req, res));
    server.on("upgrade", (req: http.IncomingMessage, s: net.Socket) =>
      this.refuseRaw(s, req.method ?? "?", req.url ?? "", "protocol upgrades are not proxied"),
    );
    server.on("clientError", (err: NodeJS.ErrnoException, s: net.Socket) => {
      const reason =
        err.code === "HPE_HEADER_OVERFLOW" ? "request head too large" : `bad request (${err.code ?? err.message})`;
      this.record({ host: "", port: 0, method: "?", allowed: false, reason, bytesUp: 0, bytesDown: 0, ms: 0 });
      if (s.writable)
        s.end(`HTTP/1.1 ${err.code === "HPE_HEADER_OVERFLOW" ? 431 : 400} ${reason}\r\nConnection: close\r\n\r\n`);
      else s.destroy();
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.socketPath, () => resolve());
    });
    await chmod(this.socketPath, 0o600);
  }

  /** Closes the listener and every connection, and removes the socket and the directory. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.sockets) s.destroy();
    if (this.server) await new Promise<void>((r) => this.server!.close(() => r()));
    rmSync(this.dir, { recursive: true, force: true });
  }

  private track(s: net.Socket): void {
    if (this.clients >= this.limits.maxConnections || this.closed) {
      this.record({
        host: "",
        port: 0,
        method: "?",
        allowed: false,
        reason: `more than ${count(this.limits.maxConnections, "connection")} at once`,
        bytesUp: 0,
        bytesDown: 0,
        ms: 0,
      });
      s.destroy();
      return;
    }
    this.hold(s);
    this.clients++;
    s.once("close", () => this.clients--);
  }

  hold(s: net.Socket): void {
    this.sockets.add(s);
    s.once("close", () => this.sockets.delete(s));
  }

  /** Records one connection or request, every field bounded here (the one place records are emitted). */
  record(raw: EgressRecord): void {
    const r = boundRecord(raw);
    if (r.allowed) this.stats.allowed++;
    else {
      this.stats.refused++;
      if (r.host && this.refusals.size < 20) this.refusals.add(`${r.host}:${r.port} (${r.reason})`);
    }
    this.stats.bytesUp += r.bytesUp;
    this.stats.bytesDown += r.bytesDown;
    this.onRecord(r);
  }

  /** Counts bytes against the job's budget as they flow; false once it is spent. */
  charge(n: number): boolean {
    if (this.used + n > this.limits.maxBytes) return false;
    this.used += n;
    return true;
  }

  private refuseRaw(s: net.Socket, method: string, host: string, reason: string, port = 0): void {
    this.record({ host, port, method, allowed: false, reason, bytesUp: 0, bytesDown: 0, ms: 0 });
    s.end(
      `HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\npatchbay egress: ${refusalText(host, port, reason)}\n`,
    );
  }

  private async tunnel(req: http.IncomingMessage, client: net.Socket, head: Buffer): Promise<void> {
    const t0 = performance.now();
    const m = /^\[?([^\]]*?)\]?:(\d{1,5})$/.exec(req.url ?? "");
    if (!m) return this.refuseRaw(client, "CONNECT", req.url ?? "", "CONNECT needs host:port");
    const [host, port] = [m[1]!, Number(m[2])];
    const verdict = await this.proxy.check(this.rules, host, port, "connect");
    if ("reason" in verdict) return this.refuseRaw(client, "CONNECT", host, verdict.reason, port);
    if (this.closed) return void client.destroy();
    const credential = this.credentials.find((c) => c.host === verdict.host && c.port === port);
    if (credential && this.ca) {
      const leaf = await this.ca.leaf(verdict.host).catch((e: Error) => e);
      if (leaf instanceof Error)
        return this.refuseRaw(client, "CONNECT", host, `no certificate: ${leaf.message}`, port);
      if (this.closed) return void client.destroy();
      return runTerminated(this, client, head, {
        host: verdict.host,
        port,
        address: verdict.address,
        credential,
        leaf,
        t0,
      });
    }
    runTunnel(this, client, head, verdict.host, port, verdict.address, t0);
  }

  private refuseHttp(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    t0: number,
    r: { host: string; port: number; reason: string; status: number },
  ): void {
    this.record({
      host: r.host,
      port: r.port,
      method: req.method ?? "?",
      allowed: false,
      reason: r.reason,
      bytesUp: 0,
      bytesDown: 0,
      ms: Math.round(performance.now() - t0),
    });
    res
      .writeHead(r.status, { "content-type": "text/plain", connection: "close" })
      .end(`patchbay egress: ${refusalText(r.host, r.port, r.reason)}\n`);
    req.resume();
  }

  /** The upstream's answer to the client: a redirect off the allow-list refused, bytes charged to the job. */
  private relay(
    up: http.IncomingMessage,
    res: http.ServerResponse,
    url: URL,
    rec: EgressRecord,
    finish: (reason?: string) => void,
  ): void {
    const location = up.statusCode && up.statusCode >= 300 && up.statusCode < 400 ? up.headers.location : undefined;
    const offList = location === undefined ? undefined : this.redirectOffList(location, url);
    if (offList) {
      up.destroy();
      rec.allowed = false;
      rec.status = up.statusCode;
      finish(`redirect to ${offList.record}: not on the allow-list`);
      res
        .writeHead(403, { "content-type": "text/plain", connection: "close" })
        .end(`patchbay egress: redirect from ${url.hostname} to ${offList.shown} refused: not on the allow-list\n`);
      return;
    }
    rec.status = up.statusCode;
    res.writeHead(up.statusCode ?? 502, { ...endToEnd(up.headers), connection: "close" });
    up.on("data", (c: Buffer) => {
      if (!this.charge(c.length)) {
        finish("byte limit for the job");
        up.destroy();
        return res.destroy();
      }
      rec.bytesDown += c.length;
    });
    up.pipe(res);
    up.on("end", () => finish());
    up.on("error", (e: NodeJS.ErrnoException) => finish(`upstream error: ${e.code ?? e.message}`));
  }

  /** A redirect's target when the allow-list does not name it (or it is no URL, or an IP literal): how to record and show it. */
  private redirectOffList(location: string, base: URL): { record: string; shown: string } | undefined {
    let target: URL | undefined;
    try {
      target = new URL(location, base);
    } catch {
      /* refused below */
    }
    const tHost = target ? normalizeHost(target.hostname) : undefined;
    const tVia: Via = target?.protocol === "https:" ? "connect" : "http";
    const tPort = target ? Number(target.port || (tVia === "connect" ? 443 : 80)) : 0;
    if (target && tHost && !isIpLiteral(target.hostname) && !refusal(this.rules, tHost, tPort, tVia)) return undefined;
    return target
      ? { record: target.host, shown: bounded(target.host, RECORD_BOUNDS.host) }
      : { record: JSON.stringify(location.slice(0, 100)), shown: "an invalid location" };
  }

  private async forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const t0 = performance.now();
    const refuse = (host: string, port: number, reason: string, status = 403) =>
      this.refuseHttp(req, res, t0, { host, port, reason, status });
    let url: URL;
    try {
      url = new URL(req.url ?? "");
    } catch {
      return refuse(req.headers.host ?? "", 0, "only CONNECT and absolute http:// requests are proxied", 400);
    }
    if (url.protocol !== "http:") return refuse(url.hostname, 0, `scheme ${url.protocol} is not proxied`, 400);
    const host = url.hostname;
    const port = Number(url.port || 80);
    const verdict = await this.proxy.check(this.rules, host, port, "http");
    if ("reason" in verdict) return refuse(host, port, verdict.reason);
    const rec: EgressRecord = {
      host,
      port,
      method: req.method ?? "GET",
      allowed: true,
      address: verdict.address,
      bytesUp: 0,
      bytesDown: 0,
      ms: 0,
    };
    let done = false;
    const finish = (reason?: string) => {
      if (done) return;
      done = true;
      clearTimeout(total);
      if (reason) rec.reason = reason;
      rec.ms = Math.round(performance.now() - t0);
      this.record(rec);
    };
    const total = setTimeout(() => {
      finish("total time limit");
      upReq.destroy();
      res.destroy();
    }, this.limits.totalMs);
    const upReq = http.request({
      host: verdict.address,
      port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      // Host is the URL's, whatever the client's Host said: the request reaches the checked name.
      headers: { ...endToEnd(req.headers, HOST_OVERRIDES), host: url.host, connection: "close" },
      setHost: false,
      agent: false,
      maxHeaderSize: this.limits.headerBytes,
      timeout: this.limits.connectMs,
    });
    upReq.on("socket", (s) => {
      this.hold(s);
      s.once("connect", () => upReq.setTimeout(this.limits.idleMs));
    });
    upReq.on("timeout", () => upReq.destroy(new Error("upstream timed out")));
    upReq.on("error", (e: NodeJS.ErrnoException) => {
      finish(`upstream error: ${e.code ?? e.message}`);
      if (!res.headersSent)
        res
          .writeHead(502, { "content-type": "text/plain", connection: "close" })
          .end(`patchbay egress: ${host}:${port}: ${e.code ?? e.message}\n`);
      else res.destroy();
    });
    req.on("data", (c: Buffer) => {
      if (!this.charge(c.length)) return upReq.destroy(new Error("byte limit for the job"));
      rec.bytesUp += c.length;
    });
    req.pipe(upReq);
    upReq.on("response", (up) => this.relay(up, res, url, rec, finish));
    res.on("close", () => {
      if (!done) {
        upReq.destroy();
        finish("client closed");
      }
    });
  }
}

/** The body of a refusal the client sees: bounded like the record. */
function refusalText(host: string, port: number, reason: string): string {
  return `${bounded(host, RECORD_BOUNDS.host)}${port ? `:${port}` : ""} refused: ${bounded(reason, RECORD_BOUNDS.reason, true)}`;
}
