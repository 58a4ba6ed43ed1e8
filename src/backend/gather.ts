// Chunks gathered into writes of about 256 KiB for a process's stdin.
const PIPE_CHUNK = 256 * 1024;

/**
 * Chunks gathered into writes of about 256 KiB: a tar stream comes as a 512-byte header and a small
 * body per file, and each write costs a trip through dockerd and the shim (a 1,000-file repo loaded
 * 2x faster gathered).
 */
export async function* gather(source: AsyncIterable<Buffer | string>): AsyncIterable<Buffer> {
  let parts: Buffer[] = [];
  let size = 0;
  for await (const c of source) {
    const b = typeof c === "string" ? Buffer.from(c) : c;
    parts.push(b);
    if ((size += b.length) >= PIPE_CHUNK) {
      yield Buffer.concat(parts, size);
      [parts, size] = [[], 0];
    }
  }
  if (size) yield Buffer.concat(parts, size);
}

/** A source into a process's stdin, gathered, with backpressure (send), while it is alive; then its end. */
export async function pipeGathered(
  source: AsyncIterable<Buffer | string>,
  send: (b: Buffer) => Promise<void>,
  alive: () => boolean,
  end: () => void,
): Promise<void> {
  for await (const chunk of gather(source)) {
    if (!alive()) break;
    await send(chunk);
  }
  if (alive()) end();
}
