// Unit tests of the text editor semantics against the in-memory fs. Edits are checked byte for byte.
import { describe, expect, it } from "vitest";
import {
  catN,
  countOccurrences,
  findAll,
  insertBytes,
  normalizePath,
  numberLines,
  strReplaceBytes,
  TextEditor,
  TRUNCATED_MESSAGE,
  truncateForModel,
  type EditorFlavor,
  type TextEditorOptions,
} from "../../../src/tools/editor.js";
import { MemFs } from "../../support/memfs.js";

const W = "/workspace";
const b = (s: string) => Buffer.from(s, "utf8");

function setup(files: Record<string, string | Uint8Array> = {}, opts: TextEditorOptions = {}) {
  const fs = new MemFs();
  fs.setFile(`${W}/.keep`, "");
  for (const [path, content] of Object.entries(files)) fs.setFile(path, content);
  const ed = new TextEditor(fs, opts);
  return { fs, ed, run: (input: unknown) => ed.run(input) };
}

/** The exact stored bytes of a file as a Buffer (toEqual on Buffers compares bytes). */
function fileBytes(fs: MemFs, path: string): Buffer {
  const bytes = fs.getFile(path);
  if (!bytes) throw new Error(`no file ${path}`);
  return Buffer.from(bytes);
}

const writes = (fs: MemFs) => fs.log.filter((l) => l.startsWith("write ") || l.startsWith("remove "));

describe("byte preservation", () => {
  it("keeps tabs in the edited file and in the view", async () => {
    const { fs, run } = setup({ "/workspace/t.py": "def f():\n\tif x:\n\t\treturn 1\n" });
    const r = await run({
      command: "str_replace",
      path: "/workspace/t.py",
      old_str: "\t\treturn 1",
      new_str: "\t\treturn 2",
    });
    expect(r.isError).toBe(false);
    expect(fileBytes(fs, "/workspace/t.py")).toEqual(b("def f():\n\tif x:\n\t\treturn 2\n"));
    expect(r.content).toContain("     3\t\t\treturn 2\n");
  });

  it("keeps CRLF line endings, and writes new lines as CRLF in a CRLF file", async () => {
    const { fs, run } = setup({ "/workspace/w.txt": "a\r\nb\r\nc\r\n" });
    expect((await run({ command: "str_replace", path: "/workspace/w.txt", old_str: "b", new_str: "B" })).isError).toBe(
      false,
    );
    expect(fileBytes(fs, "/workspace/w.txt")).toEqual(b("a\r\nB\r\nc\r\n"));
    // A multi-line quote with bare \n (how models quote) matches the CRLF text.
    const r = await run({ command: "str_replace", path: "/workspace/w.txt", old_str: "a\nB", new_str: "x\ny" });
    expect(r.isError).toBe(false);
    expect(fileBytes(fs, "/workspace/w.txt")).toEqual(b("x\r\ny\r\nc\r\n"));
    expect(
      (await run({ command: "insert", path: "/workspace/w.txt", insert_line: 1, insert_text: "new" })).isError,
    ).toBe(false);
    expect(fileBytes(fs, "/workspace/w.txt")).toEqual(b("x\r\nnew\r\ny\r\nc\r\n"));
  });

  it("keeps a missing final newline missing", async () => {
    const { fs, run } = setup({ "/workspace/n.txt": "x = 1\ny = 2" });
    expect(
      (await run({ command: "str_replace", path: "/workspace/n.txt", old_str: "y = 2", new_str: "y = 3" })).isError,
    ).toBe(false);
    expect(fileBytes(fs, "/workspace/n.txt")).toEqual(b("x = 1\ny = 3"));
    expect(
      (await run({ command: "insert", path: "/workspace/n.txt", insert_line: 0, insert_text: "# top" })).isError,
    ).toBe(false);
    expect(fileBytes(fs, "/workspace/n.txt")).toEqual(b("# top\nx = 1\ny = 3"));
  });

  it("keeps Latin-1 bytes outside the match untouched and shows them as U+FFFD with a note", async () => {
    const latin1 = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a, 0x6f, 0x6c, 0x64, 0x0a, 0xff, 0x0a]); // "café\nold\n\xff\n"
    const { fs, run } = setup({ "/workspace/l.txt": latin1 });
    const view = await run({ command: "view", path: "/workspace/l.txt" });
    expect(view.isError).toBe(false);
    expect(view.content).toContain("     1\tcaf\uFFFD\n");
    expect(view.content).toContain("not valid UTF-8");
    const r = await run({ command: "str_replace", path: "/workspace/l.txt", old_str: "old", new_str: "new" });
    expect(r.isError).toBe(false);
    expect(r.content).toContain("not valid UTF-8");
    expect(fileBytes(fs, "/workspace/l.txt")).toEqual(
      Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a, 0x6e, 0x65, 0x77, 0x0a, 0xff, 0x0a]),
    );
    // old_str's UTF-8 "é" (C3 A9) is not the file's Latin-1 E9.
    const miss = await run({ command: "str_replace", path: "/workspace/l.txt", old_str: "café", new_str: "cafe" });
    expect(miss).toEqual({
      isError: true,
      content: "No replacement was performed, old_str `café` did not appear verbatim in /workspace/l.txt.",
    });
  });

  it("create writes file_text verbatim: tabs, no final newline, non-ASCII", async () => {
    const { fs, run } = setup();
    const r = await run({
      command: "create",
      path: "/workspace/c.go",
      file_text: 'func main() {\n\tprintln("héllo")\n}',
    });
    expect(r).toEqual({ isError: false, content: "File created successfully at: /workspace/c.go" });
    expect(fileBytes(fs, "/workspace/c.go")).toEqual(b('func main() {\n\tprintln("héllo")\n}'));
  });
});

