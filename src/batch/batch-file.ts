// Batch files: one JobSpec per line, validated as enqueue does, and the content hash that makes
// submitting the same file twice idempotent.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
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
 * One JobSpec per line (blank lines skipped), each validated as enqueue does (schema, local paths
 * made absolute and checked). Any bad line: BatchFileError naming every one of them.
 */
export function parseBatchFile(text: string, file = "batch"): BatchLine[] {
  const out: BatchLine[] = [];
  const errors: string[] = [];
  text.split("\n").forEach((raw, i) => {
    if (!raw.trim()) return;
    try {
      const parsed: unknown = JSON.parse(raw);
      out.push({ line: i + 1, spec: prepareSpecs([parsed])[0]! });
    } catch (err) {
      errors.push(`${file}:${i + 1}: ${err instanceof SyntaxError ? "not valid JSON: " : ""}${(err as Error).message}`);
    }
  });
  if (errors.length) throw new BatchFileError(errors);
  if (!out.length) throw new BatchFileError([`${file}: no jobs in the file`]);
  return out;
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
