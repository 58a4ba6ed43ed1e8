// The in-sandbox helper's framing (src/sandbox/py/helper.py, whose header says what each frame
// means), typed and pure: frames written and read, bounded. helper.ts carries processes over it.
import { count } from "../core/count.js";
import { kinded } from "../core/errors.js";

/** Bumped with any change to the frames; the helper's VERSION must be the same (a test holds them). */
export const HELPER_VERSION = 2;
/** Bytes of a channel's stdin or output that may be out unacknowledged, each way. */
export const WINDOW = 1 << 20;
/** The largest data frame either side sends. */
export const CHUNK = 64 << 10;
/** A frame from the helper longer than this is a protocol violation (its data frames are at most CHUNK). */
export const MAX_FROM_HELPER = CHUNK;

const HEAD = 9;

/** worker -> helper: spawn, stdin data, stdin EOF, drop the channel, output acknowledged, cut the output. */
export type ToHelper = "S" | "D" | "E" | "C" | "A" | "L";
/** helper -> worker: stdout, stderr, stdin acknowledged, bytes cut, output ended, exit status. */
export type FromHelper = "O" | "e" | "a" | "K" | "Z" | "X";
const FROM = new Set<string>(["O", "e", "a", "K", "Z", "X"]);
/** The longest start or end marker of a cut (the helper's CUT_MARK_MAX). */
export const CUT_MARK_MAX = 256;
/** The largest head or tail a cut keeps (the helper's CUT_MAX): a larger bound is cut to it. */
export const CUT_MAX = 64 << 20;

export interface Frame {
  kind: FromHelper;
  channel: number;
  body: Buffer;
}

/** What a spawn asks: the program, as whom, with what over the helper's environment, where, its output cut how. */
export interface SpawnRequest {
  argv: string[];
  user: string;
  env: string[];
  cwd: string;
  cut?: { head: number; tail: number };
  gate?: "read" | "write";
}

export function frame(kind: ToHelper, channel: number, body: Buffer = Buffer.alloc(0)): Buffer {
  const b = Buffer.allocUnsafe(HEAD + body.length);
  b[0] = kind.charCodeAt(0);
  b.writeUInt32BE(channel, 1);
  b.writeUInt32BE(body.length, 5);
  body.copy(b, HEAD);
  return b;
}

export const spawnFrame = (channel: number, req: SpawnRequest) => frame("S", channel, Buffer.from(JSON.stringify(req)));
export const countFrame = (kind: "A", channel: number, n: number) => frame(kind, channel, u32(n));

/** An L frame: the channel's output from now on cut to `head` bytes after `start` and `tail` before `end`. */
export function cutFrame(channel: number, c: { head: number; tail: number; start?: Buffer; end?: Buffer }): Buffer {
  const start = c.start ?? Buffer.alloc(0);
  const end = c.end ?? Buffer.alloc(0);
  if (start.length > CUT_MARK_MAX || end.length > CUT_MARK_MAX)
    throw new RangeError(`a cut's markers are at most ${count(CUT_MARK_MAX, "byte")}`);
  const b = Buffer.allocUnsafe(10);
  b.writeUInt32BE(Math.min(c.head, CUT_MAX), 0);
  b.writeUInt32BE(Math.min(c.tail, CUT_MAX), 4);
  b.writeUInt16BE(start.length, 8);
  return frame("L", channel, Buffer.concat([b, start, end]));
}

function u32(n: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(n, 0);
  return b;
}

/** The count of an `a` frame, or the code of an `X` frame (JSON {code}); undefined when malformed. */
export const countOf = (f: Frame) => (f.body.length === 4 ? f.body.readUInt32BE(0) : undefined);
/** The bytes a `K` frame says were cut; undefined when malformed. */
export const cutOf = (f: Frame) => (f.body.length === 8 ? Number(f.body.readBigUInt64BE(0)) : undefined);
export function exitOf(f: Frame): number | undefined {
  try {
    const code = (JSON.parse(f.body.toString()) as { code?: unknown }).code;
    return Number.isInteger(code) ? (code as number) : undefined;
  } catch {
    return undefined;
  }
}

/** The helper said what it never says: its connection is dropped (every process on it ends). */
export class HelperProtocolError extends kinded("internal") {}

/** Splits the helper's stdout into frames; throws HelperProtocolError on a kind or length it never sends. */
export class FrameReader {
  private buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Frame[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const frames: Frame[] = [];
    let at = 0;
    while (this.buf.length - at >= HEAD) {
      const kind = String.fromCharCode(this.buf[at]!);
      const len = this.buf.readUInt32BE(at + 5);
      if (!FROM.has(kind) || len > MAX_FROM_HELPER)
        throw new HelperProtocolError(
          `the sandbox's helper sent a frame it never sends (kind ${JSON.stringify(kind)}, ${count(len, "byte")})`,
        );
      if (this.buf.length - at < HEAD + len) break;
      frames.push({
        kind: kind as FromHelper,
        channel: this.buf.readUInt32BE(at + 1),
        body: this.buf.subarray(at + HEAD, at + HEAD + len),
      });
      at += HEAD + len;
    }
    this.buf = at === this.buf.length ? Buffer.alloc(0) : Buffer.from(this.buf.subarray(at));
    return frames;
  }
}