describe("str_replace", () => {
  it("counts overlapping occurrences: `aa` in `aaa` is ambiguous", async () => {
    const { fs, run } = setup({ "/workspace/o.txt": "aaa\n" });
    const r = await run({ command: "str_replace", path: "/workspace/o.txt", old_str: "aa", new_str: "b" });
    expect(r).toEqual({
      isError: true,
      content:
        "No replacement was performed. Multiple occurrences of old_str `aa` in lines [1]. Please ensure it is unique",
    });
    expect(fileBytes(fs, "/workspace/o.txt")).toEqual(b("aaa\n"));
    expect(writes(fs)).toEqual([]);
  });

  it("lists the starting line of each multi-line occurrence, overlapping ones too", async () => {
    const { fs, run } = setup({ "/workspace/m.txt": "x\nx\nx\n" });
    const r = await run({ command: "str_replace", path: "/workspace/m.txt", old_str: "x\nx", new_str: "y" });
    expect(r.content).toBe(
      "No replacement was performed. Multiple occurrences of old_str `x\nx` in lines [1, 2]. Please ensure it is unique",
    );
    expect(fileBytes(fs, "/workspace/m.txt")).toEqual(b("x\nx\nx\n"));
  });

  it("refuses old_str equal to new_str without touching the file", async () => {
    const { fs, run } = setup({ "/workspace/s.txt": "same\n" });
    const r = await run({ command: "str_replace", path: "/workspace/s.txt", old_str: "same", new_str: "same" });
    expect(r.isError).toBe(true);
    expect(r.content).toContain("old_str and new_str are the same");
    expect(fileBytes(fs, "/workspace/s.txt")).toEqual(b("same\n"));
    expect(writes(fs)).toEqual([]);
  });

  it("an empty old_str on an empty file occurs exactly once, as in the reference: the file becomes new_str", async () => {
    const { fs, run } = setup({ "/workspace/e.txt": "" });
    const r = await run({ command: "str_replace", path: "/workspace/e.txt", old_str: "", new_str: "hello\nworld\n" });
    expect(r).toEqual({
      isError: false,
      content:
        "The file /workspace/e.txt has been edited. Here's the result of running `cat -n` on a snippet of /workspace/e.txt:\n" +
        "     1\thello\n     2\tworld\n     3\t\n" +
        "Review the changes and make sure they are as expected. Edit the file again if necessary.",
    });
    expect(fileBytes(fs, "/workspace/e.txt")).toEqual(b("hello\nworld\n"));
  });

  it("an empty old_str on an empty file can be undone (text_editor_20250124)", async () => {
    const { fs, run } = setup({ "/workspace/e.txt": "" }, { flavor: "text_editor_20250124" });
    expect((await run({ command: "str_replace", path: "/workspace/e.txt", old_str: "", new_str: "x" })).isError).toBe(
      false,
    );
    expect(fileBytes(fs, "/workspace/e.txt")).toEqual(b("x"));
    expect((await run({ command: "undo_edit", path: "/workspace/e.txt" })).isError).toBe(false);
    expect(fileBytes(fs, "/workspace/e.txt")).toEqual(b(""));
  });

  it.each<[string, string]>([
    ["abc\ndef\n", "[1, 2, 3]"],
    ["abc", "[1]"],
    ["\n", "[1, 2]"],
    ["a\r\nb\r\n", "[1, 2, 3]"],
  ])(
    "an empty old_str in the non-empty file %j occurs many times: the reference's message, every line listed",
    async (content, lines) => {
      const { fs, run } = setup({ "/workspace/e.txt": content });
      const r = await run({ command: "str_replace", path: "/workspace/e.txt", old_str: "", new_str: "x" });
      expect(r).toEqual({
        isError: true,
        content: `No replacement was performed. Multiple occurrences of old_str \`\` in lines ${lines}. Please ensure it is unique`,
      });
      expect(fileBytes(fs, "/workspace/e.txt")).toEqual(b(content));
      expect(writes(fs)).toEqual([]);
    },
  );

  it("an empty old_str in a long file lists the first lines only", async () => {
    const { run } = setup({ "/workspace/e.txt": "x\n".repeat(300) });
    const r = await run({ command: "str_replace", path: "/workspace/e.txt", old_str: "", new_str: "x" });
    const first200 = Array.from({ length: 200 }, (_, i) => i + 1).join(", ");
    expect(r.content).toBe(
      `No replacement was performed. Multiple occurrences of old_str \`\` in lines [${first200}, … (101 more)]. Please ensure it is unique`,
    );
  });

  it("requires old_str", async () => {
    const { run } = setup({ "/workspace/e.txt": "abc\n" });
    expect(await run({ command: "str_replace", path: "/workspace/e.txt", new_str: "x" })).toEqual({
      isError: true,
      content: "Parameter `old_str` is required for command: str_replace",
    });
  });

  it("does not write when the file changes between the read and the write; the concurrent content survives", async () => {
    const { fs, run } = setup({ "/workspace/c.txt": "value = 1\n" });
    fs.hooks.afterRead = (path, n, mem) => {
      if (n === 1) mem.setFile(path, "value = 42 # written by bash\n");
    };
    const r = await run({
      command: "str_replace",
      path: "/workspace/c.txt",
      old_str: "value = 1",
      new_str: "value = 2",
    });
    expect(r.isError).toBe(true);
    expect(r.content).toContain("changed while this edit was being made");
    expect(r.content).toContain("View the file again");
    expect(fileBytes(fs, "/workspace/c.txt")).toEqual(b("value = 42 # written by bash\n"));
    expect(writes(fs)).toEqual([]);
  });

  it("insert also refuses to land on a concurrently changed file", async () => {
    const { fs, run } = setup({ "/workspace/c.txt": "a\nb\n" });
    fs.hooks.afterRead = (path, n, mem) => {
      if (n === 1) mem.setFile(path, "other\n");
    };
    const r = await run({ command: "insert", path: "/workspace/c.txt", insert_line: 1, insert_text: "x" });
    expect(r.isError).toBe(true);
    expect(fileBytes(fs, "/workspace/c.txt")).toEqual(b("other\n"));
  });
});

