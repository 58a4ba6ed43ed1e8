// A credential's secrets cut out of what an upstream sends back through a terminated tunnel
// (src/net/terminate.ts): an upstream that echoes the header it got (a 401 body quoting it, a
// debug endpoint) never shows it to the sandbox. Every occurrence of any secret, in its usual
// echoed forms too (secretForms, as UTF-8 and Latin-1 bytes, in any case of its ASCII letters),
// overlapping ones too, becomes as many '*' as it has bytes, so a Content-Length stays right. The
// stream form holds back the last (longest form - 1) bytes of each chunk until the next one shows
// whether they begin a secret, so a secret split over any number of chunks is found. Pure.
import { Transform, type TransformCallback } from "node:stream";

const STAR = 0x2a;

/**
 * The forms an echo commonly gives a secret besides its own: percent-encoded (a URL, a Location
 * header, a form), JSON-escaped (quotes and backslashes; `/` as `\/` as PHP and others write it;
 * past ASCII as `\uXXXX` as Python writes it).
 * A token's base64 alphabet holds `+`, `/` and `=`, so a Basic pair echoed in a URL or in JSON
 * would otherwise come back readable. Pure.
 */
export function secretForms(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1);
  // Python's json.dumps (ensure_ascii, its default) writes every character past ASCII as \uXXXX.
  const ascii = json.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  return [...new Set([secret, encodeURIComponent(secret), json, json.replaceAll("/", "\\/"), ascii])];
}

/**
 * The secrets and their echoed forms as bytes, empty ones dropped, each once: as UTF-8 and as
 * Latin-1, which differ past ASCII. Node sends a header's value as Latin-1 bytes (a secret may
 * hold any Latin-1 character), so a header echoed byte for byte comes back in that form.
 */
function secretBytes(secrets: readonly string[]): Buffer[] {
  const forms = new Set(secrets.filter((s) => s.length > 0).flatMap(secretForms));
  const bytes = new Map<string, Buffer>();
  for (const f of forms)
    for (const b of [Buffer.from(f, "utf8"), Buffer.from(f, "latin1")].map(lowerAscii)) bytes.set(b.toString("hex"), b);
  return [...bytes.values()];
}

/** A copy of `buf` with the ASCII letters A-Z made lower case (the search runs on these copies). */
function lowerAscii(buf: Buffer): Buffer {
  const out = Buffer.from(buf);
  for (let i = 0; i < out.length; i++) if (out[i]! >= 0x41 && out[i]! <= 0x5a) out[i] = out[i]! | 0x20;
  return out;
}

/**
 * Marks in `mask` every byte of `buf` that belongs to an occurrence of a secret (`secrets` lower
 * case), whatever the case of its ASCII letters: an upstream or a header's parser that changes
 * case (a lower-cased header value, an upper-cased echo) still gives the secret away.
 */
function markSecrets(buf: Buffer, secrets: readonly Buffer[], mask: Uint8Array): void {
  const lower = lowerAscii(buf);
  for (const s of secrets) {
    for (let i = lower.indexOf(s); i !== -1; i = lower.indexOf(s, i + 1)) mask.fill(1, i, i + s.length);
  }
}

/** `buf` with every byte of every occurrence of a secret replaced by '*' (a copy; same length). */
export function scrubBytes(buf: Buffer, secrets: readonly string[]): Buffer {
  const bytes = secretBytes(secrets);
  const mask = new Uint8Array(buf.length);
  markSecrets(buf, bytes, mask);
  const out = Buffer.from(buf);
  for (let i = 0; i < out.length; i++) if (mask[i]) out[i] = STAR;
  return out;
}

/** A header's value (Node reads header bytes as latin1) with the secrets replaced by '*'. */
export function scrubHeader(value: string, secrets: readonly string[]): string {
  return scrubBytes(Buffer.from(value, "latin1"), secrets).toString("latin1");
}

/** A stream that passes bytes through with every occurrence of a secret replaced by '*', across chunk boundaries. */
export class ScrubStream extends Transform {
  private readonly secrets: Buffer[];
  private readonly keep: number;
  /** The held tail: its original bytes, and which of them a secret already covers. */
  private tail = Buffer.alloc(0);
  private tailMask = new Uint8Array(0);

  constructor(secrets: readonly string[]) {
    super();
    this.secrets = secretBytes(secrets);
    this.keep = Math.max(0, ...this.secrets.map((s) => s.length - 1));
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    if (!this.secrets.length) return cb(null, chunk);
    const buf = this.tail.length ? Buffer.concat([this.tail, chunk]) : chunk;
    const mask = new Uint8Array(buf.length);
    mask.set(this.tailMask);
    // The search runs over the original bytes, so overlapping occurrences are all found.
    markSecrets(buf, this.secrets, mask);
    const cut = Math.max(0, buf.length - this.keep);
    this.tail = Buffer.from(buf.subarray(cut));
    this.tailMask = mask.slice(cut);
    if (cut === 0) return cb();
    cb(null, masked(buf.subarray(0, cut), mask));
  }

  override _flush(cb: TransformCallback): void {
    if (this.tail.length) this.push(masked(this.tail, this.tailMask));
    this.tail = Buffer.alloc(0);
    cb();
  }
}

function masked(bytes: Buffer, mask: Uint8Array): Buffer {
  const out = Buffer.from(bytes);
  for (let i = 0; i < out.length; i++) if (mask[i]) out[i] = STAR;
  return out;
}
