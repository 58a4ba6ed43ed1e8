// The text editor bound to a sandbox: its filesystem (EditorFs) on the sandbox's files, and the
// tool definitions sent to the Messages API for each editor flavour.
import { createHash } from "node:crypto";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { EditorFlavor, EditorFs, EditorStat } from "./editor.js";
import { spliceOf, toolName } from "./editor-text.js";

/** Built-in editor tools are sent schema-less; the model knows their input. */
export function editorDefinition(flavor: EditorFlavor, maxCharacters: number): Record<string, unknown> {
  // Only the newer flavour takes max_characters.
  return flavor === "text_editor_20250124"
    ? { type: flavor, name: toolName(flavor) }
    : { type: flavor, name: toolName(flavor), max_characters: maxCharacters };
}

/** The most bytes of files' content a SandboxFs holds to spare sending them again. */
const KNOWN_MAX_BYTES = 8 << 20;
/** The most files it holds, and what each costs beside its content (its path, its hash, the entry). */
const KNOWN_MAX_FILES = 256;
const KNOWN_ENTRY_BYTES = 256;
const entryBytes = (p: string, b: Buffer) => b.length + p.length * 2 + KNOWN_ENTRY_BYTES;

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/**
 * The editor's filesystem on a sandbox's files: every operation with the agent's permissions. It
 * holds the content it last read or wrote of a few files (`known`), so that a file read again
 * unchanged is not sent again: the file agent reads it all the same and compares its sha256.
 */
export class SandboxFs implements EditorFs {
  /** Path → content as last read or written here, oldest first, at most KNOWN_MAX_FILES and KNOWN_MAX_BYTES in all. */
  private readonly known = new Map<string, { sha256: string; bytes: Buffer }>();
  private knownBytes = 0;

  constructor(private sb: Sandbox) {}

  /** Stats a path, following symlinks; with `read`, a regular file within it comes back read. */
  async stat(p: string, read?: number): Promise<EditorStat> {
    const known = read === undefined ? undefined : this.known.get(p);
    const st = await this.sb.files.statRead(p, read, known);
    if (!st) return (this.forget(p), { type: "missing", size: 0 });
    if (st.bytes && st.bytes !== known?.bytes) this.remember(p, st.bytes);
    return { type: st.type, size: st.size, ...(st.bytes ? { bytes: st.bytes } : {}) };
  }

  /** Reads a regular file. */
  async read(p: string): Promise<Uint8Array> {
    const bytes = await this.sb.files.read(p);
    this.remember(p, bytes);
    return bytes;
  }

  /** Writes a file byte-exact, keeping an existing file's mode and owner. */
  async write(p: string, bytes: Uint8Array): Promise<void> {
    this.forget(p);
    await this.sb.files.write(p, bytes);
    this.remember(p, bytes);
  }

  /**
   * Check and write in one step inside the container, so no bash write can slip in between. Only
   * the changed span travels (a splice of the checked content) where the file agent can splice.
   */
  async writeIfUnchanged(p: string, expected: Uint8Array, next: Uint8Array): Promise<boolean | undefined> {
    const known = this.known.get(p);
    const sha = known && known.bytes === expected ? known.sha256 : sha256(expected);
    this.forget(p);
    const { at, cut, insert } = spliceOf(expected, next);
    const swapped =
      (await this.sb.files.spliceIfUnchanged(p, sha, at, cut, insert)) ??
      (await this.sb.files.writeIfUnchanged(p, sha, next));
    if (swapped) this.remember(p, next);
    return swapped;
  }

  /** Makes a directory and its missing parents. */
  mkdirp(dir: string): Promise<void> {
    return this.sb.files.mkdirp(dir);
  }

  /** Removes a file. */
  remove(p: string): Promise<void> {
    this.forget(p);
    return this.sb.files.remove(p);
  }

  /** Holds a file's content as the newest (a file over the bound, or what it pushes out, is not held). */
  private remember(p: string, bytes: Uint8Array): void {
    this.forget(p);
    if (bytes.byteLength > KNOWN_MAX_BYTES) return;
    const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.known.set(p, { sha256: sha256(b), bytes: b });
    this.knownBytes += entryBytes(p, b);
    for (const [q, k] of this.known) {
      if (this.knownBytes <= KNOWN_MAX_BYTES && this.known.size <= KNOWN_MAX_FILES) break;
      this.forget(q, k);
    }
  }

  private forget(p: string, k = this.known.get(p)): void {
    if (!k) return;
    this.known.delete(p);
    this.knownBytes -= entryBytes(p, k.bytes);
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