describe("refused files", () => {
  it("refuses a 10 MB file for view and edits, without reading it, and leaves it untouched", async () => {
    const big = new Uint8Array(10 * 1024 * 1024).fill(0x61);
    big[100] = 0x0a;
    const { fs, run } = setup({ "/workspace/big.txt": big });
    for (const input of [
      { command: "view", path: "/workspace/big.txt" },
      { command: "str_replace", path: "/workspace/big.txt", old_str: "aaa\n", new_str: "b" },
      { command: "insert", path: "/workspace/big.txt", insert_line: 0, insert_text: "x" },
    ]) {
      const r = await run(input);
      expect(r.isError).toBe(true);
      expect(r.content).toContain("10485760 bytes, over the editor's limit of 5242880 bytes");
      expect(r.content).toMatch(/use bash/i);
      expect(r.content).toContain("grep -n");
      expect(r.content).toContain("sed");
    }
    expect(fs.reads("/workspace/big.txt")).toBe(0);
    expect(Buffer.from(fs.getFile("/workspace/big.txt")!).equals(Buffer.from(big))).toBe(true);
    expect(writes(fs)).toEqual([]);
  });

  it("takes the size bound as an option", async () => {
    const { run } = setup({ "/workspace/s.txt": "0123456789" }, { maxFileBytes: 9 });
    expect((await run({ command: "view", path: "/workspace/s.txt" })).content).toContain(
      "over the editor's limit of 9 bytes",
    );
  });

  it("refuses a binary file (NUL bytes) for view and edits", async () => {
    const bin = Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x00, 0x01, 0x0a, 0x61]);
    const { fs, run } = setup({ "/workspace/a.out": bin });
    for (const input of [
      { command: "view", path: "/workspace/a.out" },
      { command: "str_replace", path: "/workspace/a.out", old_str: "ELF", new_str: "FLE" },
      { command: "insert", path: "/workspace/a.out", insert_line: 1, insert_text: "x" },
    ]) {
      const r = await run(input);
      expect(r.isError).toBe(true);
      expect(r.content).toContain("looks binary (it contains NUL bytes)");
    }
    expect(fileBytes(fs, "/workspace/a.out")).toEqual(bin);
  });

  it("refuses a path that is neither a file nor a directory", async () => {
    const { fs, run } = setup();
    fs.addOther("/workspace/fifo");
    const r = await run({ command: "view", path: "/workspace/fifo" });
    expect(r.isError).toBe(true);
    expect(r.content).toContain("neither a regular file nor a directory");
  });
});

