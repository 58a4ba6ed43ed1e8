// edit_file: a plain JSON-schema editing tool for models without Anthropic's built-in editor,
// the way the loom tutorial's edit_file works (empty old_string on a missing file creates it),
// with the same byte-exact, exactly-once and no-clobber rules as the built-in editor.
import { count } from "../core/count.js";
import { z } from "zod";
import {
  bytesEqual,
  catN,
  countNewlines,
  DEFAULT_MAX_FILE_BYTES,
  findAll,
  hasNul,
  msg,
  parentDir,
  strReplaceBytes,
  utf8,
  type EditorFs,
  type ToolOutput,
} from "./editor.js";

const Input = z.object({ path: z.string(), old_string: z.string(), new_string: z.string() });

export const editFileDefinition = {
  name: "edit_file",
  description:
    "Edit a text file. Replaces old_string with new_string; old_string must occur exactly once in the file " +
    "(include enough surrounding lines to make it unique) and must match the file exactly, whitespace included. " +
    "With an empty old_string and a path that does not exist, creates the file (and its parent directories) " +
    "with new_string as its content. Paths are absolute, e.g. /workspace/src/main.py. To read files, use bash (cat -n, sed -n, grep -n).",
  input_schema: {
    type: "object" as const,
    properties: {
      path: { type: "string", description: "Absolute path of the file." },
      old_string: { type: "string", description: "The exact text to replace; empty to create a new file." },
      new_string: { type: "string", description: "The replacement text (or the content of a new file)." },
    },
    required: ["path", "old_string", "new_string"],
  },
};

/** How EditFileTool edits. */
export interface EditFileToolOptions {
  /**
   * Files above this many bytes are refused.
   * @default 5242880 (5 MiB)
   */
  maxFileBytes?: number;
  /**
   * Where a relative path would be (named in the message that refuses it).
   * @default "/workspace"
   */
  workspace?: string;
}

/** The edit_file tool (path, old_string, new_string) for models without Anthropic's built-in editor. */
export class EditFileTool {
  constructor(
    private fs: EditorFs,
    private opts: EditFileToolOptions = {},
  ) {}

  /** Runs one call; never throws: bad input and filesystem failures become is_error results. */
  async run(input: unknown): Promise<ToolOutput> {
    const parsed = Input.safeParse(input ?? {});
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const field = String(issue.path[0] ?? "input");
      return fail(
        `Invalid input for edit_file: \`${field}\` is required and must be a string. Expected {"path", "old_string", "new_string"}.`,
      );
    }
    const { path, old_string: oldStr, new_string: newStr } = parsed.data;
    try {
      return await this.edit(path, oldStr, newStr);
    } catch (err) {
      return fail(msg.fsFailed("edit_file", path, (err as Error).message));
    }
  }

  private async edit(path: string, oldStr: string, newStr: string): Promise<ToolOutput> {
    if (!path.startsWith("/")) return fail(msg.notAbsolute(path, this.opts.workspace ?? "/workspace"));
    const max = this.opts.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
    const st = await this.fs.stat(path, max); // a file within the bound comes back read

    if (st.type === "missing") {
      if (oldStr !== "")
        return fail(
          `The file ${path} does not exist. To create it, call edit_file with an empty old_string; otherwise check the path (ls).`,
        );
      await this.fs.mkdirp(parentDir(path));
      await this.fs.write(path, utf8(newStr));
      return ok(`Created file ${path}`);
    }
    if (st.type !== "file")
      return fail(msg.notRegular(path).replace("neither a regular file nor a directory", "not a regular file"));
    if (st.size > max) return fail(msg.tooBig(path, st.size, max));
    if (oldStr === "")
      return fail(
        `old_string is empty but ${path} already exists. Give the exact text to replace (re-read the file with cat -n), or choose a new path to create a file.`,
      );
    if (oldStr === newStr) return fail(msg.sameStrings(path));
    const bytes = st.bytes ?? (await this.fs.read(path));
    if (hasNul(bytes)) return fail(msg.binary(path));
    const needle = utf8(oldStr);
    const at = findAll(bytes, needle, 2);
    if (at.length === 0)
      return fail(
        `old_string not found in ${path}. Re-read the file (cat -n ${path}) and copy the exact text, whitespace and indentation included.`,
      );
    if (at.length > 1) {
      const n = findAll(bytes, needle).length;
      return fail(
        `old_string appears ${count(n, "time")} in ${path}; it must appear exactly once. Include more surrounding context (whole lines before and after) to make it unique.`,
      );
    }
    const start = at[0]!; // the one match
    const replacement = utf8(newStr);
    const next = strReplaceBytes(bytes, start, needle.byteLength, replacement);
    // Written only if the file still holds what the edit was made from: checked and written in one
    // step where the filesystem can, else read back and compared first.
    const swapped = await this.fs.writeIfUnchanged?.(path, bytes, next);
    if (swapped === false) return fail(msg.changedSinceRead(path));
    if (swapped === undefined) {
      if (!bytesEqual(await this.fs.read(path), bytes)) return fail(msg.changedSinceRead(path));
      await this.fs.write(path, next);
    }
    const line = countNewlines(bytes, start);
    const text = Buffer.from(next).toString("utf8").split("\n");
    const from = Math.max(0, line - 4);
    const to = line + newStr.split("\n").length + 4;
    return ok(
      `The file ${path} has been edited. ${catN(text.slice(from, to).join("\n"), `a snippet of ${path}`, from + 1)}`,
    );
  }
}

const ok = (content: string): ToolOutput => ({ content, isError: false });
const fail = (content: string): ToolOutput => ({ content, isError: true });
