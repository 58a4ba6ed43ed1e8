// The editor's byte and text helpers (src/tools/editor-text.ts) at their edges, pure: what the
// editor tests reach only through whole commands, held here word for word and byte for byte
// (the mutation run, npm run mutation, found these unheld).
import { describe, expect, it } from "vitest";
import {
  bytesEqual,
  countNewlines,
  findAll,
  hasHiddenComponent,
  insertBytes,
  isCrlfFile,
  msg,
  parentDir,
  readOnly,
  spliceOf,
  toolName,
  truncateForModel,
  TRUNCATED_MESSAGE,
  utf8,
  withNote,
} from "../../../src/tools/editor-text.js";

const text = (b: Uint8Array) => Buffer.from(b).toString("utf8");

describe("editor-text helpers", () => {
  it("readOnly: only an editor's view", () => {
    const editor = toolName("text_editor_20250728");
    expect(readOnly({ name: editor, input: { command: "view", path: "/w" } })).toBe(true);
    expect(readOnly({ name: toolName("text_editor_20250124"), input: { command: "view" } })).toBe(true);
    expect(readOnly({ name: editor, input: { command: "create" } })).toBe(false);
    expect(readOnly({ name: "bash", input: { command: "view" } })).toBe(false);
    expect(readOnly({ name: editor, input: null })).toBe(false);
    expect(readOnly({ name: editor })).toBe(false);
    expect(readOnly({ name: editor, input: "view" })).toBe(false);
  });

  it("bytes: equality, occurrences up to a limit, newlines before an offset", () => {
    expect(bytesEqual(utf8("ab"), utf8("ab"))).toBe(true);
    expect(bytesEqual(utf8("ab"), utf8("ac"))).toBe(false);
    expect(bytesEqual(utf8("ab"), utf8("abc"))).toBe(false);
    expect(findAll(utf8("aaaa"), utf8("aa"))).toEqual([0, 1, 2]);
    expect(findAll(utf8("aaaa"), utf8("aa"), 2)).toEqual([0, 1]);
    expect(findAll(utf8("abc"), utf8("d"))).toEqual([]);
    expect(findAll(utf8("abc"), utf8(""))).toEqual([]);
    expect(countNewlines(utf8("a\n\n\n"), 1)).toBe(0);
    expect(countNewlines(utf8("a\n\n\n"), 2)).toBe(1);
    expect(countNewlines(utf8("a\n\n\n"))).toBe(3);
  });

  it("spliceOf: the one span that differs, its head and tail kept, never overlapping", () => {
    const check = (a: Uint8Array, b: Uint8Array) => {
      const { at, cut, insert } = spliceOf(a, b);
      expect(at).toBeGreaterThanOrEqual(0);
      expect(at + cut).toBeLessThanOrEqual(a.length);
      expect(Buffer.concat([a.subarray(0, at), insert, a.subarray(at + cut)]).equals(Buffer.from(b))).toBe(true);
      return { at, cut, insert: Buffer.from(insert).toString("latin1") };
    };
    expect(check(utf8("abcdef"), utf8("abXYef"))).toEqual({ at: 2, cut: 2, insert: "XY" });
    expect(check(utf8("aaaa"), utf8("aaaaa"))).toEqual({ at: 4, cut: 0, insert: "a" });
    expect(check(utf8("aaaaa"), utf8("aaa"))).toEqual({ at: 3, cut: 2, insert: "" });
    expect(check(utf8("same"), utf8("same"))).toEqual({ at: 4, cut: 0, insert: "" });
    expect(check(utf8(""), utf8("new"))).toEqual({ at: 0, cut: 0, insert: "new" });
    expect(check(utf8("old"), utf8(""))).toEqual({ at: 0, cut: 3, insert: "" });
    // Past the native blocks (4 KiB): a change in the middle of 100 KB, at either end, and random ones.
    const big = Buffer.from(Array.from({ length: 100_000 }, (_, i) => 97 + (i % 26)));
    const mid = Buffer.from(big);
    mid[51_000] = 65;
    expect(check(big, mid)).toEqual({ at: 51_000, cut: 1, insert: "A" });
    expect(check(big, Buffer.concat([Buffer.from("X"), big]))).toMatchObject({ at: 0, cut: 0 });
    expect(check(big, big.subarray(0, 99_999))).toMatchObject({ at: 99_999, cut: 1 });
    let seed = 7;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let k = 0; k < 200; k++) {
      const a = Buffer.from(Array.from({ length: rnd(9000) }, () => 97 + rnd(2)));
      const at = rnd(a.length + 1);
      const b = Buffer.concat([
        a.subarray(0, at),
        Buffer.from(Array.from({ length: rnd(5) }, () => 97 + rnd(2))),
        a.subarray(at + rnd(a.length - at + 1)),
      ]);
      check(a, b);
    }
  });

  it("CRLF files: every break is CRLF and there is one", () => {
    expect(isCrlfFile(utf8("a\r\nb\r\n"))).toBe(true);
    expect(isCrlfFile(utf8("a\r\nb\n"))).toBe(false);
    expect(isCrlfFile(utf8("\nb"))).toBe(false);
    expect(isCrlfFile(utf8("abc"))).toBe(false);
  });

  it("insert: after a line, at the top, at the end; the lines the text takes; out of range named", () => {
    const file = utf8("a\nb\nc");
    expect(text(insertBytes(file, 1, "X").bytes)).toBe("a\nX\nb\nc");
    expect(text(insertBytes(file, 2, "X\n").bytes)).toBe("a\nb\nX\nc");
    expect(text(insertBytes(file, 0, "X").bytes)).toBe("X\na\nb\nc");
    expect(text(insertBytes(file, 3, "X").bytes)).toBe("a\nb\nc\nX");
    expect(text(insertBytes(utf8("a\r\nb"), 1, "X", "\r\n").bytes)).toBe("a\r\nX\r\nb");
    expect(insertBytes(file, 1, "x\ny").lines).toBe(2);
    expect(insertBytes(file, 1, "x\ny\n").lines).toBe(2);
    expect(insertBytes(file, 1, "").lines).toBe(1);
    expect(insertBytes(file, 1, "\n").lines).toBe(1);
    expect(() => insertBytes(file, 4, "X")).toThrow("insert_line 4 outside [0, 3]");
    expect(() => insertBytes(file, -1, "X")).toThrow("insert_line -1 outside [0, 3]");
    expect(() => insertBytes(file, 1.5, "X")).toThrow(RangeError);
  });

  it("truncateForModel counts code points, and a non-positive limit cuts nothing", () => {
    const faces = "😀😀😀"; // 6 UTF-16 units, 3 code points
    expect(truncateForModel(faces, 2)).toBe("😀😀" + TRUNCATED_MESSAGE);
    expect(truncateForModel(faces, 3)).toBe(faces);
    expect(truncateForModel("abcdef", 3)).toBe("abc" + TRUNCATED_MESSAGE);
    expect(truncateForModel("abc", 3)).toBe("abc");
    expect(truncateForModel("abc", 0)).toBe("abc");
    expect(truncateForModel("abc", -1)).toBe("abc");
  });

  it("paths: parent directories and hidden components", () => {
    expect(parentDir("/a/b")).toBe("/a");
    expect(parentDir("/a")).toBe("/");
    expect(parentDir("/")).toBe("/");
    expect(parentDir("a")).toBe("/");
    expect(hasHiddenComponent("a/.git/x")).toBe(true);
    expect(hasHiddenComponent(".env")).toBe(true);
    expect(hasHiddenComponent("a.b/c")).toBe(false);
    expect(hasHiddenComponent("a/b")).toBe(false);
  });

  it("messages say what to do next; notes go on a line of their own", () => {
    expect(msg.notAbsolute("x", "/workspace/")).toContain("Maybe you meant /workspace/x?");
    expect(msg.notAbsolute(".", "/workspace")).toContain("Maybe you meant /workspace?");
    expect(msg.sameStrings("/w/a")).toMatch(/ Provide a new_str that differs from old_str\.$/);
    expect(msg.binary("/w/a")).toContain("Use bash to inspect it instead (e.g. `file /w/a` or `xxd /w/a | head`).");
    expect(msg.tooBig("/w/a", 9, 5)).toMatch(/and `sed -i` or a small script to edit\.$/);
    expect(msg.changedSinceEdit("/w/a")).toMatch(
      /applied: it would discard those changes\. View the file and use str_replace/,
    );
    expect(withNote("out\n", "N")).toBe("out\nN");
    expect(withNote("out", "N")).toBe("out\nN");
    expect(withNote("out", undefined)).toBe("out");
    expect(withNote("out", "")).toBe("out");
  });
});