describe("malformed input names the bad field", () => {
  const cases: [string, unknown, string][] = [
    ["not an object", null, "JSON object"],
    ["an array", [], "JSON object"],
    ["missing command", { path: "/workspace/a" }, "Parameter `command` is required"],
    ["command not a string", { command: 3, path: "/workspace/a" }, "Invalid `command` parameter"],
    ["missing path", { command: "view" }, "Parameter `path` is required"],
    ["path not a string", { command: "view", path: ["/workspace/a"] }, "Invalid `path` parameter"],
    [
      "file_text not a string",
      { command: "create", path: "/workspace/new", file_text: 5 },
      "Invalid `file_text` parameter",
    ],
    [
      "old_str not a string",
      { command: "str_replace", path: "/workspace/a.txt", old_str: 1 },
      "Invalid `old_str` parameter",
    ],
    [
      "new_str not a string",
      { command: "str_replace", path: "/workspace/a.txt", old_str: "a", new_str: {} },
      "Invalid `new_str` parameter",
    ],
    [
      "insert_line a string",
      { command: "insert", path: "/workspace/a.txt", insert_line: "1", insert_text: "x" },
      "Invalid `insert_line` parameter",
    ],
    [
      "insert_line fractional",
      { command: "insert", path: "/workspace/a.txt", insert_line: 1.5, insert_text: "x" },
      "Invalid `insert_line` parameter",
    ],
    [
      "insert_text not a string",
      { command: "insert", path: "/workspace/a.txt", insert_line: 1, insert_text: 7 },
      "Invalid `insert_text` parameter",
    ],
  ];
  it.each(cases)("%s", async (_name, input, expected) => {
    const { run } = setup({ "/workspace/a.txt": "a\nb\n" });
    const r = await run(input);
    expect(r.isError).toBe(true);
    expect(r.content).toContain(expected);
  });

  it.each([["1,2"], [[1]], [[1, 2, 3]], [[1.5, 2]], [["1", "2"]]])(
    "view_range %j gets the reference's message",
    async (range) => {
      const { run } = setup({ "/workspace/a.txt": "a\nb\n" });
      expect(await run({ command: "view", path: "/workspace/a.txt", view_range: range })).toEqual({
        isError: true,
        content: "Invalid `view_range`. It should be a list of two integers.",
      });
    },
  );

  it("treats null optional parameters as absent", async () => {
    const { run } = setup({ "/workspace/a.txt": "a\n" });
    expect((await run({ command: "view", path: "/workspace/a.txt", view_range: null })).isError).toBe(false);
    expect((await run({ command: "create", path: "/workspace/b.txt", file_text: null })).content).toBe(
      "Parameter `file_text` is required for command: create",
    );
  });
});

