// The repository's instruction files read from the loaded tree in the sandbox, after setup and
// before the first model request (agent-phase.ts). Every stat and read goes through Files, as the
// agent's uid. A file is used only when it is itself a regular file at its own path: a symlink (or a
// path through one), a FIFO, a directory, or a file larger than the bound is never followed or read,
// and is named in the transcript's instructions_loaded event with why. Which files and in which
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

/** One candidate file: its bytes, undefined when absent or empty, or why it is refused. */
async function readOne(files: Files, abs: string, max: number): Promise<Uint8Array | string | undefined> {
  let st;
  try {
    st = await files.stat(abs);
  } catch (err) {
    if (err instanceof FileError) return `cannot be read: ${err.message}`;
    throw err;
  }
  if (!st) return undefined;
  if (st.symlinkTarget !== undefined) return "a symbolic link, or a path through one: not followed";
  if (st.type !== "file") return "not a regular file: not read";
  if (st.size === 0) return undefined;
  if (st.size > max) return `${count(st.size, "byte")}, over the ${max / 1024} KiB bound: not read`;
  try {
    const entry = await files.readEntry(abs, { maxBytes: max });
    // What was opened must be the path itself: nothing may have put a link there since the stat.
    if (entry.path !== abs) return "a symbolic link, or a path through one: not followed";
    return entry.bytes.length ? entry.bytes : undefined;
  } catch (err) {
    if (!(err instanceof FileError)) throw err;
    return err.code === "EFBIG" ? `over the ${max / 1024} KiB bound: not read` : `cannot be read: ${err.message}`;
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
    if (used > max) break;
    for (const rel of slot) {
      const got = await readOne(files, path.join(root, rel), max);
      if (got === undefined) continue;
      if (typeof got === "string") {
        refused.push({ path: rel, reason: got });
        continue;
      }
      found.push({ path: rel, bytes: got });
      used += got.length;
      break;
    }
  }
  return combineInstructions(found, refused, max);
}
