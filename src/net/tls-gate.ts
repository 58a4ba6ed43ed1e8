// What a CONNECT tunnel lets through, decided on the bytes alone (pure; the proxy does the I/O).
// Nothing goes upstream until the client's ClientHello is complete and names the CONNECT host.
// The client's next bytes are then held until the server's first answer shows whether it is a
// HelloRetryRequest: if so, the client's second ClientHello (which a server may route by anew)
// is checked the same way before anything of it goes up. After that the tunnel is open.
import { normalizeHost } from "../core/allow.js";
import { ClientHelloReader, MAX_HELLO, parseClientHello, serverAnswer, type Read } from "./client-hello.js";

/** Stream bytes a ClientHello must be complete within: its cap plus record headers of some fragmentation. */
export const HELLO_STREAM = MAX_HELLO + 2048;
/** After a HelloRetryRequest: room for early data and change_cipher_spec records before the second ClientHello. */
export const RETRY_STREAM = HELLO_STREAM + 64 * 1024;
/** The server's first bytes kept to tell a HelloRetryRequest (38 handshake bytes, however fragmented). */
const SERVER_PEEK = 512;

export type GateState = "hello" | "answer" | "retry" | "open" | "refused";

export interface GateStep {
  /** Bytes to send upstream now, in order. */
  up: Uint8Array[];
  /** Set once: the tunnel must be closed, with this reason. */
  refuse?: string;
}

/** A stream prefix in a fixed buffer, read by a ClientHelloReader as it grows. */
class Collector {
  private readonly buf: Uint8Array;
  private filled = 0;
  private readonly overflow: Uint8Array[] = [];
  private need = 0;
  private readonly reader: ClientHelloReader;

  constructor(max: number, skip?: readonly number[]) {
    this.buf = new Uint8Array(max);
    this.reader = new ClientHelloReader({ maxStream: max, ...(skip ? { skip } : {}) });
  }

  get bytes(): number {
    return this.filled + this.overflow.reduce((n, c) => n + c.length, 0);
  }

  push(chunk: Uint8Array): Read {
    const room = Math.min(this.buf.length - this.filled, chunk.length);
    this.buf.set(chunk.subarray(0, room), this.filled);
    this.filled += room;
    if (room < chunk.length) this.overflow.push(chunk.subarray(room));
    // Each record is read once, when all of it is here (the reader asks for exactly that).
    if (this.filled < this.need) return { kind: "more", need: this.need };
    const r = this.reader.advance(this.buf.subarray(0, this.filled));
    if (r.kind === "more") this.need = r.need;
    return r;
  }

  /** [through `end`, after it]: everything pushed, split at a stream offset. */
  split(end: number): [Uint8Array, Uint8Array[]] {
    const rest = end < this.filled ? [this.buf.subarray(end, this.filled)] : [];
    return [this.buf.subarray(0, end), [...rest, ...this.overflow]];
  }
}

export class TlsGate {
  state: GateState = "hello";
  /** The server name of the (last) ClientHello checked. */
  serverName?: string;
  /** Reads the hello being awaited; dropped once it passed (its ~34 KiB are not kept for the tunnel's life). */
  private collector: Collector | undefined = new Collector(HELLO_STREAM);
  private held: Uint8Array[] = [];
  private heldBytes = 0;
  private readonly peek = new Uint8Array(SERVER_PEEK);
  private peekLen = 0;

  /** `host`: the CONNECT host, normalized. */
  constructor(private readonly host: string) {}

  /** Client bytes buffered here, not yet sent upstream (the proxy stops reading the client above a bound). */
  get pending(): number {
    if (this.state === "answer") return this.heldBytes;
    if (this.state === "hello" || this.state === "retry") return this.collector?.bytes ?? 0;
    return 0;
  }

  fromClient(chunk: Uint8Array): GateStep {
    switch (this.state) {
      case "open":
        return { up: [chunk] };
      case "answer":
        this.held.push(chunk);
        this.heldBytes += chunk.length;
        return { up: [] };
      case "hello":
      case "retry":
        return this.collect([chunk]);
      default:
        return { up: [] };
    }
  }

  /** Server bytes (the caller relays them to the client as they are); may release held client bytes. */
  fromServer(chunk: Uint8Array): GateStep {
    if (this.state !== "answer") return { up: [] };
    const n = Math.min(SERVER_PEEK - this.peekLen, chunk.length);
    this.peek.set(chunk.subarray(0, n), this.peekLen);
    this.peekLen += n;
    const answer = serverAnswer(this.peek.subarray(0, this.peekLen));
    if (answer === "more" && this.peekLen < SERVER_PEEK) return { up: [] };
    const held = this.held;
    this.held = [];
    this.heldBytes = 0;
    if (answer === "retry") {
      // RFC 8446 §D.4: change_cipher_spec may precede the second ClientHello; early data sent
      // with the first is skipped by the server, and here.
      this.state = "retry";
      this.collector = new Collector(RETRY_STREAM, [0x14, 0x17]);
      return this.collect(held);
    }
    this.state = "open";
    return { up: held };
  }

  private collect(chunks: Uint8Array[]): GateStep {
    const collector = this.collector!;
    for (let i = 0; i < chunks.length; i++) {
      const r = collector.push(chunks[i]!);
      if (r.kind === "more") continue;
      if (r.kind === "bad")
        return this.refuse(
          this.state === "retry" ? `second ClientHello (after a HelloRetryRequest): ${r.reason}` : r.reason,
        );
      const why = this.check(r.body);
      if (why)
        return this.refuse(this.state === "retry" ? `second ClientHello (after a HelloRetryRequest): ${why}` : why);
      const [hello, rest] = collector.split(r.end);
      this.collector = undefined;
      const later = chunks.slice(i + 1);
      if (this.state === "retry") {
        this.state = "open";
        return { up: [hello, ...rest, ...later] };
      }
      this.state = "answer";
      for (const c of [...rest, ...later]) this.fromClient(c);
      return { up: [hello] };
    }
    return { up: [] };
  }

  /** Why a ClientHello may not pass, or undefined. */
  private check(body: Uint8Array): string | undefined {
    const hello = parseClientHello(body);
    if (typeof hello === "string") return hello;
    if (hello.ech)
      return "the ClientHello carries encrypted_client_hello (ECH): the server name it reaches is encrypted and cannot be checked";
    if (hello.serverName === undefined) return `the ClientHello names no server (no SNI); it must name ${this.host}`;
    this.serverName = hello.serverName;
    if (normalizeHost(hello.serverName) !== this.host)
      return `the ClientHello's server name ${hello.serverName} is not the CONNECT host ${this.host}`;
    return undefined;
  }

  private refuse(reason: string): GateStep {
    this.state = "refused";
    this.held = [];
    return { up: [], refuse: reason };
  }
}
