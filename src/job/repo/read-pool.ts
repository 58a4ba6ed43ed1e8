// The reader threads, and the read-ahead of one local repo's files (repo-dir.ts): small files are
// read on the threads in batches while the event loop packs the ones before them (a file's open,
// fstat, read and close are most of a large repo's load on one thread: ~60% of 50,000 files').
// Bounded: a few batches in flight per thread, each at most BATCH_FILES files and about
// BATCH_BYTES bytes (a thread stops a batch there; its rest is asked for next); a large file is
// read by the main thread, as every file was before. The threads are started once per process and kept.
import { createRequire } from "node:module";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { DirId } from "./dir-at.js";
import { RepoError, type Body, type Header } from "./common.js";
import type { BlobObject } from "./blob-pack.js";
import { DirCursor, readNoFollow, type Dir, type ReadReply, type ReadRequest } from "./read.js";

const BATCH_FILES = 256;
const BATCH_BYTES = 4 * 1024 * 1024;
const PER_THREAD = 2;

class ReaderThread {
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve: (r: ReadReply) => void; reject: (e: Error) => void }>();
  dead?: Error;

  constructor() {
    this.worker = spawnThread();
    this.worker.unref();
    this.worker.on("message", (r: ReadReply) => {
      this.pending.get(r.id)?.resolve(r);
      this.pending.delete(r.id);
      if (!this.pending.size) this.worker.unref();
    });
    const fail = (err: Error) => {
      this.dead ??= err;
      for (const p of this.pending.values()) p.reject(new Error(`a repo reader thread stopped: ${err.message}`));
      this.pending.clear();
    };
    this.worker.on("error", fail);
    this.worker.on("messageerror", fail); // a reply that cannot be delivered: nothing waits for it forever
    this.worker.on("exit", (code) => fail(new Error(`exit code ${code}`)));
  }

  ask(req: ReadRequest): Promise<ReadReply> {
    if (this.dead) return Promise.reject(new Error(`a repo reader thread stopped: ${this.dead.message}`));
    return new Promise((resolve, reject) => {
      this.pending.set(req.id, { resolve, reject });
      this.worker.ref(); // a pending read keeps the process up
      this.worker.postMessage(req);
    });
  }

  forget(dirsOf: number): void {
    if (!this.dead) this.worker.postMessage({ done: dirsOf });
  }
}

/**
 * From dist/ the thread is the compiled read-thread.js; from src/ (tests, the bench under tsx)
 * Node 20 gives a worker thread no TypeScript loader, so tsx's require hook loads the .ts.
 */
function spawnThread(): Worker {
  const here = fileURLToPath(import.meta.url);
  if (!here.endsWith(".ts")) return new Worker(new URL("./read-thread.js", import.meta.url));
  const entry = JSON.stringify(here.replace(/read-pool\.ts$/, "read-thread.ts"));
  const tsx = JSON.stringify(createRequire(import.meta.url).resolve("tsx/cjs/api")); // this project's, whatever the working directory
  return new Worker(`require(${tsx}).register(); require(${entry});`, { eval: true });
}

let threads: ReaderThread[] = [];
/** The default: one thread per core but the event loop's, 1 to 4. */
export const DEFAULT_READER_THREADS = Math.max(1, Math.min(4, os.availableParallelism() - 1));

/** `n` live reader threads (started now if need be, e.g. while the walk runs). */
export function readerThreads(n = DEFAULT_READER_THREADS): ReaderThread[] {
  threads = threads.filter((t) => !t.dead);
  while (threads.length < n) threads.push(new ReaderThread());
  return threads.slice(0, n);
}

let ids = 0;

/** A stretch of the walk's files one thread reads; a partial reply's rest becomes the next one. */
type Segment = { start: number; end: number; thread: ReaderThread; reply?: Promise<ReadReply> };

/**
 * One repo's file bodies, asked for in the walk's order (`body(i)`), read ahead on the threads.
 * `threads: 0` reads every file on the main thread.
 */
export class ReadAhead {
  private readonly segments: Segment[] = [];
  private readonly threads: ReaderThread[];
  /** Per thread, which of the walk's directories it was sent (each batch sends the chains it lacks). */
  private readonly sent = new Map<ReaderThread, Uint8Array>();
  private readonly pending = new Set<Promise<ReadReply>>();
  private readonly dirsOf = ++ids;
  private readonly cursor: DirCursor;
  private seg = 0;
  private closing = false;

