// The repository's instruction files read from the loaded tree in the sandbox, after setup and
// before the first model request (agent-phase.ts). Every stat and read goes through Files, as the
// agent's uid. A file is used only when it is itself a regular file at its own path: a symlink (or a
// path through one), a FIFO or a directory is never followed or read, and is named in the
// transcript's instructions_loaded event with why; no file is read past the bound. Which files and in which
// order, and the bound, are src/agent/repo-instructions.ts's.
import path from "node:path/posix";
import { count } from "../core/count.js";
import {
  combineInstructions,
  instructionSlots,
  REPO_INSTRUCTIONS_MAX_BYTES,
  type InstructionFile,
  type RefusedFile,
  type RepoInstructions,
} from "../agent/repo-instructions.js";
import { FileError, type Files } from "../sandbox/files.js";

type InstructionRead = { bytes: Uint8Array; size: number };

/** Where readRepoInstructions looks. */
export interface ReadInstructionsOptions {
  /**
   * The repo root in the sandbox.
   * @default "/workspace"
   */
  root?: string;
  /**
   * The job's working directory below the root; AGENTS.md files are read from the root down to it.
   * @default "" (the root)
   */
  workDir?: string;
  /**
   * The most bytes of all files together.
   * @default REPO_INSTRUCTIONS_MAX_BYTES (32 KiB)
   */
  maxBytes?: number;
}

/**
 * Whether bytes are UTF-8 text with no NUL: a sparse or binary file would offer the model tokens of
 * nothing, and each invalid byte a U+FFFD three times its size, past the bound. A head cut short may
 * end inside a character.
 */
function isText(bytes: Uint8Array, cutShort: boolean): boolean {
  if (bytes.includes(0)) return false;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes, { stream: cutShort });
    return true;
  } catch {
    return false;
  }
}

/** One candidate file: its bytes (at most `max`) and size, undefined when absent or empty, or why it is refused. */
async function readOne(files: Files, abs: string, max: number): Promise<InstructionRead | string | undefined> {
  let st;
  try {
    st = await files.stat(abs);
  } catch (err) {
    // A parent that is not a directory (a `.github` file): no such file, not one refused.
    if (err instanceof FileError) return err.code === "ENOTDIR" ? undefined : `cannot be read: ${err.message}`;
    throw err;
  }
  if (!st) return undefined;
  if (st.symlinkTarget !== undefined) return "a symbolic link, or a path through one: not followed";
  if (st.type !== "file") return "not a regular file: not read";
  if (st.size === 0) return undefined;
  try {
    // Never past the bound: a larger file gives its head (the file agent's lane), or is refused.
    // noFollow: no link swapped in since the stat is followed (the file agent opens each component
    // below the last); the check of the path after it is what holds without the agent.
    const entry = await files.readEntry(abs, { maxBytes: max, head: true, noFollow: true });
    if (entry.path !== abs) return "a symbolic link, or a path through one: not followed";
    if (!entry.bytes.length) return undefined;
    const size = Math.max(st.size, entry.bytes.length);
    if (!isText(entry.bytes, entry.bytes.length < size)) return "not UTF-8 text: not read";
    return { bytes: entry.bytes, size };
  } catch (err) {
    if (!(err instanceof FileError)) throw err;
    return err.code === "EFBIG"
      ? `${count(st.size, "byte")}, over the ${count(max, "byte")} bound: not read`
      : `cannot be read: ${err.message}`;
  }
}

/**
 * The repository's instructions from the sandbox's tree: in each slot the first candidate present,
 * non-empty and a regular file of its own; refused candidates fall through to the next one of their
 * slot. Reading stops once the bound is used up.
 */
export async function readRepoInstructions(
  files: Files,
  opts: ReadInstructionsOptions = {},
): Promise<RepoInstructions> {
  const root = opts.root ?? "/workspace";
  const max = opts.maxBytes ?? REPO_INSTRUCTIONS_MAX_BYTES;
  const found: InstructionFile[] = [];
  const refused: RefusedFile[] = [];
  let used = 0;
  for (const slot of instructionSlots(opts.workDir)) {
    if (used > max) break; // the file that crossed it is cut, with every file after it
    for (const rel of slot) {
      const got = await readOne(files, path.join(root, rel), max);
      if (got === undefined) continue;
      if (typeof got === "string") {
        refused.push({ path: rel, reason: got });
        continue;
      }
      found.push({ path: rel, ...got });
      used += got.size;
      break;
    }
  }
  return combineInstructions(found, refused, max);
}
