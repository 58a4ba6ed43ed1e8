// The text editor tools (text_editor_20250728 / text_editor_20250124) over an abstract async filesystem,
// so the same semantics run against an in-memory fs in tests and a Docker sandbox in production.
// Pure logic: no fs, no docker. Byte and message helpers live in editor-text.ts.
import { z } from "zod";
import { DEFAULT_EDITOR_TOOL } from "../core/spec/names.js";
import {
  allowedCommands,
  bytesEqual,
  catN,
  countNewlines,
  decodeText,
  DEFAULT_MAX_CHARACTERS,
  DEFAULT_MAX_FILE_BYTES,
  DEFAULT_WORKSPACE,
  findAll,
  hasHiddenComponent,
  hasNul,
  insertBytes,
  insertTextParam,
  isCrlfFile,
  lineCount,
  msg,
  normalizePath,
  parentDir,
  SNIPPET_LINES,
  strReplaceBytes,
  toCrlf,
  truncateForModel,
  utf8,
  withNote,
  type EditorFlavor,
} from "./editor-text.js";
import { kinded } from "../core/errors.js";

export * from "./editor-text.js";

/** What EditorFs.stat says of a path. */
export interface EditorStat {
  /** What it is; "missing" where nothing is. */
  type: "file" | "directory" | "missing" | "other";
  /** Its size in bytes (0 when missing). */
  size: number;
  /** A regular file's content, when stat was asked to `read` it and could (else the editor reads it). */
  bytes?: Uint8Array;
}

/** The filesystem the editor works on: a sandbox's files (SandboxFs), or any other. */
export interface EditorFs {
  /**
   * Follows symlinks. With `read`, it may bring a regular file of at most that many bytes back
   * with the stat (EditorStat.bytes), read as `read` reads it: one trip to the box instead of two.
   */
  stat(path: string, read?: number): Promise<EditorStat>;
  /** A regular file's bytes; follows symlinks. */
  read(path: string): Promise<Uint8Array>;
  /** Overwriting keeps mode and owner; a missing file is created (its parent must exist). */
  write(path: string, bytes: Uint8Array): Promise<void>;
  /** Makes a directory and its missing parents. */
  mkdirp(dir: string): Promise<void>;
  /** Removes a file (undo of a create). */
  remove(path: string): Promise<void>;
  /**
   * Optional compare-and-write: writes `next` only if the file still holds `expected`; resolves
   * false if it changed, undefined if the backend cannot do it (the editor then reads back first).
   */
  writeIfUnchanged?(path: string, expected: Uint8Array, next: Uint8Array): Promise<boolean | undefined>;
  /** Absolute paths of the entries up to 2 levels under path (path excluded), hidden components excluded, filesystem order. */
  listDir(path: string): Promise<string[]>;
}

/** What a tool call gives back to the model. */
export interface ToolOutput {
  /** The tool_result's text. */
  content: string;
  /** Whether the call failed (bad input, a missing file, a failed command's tool error): the tool_result's is_error. */
  isError: boolean;
  /** The process behind the tool ended under it (the shell exited): its sandbox may be gone too. */
  processLost?: boolean;
  /** The tool_result's content for the API where it is more than text (an MCP tool's images); `content` then says it in text. */
  blocks?: { type: string; [k: string]: unknown }[];
}

/** How a TextEditor behaves. */
export interface TextEditorOptions {
  /**
   * Which of Anthropic's text editor tools it is (their commands and messages differ).
   * @default "text_editor_20250728"
   */
  flavor?: EditorFlavor;
  /**
   * Files above this many bytes are refused (view and edits).
   * @default 5242880 (5 MiB)
   */
  maxFileBytes?: number;
  /**
   * What the editor shows the model (a view, an edit's snippet) is cut to this many characters.
   * @default 16000
   */
  maxCharacters?: number;
  /**
   * Where a relative path would be (named in the message that refuses it).
   * @default "/workspace"
   */
  workspace?: string;
}

/** An expected failure: its message goes to the model as an is_error result. */
class ToolError extends kinded("tool") {}

interface HistoryEntry {
  /** null: the edit created the file, so undoing it removes the file. */
  before: Uint8Array | null;
  after: Uint8Array;
}

// Undo keeps whole file versions; bound them so a long session on big files cannot exhaust memory.
const MAX_HISTORY_PER_PATH = 50;
// A multiple-occurrence error listing more lines than this would flood the model's context.
const MAX_LISTED_LINES = 200;

/** The commands that read the file they name (create only checks that nothing is there). */
const READS = new Set(["view", "str_replace", "insert", "undo_edit"]);