describe("paths and commands", () => {
  it("suggests /workspace for a relative path", async () => {
    const { run } = setup();
    expect(await run({ command: "view", path: "src/app.ts" })).toEqual({
      isError: true,
      content:
        "The path src/app.ts is not an absolute path, it should start with `/`. Maybe you meant /workspace/src/app.ts?",
    });
    const other = new TextEditor(new MemFs(), { workspace: "/repo" });
    expect((await other.run({ command: "view", path: "./a.ts" })).content).toContain("Maybe you meant /repo/a.ts?");
  });

  it("normalizes the path like pathlib", async () => {
    const { run } = setup();
    expect((await run({ command: "view", path: "/workspace//missing.txt/" })).content).toBe(
      "The path /workspace/missing.txt does not exist. Please provide a valid path.",
    );
  });

  it.each<[EditorFlavor, string]>([
    [
      "text_editor_20250728",
      "Unrecognized command delete. The allowed commands for the str_replace_based_edit_tool tool are: view, create, str_replace, insert",
    ],
    [
      "text_editor_20250124",
      "Unrecognized command delete. The allowed commands for the str_replace_editor tool are: view, create, str_replace, insert, undo_edit",
    ],
  ])("unknown command for %s", async (flavor, message) => {
    const { run } = setup({ "/workspace/a.txt": "a" }, { flavor });
    expect(await run({ command: "delete", path: "/workspace/a.txt" })).toEqual({ isError: true, content: message });
  });

  it("only view works on a directory", async () => {
    const { run } = setup({ "/workspace/d/a.txt": "a" });
    expect((await run({ command: "str_replace", path: "/workspace/d", old_str: "a" })).content).toBe(
      "The path /workspace/d is a directory and only the `view` command can be used on directories",
    );
    expect((await run({ command: "view", path: "/workspace/d", view_range: [1, 2] })).content).toBe(
      "The `view_range` parameter is not allowed when `path` points to a directory.",
    );
  });

  it("lists a directory two levels deep without hidden entries", async () => {
    const { run } = setup({
      "/workspace/p/a.txt": "",
      "/workspace/p/.env": "S=1",
      "/workspace/p/s/t/u.txt": "",
      "/workspace/p/s/.h/x": "",
    });
    expect(await run({ command: "view", path: "/workspace/p" })).toEqual({
      isError: false,
      content:
        "Here's the files and directories up to 2 levels deep in /workspace/p, excluding hidden items:\n" +
        "/workspace/p\n/workspace/p/a.txt\n/workspace/p/s\n/workspace/p/s/t\n\n",
    });
  });

  it("clips a directory listing at max_characters like a file view, with the reference's notice", async () => {
    const { run } = setup({ "/workspace/p/a.txt": "", "/workspace/p/s/t/u.txt": "" }, { maxCharacters: 20 });
    // The reference clips find's output (one path per line), then adds the header and a newline.
    expect(await run({ command: "view", path: "/workspace/p" })).toEqual({
      isError: false,
      content:
        "Here's the files and directories up to 2 levels deep in /workspace/p, excluding hidden items:\n" +
        `/workspace/p\n/worksp${TRUNCATED_MESSAGE}\n`,
    });
    // Exactly at the limit: not clipped.
    const body = "/workspace/p\n/workspace/p/a.txt\n/workspace/p/s\n/workspace/p/s/t\n";
    const exact = setup({ "/workspace/p/a.txt": "", "/workspace/p/s/t/u.txt": "" }, { maxCharacters: body.length });
    expect((await exact.run({ command: "view", path: "/workspace/p" })).content).toBe(
      `Here's the files and directories up to 2 levels deep in /workspace/p, excluding hidden items:\n${body}\n`,
    );
  });

  it("clips a big directory listing at the default 16,000 characters", async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 2000; i++)
      files[`/workspace/big/dir-${String(i).padStart(4, "0")}/file-with-a-long-name-${i}.txt`] = "";
    const { run } = setup(files);
    const r = await run({ command: "view", path: "/workspace/big" });
    expect(r.isError).toBe(false);
    const header = "Here's the files and directories up to 2 levels deep in /workspace/big, excluding hidden items:\n";
    expect(r.content.startsWith(`${header}/workspace/big\n`)).toBe(true);
    expect(r.content.endsWith(`${TRUNCATED_MESSAGE}\n`)).toBe(true);
    expect(r.content.length).toBe(header.length + 16_000 + TRUNCATED_MESSAGE.length + 1);
  });

  it("create makes missing parents and never overwrites", async () => {
    const { fs, run } = setup({ "/workspace/x.txt": "keep" });
    expect((await run({ command: "create", path: "/workspace/deep/er/f.txt", file_text: "hi\n" })).isError).toBe(false);
    expect(fileBytes(fs, "/workspace/deep/er/f.txt")).toEqual(b("hi\n"));
    expect((await run({ command: "create", path: "/workspace/x.txt", file_text: "new" })).content).toBe(
      "File already exists at: /workspace/x.txt. Cannot overwrite files using command `create`.",
    );
    expect((await run({ command: "create", path: "/workspace/deep", file_text: "new" })).isError).toBe(true);
    expect(fileBytes(fs, "/workspace/x.txt")).toEqual(b("keep"));
  });

  it("turns filesystem failures into an is_error result with the message", async () => {
    const { fs, run } = setup({ "/workspace/a.txt": "a" });
    fs.hooks.failWith = new Error("container 1234 is not running");
    const r = await run({ command: "view", path: "/workspace/a.txt" });
    expect(r.isError).toBe(true);
    expect(r.content).toContain("container 1234 is not running");
    expect(r.content).toContain("/workspace/a.txt");
  });
});