  constructor(
    private readonly root: { fd: number; id: DirId },
    private readonly dirs: Dir[],
    private readonly files: { dir: number; name: string }[],
    private readonly label: string,
    /** Whether the pack still takes objects: the threads make files' objects while it does. */
    private readonly packing: () => boolean,
    threadCount = DEFAULT_READER_THREADS,
  ) {
    this.threads = threadCount > 0 ? readerThreads(threadCount) : [];
    this.cursor = new DirCursor(root.fd, dirs, label);
    for (let i = 0, turn = 0; this.threads.length && i < files.length; i += BATCH_FILES)
      this.segments.push({
        start: i,
        end: Math.min(files.length, i + BATCH_FILES),
        thread: this.threads[turn++ % this.threads.length]!,
      });
  }

  /** Sends the batches from segment `from` on that are not out yet, up to PER_THREAD per thread. */
  private fill(from: number): void {
    const limit = this.threads.length * PER_THREAD;
    for (let s = from; s < this.segments.length && s < from + limit; s++) {
      const seg = this.segments[s]!;
      if (!seg.reply) this.send(seg);
    }
  }

  /** The walk's directories a batch needs that its thread was not sent yet: each file's, and those above it. */
  private chains(t: ReaderThread, files: { dir: number }[]): [number, Dir][] {
    let sent = this.sent.get(t);
    if (!sent) this.sent.set(t, (sent = new Uint8Array(this.dirs.length)));
    const out: [number, Dir][] = [];
    for (const f of files)
      for (let d = f.dir; d >= 0 && !sent[d]; d = this.dirs[d]!.parent) {
        sent[d] = 1;
        out.push([d, this.dirs[d]!]);
      }
    return out;
  }

  private send(seg: Segment): void {
    if (this.closing) throw new Error("the repo's read-ahead was closed");
    const t = seg.thread;
    const packing = this.packing();
    const files = this.files.slice(seg.start, seg.end);
    const req: ReadRequest = {
      id: ++ids,
      root: this.root.fd,
      rootId: this.root.id,
      dirsOf: this.dirsOf,
      dirs: this.chains(t, files),
      label: this.label,
      files: files.map((f) => ({ dir: f.dir, name: f.name, blob: packing && !`/${f.name}`.includes("/.git/") })),
      maxBytes: BATCH_BYTES,
    };
    const reply = t.ask(req);
    this.pending.add(reply);
    const settled = () => void this.pending.delete(reply);
    reply.then(settled, settled);
    seg.reply = reply;
  }

  /**
   * File `i`'s body (files are asked for in order), with its pack object where a thread made it;
   * the header's size, mode and mtime set from the open file. "here": the file is the main
   * thread's to read (readHere), when it is written (large, or no threads).
   */
  async body(i: number, header: Header): Promise<{ body: Buffer; object?: BlobObject } | "here"> {
    if (this.closing) throw new Error("the repo's read-ahead was closed");
    if (!this.threads.length) return "here";
    while (this.segments[this.seg]!.end <= i) this.segments[this.seg++] = undefined!; // a consumed batch is not kept
    const seg = this.segments[this.seg]!;
    this.fill(this.seg);
    const r = await seg.reply!;
    const got = r.files[i - seg.start];
    if (!got && r.error)
      throw r.error.repo
        ? new RepoError(r.error.message)
        : Object.assign(new Error(r.error.message), r.error.code ? { code: r.error.code } : {});
    if (!got) {
      // The batch's bytes were spent: the rest of it is the next batch, asked for now.
      this.segments.splice(this.seg + 1, 0, { start: i, end: seg.end, thread: seg.thread });
      seg.end = i;
      return this.body(i, header);
    }
    if ("defer" in got) return "here";
    header.size = got.len;
    header.mode = got.mode;
    header.mtime = new Date(got.mtime);
    const body = Buffer.from(r.buffer, got.off, got.len);
    if (!got.obj) return { body };
    return {
      body,
      object: {
        sha: Buffer.from(got.obj.sha, "hex"),
        body: Buffer.from(r.objects, got.obj.off, got.obj.len),
        crc: got.obj.crc,
      },
    };
  }

  /** A file the threads left (large, or no threads), read on the main thread as every file was before them. */
  readHere(i: number, header: Header): Body {
    if (this.closing) throw new Error("the repo's read-ahead was closed");
    return readNoFollow(this.cursor.fd(this.files[i]!.dir), header, this.label);
  }

  /**
   * No batch is sent from now on; once none is out any more, the threads forget the repo and its
   * directories are closed. The caller closes the root only then: a thread never reads through an
   * fd number the process has reused.
   */
  async close(): Promise<void> {
    this.closing = true;
    while (this.pending.size) await Promise.allSettled([...this.pending]);
    for (const t of this.sent.keys()) t.forget(this.dirsOf);
    this.cursor.close(true);
    this.segments.length = 0; // nothing of the repo is kept by a closed read-ahead (its archive may live on)
    this.files.length = 0;
  }
}
