// The repo's tar as the sandbox's tar reads it: POSIX ustar headers, with a pax record for what
// ustar cannot hold (a name or link target that is long or not ASCII, a size past 8 GiB), written
// into large chunks. tar-stream's packer makes a stream, a header buffer and callbacks per entry,
// which at 50,000 small files was most of the worker's CPU for a load. No I/O here.

/** What an entry's header says (repo-common's Header is one). */
export interface TarEntry {
  name: string;
  type: string;
  size: number;
  mode?: number;
  mtime?: Date;
  linkname?: string | null;
  uid?: number;
  gid?: number;
}

const BLOCK = 512;
const CHUNK = 256 * 1024;
const TYPE: Record<string, string | undefined> = { file: "0", link: "1", symlink: "2", directory: "5" };
/** The largest mtime (s) and size ustar's octal fields hold. */
const MAX_MTIME = 8 ** 11 - 1;
const MAX_SIZE = 8 ** 11 - 1;

/** Whether `s` is ASCII only (ustar's fields are bytes; anything else goes in pax, as UTF-8). */
const ascii = (s: string) => !/[^\x00-\x7f]/.test(s);

/** ustar's name and prefix fields for `name`, or undefined where they cannot hold it. */
function split(name: string): { name: string; prefix: string } | undefined {
  if (!ascii(name)) return undefined;
  if (name.length <= 100) return { name, prefix: "" };
  // The prefix is everything before a "/" such that the rest fits in 100 bytes.
  for (let i = name.indexOf("/"); i !== -1 && i <= 155; i = name.indexOf("/", i + 1))
    if (name.length - i - 1 <= 100 && i > 0) return { name: name.slice(i + 1), prefix: name.slice(0, i) };
  return undefined;
}

/** One pax record: "<length> <key>=<value>\n", the length counting itself, in bytes. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  const n = Buffer.byteLength(body);
  let len = n + String(n).length;
  if (String(len).length !== String(n).length) len = n + String(len).length;
  return `${len}${body}`;
}

/** The fields every header shares: magic "ustar" and version "00", device numbers 0, the checksum field as spaces. */
const TEMPLATE = Buffer.alloc(BLOCK);
TEMPLATE.write("ustar\x0000", 257, "latin1");
TEMPLATE.write("0000000", 329, "latin1");
TEMPLATE.write("0000000", 337, "latin1");
TEMPLATE.fill(0x20, 148, 156);
const TEMPLATE_SUM = TEMPLATE.reduce((a, b) => a + b, 0);

/** `s` (ASCII, or latin1 for "PaxHeader") into at most `max` bytes at `at`; the sum of its bytes. */
function text(buf: Buffer, at: number, s: string, max: number): number {
  let sum = 0;
  for (let i = 0; i < s.length && i < max; i++) sum += buf[at + i] = s.charCodeAt(i) & 0xff;
  return sum;
}

/** `value` as `width - 1` octal digits and a NUL at `at`; the sum of its bytes. */
function octal(buf: Buffer, at: number, width: number, value: number): number {
  let sum = 0;
  for (let i = width - 2; i >= 0; i--) {
    const d = 48 + (value % 8);
    buf[at + i] = d;
    sum += d;
    value = Math.floor(value / 8);
  }
  buf[at + width - 1] = 0;
  return sum;
}

/** A ustar header block at `at` in `buf`. */
function ustar(
  buf: Buffer,
  at: number,
  name: string,
  prefix: string,
  type: string,
  mode: number,
  size: number,
  mtime: number,
  linkname: string,
  uid: number,
  gid: number,
): void {
  TEMPLATE.copy(buf, at);
  let sum = TEMPLATE_SUM - 8 * 0x20;
  sum += text(buf, at, name, 100);
  sum += octal(buf, at + 100, 8, mode & 0o7777);
  sum += octal(buf, at + 108, 8, uid);
  sum += octal(buf, at + 116, 8, gid);
  sum += octal(buf, at + 124, 12, size);
  sum += octal(buf, at + 136, 12, mtime);
  sum += text(buf, at + 156, type, 1);
  sum += text(buf, at + 157, linkname, 100);
  sum += text(buf, at + 345, prefix, 155);
  sum += 8 * 0x20; // the checksum is summed with its own field as spaces
  octal(buf, at + 148, 7, sum);
  buf[at + 155] = 0x20;
}