describe("insert", () => {
  const path = "/workspace/i.txt";

  it("inserts at 0 and after the last line", async () => {
    const { fs, run } = setup({ [path]: "a\nb\n" });
    const top = await run({ command: "insert", path, insert_line: 0, insert_text: "top" });
    expect(top.content).toBe(
      "The file /workspace/i.txt has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n" +
        "     1\ttop\n     2\ta\n     3\tb\n     4\t\n" +
        "Review the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary.",
    );
    expect(fileBytes(fs, path)).toEqual(b("top\na\nb\n"));
    expect((await run({ command: "insert", path, insert_line: 3, insert_text: "end" })).isError).toBe(false);
    expect(fileBytes(fs, path)).toEqual(b("top\na\nb\nend\n"));
    // After the empty piece that follows the final newline, as the reference numbers lines.
    expect((await run({ command: "insert", path, insert_line: 5, insert_text: "tail" })).isError).toBe(false);
    expect(fileBytes(fs, path)).toEqual(b("top\na\nb\nend\n\ntail"));
  });

  it("inserts at the end of a file without a final newline", async () => {
    const { fs, run } = setup({ [path]: "a\nb" });
    expect((await run({ command: "insert", path, insert_line: 2, insert_text: "c" })).isError).toBe(false);
    expect(fileBytes(fs, path)).toEqual(b("a\nb\nc"));
  });

  it("adds no blank line for an insert_text ending with a newline", async () => {
    const { fs, run } = setup({ [path]: "a\nb\n" });
    const r = await run({ command: "insert", path, insert_line: 1, insert_text: "x\ny\n" });
    expect(fileBytes(fs, path)).toEqual(b("a\nx\ny\nb\n"));
    expect(r.content).toContain("     1\ta\n     2\tx\n     3\ty\n     4\tb\n     5\t\nReview");
  });

  it("rejects an insert_line out of range", async () => {
    const { fs, run } = setup({ [path]: "a\nb\n" });
    expect((await run({ command: "insert", path, insert_line: 4, insert_text: "x" })).content).toBe(
      "Invalid `insert_line` parameter: 4. It should be within the range of lines of the file: [0, 3]",
    );
    expect((await run({ command: "insert", path, insert_line: -1, insert_text: "x" })).isError).toBe(true);
    expect(fileBytes(fs, path)).toEqual(b("a\nb\n"));
  });

  it("uses insert_text in 20250728 and new_str in 20250124", async () => {
    const a = setup({ [path]: "a\n" });
    expect(await a.run({ command: "insert", path, insert_line: 1, new_str: "x" })).toEqual({
      isError: true,
      content: "Parameter `insert_text` is required for command: insert",
    });
    const c = setup({ [path]: "a\n" }, { flavor: "text_editor_20250124" });
    expect(await c.run({ command: "insert", path, insert_line: 1, insert_text: "x" })).toEqual({
      isError: true,
      content: "Parameter `new_str` is required for command: insert",
    });
    expect(await a.run({ command: "insert", path, insert_text: "x" })).toEqual({
      isError: true,
      content: "Parameter `insert_line` is required for command: insert",
    });
  });
});

