// The records of a task set or a predictions file, each with the line it starts on: JSONL (one JSON
// value a line), a JSON array, or (for predictions) a JSON object keyed by instance_id. instance.ts
// checks each record's fields; this module only finds them, bounds the text and names what cannot be
// read as `file:line: what is wrong`. Pure: the caller reads the file.
import { count } from "../core/count.js";
import { PatchbayError } from "../core/errors.js";
import { show } from "../core/spec/fields.js";

/** The largest task set or predictions file read, in bytes (UTF-8). */
export const MAX_SET_BYTES = 64 * 1024 * 1024;
/** At most this many instances in a set (and predictions in a file). */
export const MAX_INSTANCES = 10_000;
/** An EvalSetError's message lists at most this many problems, then how many more there are. */
export const MAX_LISTED_PROBLEMS = 1_000;

/** A task set or a predictions file with problems: one `file:line: field: what is wrong` per problem; nothing was read. */
export class EvalSetError extends PatchbayError {
  constructor(
    /** Every problem found, in the file's order. */
    readonly problems: string[],
  ) {
    const listed = problems.slice(0, MAX_LISTED_PROBLEMS);
    const more = problems.length - listed.length;
    super(
      "spec",
      `${count(problems.length, "problem")}, nothing was read:\n${listed.join("\n")}${more > 0 ? `\n… and ${more} more` : ""}`,
    );
  }
}

/** One record of a file: its value, the line it starts on and, in a JSON object of records, its key. */
export interface FileRecord {
  /** The record as JSON.parse read it: unchecked. */
  value: unknown;
  /** The 1-based line it starts on. */
  line: number;
  /** Its key, in a JSON object of records keyed by instance_id. */
  key?: string;
}

// C1 controls, DEL, line and paragraph separators and bidi controls, which JSON.stringify leaves as
// they are: shown as \u escapes, so a value in a message can neither act on a terminal nor read as
// something else (safeText's set, made visible instead of removed).
const UNSAFE_IN_JSON = /[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** A value as a message shows it: short (show()), and with every control or bidi character escaped. */
export function shownValue(value: unknown): string {
  return escapeUnsafe(show(value));
}

/** `s` with the characters JSON.stringify keeps but a terminal acts on as \u escapes (and C0 controls too). */
export function escapeUnsafe(s: string): string {
  return s
    .replace(/[\x00-\x1f]/g, (c) => JSON.stringify(c).slice(1, -1))
    .replace(UNSAFE_IN_JSON, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** The 1-based line of each offset in `text` (offsets ascending). */
function linesAt(text: string, offsets: number[]): number[] {
  const out: number[] = [];
  let line = 1;
  let at = 0;
  for (const o of offsets) {
    for (; at < o; at++) if (text.charCodeAt(at) === 10) line++;
    out.push(line);
  }
  return out;
}

/**
 * The offsets where the top-level items of a JSON array or object start (for an object, its keys),
 * found by a scan that skips strings and nested values. The text is valid JSON (JSON.parse read it).
 */
function topLevelStarts(text: string): number[] {
  const starts: number[] = [];
  let depth = 0;
  let expectItem = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === " " || c === "\n" || c === "\r" || c === "\t") continue;
    if (depth === 1 && expectItem && c !== "]" && c !== "}") {
      starts.push(i);
      expectItem = false;
    }
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++;
    } else if (c === "[" || c === "{") {
      depth++;
      if (depth === 1) expectItem = true;
    } else if (c === "]" || c === "}") depth--;
    else if (c === "," && depth === 1) expectItem = true;
  }
  return starts;
}

/** How a whole-file JSON object is read: as one record, or as records keyed by instance_id. */
export type ObjectMode = "one" | "keyed";

/**
 * The records of `text`. A JSON array gives its items; a JSON object is one record, or (`keyed`
 * when `objectMode` says) one record per key; anything else is JSONL, one value a non-blank line.
 * Problems (size, count, a line that is not JSON) are pushed to `problems` as `file:line: what`.
 */
export function readRecords(
  text: string,
  file: string,
  problems: string[],
  objectMode: (obj: Record<string, unknown>) => ObjectMode = () => "one",
): FileRecord[] {
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > MAX_SET_BYTES) {
    problems.push(
      `${file}:1: the file is ${count(bytes, "byte")}, over the bound of ${MAX_SET_BYTES} (64 MiB): split it`,
    );
    return [];
  }
  const whole = wholeJson(text, file, problems);
  if (whole instanceof WholeJson) return fromWhole(whole, text, file, problems, objectMode);
  return whole === "broken" ? [] : jsonLines(text, file, problems);
}

class WholeJson {
  constructor(readonly value: unknown) {}
}

/**
 * The whole text as one JSON array or object; "broken" for an array that is not valid JSON (its
 * problem pushed); else undefined, and the text is read as JSONL (an object a line).
 */
function wholeJson(text: string, file: string, problems: string[]): WholeJson | "broken" | undefined {
  const t = text.trimStart();
  if (!t.startsWith("[") && !t.startsWith("{")) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === "object" ? new WholeJson(v) : undefined;
  } catch (err) {
    if (!t.startsWith("[")) return undefined; // JSONL, or broken JSON: its lines say which line
    const why = err instanceof Error ? err.message : String(err);
    const at = /at position (\d+)/.exec(why);
    const line = at ? linesAt(text, [Number(at[1])])[0]! : 1;
    problems.push(`${file}:${line}: not valid JSON: ${escapeUnsafe(why.slice(0, 200))}`);
    return "broken";
  }
}

function fromWhole(
  whole: WholeJson,
  text: string,
  file: string,
  problems: string[],
  objectMode: (obj: Record<string, unknown>) => ObjectMode,
): FileRecord[] {
  const v = whole.value;
  const first = text.length - text.trimStart().length;
  if (!Array.isArray(v) && objectMode(v as Record<string, unknown>) === "one")
    return [{ value: v, line: linesAt(text, [first])[0]! }];
  const entries: [string | undefined, unknown][] = Array.isArray(v)
    ? v.map((x: unknown) => [undefined, x])
    : Object.entries(v as Record<string, unknown>);
  if (entries.length > MAX_INSTANCES) {
    problems.push(`${file}:1: ${count(entries.length, "record")}, over the bound of ${MAX_INSTANCES}: split the file`);
    return [];
  }
  const lines = linesAt(text, topLevelStarts(text));
  return entries.map(([key, value], i) => ({ value, line: lines[i] ?? 1, ...(key === undefined ? {} : { key }) }));
}

function jsonLines(text: string, file: string, problems: string[]): FileRecord[] {
  const lines = text.split("\n");
  const nonBlank = lines.reduce((n, l) => (l.trim() === "" ? n : n + 1), 0);
  if (nonBlank > MAX_INSTANCES) {
    problems.push(`${file}:1: ${count(nonBlank, "record")}, over the bound of ${MAX_INSTANCES}: split the file`);
    return [];
  }
  const out: FileRecord[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === "") continue;
    try {
      out.push({ value: JSON.parse(line) as unknown, line: i + 1 });
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      problems.push(`${file}:${i + 1}: not valid JSON: ${escapeUnsafe(why.slice(0, 200))}`);
    }
  }
  return out;
}
