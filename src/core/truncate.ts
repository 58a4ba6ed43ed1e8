// Bounded output capture: keeps the head and the tail of a byte stream of any length,
// so a command that prints gigabytes never costs the worker more than `limit` bytes.
import { count } from "./count.js";

export class HeadTail {
  private head: Buffer[] = [];
  /** Set once bytes were cut elsewhere (skip): what comes next is the tail, never the head. */
  private headClosed = false;
  /** Set when bytes may have been cut elsewhere and their count never came (skipUnknown). */
  private unknownCut = false;
  private headLen = 0;
  private tail: Buffer[] = [];
  private tailLen = 0;
  total = 0;

  constructor(readonly limit: number) {}

  get headLimit(): number {
    return Math.ceil(this.limit / 2);
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.total += chunk.length;
    const room = this.headClosed ? 0 : this.headLimit - this.headLen;
    if (room > 0) {
      const part = chunk.subarray(0, room);
      this.head.push(part);
      this.headLen += part.length;
      chunk = chunk.subarray(part.length);
      if (chunk.length === 0) return;
    }
    const tailLimit = this.limit - this.headLimit;
    // Copy: the caller's buffer may be a slice of a much larger one we must not pin.
    this.tail.push(Buffer.from(chunk.subarray(Math.max(0, chunk.length - tailLimit))));
    this.tailLen += Math.min(chunk.length, tailLimit);
    while (this.tailLen - this.tail[0]!.length >= tailLimit) this.tailLen -= this.tail.shift()!.length;
  }

  /**
   * Counts `n` bytes cut elsewhere (in the box: OutputCut) between what was pushed and what comes
   * next: what the tail held so far is cut too, as it is no longer the end.
   */
  skip(n: number): void {
    if (n <= 0) return;
    this.total += n;
    this.tail = [];
    this.tailLen = 0;
    this.headClosed = true;
  }

  /**
   * Output past what was pushed may have been cut elsewhere and its count will not come (the box's
   * helper was cut off before the command's end): the text says so, and it counts as truncated.
   */
  skipUnknown(): void {
    this.unknownCut = true;
  }

  get cut(): number {
    return this.total - this.headLen - Math.min(this.tailLen, this.limit - this.headLimit);
  }

  get truncated(): boolean {
    return this.cut > 0 || this.unknownCut;
  }

  /** The kept text; when bytes were cut, a notice between head and tail says how many. */
  text(): string {
    const head = Buffer.concat(this.head).toString("utf8");
    let tail = Buffer.concat(this.tail);
    const tailLimit = this.limit - this.headLimit;
    if (tail.length > tailLimit) tail = tail.subarray(tail.length - tailLimit);
    if (!this.truncated) return head + tail.toString("utf8");
    if (this.unknownCut && this.cut === 0)
      return `${head}\n\n[... what the command printed past this point was cut in the sandbox, and its size is unknown: the command did not end ...]\n\n${tail.toString("utf8")}`;
    return `${head}\n\n[... ${count(this.cut, "byte")} of output cut (${this.total} in all); the start and the end are shown. Redirect to a file and use head/tail/grep to see more ...]\n\n${tail.toString("utf8")}`;
  }
}

/** Cuts a string to at most `max` characters keeping head and tail, with a notice counting `what` (a singular noun) cut. */
export function cutMiddle(text: string, max: number, what = "character"): string {
  if (text.length <= max) return text;
  const half = Math.floor(max / 2);
  const cut = text.length - 2 * half;
  return `${text.slice(0, half)}\n\n[... ${count(cut, what)} cut ...]\n\n${text.slice(text.length - half)}`;
}
