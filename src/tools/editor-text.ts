// Pure byte/text helpers and the model-facing messages of the text editor tools.
// No I/O here: everything takes and returns bytes or strings, so it is tested exhaustively and fast.
// Matching and editing work on the file's bytes (tabs, CRLF, a missing final newline and non-UTF-8
// bytes survive); strings are only used for what the model is shown.

import { count } from "../core/count.js";
import { EDITOR_TOOLS, type EditorToolName } from "../core/spec/names.js";

/** The built-in editor tools (edit_file is the plain JSON-schema one). */
export type EditorFlavor = Exclude<EditorToolName, "edit_file">;

export const SNIPPET_LINES = 4;
export const DEFAULT_MAX_CHARACTERS = 16_000;
export const DEFAULT_MAX_FILE_BYTES = 5 * 1024 * 1024;
export const DEFAULT_WORKSPACE = "/workspace";
export const TRUNCATED_MESSAGE =
  "<response clipped><NOTE>To save on context only part of this file has been shown to you. " +
  "You should retry this tool after you have searched inside the file with `grep -n` in order to " +
  "find the line numbers of what you are looking for.</NOTE>";

const NL = 0x0a;
const CR = 0x0d;
const encoder = new TextEncoder();

// ---------------------------------------------------------------- flavors

export function toolName(flavor: EditorFlavor): string {
  return flavor === "text_editor_20250124" ? "str_replace_editor" : "str_replace_based_edit_tool";
}

/** The names the model calls the built-in editors by. */
export const EDITOR_TOOL_NAMES: readonly string[] = EDITOR_TOOLS.filter((t) => t !== "edit_file").map((t) =>
  toolName(t),
);

/** Whether a tool call can only read files: an editor's `view`. Bash and every other command may write. */
export function readOnly(block: { name: string; input?: unknown }): boolean {
  return (
    EDITOR_TOOL_NAMES.includes(block.name) &&
    (block.input as { command?: unknown } | null | undefined)?.command === "view"
  );
}

export function allowedCommands(flavor: EditorFlavor): string[] {
  const base = ["view", "create", "str_replace", "insert"];
  return flavor === "text_editor_20250124" ? [...base, "undo_edit"] : base;
}

/** The parameter carrying the inserted text: renamed in text_editor_20250728. */
export function insertTextParam(flavor: EditorFlavor): "insert_text" | "new_str" {
  return flavor === "text_editor_20250124" ? "new_str" : "insert_text";
}

// ---------------------------------------------------------------- bytes

export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}

// Buffer gives native-speed search and comparison; these are views, not copies.
function buf(b: Uint8Array): Buffer {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && buf(a).equals(buf(b));
}

