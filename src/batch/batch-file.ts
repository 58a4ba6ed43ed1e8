// Batch files: one JobSpec per line, validated as enqueue does, and the content hash that makes
// submitting the same file twice idempotent.
import { createHash } from "node:crypto";
import { count } from "../core/count.js";
import { readFileSync } from "node:fs";
import { setImmediate } from "node:timers/promises";
import { prepareSpecs } from "../queue/enqueue-spec.js";
import type { JobSpec } from "../core/spec/spec.js";
import { canonicalJson } from "../core/spec/hash.js";
import { PatchbayError } from "../core/errors.js";

/** One line of a batch file: its number in the file and its spec. */
export interface BatchLine {
  /** Its line number in the file (from 1). */
  line: number;
  /** Its JobSpec, validated. */
  spec: JobSpec;
}

/** A batch file with bad lines: `errors` are `file:line: message`, one per bad line. */
export class BatchFileError extends PatchbayError {
  constructor(readonly errors: string[]) {
    super("spec", `nothing enqueued:\n${errors.join("\n")}`);
  }
}

/**
 * The bad lines a BatchFileError lists at most. Past them the rest of the file is not read: a body
 * of millions of bad lines (an API client's) costs what this many do, and its answer stays small.
 */
export const MAX_BAD_LINES = 100;

/** What parseBatchFile takes besides the text. */
export interface BatchFileOptions {
  /**
   * The caller's own refusal of a line's JSON, before the spec is checked (the HTTP API's repo
   * roots, so that no path outside them is looked at): the problem, named as the line's, or undefined.
   */
  check?: (parsed: unknown) => string | undefined;
}

/** How long parseBatchFileYielding reads before it hands the event loop back. */
const SLICE_MS = 10;

/**
 * Each line of `text` that is not blank (String.prototype.trim's whitespace only), with its number
 * from 1, in one pass: blank lines are stepped over char by char, never copied, and a line's end is
 * found by indexOf, so a body of millions of lines costs time linear in its length.
 */
function* nonBlankLines(text: string): Generator<[raw: string, line: number]> {
  const n = text.length;
  let line = 1;
  let lineStart = 0;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 10) {
      line++;
      lineStart = ++i;
    } else if (c === 32 || c === 9 || c === 13) {
      i++;
    } else {
      const nl = text.indexOf("\n", i);
      const end = nl === -1 ? n : nl;
      const raw = text.slice(lineStart, end);
      if (raw.trim()) yield [raw, line]; // a line of other whitespace (U+00A0 …) is blank too
      i = end;
    }
  }
}

/** The lines read so far and the errors of the bad ones: what both parsers share. */
class BatchFileReader {
  private readonly out: BatchLine[] = [];
  private readonly errors: string[] = [];

  constructor(
    private readonly file: string,
    private readonly opts: BatchFileOptions,
  ) {}

  /** Reads one line; false once MAX_BAD_LINES are bad, when no more lines are read. */
  add(raw: string, line: number): boolean {
    const { file, errors } = this;
    if (errors.length === MAX_BAD_LINES) {
      errors.push(
        `${file}:${line}: not read, nor the lines after it: fix the ${count(MAX_BAD_LINES, "bad line")} above first`,
      );
      return false;
    }
    try {
      const parsed: unknown = JSON.parse(raw);
      const refused = this.opts.check?.(parsed);
      if (refused) errors.push(`${file}:${line}: invalid JobSpec: ${refused}`);
      else this.out.push({ line, spec: prepareSpecs([parsed])[0]! });
    } catch (err) {
      errors.push(`${file}:${line}: ${err instanceof SyntaxError ? "not valid JSON: " : ""}${(err as Error).message}`);
    }
    return true;
  }

  /** The lines, or the BatchFileError of the bad ones (or of a file with no line). */
  result(): BatchLine[] {
    if (this.errors.length) throw new BatchFileError(this.errors);
    if (!this.out.length) throw new BatchFileError([`${this.file}: no jobs in the file`]);
    return this.out;
  }
}

/**
 * One JobSpec per line (blank lines skipped), each validated as enqueue does (schema, local paths
 * made absolute and checked), in time linear in the text. Any bad line: BatchFileError naming every
 * one of them, up to MAX_BAD_LINES, after which the rest is not read and the last error says so.
 */
export function parseBatchFile(text: string, file = "batch"): BatchLine[] {
  const reader = new BatchFileReader(file, {});
  for (const [raw, line] of nonBlankLines(text)) if (!reader.add(raw, line)) break;
  return reader.result();
}

/**
 * parseBatchFile for a server (the HTTP API's batch bodies): the same lines and errors, but the
 * event loop is handed back every 10 ms, so a body of 8 MiB of valid lines (a spec's check takes
 * tens of microseconds) never holds up the server's other requests for seconds.
 */
export async function parseBatchFileYielding(
  text: string,
  file = "batch",
  opts: BatchFileOptions = {},
): Promise<BatchLine[]> {
  const reader = new BatchFileReader(file, opts);
  let since = performance.now();
  for (const [raw, line] of nonBlankLines(text)) {
    if (!reader.add(raw, line)) break;
    if (performance.now() - since < SLICE_MS) continue;
    await setImmediate();
    since = performance.now();
  }
  return reader.result();
}

/** Reads and validates a batch file (JSON Lines, one JobSpec a line); a bad line is a BatchFileError naming each. */
export function readBatchFile(file: string): BatchLine[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new BatchFileError([`${file}: ${(err as Error).message}`]);
  }
  return parseBatchFile(text, file);
}

/** The batch's content hash: its specs (local paths absolute) with their lines. */
export function batchHash(lines: BatchLine[]): string {
  const h = createHash("sha256");
  for (const { line, spec } of lines) h.update(`${line}\n${canonicalJson(spec)}\n`);
  return h.digest("hex");
}
