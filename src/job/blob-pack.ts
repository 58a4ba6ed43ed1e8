// A git pack (version 2) of a repo's file contents and its .idx, made on the host while the repo is
// tarred. Git in the sandbox then finds every blob it hashes at baseline already in its store and
// writes nothing: on these machines a loose object costs ~0.35 ms of syscalls, most of a small
// repo's baseline. The pack only saves writes; it decides nothing: the baseline's tree is still
// git's own hash of the bytes on disk, and a file left out (over the bound, or streamed) is simply
// written by git as before. No I/O here.
import { createHash } from "node:crypto";
import { crc32, deflateSync } from "node:zlib";

const OBJ_BLOB = 3;

export interface BuiltPack {
  /** The pack's own checksum, hex: its file names are pack-<name>.pack and .idx. */
  name: string;
  pack: Buffer;
  idx: Buffer;
  objects: number;
}

export class BlobPack {
  private readonly parts: Buffer[] = [];
  private readonly entries = new Map<string, { sha: Buffer; offset: number; crc: number }>();
  private offset = 12;
  full = false;

  /** `maxBytes` bounds the pack (the worker holds it until the baseline is made). */
  constructor(private readonly maxBytes = 64 * 1024 * 1024) {}

  add(content: Buffer): void {
    if (this.full) return;
    const sha = createHash("sha1").update(`blob ${content.length}\0`).update(content).digest();
    const key = sha.toString("hex");
    if (this.entries.has(key)) return;
    const body = Buffer.concat([objectHeader(OBJ_BLOB, content.length), deflateSync(content, { level: 1 })]);
    if (this.offset + body.length + 20 > this.maxBytes) {
      this.full = true; // the rest is hashed and written by git in the sandbox, as without a pack
      return;
    }
    this.entries.set(key, { sha, offset: this.offset, crc: crc32(body) });
    this.parts.push(body);
    this.offset += body.length;
  }

  get objects(): number {
    return this.entries.size;
  }

  /** The pack and its index; undefined when nothing was added. */
  finish(): BuiltPack | undefined {
    const n = this.entries.size;
    if (n === 0) return undefined;
    const head = Buffer.alloc(12);
    head.write("PACK", 0, "latin1");
    head.writeUInt32BE(2, 4);
    head.writeUInt32BE(n, 8);
    const packSum = this.parts.reduce((h, p) => h.update(p), createHash("sha1").update(head)).digest();
    const pack = Buffer.concat([head, ...this.parts, packSum]);
    const sorted = [...this.entries.values()].sort((a, b) => Buffer.compare(a.sha, b.sha));
    // idx v2: magic, version, 256-entry fan-out, names, CRC32s, 4-byte offsets (the pack is < 2 GiB), both checksums.
    const idx = Buffer.alloc(8 + 256 * 4 + n * 28 + 40);
    idx.writeUInt32BE(0xff744f63, 0);
    idx.writeUInt32BE(2, 4);
    const fan = new Array<number>(256).fill(0);
    for (const e of sorted) fan[e.sha[0]!]!++;
    for (let i = 0, sum = 0; i < 256; i++) idx.writeUInt32BE((sum += fan[i]!), 8 + i * 4);
    let at = 8 + 1024;
    for (const e of sorted) at += e.sha.copy(idx, at);
    for (const e of sorted) at = idx.writeUInt32BE(e.crc >>> 0, at);
    for (const e of sorted) at = idx.writeUInt32BE(e.offset, at);
    at += packSum.copy(idx, at);
    createHash("sha1").update(idx.subarray(0, at)).digest().copy(idx, at);
    return { name: packSum.toString("hex"), pack, idx, objects: n };
  }
}

/** An object's type and inflated size: 3 type bits and 4 size bits, then 7 size bits per byte. */
function objectHeader(type: number, size: number): Buffer {
  const out = [((type & 7) << 4) | (size & 15)];
  for (size = Math.floor(size / 16); size > 0; size = Math.floor(size / 128)) {
    out[out.length - 1]! |= 0x80;
    out.push(size & 127);
  }
  return Buffer.from(out);
}