/**
 * Writes entries into chunks of CHUNK bytes and hands each full one to `out` (which says, as a
 * stream's push does, whether it wants more: `full` tells the caller to wait for the consumer).
 */
export class TarWriter {
  private chunk = Buffer.allocUnsafe(CHUNK);
  private at = 0;
  /** False once `out` said it has enough: the caller waits before writing more. */
  wantsMore = true;

  constructor(private readonly out: (chunk: Buffer) => boolean) {}

  /** An entry's header (and pax record where needed); a file's `size` bytes must follow, by `data`. */
  header(h: TarEntry): void {
    const size = h.type === "file" ? h.size : 0;
    const linkname = h.linkname ?? "";
    const ms = h.mtime?.getTime() ?? 0;
    const mtime = Number.isFinite(ms) ? Math.min(MAX_MTIME, Math.max(0, Math.floor(ms / 1000))) : 0; // an invalid Date too
    const names = split(h.name);
    const linkOk = ascii(linkname) && linkname.length <= 100;
    // A NUL would end the name or target for every reader: what was checked is not what is written.
    if (h.name.includes("\0") || linkname.includes("\0"))
      throw new Error(
        `tar: a name or link target with a NUL byte is not written: ${JSON.stringify(h.name.slice(0, 200))}`,
      );
    const type = TYPE[h.type];
    if (!type) throw new Error(`tar: no entry of type ${JSON.stringify(h.type)} is written`);
    const mode = h.mode ?? 0o644;
    const uid = h.uid ?? 0;
    const gid = h.gid ?? 0;
    if (!names || !linkOk || size > MAX_SIZE) {
      const pax = Buffer.from(
        (names ? "" : paxRecord("path", h.name)) +
          (linkOk ? "" : paxRecord("linkpath", linkname)) +
          (size > MAX_SIZE ? paxRecord("size", String(size)) : ""),
      );
      this.block((b, at) => ustar(b, at, "PaxHeader", "", "x", mode, pax.length, mtime, "", uid, gid));
      this.data(pax);
      this.pad(pax.length);
    }
    this.block((b, at) =>
      ustar(
        b,
        at,
        names?.name ?? "PaxHeader",
        names?.prefix ?? "",
        type,
        mode,
        size > MAX_SIZE ? 0 : size,
        mtime,
        linkOk ? linkname : "",
        uid,
        gid,
      ),
    );
  }

  /** Bytes of the current file. */
  data(bytes: Buffer): void {
    for (let i = 0; i < bytes.length;) {
      if (this.at === CHUNK) this.flush();
      if (this.at === 0 && bytes.length - i >= CHUNK) {
        // A large piece goes out as it is, not copied.
        this.wantsMore = this.out(bytes.subarray(i)) && this.wantsMore;
        return;
      }
      const n = bytes.copy(this.chunk, this.at, i, Math.min(bytes.length, i + CHUNK - this.at));
      this.at += n;
      i += n;
    }
  }

  /** The zeros after a file's `size` bytes, to the next block. */
  pad(size: number): void {
    const n = (BLOCK - (size % BLOCK)) % BLOCK;
    if (n) this.zeros(n);
  }

  /** The end of the archive (two zero blocks), and the last chunk handed out. */
  end(): void {
    this.zeros(2 * BLOCK);
    this.flush();
  }

  /** Hands out what is written so far. */
  flush(): void {
    if (!this.at) return;
    const full = this.chunk.subarray(0, this.at);
    this.chunk = Buffer.allocUnsafe(CHUNK);
    this.at = 0;
    this.wantsMore = this.out(full) && this.wantsMore;
  }

  private zeros(n: number): void {
    while (n > 0) {
      if (this.at === CHUNK) this.flush();
      const k = Math.min(n, CHUNK - this.at);
      this.chunk.fill(0, this.at, this.at + k);
      this.at += k;
      n -= k;
    }
  }

  private block(write: (b: Buffer, at: number) => void): void {
    if (this.at + BLOCK > CHUNK) this.flush();
    write(this.chunk, this.at);
    this.at += BLOCK;
  }
}
