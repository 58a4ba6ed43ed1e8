// Bulk loads through a stream: a tar piped into `tar -x` in an attached exec, run as the agent's
// uid (it can write nothing the agent could not). Docker 20.10's archive API re-executes dockerd
// for every call and costs ~50 µs per file on top; this costs one exec. The archive API stays the
// fallback for an image without GNU tar (the stream is untouched until tar says it is ready).
import type { Readable } from "node:stream";
import { asset } from "../core/assets.js";
import { HeadTail } from "../core/truncate.js";
import type { Box } from "../backend/types.js";
import { kinded } from "../core/errors.js";

/** What the script prints once tar can run. */
export const READY = "PBTAR\n";
// -p keeps modes exactly, as the archive API does; directories' modes are set at the end so a
// read-only directory does not stop its own files; names are the worker's own (checked) ones.
// (The file agent runs these words; tar-extract.sh runs the same, held to them by test/unit/assets.test.ts.)
export const TAR_EXTRACT = ["tar", "-x", "-p", "-f", "-", "--delay-directory-restore", "--no-same-owner", "-C"];
/** The program (src/sandbox/sh/tar-extract.sh): READY once tar can run, then tar reads stdin into $1. */
export const TAR_SCRIPT = asset("sandbox/sh/tar-extract.sh");

export class StreamUnavailable extends kinded("image") {}

/**
 * Extracts `archive` into `dir` (which must exist). Throws StreamUnavailable, with the archive
 * not read at all, when the image cannot run tar; any other failure is an Error with tar's words.
 */
export async function extractTarStream(box: Box, dir: string, archive: Readable, timeoutSec = 600): Promise<void> {
  const err = new HeadTail(4096);
  let ready!: () => void;
  const readySeen = new Promise<void>((r) => (ready = r));
  let head = "";
  const proc = await box.attach(
    ["timeout", "-s", "KILL", String(timeoutSec), "bash", "--noprofile", "--norc", "-c", TAR_SCRIPT, "tar", dir],
    (chunk, stream) => {
      if (stream === 2) return err.push(chunk);
      if (head.length < READY.length) {
        head += chunk.toString("latin1");
        if (head.startsWith(READY)) ready();
      }
    },
    { env: ["HOME=/home/agent"] },
  );
  if ((await Promise.race([readySeen.then(() => true), proc.ended.then(() => false)])) === false) {
    throw new StreamUnavailable(`tar cannot run in the sandbox: ${err.text().trim()}`);
  }
  let piped: Error | undefined;
  await proc.pipeIn(archive).catch((e: Error) => ((piped = e), proc.destroy()));
  await proc.ended;
  if (piped) throw piped;
  const code = await proc.exitCode();
  if (code !== 0)
    throw new Error(`extracting the repo into ${dir} failed (tar exit ${code}): ${err.text().trim().slice(-600)}`);
}
