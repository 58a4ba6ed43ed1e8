// A reader thread (read-pool.ts starts it): reads batches of a local repo's small files for
// dirArchive, so that the worker's event loop only packs them. Each repo's directory table comes
// with its first batch; the thread forgets it when told the repo is done.
import { parentPort } from "node:worker_threads";
import { readBatch, type Dir, type ReadRequest } from "./repo-read.js";

const port = parentPort;
if (!port) throw new Error("read-thread.ts runs as a worker thread (started by read-pool.ts)");
const tables = new Map<number, Dir[]>();
port.on("message", (m: ReadRequest | { done: number }) => {
  if ("done" in m) return void tables.delete(m.done);
  if (m.dirs) tables.set(m.dirsOf, m.dirs);
  const dirs = tables.get(m.dirsOf);
  const reply = dirs ? readBatch(m, dirs) : { id: m.id, buffer: new ArrayBuffer(0), objects: new ArrayBuffer(0), files: [], error: { repo: false, message: "a reader thread was asked for a repo it was not given" } };
  port.postMessage(reply, [reply.buffer, reply.objects]);
});
