// A CONNECT tunnel after its host and port passed the allow-list: the 200, then the TLS gate
// (src/net/tls-gate.ts) between the client and an upstream that is opened only once the client's
// ClientHello names the CONNECT host. Bytes are counted against the job's budget, both ways have
// backpressure, and the hello, connect, idle and total times are bounded.
import net from "node:net";
import type { EgressLimits, EgressRecord } from "./record.js";
import { TlsGate } from "./tls-gate.js";

/** What a tunnel needs of its session. */
export interface TunnelSession {
  readonly limits: EgressLimits;
  /** Counts bytes against the job's budget; false once it is spent. */
  charge(n: number): boolean;
  /** Tracks a socket so that closing the session ends it. */
  hold(s: net.Socket): void;
  record(r: EgressRecord): void;
}

/** Client bytes held while the server's first answer is awaited; above this the client is not read. */
const HOLD_BYTES = 64 * 1024;

export function runTunnel(
  session: TunnelSession,
  client: net.Socket,
  head: Buffer,
  host: string,
  port: number,
  address: string,
  t0: number,
): void {
  new Tunnel(session, client, port, address, t0, {
    host,
    port,
    method: "CONNECT",
    allowed: true,
    address,
    bytesUp: 0,
    bytesDown: 0,
    ms: 0,
  }).start(head);
}

/** One tunnel's state; its handlers are arrow properties, given to sockets as they are. */
class Tunnel {
  private readonly gate: TlsGate;
  private upstream: net.Socket | undefined;
  private done = false;
  private upBlocked = false;
  private clientEnded = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private helloTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly session: TunnelSession,
    private readonly client: net.Socket,
    private readonly port: number,
    private readonly address: string,
    private readonly t0: number,
    private readonly rec: EgressRecord,
  ) {
    this.gate = new TlsGate(rec.host);
  }

  start(head: Buffer): void {
    const { limits } = this.session;
    const client = this.client;
    this.helloTimer = setTimeout(
      () => this.end(`no complete TLS ClientHello within ${limits.helloMs} ms`, true),
      limits.helloMs,
    );
    this.timers.push(
      this.helloTimer,
      setTimeout(() => this.end("total time limit"), limits.totalMs),
    );
    client.on("data", this.fromClient);
    client.on("end", () => {
      this.clientEnded = true;
      if (!this.upstream) this.end("the client closed the tunnel before a complete TLS ClientHello");
      else this.endUp();
    });
    client.setTimeout(limits.idleMs, () => this.end("idle timeout"));
    client.on("error", () => this.end());
    client.on("close", () => this.end());
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    if (head.length) this.fromClient(head);
  }

  /**
   * Ends both sides and records the tunnel. It counts as allowed only if the upstream was reached
   * (a ClientHello passed); `refused` marks a refusal of the gate's after that too.
   */
  private end = (reason?: string, refused = false): void => {
    if (this.done) return;
    this.done = true;
    for (const t of this.timers) clearTimeout(t);
    this.client.destroy();
    this.upstream?.destroy();
    const rec = this.rec;
    if (refused || !this.upstream) rec.allowed = false;
    const why = reason ?? (this.upstream ? undefined : "closed before a complete TLS ClientHello");
    if (why) rec.reason = why;
    rec.ms = Math.round(performance.now() - this.t0);
    this.session.record(rec);
  };

  // The client is read while nothing is waiting on upstream's buffer and the gate holds little.
  private flowClient = (): void => {
    if (this.done) return;
    if (!this.upBlocked && this.gate.pending <= HOLD_BYTES) this.client.resume();
    else this.client.pause();
  };

  private sendUp(bufs: Uint8Array[]): void {
    if (!bufs.length || this.done) return;
    if (!this.upstream) {
      clearTimeout(this.helloTimer);
      this.upstream = this.openUpstream();
    }
    for (const b of bufs) {
      if (!b.length) continue;
      this.rec.bytesUp += b.length;
      if (!this.upstream.write(b) && !this.upBlocked) {
        this.upBlocked = true;
        this.upstream.once("drain", () => {
          this.upBlocked = false;
          this.flowClient();
        });
      }
    }
  }

  private openUpstream(): net.Socket {
    const { session, client } = this;
    const u = net.connect({ host: this.address, port: this.port });
    session.hold(u);
    const connectTimer = setTimeout(() => this.end("connect timed out"), session.limits.connectMs);
    this.timers.push(connectTimer);
    u.once("connect", () => clearTimeout(connectTimer));
    u.on("data", (chunk: Buffer) => {
      if (!session.charge(chunk.length)) return this.end("byte limit for the job");
      this.rec.bytesDown += chunk.length;
      if (!client.write(chunk)) {
        u.pause();
        client.once("drain", () => u.resume());
      }
      const step = this.gate.fromServer(chunk);
      if (step.refuse) return this.end(step.refuse, true);
      this.sendUp(step.up);
      this.flowClient();
      this.endUp();
    });
    u.on("end", () => client.end());
    u.setTimeout(session.limits.idleMs, () => this.end("idle timeout"));
    u.on("error", (e: NodeJS.ErrnoException) => this.end(`upstream error: ${e.code ?? e.message}`));
    // What the upstream sent before it closed reaches the client first.
    u.on("close", () => (client.writableLength ? client.once("finish", () => this.end()) : this.end()));
    return u;
  }

  private fromClient = (chunk: Buffer): void => {
    if (this.done) return;
    if (!this.session.charge(chunk.length)) return this.end("byte limit for the job");
    const step = this.gate.fromClient(chunk);
    if (step.refuse) return this.end(step.refuse, true);
    this.sendUp(step.up);
    this.flowClient();
  };

  // The client's end goes upstream once the gate holds nothing more of its bytes.
  private endUp(): void {
    const up = this.upstream;
    if (this.clientEnded && up && this.gate.pending === 0 && !up.writableEnded) up.end();
  }
}
