// An in-memory EditorFs: files (bytes), directories and "other" nodes (a fifo or device), in insertion
// order, which stands in for filesystem order. Hooks let tests simulate a concurrent writer or a dead sandbox.
import type { EditorFs, EditorStat } from "../../src/tools/editor.js";

type Node = { type: "file"; bytes: Uint8Array } | { type: "directory" } | { type: "other" };

export interface MemFsHooks {
  /** Called after each read returns; n counts the reads of that path, from 1. */
  afterRead?: (path: string, n: number, fs: MemFs) => void;
  /** When set, every operation rejects with this error (the sandbox is gone). */
  failWith?: Error;
}

function fsError(code: string, path: string): Error {
  return Object.assign(new Error(`${code}: ${path}`), { code });
}

function parentOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}

export class MemFs implements EditorFs {
  private readonly nodes = new Map<string, Node>([["/", { type: "directory" }]]);
  private readonly readCounts = new Map<string, number>();
  readonly hooks: MemFsHooks = {};
  /** Every operation in order, e.g. "read /a", so tests can check what the editor did. */
  readonly log: string[] = [];

  // ------------------------------------------------------------ EditorFs

  async stat(path: string): Promise<EditorStat> {
    this.enter("stat", path);
    const node = this.nodes.get(path);
    if (!node) return { type: "missing", size: 0 };
    return { type: node.type, size: node.type === "file" ? node.bytes.byteLength : 4096 };
  }

  async read(path: string): Promise<Uint8Array> {
    this.enter("read", path);
    const node = this.nodes.get(path);
    if (!node) throw fsError("ENOENT", path);
    if (node.type !== "file") throw fsError("EISDIR", path);
    const n = (this.readCounts.get(path) ?? 0) + 1;
    this.readCounts.set(path, n);
    const copy = node.bytes.slice(); // callers must not alias our storage
    this.hooks.afterRead?.(path, n, this);
    return copy;
  }

  async write(path: string, bytes: Uint8Array): Promise<void> {
    this.enter("write", path);
    this.writeSync(path, bytes);
  }

  async mkdirp(dir: string): Promise<void> {
    this.enter("mkdirp", dir);
    this.mkdirpSync(dir);
  }

  async remove(path: string): Promise<void> {
    this.enter("remove", path);
    const node = this.nodes.get(path);
    if (!node) throw fsError("ENOENT", path);
    if (node.type === "directory" && this.children(path).length > 0) throw fsError("ENOTEMPTY", path);
    this.nodes.delete(path);
  }

  async listDir(path: string): Promise<string[]> {
    this.enter("listDir", path);
    if (this.nodes.get(path)?.type !== "directory") throw fsError("ENOTDIR", path);
    const out: string[] = [];
    // Pre-order walk like find(1), depth ≤ 2, skipping hidden names (and everything under them).
    const walk = (dir: string, depth: number) => {
      for (const child of this.children(dir)) {
        if (child.slice(child.lastIndexOf("/") + 1).startsWith(".")) continue;
        out.push(child);
        if (depth < 2 && this.nodes.get(child)?.type === "directory") walk(child, depth + 1);
      }
    };
    walk(path, 1);
    return out;
  }

  // ------------------------------------------------------------ test helpers (synchronous, no hooks)

  /** Creates or overwrites a file, making its parents. */
  setFile(path: string, content: string | Uint8Array): void {
    this.mkdirpSync(parentOf(path));
    this.writeSync(path, typeof content === "string" ? Buffer.from(content, "utf8") : content);
  }

  /** The stored bytes of a file, or undefined. */
  getFile(path: string): Uint8Array | undefined {
    const node = this.nodes.get(path);
    return node?.type === "file" ? node.bytes : undefined;
  }

  getText(path: string): string | undefined {
    const bytes = this.getFile(path);
    return bytes && Buffer.from(bytes).toString("utf8");
  }

  addOther(path: string): void {
    this.mkdirpSync(parentOf(path));
    this.nodes.set(path, { type: "other" });
  }

  has(path: string): boolean {
    return this.nodes.has(path);
  }

  reads(path: string): number {
    return this.readCounts.get(path) ?? 0;
  }

  // ------------------------------------------------------------ internals

  private enter(op: string, path: string): void {
    this.log.push(`${op} ${path}`);
    if (this.hooks.failWith) throw this.hooks.failWith;
  }

  private writeSync(path: string, bytes: Uint8Array): void {
    const existing = this.nodes.get(path);
    if (existing && existing.type !== "file") throw fsError("EISDIR", path);
    if (this.nodes.get(parentOf(path))?.type !== "directory") throw fsError("ENOENT", parentOf(path));
    this.nodes.set(path, { type: "file", bytes: new Uint8Array(bytes) });
  }

  private mkdirpSync(dir: string): void {
    if (!dir.startsWith("/")) throw fsError("EINVAL", dir);
    let cur = "";
    for (const part of dir.split("/").filter(Boolean)) {
      cur += `/${part}`;
      const node = this.nodes.get(cur);
      if (!node) this.nodes.set(cur, { type: "directory" });
      else if (node.type !== "directory") throw fsError("ENOTDIR", cur);
    }
  }

  private children(dir: string): string[] {
    const prefix = dir === "/" ? "/" : `${dir}/`;
    return [...this.nodes.keys()].filter(
      (p) => p !== dir && p.startsWith(prefix) && !p.slice(prefix.length).includes("/"),
    );
  }
}
