// TLS as far as the setup proxy reads it inside a CONNECT tunnel: the records that carry the
// client's ClientHello (reassembled from any fragmentation), the ClientHello's server name, and
// whether the server's first answer is a HelloRetryRequest (after which the client sends a second
// ClientHello). Pure: bytes in, verdicts out. Every length is checked against the bytes present
// and against a cap before anything waits for more, so a hostile client can make it hold at most
// `maxStream` bytes. No npm library does just this (they parse whole handshakes or need a TLS
// stack), and the part needed is small.
import { count } from "../core/count.js";
import { kinded } from "../core/errors.js";

/** RFC 8446 §5.1: a plaintext record's fragment is at most 2^14 bytes. */
export const MAX_RECORD = 16_384;
/** A ClientHello's own cap. Real ones are 0.2–2 KiB (a post-quantum key share included). */
export const MAX_HELLO = 16 * 1024;

const HANDSHAKE = 0x16;
const CLIENT_HELLO = 1;
const SERVER_HELLO = 2;
const RECORD_NAMES: Record<number, string> = {
  0x14: "change_cipher_spec",
  0x15: "alert",
  0x16: "handshake",
  0x17: "application_data",
};
const recordName = (t: number) => RECORD_NAMES[t] ?? `0x${t.toString(16).padStart(2, "0")}`;

export type Read =
  | { kind: "more"; need: number }
  /** `end`: the stream offset just after the record that completed the message. */
  | { kind: "message"; body: Uint8Array; end: number }
  | { kind: "bad"; reason: string };

export interface ReaderOptions {
  /** The stream bytes (record headers included) the message must be complete within. */
  maxStream: number;
  /** Record types that may come before the message and are stepped over (after a HelloRetryRequest: change_cipher_spec, early data). */
  skip?: readonly number[];
}

/**
 * Reads one ClientHello from the start of a byte stream, record by record. Call `advance` with the
 * whole stream so far (the same prefix each time, longer) once it has at least `need` bytes; each
 * record is read once. Nothing else may share the ClientHello's records.
 */
export class ClientHelloReader {
  private pos = 0;
  private readonly hs = new Uint8Array(4 + MAX_HELLO);
  private hsLen = 0;
  constructor(private readonly opts: ReaderOptions) {}

  advance(stream: Uint8Array): Read {
    for (;;) {
      const p = this.pos;
      if (p + 5 > this.opts.maxStream)
        return bad(`no complete ClientHello within ${count(this.opts.maxStream, "byte")}`);
      if (stream.length < p + 5) return { kind: "more", need: p + 5 };
      const [type, major, minor] = [stream[p]!, stream[p + 1]!, stream[p + 2]!];
      const len = (stream[p + 3]! << 8) | stream[p + 4]!;
      if (type !== HANDSHAKE) {
        if (this.hsLen > 0 || !this.opts.skip?.includes(type)) {
          return bad(
            p === 0 && !this.opts.skip
              ? notTls(stream)
              : `record type ${recordName(type)} where the ClientHello was expected`,
          );
        }
        if (len > MAX_RECORD + 256)
          return bad(`a ${recordName(type)} record of ${count(len, "byte")} (over 2^14 + 256)`);
      } else {
        if (major !== 3 || minor > 4) return bad(p === 0 ? notTls(stream) : `a record with version ${major}.${minor}`);
        if (len === 0) return bad("an empty handshake record");
        if (len > MAX_RECORD) return bad(`a record of ${count(len, "byte")} (over 2^14)`);
        if (this.hsLen + len > this.hs.length) return bad(`a ClientHello over ${count(MAX_HELLO, "byte")}`);
      }
      if (p + 5 + len > this.opts.maxStream)
        return bad(`no complete ClientHello within ${count(this.opts.maxStream, "byte")}`);
      if (stream.length < p + 5 + len) return { kind: "more", need: p + 5 + len };
      this.pos = p + 5 + len;
      if (type !== HANDSHAKE) continue;
      this.hs.set(stream.subarray(p + 5, p + 5 + len), this.hsLen);
      this.hsLen += len;
      if (this.hsLen < 4) continue;
      if (this.hs[0] !== CLIENT_HELLO)
        return bad(`handshake message type ${this.hs[0]} where a ClientHello (1) was expected`);
      const msgLen = (this.hs[1]! << 16) | (this.hs[2]! << 8) | this.hs[3]!;
      if (msgLen > MAX_HELLO) return bad(`a ClientHello of ${count(msgLen, "byte")} (over ${MAX_HELLO})`);
      if (this.hsLen < 4 + msgLen) continue;
      // A client sends nothing else until the server answers, so more handshake bytes are no ClientHello's.
      if (this.hsLen > 4 + msgLen) return bad("bytes after the ClientHello in its record");
      return { kind: "message", body: this.hs.slice(4, 4 + msgLen), end: this.pos };
    }
  }
}

function bad(reason: string): Read {
  return { kind: "bad", reason };
}

function notTls(stream: Uint8Array): string {
  const b = stream[0]!;
  const text = b >= 0x41 && b <= 0x5a ? `: "${String.fromCharCode(b)}", plain text` : "";
  return `not a TLS handshake (first byte 0x${b.toString(16).padStart(2, "0")}${text})`;
}