const BaseInput = z.object({ command: z.string(), path: z.string() });
const CreateInput = z.object({ file_text: z.string().nullish() });
const StrReplaceInput = z.object({ old_str: z.string().nullish(), new_str: z.string().nullish() });
const ViewRange = z.tuple([z.number().int(), z.number().int()]);
const insertInput = (textParam: string) =>
  z.object({ insert_line: z.number().int().nullish(), [textParam]: z.string().nullish() });

const HINTS: Record<string, string> = {
  path: "a string holding an absolute path, e.g. /workspace/src/index.ts",
  file_text: "a string: the whole content of the new file",
  old_str: "a string: the exact text to replace, copied from the file",
  new_str: "a string: the new text",
  insert_line: "an integer: the line after which to insert (0 inserts at the beginning of the file)",
  insert_text: "a string: the text to insert",
};

/** Anthropic's text editor tool (view, create, str_replace, insert, undo_edit) on an EditorFs, byte-exact, with undo. */
export class TextEditor {
  /** Which text editor tool it is. */
  readonly flavor: EditorFlavor;
  private readonly maxFileBytes: number;
  private readonly maxCharacters: number;
  private readonly workspace: string;
  private readonly history = new Map<string, HistoryEntry[]>();

  constructor(
    private readonly fs: EditorFs,
    opts: TextEditorOptions = {},
  ) {
    this.flavor = opts.flavor ?? DEFAULT_EDITOR_TOOL;
    this.maxFileBytes = opts.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
    this.maxCharacters = opts.maxCharacters ?? DEFAULT_MAX_CHARACTERS;
    this.workspace = opts.workspace ?? DEFAULT_WORKSPACE;
  }

  /** Runs one tool call. Never throws: bad input and filesystem failures become is_error results. */
  async run(input: unknown): Promise<ToolOutput> {
    const where = { command: "?", path: "?" };
    try {
      return { content: await this.dispatch(input, where), isError: false };
    } catch (e) {
      if (e instanceof ToolError) return { content: e.message, isError: true };
      const detail = e instanceof Error ? e.message : String(e);
      return { content: msg.fsFailed(where.command, where.path, detail), isError: true };
    }
  }

  private async dispatch(input: unknown, where: { command: string; path: string }): Promise<string> {
    if (typeof input !== "object" || input === null || Array.isArray(input)) throw new ToolError(msg.notObject());
    const { command, path: rawPath } = this.parse(BaseInput, input);
    const path = normalizePath(rawPath);
    Object.assign(where, { command, path });
    // The reference validates the path before it looks at the command.
    const stat = await this.validatePath(command, path);
    switch (command) {
      case "view":
        return this.view(path, stat, (input as Record<string, unknown>).view_range);
      case "create":
        return this.create(path, this.parse(CreateInput, input).file_text);
      case "str_replace":
        return this.strReplace(path, stat, this.parse(StrReplaceInput, input));
      case "insert":
        return this.insert(path, stat, input);
      case "undo_edit":
        if (this.flavor === "text_editor_20250124") return this.undo(path, stat);
    }
    throw new ToolError(msg.unrecognized(command, this.flavor));
  }

  /** zod parse whose failure names the first bad field and says what it should be. */
  private parse<T>(schema: z.ZodType<T>, input: object): T {
    const r = schema.safeParse(input);
    if (r.success) return r.data;
    const field = String(r.error.issues[0]?.path[0] ?? "input");
    const hint =
      field === "command" ? `a string, one of: ${allowedCommands(this.flavor).join(", ")}` : (HINTS[field] ?? "valid");
    const value = (input as Record<string, unknown>)[field];
    throw new ToolError(value == null ? msg.missingParam(field, hint) : msg.invalidParam(field, hint));
  }

  private async validatePath(command: string, path: string) {
    if (!path.startsWith("/")) throw new ToolError(msg.notAbsolute(path, this.workspace));
    // The commands that read a regular file they find have its bytes come with the stat.
    const stat = await this.fs.stat(path, READS.has(command) ? this.maxFileBytes : undefined);
    if (stat.type === "missing" && command !== "create") throw new ToolError(msg.missing(path));
    if (stat.type !== "missing" && command === "create") throw new ToolError(msg.exists(path));
    if (stat.type === "directory" && command !== "view") throw new ToolError(msg.isDirectory(path));
    return stat;
  }

  /** Reads a file the editor may work on: regular, within the size bound, not binary. */
  private async load(path: string, stat: EditorStat): Promise<Uint8Array> {
    if (stat.type !== "file") throw new ToolError(msg.notRegular(path));
    // Checked before reading, so a huge file never travels to the worker.
    if (stat.size > this.maxFileBytes) throw new ToolError(msg.tooBig(path, stat.size, this.maxFileBytes));
    const bytes = stat.bytes ?? (await this.fs.read(path));
    if (bytes.byteLength > this.maxFileBytes)
      throw new ToolError(msg.tooBig(path, bytes.byteLength, this.maxFileBytes));
    if (hasNul(bytes)) throw new ToolError(msg.binary(path));
    return bytes;
  }

