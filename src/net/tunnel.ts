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

export function runTunnel(session: TunnelSession, client: net.Socket, head: Buffer, host: string, port: number, address: string, t0: number): void {
  const { limits } = session;
  const rec: EgressRecord = { host, port, method: "CONNECT", allowed: true, address, bytesUp: 0, bytesDown: 0, ms: 0 };
  const gate = new TlsGate(host);
  let upstream: net.Socket | undefined;
  let done = false;
  let upBlocked = false;
  let clientEnded = false;
  const timers: NodeJS.Timeout[] = [];

  /**
   * Ends both sides and records the tunnel. It counts as allowed only if the upstream was reached
   * (a ClientHello passed); `refused` marks a refusal of the gate's after that too.
   */
  const end = (reason?: string, refused = false) => {
    if (done) return;
    done = true;
    for (const t of timers) clearTimeout(t);
    client.destroy();
    upstream?.destroy();
    if (refused || !upstream) rec.allowed = false;
    const why = reason ?? (upstream ? undefined : "closed before a complete TLS ClientHello");
    if (why) rec.reason = why;
    rec.ms = Math.round(performance.now() - t0);
    session.record(rec);
  };
  const helloTimer = setTimeout(() => end(`no complete TLS ClientHello within ${limits.helloMs} ms`, true), limits.helloMs);
  timers.push(helloTimer, setTimeout(() => end("total time limit"), limits.totalMs));

  // The client is read while nothing is waiting on upstream's buffer and the gate holds little.
  const flowClient = () => {
    if (done) return;
    if (!upBlocked && gate.pending <= HOLD_BYTES) client.resume();
    else client.pause();
  };
  const sendUp = (bufs: Uint8Array[]) => {
    if (!bufs.length || done) return;
    if (!upstream) {
      clearTimeout(helloTimer);
      upstream = openUpstream();
    }
    for (const b of bufs) {
      if (!b.length) continue;
      rec.bytesUp += b.length;
      if (!upstream.write(b) && !upBlocked) {
        upBlocked = true;
        upstream.once("drain", () => {
          upBlocked = false;
          flowClient();
        });
      }
    }
  };

  const openUpstream = (): net.Socket => {
    const u = net.connect({ host: address, port });
    session.hold(u);
    const connectTimer = setTimeout(() => end("connect timed out"), limits.connectMs);
    timers.push(connectTimer);
    u.once("connect", () => clearTimeout(connectTimer));
    u.on("data", (chunk: Buffer) => {
      if (!session.charge(chunk.length)) return end("byte limit for the job");
      rec.bytesDown += chunk.length;
      if (!client.write(chunk)) {
        u.pause();
        client.once("drain", () => u.resume());
      }
      const step = gate.fromServer(chunk);
      if (step.refuse) return end(step.refuse, true);
      sendUp(step.up);
      flowClient();
      endUp();
    });
    u.on("end", () => client.end());
    u.setTimeout(limits.idleMs, () => end("idle timeout"));
    u.on("error", (e: NodeJS.ErrnoException) => end(`upstream error: ${e.code ?? e.message}`));
    // What the upstream sent before it closed reaches the client first.
    u.on("close", () => (client.writableLength ? client.once("finish", () => end()) : end()));
    return u;
  };

  const fromClient = (chunk: Buffer) => {
    if (done) return;
    if (!session.charge(chunk.length)) return end("byte limit for the job");
    const step = gate.fromClient(chunk);
    if (step.refuse) return end(step.refuse, true);
    sendUp(step.up);
    flowClient();
  };
  client.on("data", fromClient);
  // The client's end goes upstream once the gate holds nothing more of its bytes.
  const endUp = () => {
    if (clientEnded && upstream && gate.pending === 0 && !upstream.writableEnded) upstream.end();
  };
  client.on("end", () => {
    clientEnded = true;
    if (!upstream) end("the client closed the tunnel before a complete TLS ClientHello");
    else endUp();
  });
  client.setTimeout(limits.idleMs, () => end("idle timeout"));
  client.on("error", () => end());
  client.on("close", () => end());
  client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
  if (head.length) fromClient(head);
}