// Extension types whose presence means the real server name is encrypted: ECH (RFC 9849's
// 0xfe0d, its drafts' 0xfe08–0xfe0c) and the older ESNI draft's 0xffce.
const ECH_TYPES = new Set([0xfe08, 0xfe09, 0xfe0a, 0xfe0b, 0xfe0c, 0xfe0d, 0xffce]);

export interface ClientHello {
  /** The host_name in server_name, as sent (not normalized); undefined when there is none. */
  serverName?: string;
  /** The ClientHello carries an encrypted_client_hello (or ESNI) extension. */
  ech: boolean;
  /** Extension types in order. */
  extensions: number[];
}

class Cursor {
  constructor(
    private readonly b: Uint8Array,
    public pos = 0,
    public readonly end = b.length,
  ) {}
  get left(): number {
    return this.end - this.pos;
  }
  take(n: number, what: string): Uint8Array {
    if (n > this.left) throw new HelloError(`${what}: needs ${count(n, "byte")}, ${this.left} left`);
    const out = this.b.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  u8(what: string): number {
    return this.take(1, what)[0]!;
  }
  u16(what: string): number {
    const x = this.take(2, what);
    return (x[0]! << 8) | x[1]!;
  }
  /** A sub-cursor over a vector with a `width`-byte length prefix. */
  vector(width: 1 | 2, what: string): Cursor {
    const n = width === 1 ? this.u8(what) : this.u16(what);
    const start = this.pos;
    this.take(n, what);
    return new Cursor(this.b, start, start + n);
  }
}
class HelloError extends kinded("setup") {}

/** The fields of a ClientHello body (after its 4-byte handshake header); a string says what is wrong. */
export function parseClientHello(body: Uint8Array): ClientHello | string {
  try {
    return readHello(new Cursor(body));
  } catch (err) {
    if (err instanceof HelloError) return `malformed ClientHello (${err.message})`;
    throw err;
  }
}

function readHello(c: Cursor): ClientHello {
  const version = c.u16("legacy_version");
  if (version >> 8 !== 3) throw new HelloError(`version 0x${version.toString(16)} is not TLS`);
  c.take(32, "random");
  if (c.vector(1, "session id").left > 32) throw new HelloError("session id over 32 bytes");
  const suites = c.vector(2, "cipher suites");
  if (suites.left === 0 || suites.left % 2) throw new HelloError(`cipher suites of ${count(suites.left, "byte")}`);
  if (c.vector(1, "compression methods").left === 0) throw new HelloError("no compression methods");
  const hello: ClientHello = { ech: false, extensions: [] };
  if (c.left === 0) return hello; // TLS 1.0–1.2 allow a ClientHello without extensions
  const exts = c.vector(2, "extensions");
  if (c.left) throw new HelloError(`${count(c.left, "byte")} after the extensions`);
  while (exts.left) {
    const type = exts.u16("extension type");
    const data = exts.vector(2, `extension ${type}`);
    // RFC 8446 §4.2: one of each. A server could read the second server_name a parser skipped.
    if (hello.extensions.includes(type)) throw new HelloError(`extension ${type} appears twice`);
    hello.extensions.push(type);
    if (ECH_TYPES.has(type)) hello.ech = true;
    if (type === 0) hello.serverName = serverName(data);
  }
  return hello;
}

/** The one host_name of a server_name extension. */
function serverName(data: Cursor): string {
  const list = data.vector(2, "server name list");
  if (data.left) throw new HelloError("bytes after the server name list");
  if (list.left === 0) throw new HelloError("an empty server name list");
  const type = list.u8("server name type");
  const name = list.vector(2, "server name");
  // RFC 6066 defines host_name (0) only, one per type; servers read the first. Only one is accepted.
  if (type !== 0) throw new HelloError(`server name type ${type} (only host_name, 0, exists)`);
  if (list.left) throw new HelloError("more than one server name");
  if (name.left === 0) throw new HelloError("an empty server name");
  let s = "";
  // Printable ASCII kept as is; anything else never matches a host name and is shown as "?".
  for (const b of name.take(name.left, "server name")) s += b >= 0x21 && b <= 0x7e ? String.fromCharCode(b) : "?";
  return s;
}

// RFC 8446 §4.1.3: a HelloRetryRequest is a ServerHello whose random is SHA-256("HelloRetryRequest").
const HRR_RANDOM = Uint8Array.from(
  Buffer.from("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c", "hex"),
);

/**
 * Whether the server's first bytes are a HelloRetryRequest ("retry"), something else ("other": a
 * ServerHello, an alert, not TLS), or not yet known ("more"). Only its first 38 handshake bytes
 * count; the server is the allowed host's, so anything that is not clearly a retry is "other".
 */
export function serverAnswer(stream: Uint8Array): "retry" | "other" | "more" {
  const want = 4 + 2 + 32; // handshake header, legacy_version, random
  const got: number[] = [];
  for (let p = 0; got.length < want;) {
    if (stream.length < p + 5) return "more";
    if (stream[p] !== HANDSHAKE) return "other";
    const len = (stream[p + 3]! << 8) | stream[p + 4]!;
    if (len === 0) return "other";
    const body = stream.subarray(p + 5, Math.min(p + 5 + len, stream.length));
    for (const b of body) if (got.length < want) got.push(b);
    if (got.length && got[0] !== SERVER_HELLO) return "other";
    if (body.length < len && got.length < want) return "more";
    p += 5 + len;
  }
  return HRR_RANDOM.every((b, i) => got[6 + i] === b) ? "retry" : "other";
}