  /** Writes only if the file still holds the bytes the edit was computed from (a bash process may have written meanwhile). */
  private async writeChecked(path: string, expected: Uint8Array, next: Uint8Array): Promise<void> {
    const swapped = await this.fs.writeIfUnchanged?.(path, expected, next);
    if (swapped === false) throw new ToolError(msg.changedSinceRead(path));
    if (swapped === true) return;
    const current = await this.fs.read(path);
    if (!bytesEqual(current, expected)) throw new ToolError(msg.changedSinceRead(path));
    await this.fs.write(path, next);
  }

  private record(path: string, before: Uint8Array | null, after: Uint8Array): void {
    if (this.flavor !== "text_editor_20250124") return; // only this flavor has undo_edit
    const stack = this.history.get(path) ?? [];
    stack.push({ before, after });
    if (stack.length > MAX_HISTORY_PER_PATH) stack.shift();
    this.history.set(path, stack);
  }

  private async view(path: string, stat: EditorStat, viewRange: unknown): Promise<string> {
    if (stat.type === "directory") {
      if (viewRange != null) throw new ToolError(msg.viewRangeOnDirectory());
      return this.listing(path);
    }
    const shown = decodeText(await this.load(path, stat));
    const [content, initLine] = viewRange == null ? [shown.text, 1] : this.selectRange(shown.text, viewRange);
    return withNote(catN(content, path, initLine, this.maxCharacters), shown.valid ? undefined : msg.nonUtf8Note());
  }

  private async listing(path: string): Promise<string> {
    const prefix = path === "/" ? "/" : `${path}/`;
    // Hidden entries are the fs's job; filtering again keeps secrets like .env out whatever the backend does.
    const entries = (await this.fs.listDir(path)).filter(
      (p) => !hasHiddenComponent(p.startsWith(prefix) ? p.slice(prefix.length) : p),
    );
    // As the reference: find's output (one path per line) is clipped like a file, then framed.
    const found = truncateForModel(`${[path, ...entries].join("\n")}\n`, this.maxCharacters);
    return `Here's the files and directories up to 2 levels deep in ${path}, excluding hidden items:\n${found}\n`;
  }

  /** The reference's view_range rules; returns the selected text and its first line number. */
  private selectRange(text: string, viewRange: unknown): [string, number] {
    const r = ViewRange.safeParse(viewRange);
    if (!r.success) throw new ToolError(msg.viewRangeFormat());
    const [first, last] = r.data;
    const lines = text.split("\n");
    const n = lines.length;
    if (first < 1 || first > n) throw new ToolError(msg.viewRangeFirst(first, last, n));
    if (last > n) throw new ToolError(msg.viewRangeSecondTooBig(first, last, n));
    if (last !== -1 && last < first) throw new ToolError(msg.viewRangeOrder(first, last));
    return [lines.slice(first - 1, last === -1 ? undefined : last).join("\n"), first];
  }

  private async create(path: string, fileText: string | null | undefined): Promise<string> {
    if (fileText == null) throw new ToolError(msg.required("file_text", "create"));
    await this.fs.mkdirp(parentDir(path)); // patchbay makes missing parents; the reference fails
    // Something may have created the path since validation: create never overwrites.
    if ((await this.fs.stat(path)).type !== "missing") throw new ToolError(msg.exists(path));
    const bytes = utf8(fileText);
    await this.fs.write(path, bytes);
    this.record(path, null, bytes);
    return msg.created(path);
  }