describe("undo_edit (text_editor_20250124)", () => {
  const path = "/workspace/u.txt";
  const opts = { flavor: "text_editor_20250124" as const };

  it("undoes edits in reverse order, byte for byte", async () => {
    const original = Buffer.from([0x61, 0x09, 0x62, 0x0d, 0x0a, 0xe9]);
    const { fs, run } = setup({ [path]: original }, opts);
    await run({ command: "str_replace", path, old_str: "b", new_str: "B" });
    await run({ command: "insert", path, insert_line: 0, new_str: "top" });
    expect(fileBytes(fs, path)).toEqual(Buffer.from("top\r\na\tB\r\n\xe9", "latin1"));
    expect((await run({ command: "undo_edit", path })).isError).toBe(false);
    expect(fileBytes(fs, path)).toEqual(Buffer.from("a\tB\r\n\xe9", "latin1"));
    const r = await run({ command: "undo_edit", path });
    expect(r.content).toBe(
      "Last edit to /workspace/u.txt undone successfully. Here's the result of running `cat -n` on /workspace/u.txt:\n" +
        "     1\ta\tb\r\n     2\t\uFFFD\n" +
        "Note: this file is not valid UTF-8; its invalid bytes are shown as U+FFFD (\uFFFD). Edits leave those bytes untouched, but old_str cannot match them: quote only the surrounding valid text.",
    );
    expect(fileBytes(fs, path)).toEqual(original);
    expect(await run({ command: "undo_edit", path })).toEqual({
      isError: true,
      content: "No edit history found for /workspace/u.txt.",
    });
  });

  it("undo of create removes the file", async () => {
    const { fs, run } = setup({}, opts);
    await run({ command: "create", path, file_text: "new" });
    expect(await run({ command: "undo_edit", path })).toEqual({
      isError: false,
      content:
        "Last edit to /workspace/u.txt undone successfully. That edit created the file, so /workspace/u.txt has been removed.",
    });
    expect(fs.has(path)).toBe(false);
  });

  it("refuses to undo over a change made after the edit", async () => {
    const { fs, run } = setup({ [path]: "a\n" }, opts);
    await run({ command: "str_replace", path, old_str: "a", new_str: "b" });
    fs.setFile(path, "c\n");
    const r = await run({ command: "undo_edit", path });
    expect(r.isError).toBe(true);
    expect(r.content).toContain("changed after your last edit");
    expect(fileBytes(fs, path)).toEqual(b("c\n"));
  });

  it("keeps history per editor instance and per path", async () => {
    const { fs, run } = setup({ [path]: "a\n", "/workspace/v.txt": "v\n" }, opts);
    await run({ command: "str_replace", path, old_str: "a", new_str: "b" });
    expect((await run({ command: "undo_edit", path: "/workspace/v.txt" })).content).toBe(
      "No edit history found for /workspace/v.txt.",
    );
    expect((await new TextEditor(fs, opts).run({ command: "undo_edit", path })).content).toBe(
      "No edit history found for /workspace/u.txt.",
    );
  });
});

describe("view", () => {
  const path = "/workspace/r.txt";
  const file = "L1\nL2\nL3\nL4";
  const header = "Here's the result of running `cat -n` on /workspace/r.txt:\n";

  it.each<[[number, number], string]>([
    [[1, 1], "     1\tL1\n"],
    [[3, -1], "     3\tL3\n     4\tL4\n"],
    [[4, 4], "     4\tL4\n"],
  ])("view_range %j", async (range, body) => {
    const { run } = setup({ [path]: file });
    expect(await run({ command: "view", path, view_range: range })).toEqual({ isError: false, content: header + body });
  });

  it.each<[[number, number], string]>([
    [
      [0, 2],
      "Invalid `view_range`: [0, 2]. Its first element `0` should be within the range of lines of the file: [1, 4]",
    ],
    [
      [5, 5],
      "Invalid `view_range`: [5, 5]. Its first element `5` should be within the range of lines of the file: [1, 4]",
    ],
    [
      [1, 5],
      "Invalid `view_range`: [1, 5]. Its second element `5` should be smaller than the number of lines in the file: `4`",
    ],
    [[3, 2], "Invalid `view_range`: [3, 2]. Its second element `2` should be larger or equal than its first `3`"],
    [[2, -2], "Invalid `view_range`: [2, -2]. Its second element `-2` should be larger or equal than its first `2`"],
  ])("view_range %j is rejected", async (range, message) => {
    const { run } = setup({ [path]: file });
    expect(await run({ command: "view", path, view_range: range })).toEqual({ isError: true, content: message });
  });

  it("clips at max_characters, counting code points", async () => {
    const { run } = setup({ [path]: "0123456789abc", "/workspace/e.txt": "😀😀😀" }, { maxCharacters: 10 });
    expect((await run({ command: "view", path })).content).toBe(`${header}     1\t0123456789${TRUNCATED_MESSAGE}\n`);
    const emoji = await run({ command: "view", path: "/workspace/e.txt", view_range: [1, 1] });
    expect(emoji.content).toBe("Here's the result of running `cat -n` on /workspace/e.txt:\n     1\t😀😀😀\n");
    expect(truncateForModel("😀😀😀", 2)).toBe(`😀😀${TRUNCATED_MESSAGE}`);
    expect(truncateForModel("😀😀😀", 3)).toBe("😀😀😀");
  });

  it("clips edit snippets at max_characters too", async () => {
    const { run } = setup({ [path]: "aaaaaaaaaaaaaaaaaaaa\nb\n" }, { maxCharacters: 5 });
    const r = await run({ command: "str_replace", path, old_str: "b", new_str: "c" });
    expect(r.content).toContain(`     1\taaaaa${TRUNCATED_MESSAGE}\nReview the changes`);
  });
});

