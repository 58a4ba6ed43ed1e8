// Bounded output capture (HeadTail) and cutMiddle: exact head, tail, counts and notices. Pure.
import { describe, expect, it } from "vitest";
import { cutMiddle, HeadTail } from "../../../src/core/truncate.js";

const feed = (limit: number, ...chunks: string[]) => {
  const h = new HeadTail(limit);
  for (const c of chunks) h.push(Buffer.from(c));
  return h;
};
const notice = (cut: number, total: number) =>
  `\n\n[... ${cut} ${cut === 1 ? "byte" : "bytes"} of output cut (${total} in all); the start and the end are shown. Redirect to a file and use head/tail/grep to see more ...]\n\n`;

describe("HeadTail", () => {
  it("keeps everything up to the limit, in one chunk or many, without a notice", () => {
    for (const chunks of [
      ["0123456789"],
      ["01", "2345", "", "6789"],
      ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"],
    ]) {
      const h = feed(10, ...chunks);
      expect(h.text()).toBe("0123456789");
      expect(h).toMatchObject({ total: 10, cut: 0, truncated: false });
    }
    expect(feed(10).text()).toBe("");
    expect(feed(10, "").total).toBe(0);
  });

  it("past the limit keeps the first ceil(limit/2) and the last floor(limit/2) bytes and says what was cut", () => {
    const h = feed(10, "abcdefghijklmnopqrstuvwxyz");
    expect(h.headLimit).toBe(5);
    expect(h).toMatchObject({ total: 26, cut: 16, truncated: true });
    expect(h.text()).toBe(`abcde${notice(16, 26)}vwxyz`);
    const odd = feed(5, "abcdefghij");
    expect(odd.headLimit).toBe(3);
    expect(odd.text()).toBe(`abc${notice(5, 10)}ij`);
  });

  it("one byte over the limit is cut and said", () => {
    const h = feed(10, "0123456789X");
    expect(h).toMatchObject({ total: 11, cut: 1, truncated: true });
    expect(h.text()).toBe(`01234${notice(1, 11)}6789X`);
    expect(h.text()).toContain("[... 1 byte of output cut (11 in all)");
  });

  it("the tail is the newest bytes whatever the chunking", () => {
    const text = Array.from({ length: 200 }, (_, i) => String.fromCharCode(97 + (i % 26))).join("");
    for (const size of [1, 3, 7, 50, 199]) {
      const chunks: string[] = [];
      for (let i = 0; i < text.length; i += size) chunks.push(text.slice(i, i + size));
      const h = feed(20, ...chunks);
      expect(h.text(), `chunks of ${size}`).toBe(`${text.slice(0, 10)}${notice(180, 200)}${text.slice(-10)}`);
    }
  });

  it("a chunk that fills the head and overflows puts its rest in the tail", () => {
    const h = feed(10, "abc", "defghijk");
    expect(h.text()).toBe(`abcde${notice(1, 11)}ghijk`);
  });

  it("copies the tail it keeps: the caller may reuse its buffer (the head is a view of the caller's)", () => {
    const h = new HeadTail(4);
    h.push(Buffer.from("ab"));
    const buf = Buffer.from("cdef");
    h.push(buf);
    buf.fill(0x7a);
    expect(h.text()).toBe(`ab${notice(2, 6)}ef`);
  });

  it("a huge stream costs no more than the limit", () => {
    const h = new HeadTail(1000);
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    for (let i = 0; i < 200; i++) h.push(chunk);
    expect(h.total).toBe(200 * 64 * 1024);
    expect(h.cut).toBe(200 * 64 * 1024 - 1000);
    expect(h.text().length).toBe(1000 + notice(h.cut, h.total).length);
  });
});

describe("cutMiddle", () => {
  it("leaves short text alone and cuts long text to head and tail with a notice", () => {
    expect(cutMiddle("abcdef", 6)).toBe("abcdef");
    expect(cutMiddle("", 0)).toBe("");
    expect(cutMiddle("abcdefg", 6)).toBe("abc\n\n[... 1 character cut ...]\n\nefg");
    expect(cutMiddle("abcdefghij", 5)).toBe("ab\n\n[... 6 characters cut ...]\n\nij");
    expect(cutMiddle("abcdefghij", 4, "line")).toBe("ab\n\n[... 6 lines cut ...]\n\nij");
    expect(cutMiddle("abc", 2, "line")).toBe("a\n\n[... 1 line cut ...]\n\nc");
  });
});
