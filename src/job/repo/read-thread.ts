// A reader thread (read-pool.ts starts it): reads batches of a local repo's small files for
// dirArchive, so that the worker's event loop only packs them. Each batch brings the directories
// it needs that the thread has not seen; the thread forgets a repo's when told it is done.
import { parentPort } from "node:worker_threads";
import { readBatch, type Dir, type ReadRequest } from "./read.js";

const port = parentPort;
if (!port) throw new Error("read-thread.ts runs as a worker thread (started by read-pool.ts)");
const tables = new Map<number, Dir[]>();
port.on("message", (m: ReadRequest | { done: number }) => {
  if ("done" in m) return void tables.delete(m.done);
  let dirs = tables.get(m.dirsOf);
  if (!dirs) tables.set(m.dirsOf, (dirs = []));
  for (const [i, d] of m.dirs) dirs[i] = d;
  const reply = readBatch(m, dirs);
  port.postMessage(reply, [reply.buffer, reply.objects]);
});