describe("pure helpers", () => {
  it("findAll and countOccurrences count overlapping matches", () => {
    expect(findAll(b("aaa"), b("aa"))).toEqual([0, 1]);
    expect(countOccurrences(b("ababab"), b("abab"))).toBe(2);
    expect(countOccurrences(b("abc"), b(""))).toBe(0);
  });

  it("strReplaceBytes touches only the range", () => {
    expect(Buffer.from(strReplaceBytes(Buffer.from([0xff, 0x61, 0xfe]), 1, 1, b("xy")))).toEqual(
      Buffer.from([0xff, 0x78, 0x79, 0xfe]),
    );
  });

  it("insertBytes follows the reference's line pieces", () => {
    const ins = (file: string, k: number, text: string, eol?: string) =>
      Buffer.from(insertBytes(b(file), k, text, eol).bytes).toString();
    expect(ins("", 0, "x")).toBe("x\n");
    expect(ins("a\nb", 1, "x\n")).toBe("a\nx\nb");
    expect(ins("a\r\nb", 2, "x", "\r\n")).toBe("a\r\nb\r\nx");
    expect(insertBytes(b("a\n"), 1, "x\ny\n").lines).toBe(2);
    expect(() => insertBytes(b("a"), 3, "x")).toThrow(RangeError);
  });

  it("numberLines and catN format like cat -n", () => {
    expect(numberLines("a\n\tb", 9)).toBe("     9\ta\n    10\t\tb");
    expect(catN("x", "f")).toBe("Here's the result of running `cat -n` on f:\n     1\tx\n");
  });

  it("normalizePath matches pathlib", () => {
    expect(normalizePath("/a//b/./c/")).toBe("/a/b/c");
    expect(normalizePath("/")).toBe("/");
    expect(normalizePath("")).toBe(".");
    expect(normalizePath("./x/../y")).toBe("x/../y");
  });
});

describe("a filesystem that reads a file with its stat", () => {
  /** MemFs whose stat brings a file within the bound back read, as SandboxFs does through the file agent. */
  class ReadingStatFs extends MemFs {
    override async stat(path: string, read?: number) {
      const st = await super.stat(path);
      const bytes = this.getFile(path);
      return st.type === "file" && read !== undefined && bytes && bytes.byteLength <= read
        ? { ...st, bytes: bytes.slice() }
        : st;
    }
    /** Compare-and-write in one step, as the file agent's. */
    async writeIfUnchanged(path: string, expected: Uint8Array, next: Uint8Array) {
      const now = this.getFile(path);
      if (!now || !Buffer.from(now).equals(Buffer.from(expected))) return false;
      this.setFile(path, next);
      return true;
    }
  }
  const text = "one\ntwo\nthree\n";
  const both = async (calls: unknown[], opts: TextEditorOptions = {}) =>
    Promise.all(
      [new MemFs(), new ReadingStatFs()].map(async (fs) => {
        fs.setFile(`${W}/f.txt`, text);
        const ed = new TextEditor(fs, opts);
        const out = [];
        for (const c of calls) out.push(await ed.run(c));
        return { out, bytes: fileBytes(fs, `${W}/f.txt`), reads: fs.log.filter((l) => l.startsWith("read ")) };
      }),
    );

  it("answers as one that does not, and reads nothing more", async () => {
    const calls = [
      { command: "view", path: `${W}/f.txt` },
      { command: "str_replace", path: `${W}/f.txt`, old_str: "two", new_str: "TWO" },
      { command: "insert", path: `${W}/f.txt`, insert_line: 1, new_str: "1.5" },
      { command: "str_replace", path: `${W}/f.txt`, old_str: "absent", new_str: "x" },
      { command: "undo_edit", path: `${W}/f.txt` },
    ];
    const [plain, reading] = await both(calls, { flavor: "text_editor_20250124" });
    expect(reading!.out).toEqual(plain!.out);
    expect(reading!.bytes).toEqual(plain!.bytes);
    expect(plain!.reads.length).toBeGreaterThan(0);
    expect(reading!.reads).toEqual([]);
  });

  it("a file over the bound is refused by its size, never read", async () => {
    const [plain, reading] = await both([{ command: "view", path: `${W}/f.txt` }], { maxFileBytes: 4 });
    expect(reading!.out).toEqual(plain!.out);
    expect(reading!.out[0]!.content).toMatch(/too large|bytes/i);
    expect(reading!.reads).toEqual([]);
  });
});
