// The text editor bound to a sandbox: its filesystem (EditorFs) on the sandbox's files, and the
// tool definitions sent to the Messages API for each editor flavour.
import { createHash } from "node:crypto";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { EditorFlavor, EditorFs, EditorStat } from "./editor.js";
import { toolName } from "./editor-text.js";

/** Built-in editor tools are sent schema-less; the model knows their input. */
export function editorDefinition(flavor: EditorFlavor, maxCharacters: number): Record<string, unknown> {
  // Only the newer flavour takes max_characters.
  return flavor === "text_editor_20250124"
    ? { type: flavor, name: toolName(flavor) }
    : { type: flavor, name: toolName(flavor), max_characters: maxCharacters };
}

/** The editor's filesystem on a sandbox's files: every operation with the agent's permissions. */
export class SandboxFs implements EditorFs {
  constructor(private sb: Sandbox) {}

  /** Stats a path, following symlinks. */
  async stat(p: string): Promise<EditorStat> {
    const st = await this.sb.files.stat(p);
    return st ? { type: st.type, size: st.size } : { type: "missing", size: 0 };
  }

  /** Reads a regular file. */
  read(p: string): Promise<Uint8Array> {
    return this.sb.files.read(p);
  }

  /** Writes a file byte-exact, keeping an existing file's mode and owner. */
  write(p: string, bytes: Uint8Array): Promise<void> {
    return this.sb.files.write(p, bytes);
  }

  /** Check and write in one step inside the container, so no bash write can slip in between. */
  async writeIfUnchanged(p: string, expected: Uint8Array, next: Uint8Array): Promise<boolean | undefined> {
    return this.sb.files.writeIfUnchanged(p, createHash("sha256").update(expected).digest("hex"), next);
  }

  /** Makes a directory and its missing parents. */
  mkdirp(dir: string): Promise<void> {
    return this.sb.files.mkdirp(dir);
  }

  /** Removes a file. */
  remove(p: string): Promise<void> {
    return this.sb.files.remove(p);
  }

  /** The entries up to 2 levels under `p`, hidden ones left out. */
  async listDir(p: string): Promise<string[]> {
    const listed = await this.sb.files.list(p);
    if (listed) return listed;
    // No file agent: find in a fresh exec; -prune on hidden names leaves out what is under them too.
    const r = await this.sb.exec(
      ["find", p, "-mindepth", "1", "-maxdepth", "2", "-name", ".*", "-prune", "-o", "-print"],
      { timeoutSec: 30, maxBytes: 4 * 1024 * 1024 },
    );
    if (r.exitCode !== 0 && !r.stdout.length) throw new Error(r.stderr.trim() || `find exited with ${r.exitCode}`);
    return r.stdout.toString("utf8").split("\n").filter(Boolean);
  }
}