  private async strReplace(
    path: string,
    stat: EditorStat,
    p: { old_str?: string | null; new_str?: string | null },
  ): Promise<string> {
    if (p.old_str == null) throw new ToolError(msg.required("old_str", "str_replace"));
    const newStr = p.new_str ?? "";
    if (p.old_str === newStr) throw new ToolError(msg.sameStrings(path));

    const before = await this.load(path, stat);
    const crlf = isCrlfFile(before);
    let oldBytes = utf8(p.old_str);
    let offsets: number[];
    if (p.old_str === "") {
      // As the reference (Python's str.count): the empty string occurs once in an empty file, so the
      // file becomes new_str; in any other file it occurs len+1 times, on every line.
      if (before.byteLength > 0) throw new ToolError(everyLineMessage(before));
      offsets = [0];
    } else {
      // In a CRLF file, new lines are written as CRLF, and a quote with bare \n (how models usually
      // quote) falls back to the CRLF form when it does not match verbatim.
      offsets = findAll(before, oldBytes);
      if (offsets.length === 0 && crlf && /(^|[^\r])\n/.test(p.old_str)) {
        oldBytes = utf8(toCrlf(p.old_str));
        offsets = findAll(before, oldBytes);
      }
    }
    if (offsets.length === 0) throw new ToolError(msg.notFound(p.old_str, path));
    if (offsets.length > 1) throw new ToolError(multipleMessage(p.old_str, startLines(before, offsets)));

    const at = offsets[0]!;
    const newBytes = utf8(crlf ? toCrlf(newStr) : newStr);
    const after = strReplaceBytes(before, at, oldBytes.byteLength, newBytes);
    await this.writeChecked(path, before, after);
    this.record(path, before, after);

    // Snippet: SNIPPET_LINES lines before the edited line through SNIPPET_LINES after the new text.
    const line = countNewlines(before, at);
    const start = Math.max(0, line - SNIPPET_LINES);
    const end = line + SNIPPET_LINES + countNewlines(newBytes);
    const shown = decodeText(after);
    const snippet = shown.text
      .split("\n")
      .slice(start, end + 1)
      .join("\n");
    return withNote(
      msg.edited(path, snippet, start + 1, this.maxCharacters),
      shown.valid ? undefined : msg.nonUtf8Note(),
    );
  }

  private async insert(path: string, stat: EditorStat, input: object): Promise<string> {
    const textParam = insertTextParam(this.flavor); // insert_text, or new_str in text_editor_20250124
    const p = this.parse(insertInput(textParam), input) as { insert_line?: number | null } & Record<string, unknown>;
    const k = p.insert_line;
    if (k == null) throw new ToolError(msg.required("insert_line", "insert"));
    const text = p[textParam];
    if (typeof text !== "string") throw new ToolError(msg.required(textParam, "insert"));

    const before = await this.load(path, stat);
    const n = lineCount(before);
    if (k < 0 || k > n) throw new ToolError(msg.insertLine(k, n));
    const crlf = isCrlfFile(before);
    const { bytes: after, lines } = insertBytes(before, k, crlf ? toCrlf(text) : text, crlf ? "\r\n" : "\n");
    await this.writeChecked(path, before, after);
    this.record(path, before, after);

    const start = Math.max(0, k - SNIPPET_LINES);
    const shown = decodeText(after);
    const snippet = shown.text
      .split("\n")
      .slice(start, k + lines + SNIPPET_LINES)
      .join("\n");
    return withNote(
      msg.inserted(path, snippet, start + 1, this.maxCharacters),
      shown.valid ? undefined : msg.nonUtf8Note(),
    );
  }

  private async undo(path: string, stat: EditorStat): Promise<string> {
    const stack = this.history.get(path);
    const entry = stack?.at(-1);
    if (!stack || !entry) throw new ToolError(msg.noHistory(path));
    // Undo restores the version before the last edit only if nobody changed the file since that edit.
    const unchanged =
      stat.size === entry.after.byteLength && bytesEqual(stat.bytes ?? (await this.fs.read(path)), entry.after);
    if (!unchanged) throw new ToolError(msg.changedSinceEdit(path));
    if (entry.before === null) {
      await this.fs.remove(path);
      stack.pop();
      return msg.undoneCreate(path);
    }
    await this.writeChecked(path, entry.after, entry.before);
    stack.pop();
    const shown = decodeText(entry.before);
    return withNote(msg.undone(path, shown.text, this.maxCharacters), shown.valid ? undefined : msg.nonUtf8Note());
  }
}

/** 1-based line where each occurrence starts, each line once, in one pass over the bytes. */
function startLines(bytes: Uint8Array, offsets: number[]): number[] {
  const lines: number[] = [];
  let line = 1;
  let pos = 0;
  for (const at of offsets) {
    line += countNewlines(bytes.subarray(pos, at));
    pos = at;
    if (lines.at(-1) !== line) lines.push(line);
  }
  return lines;
}

function multipleMessage(oldStr: string, lines: number[], total = lines.length): string {
  return msg.multiple(oldStr, lines.slice(0, MAX_LISTED_LINES), Math.max(0, total - MAX_LISTED_LINES));
}

/** The reference's listing for an empty old_str: every line (piece split on `\n`) contains it. */
function everyLineMessage(bytes: Uint8Array): string {
  const n = lineCount(bytes);
  return multipleMessage(
    "",
    Array.from({ length: Math.min(n, MAX_LISTED_LINES) }, (_, i) => i + 1),
    n,
  );
}