function concatBytes(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** Start offsets of every occurrence of needle, overlapping ones included (`aa` in `aaa` → [0, 1]). */
export function findAll(hay: Uint8Array, needle: Uint8Array, limit = Infinity): number[] {
  if (needle.byteLength === 0) return [];
  const h = buf(hay);
  const out: number[] = [];
  for (let i = h.indexOf(buf(needle)); i !== -1 && out.length < limit; i = h.indexOf(buf(needle), i + 1)) {
    out.push(i);
  }
  return out;
}

export function countOccurrences(hay: Uint8Array, needle: Uint8Array): number {
  return findAll(hay, needle).length;
}

/** Number of `\n` bytes in bytes[0, end). */
export function countNewlines(bytes: Uint8Array, end = bytes.byteLength): number {
  let n = 0;
  for (let i = 0; i < end; i++) if (bytes[i] === NL) n++;
  return n;
}

/** Offset of the start of the 0-based line `line` (the byte after the line-th `\n`). */
function lineStart(bytes: Uint8Array, line: number): number {
  let seen = 0;
  for (let i = 0; i < bytes.byteLength && seen < line; i++) {
    if (bytes[i] === NL && ++seen === line) return i + 1;
  }
  return line === 0 ? 0 : bytes.byteLength;
}

export function hasNul(bytes: Uint8Array): boolean {
  return buf(bytes).indexOf(0) !== -1;
}

/** True when every line break is CRLF (and there is at least one): the file's convention is CRLF. */
export function isCrlfFile(bytes: Uint8Array): boolean {
  let crlf = 0;
  for (let i = 0; i < bytes.byteLength; i++) {
    if (bytes[i] !== NL) continue;
    if (i === 0 || bytes[i - 1] !== CR) return false;
    crlf++;
  }
  return crlf > 0;
}

/** Turns bare `\n` into `\r\n` (existing `\r\n` stays as it is). */
export function toCrlf(s: string): string {
  return s.replace(/\r?\n/g, "\r\n");
}

/** Replaces bytes [offset, offset+oldLength) with replacement; everything else is untouched. */
export function strReplaceBytes(
  file: Uint8Array,
  offset: number,
  oldLength: number,
  replacement: Uint8Array,
): Uint8Array {
  return concatBytes(file.subarray(0, offset), replacement, file.subarray(offset + oldLength));
}

/**
 * The one splice that turns `before` into `after`: their common head and tail kept, the `cut`
 * bytes at `at` replaced by `insert` (a view into `after`). Compared in native blocks, then bytes.
 */
export function spliceOf(before: Uint8Array, after: Uint8Array): { at: number; cut: number; insert: Uint8Array } {
  const a = buf(before);
  const b = buf(after);
  const common = Math.min(a.length, b.length);
  let head = 0;
  while (head + BLOCK <= common && a.compare(b, head, head + BLOCK, head, head + BLOCK) === 0) head += BLOCK;
  while (head < common && a[head] === b[head]) head++;
  // The tail is looked for only in what the head left, so head and tail never overlap.
  const room = common - head;
  let tail = 0;
  while (
    tail + BLOCK <= room &&
    a.compare(b, b.length - tail - BLOCK, b.length - tail, a.length - tail - BLOCK, a.length - tail) === 0
  )
    tail += BLOCK;
  while (tail < room && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  return { at: head, cut: a.length - head - tail, insert: after.subarray(head, b.length - tail) };
}
const BLOCK = 4096;

/** Lines as the reference counts them: pieces of the content split on `\n`. */
export function lineCount(bytes: Uint8Array): number {
  return countNewlines(bytes) + 1;
}

/**
 * Inserts text after line insertLine (0 = at the top), the reference's semantics on bytes, except that
 * a text ending with a newline adds no blank line. eol is the file's line break (`\n` or `\r\n`).
 * Returns the new bytes and how many lines the inserted text occupies.
 */
export function insertBytes(
  file: Uint8Array,
  insertLine: number,
  text: string,
  eol = "\n",
): { bytes: Uint8Array; lines: number } {
  const n = lineCount(file);
  if (!Number.isInteger(insertLine) || insertLine < 0 || insertLine > n)
    throw new RangeError(`insert_line ${insertLine} outside [0, ${n}]`);
  const endsWithNl = text.endsWith("\n");
  const lines = Math.max(1, (text.match(/\n/g)?.length ?? 0) + (endsWithNl ? 0 : 1));
  if (insertLine === n) {
    // After the last piece, which has no line break of its own.
    return { bytes: concatBytes(file, utf8(eol + text)), lines };
  }
  const at = lineStart(file, insertLine);
  const piece = endsWithNl ? text : text + eol;
  return { bytes: concatBytes(file.subarray(0, at), utf8(piece), file.subarray(at)), lines };
}

// ---------------------------------------------------------------- text shown to the model

export interface Decoded {
  text: string;
  /** False when the bytes are not valid UTF-8 (invalid sequences are shown as U+FFFD). */
  valid: boolean;
}

// ignoreBOM keeps a BOM visible as U+FEFF so offsets and lines line up with the bytes.
const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const lenient = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

export function decodeText(bytes: Uint8Array): Decoded {
  try {
    return { text: strict.decode(bytes), valid: true };
  } catch {
    // U+FFFD never swallows a `\n`, so line numbers still match the bytes.
    return { text: lenient.decode(bytes), valid: false };
  }
}

/** Cuts content past limit characters (code points, as the reference's Python counts) and appends the notice. */
export function truncateForModel(content: string, limit: number = DEFAULT_MAX_CHARACTERS): string {
  if (!limit || limit <= 0 || content.length <= limit) return content;
  let i = 0;
  for (let cps = 0; i < content.length && cps < limit; cps++) {
    i += (content.codePointAt(i) ?? 0) > 0xffff ? 2 : 1;
  }
  return i >= content.length ? content : content.slice(0, i) + TRUNCATED_MESSAGE;
}

/** `{n:6}\t{line}` for each piece of content split on `\n`, joined with `\n`. */
export function numberLines(content: string, initLine = 1): string {
  return content
    .split("\n")
    .map((line, i) => `${String(i + initLine).padStart(6)}\t${line}`)
    .join("\n");
}

/** The reference's `_make_output`: header, truncated and numbered content, final newline. */
export function catN(
  content: string,
  descriptor: string,
  initLine = 1,
  maxCharacters = DEFAULT_MAX_CHARACTERS,
): string {
  return (
    `Here's the result of running \`cat -n\` on ${descriptor}:\n` +
    numberLines(truncateForModel(content, maxCharacters), initLine) +
    "\n"
  );
}

/** Python's repr of a list of ints: `[1, 3]`. */
function pyList(nums: readonly number[]): string {
  return `[${nums.join(", ")}]`;
}

/** str(pathlib.Path(p)) on POSIX: collapses `//` and `.` components, drops a trailing slash. */
export function normalizePath(p: string): string {
  const abs = p.startsWith("/");
  const parts = p.split("/").filter((c) => c !== "" && c !== ".");
  const joined = parts.join("/");
  return abs ? "/" + joined : joined || ".";
}

export function parentDir(absPath: string): string {
  const i = absPath.lastIndexOf("/");
  return i <= 0 ? "/" : absPath.slice(0, i);
}

export function hasHiddenComponent(relPath: string): boolean {
  return relPath.split("/").some((c) => c.startsWith("."));
}

// ---------------------------------------------------------------- messages
// The reference's exact words first (Claude was trained on them), then patchbay's own, each saying what to do next.

export const msg = {
  notAbsolute: (path: string, workspace: string) =>
    `The path ${path} is not an absolute path, it should start with \`/\`. Maybe you meant ${
      path === "." ? workspace : `${workspace.replace(/\/+$/, "")}/${path}`
    }?`,
  missing: (path: string) => `The path ${path} does not exist. Please provide a valid path.`,
  exists: (path: string) => `File already exists at: ${path}. Cannot overwrite files using command \`create\`.`,
  isDirectory: (path: string) =>
    `The path ${path} is a directory and only the \`view\` command can be used on directories`,
  unrecognized: (cmd: string, flavor: EditorFlavor) =>
    `Unrecognized command ${cmd}. The allowed commands for the ${toolName(flavor)} tool are: ${allowedCommands(flavor).join(", ")}`,
  required: (name: string, command: string) => `Parameter \`${name}\` is required for command: ${command}`,
  viewRangeFormat: () => "Invalid `view_range`. It should be a list of two integers.",
  viewRangeFirst: (a: number, b: number, n: number) =>
    `Invalid \`view_range\`: ${pyList([a, b])}. Its first element \`${a}\` should be within the range of lines of the file: ${pyList([1, n])}`,
  viewRangeSecondTooBig: (a: number, b: number, n: number) =>
    `Invalid \`view_range\`: ${pyList([a, b])}. Its second element \`${b}\` should be smaller than the number of lines in the file: \`${n}\``,
  viewRangeOrder: (a: number, b: number) =>
    `Invalid \`view_range\`: ${pyList([a, b])}. Its second element \`${b}\` should be larger or equal than its first \`${a}\``,
  viewRangeOnDirectory: () => "The `view_range` parameter is not allowed when `path` points to a directory.",
  insertLine: (k: number, n: number) =>
    `Invalid \`insert_line\` parameter: ${k}. It should be within the range of lines of the file: ${pyList([0, n])}`,
  notFound: (oldStr: string, path: string) =>
    `No replacement was performed, old_str \`${oldStr}\` did not appear verbatim in ${path}.`,
  /** more: lines left off the list so the message stays readable. */
  multiple: (oldStr: string, lines: number[], more = 0) =>
    `No replacement was performed. Multiple occurrences of old_str \`${oldStr}\` in lines ${
      more > 0 ? `[${lines.join(", ")}, … (${more} more)]` : pyList(lines)
    }. Please ensure it is unique`,
  created: (path: string) => `File created successfully at: ${path}`,
  edited: (path: string, snippet: string, initLine: number, maxChars: number) =>
    `The file ${path} has been edited. ` +
    catN(snippet, `a snippet of ${path}`, initLine, maxChars) +
    "Review the changes and make sure they are as expected. Edit the file again if necessary.",
  inserted: (path: string, snippet: string, initLine: number, maxChars: number) =>
    `The file ${path} has been edited. ` +
    catN(snippet, "a snippet of the edited file", initLine, maxChars) +
    "Review the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary.",
  undone: (path: string, content: string, maxChars: number) =>
    `Last edit to ${path} undone successfully. ${catN(content, path, 1, maxChars)}`,
  noHistory: (path: string) => `No edit history found for ${path}.`,

  // patchbay's own
  undoneCreate: (path: string) =>
    `Last edit to ${path} undone successfully. That edit created the file, so ${path} has been removed.`,
  notObject: () =>
    'Invalid tool input: it should be a JSON object with at least `command` and `path` (e.g. {"command": "view", "path": "/workspace"}).',
  missingParam: (name: string, hint: string) => `Parameter \`${name}\` is required: ${hint}.`,
  invalidParam: (name: string, hint: string) => `Invalid \`${name}\` parameter: it should be ${hint}.`,
  sameStrings: (path: string) =>
    `No replacement was performed: old_str and new_str are the same, so the edit would not change ${path}. ` +
    "Provide a new_str that differs from old_str.",
  binary: (path: string) =>
    `The file ${path} looks binary (it contains NUL bytes), so the editor refuses to view or edit it. ` +
    `Use bash to inspect it instead (e.g. \`file ${path}\` or \`xxd ${path} | head\`).`,
  tooBig: (path: string, size: number, max: number) =>
    `The file ${path} is ${count(size, "byte")}, over the editor's limit of ${count(max, "byte")}, so it was not opened. ` +
    `Use bash instead: \`grep -n PATTERN ${path}\` to find lines, \`sed -n 'START,ENDp' ${path}\` to view them, ` +
    "and `sed -i` or a small script to edit.",
  notRegular: (path: string) =>
    `The path ${path} is neither a regular file nor a directory (a device, socket or pipe?), so the editor cannot open it. Use bash to inspect it.`,
  changedSinceRead: (path: string) =>
    `The file ${path} changed while this edit was being made (another process, e.g. a bash command, wrote to it), ` +
    "so the edit was not applied. View the file again and redo the edit on its current content.",
  changedSinceEdit: (path: string) =>
    `The file ${path} changed after your last edit to it (e.g. a bash command wrote to it), so undo_edit was not ` +
    "applied: it would discard those changes. View the file and use str_replace to revert what you need.",
  nonUtf8Note: () =>
    "Note: this file is not valid UTF-8; its invalid bytes are shown as U+FFFD (\uFFFD). Edits leave those bytes " +
    "untouched, but old_str cannot match them: quote only the surrounding valid text.",
  fsFailed: (command: string, path: string, detail: string) =>
    `The editor could not complete \`${command}\` on ${path}: ${detail}. If the problem persists, check the path with bash.`,
};

/** Appends a note on a line of its own. */
export function withNote(output: string, note: string | undefined): string {
  if (!note) return output;
  return output.endsWith("\n") ? output + note : `${output}\n${note}`;
}
