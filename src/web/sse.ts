// One page's live transcript over server-sent events: each message is a JSON array of events
// (inert strings, a cost on each model response), its id the Redis stream id of the last one, so a
// reconnect goes on from there. An `end` event says the job is over and everything was sent.
// Reads are plain XREADs on the dashboard's command connection; between them the page waits on the
// shared hub (src/web/transcript-hub.ts), never on a Redis connection of its own. A page that reads
// slowly is waited for (the socket's drain), so the dashboard never buffers more than one message.
import type { Redis } from "ioredis";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { TranscriptEvent } from "../core/spec/spec.js";
import { prepareEvent } from "./escape.js";
import type { TranscriptHub } from "./transcript-hub.js";

const STREAM_ID = /^\d{1,20}-\d{1,20}$/;
const U64_MAX = 2n ** 64n - 1n;
/** A stream id Redis can read (each part 64 bits): a forged one would fail every read, and the browser reconnect with it for ever. */
const streamId = (s: string) => STREAM_ID.test(s) && s.split("-").every((p) => BigInt(p) <= U64_MAX);
/** How long a caught-up page waits before it looks at the job's state again. */
const POLL_MS = 1000;
/** A page whose socket takes nothing for this long is let go: one that never reads would hold its slot of the cap for ever. */
const STALL_MS = 60_000;

export interface TranscriptSource {
  /** The dashboard's command connection (never blocked). */
  redis: Redis;
  hub: TranscriptHub;
  streamKey: string;
  state: () => Promise<string>;
  /** Default STALL_MS. */
  stallMs?: number;
}

type Entries = [string, [string, string[]][]][] | null;

function parse(fields: string[]): unknown {
  try {
    return prepareEvent(JSON.parse(fields[1] ?? "null") as TranscriptEvent);
  } catch {
    return { type: "unparsed" };
  }
}

export async function streamTranscript(
  src: TranscriptSource,
  req: IncomingMessage,
  res: ServerResponse,
  from: string,
): Promise<void> {
  let last = streamId(from) ? from : "0";
  res.writeHead(200, {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store",
    Connection: "keep-alive",
    "X-Content-Type-Options": "nosniff",
    "X-Accel-Buffering": "no",
  });
  let closed = false;
  const gone = new Promise<void>((resolve) => req.on("close", () => ((closed = true), resolve())));
  const write = async (text: string) => {
    if (res.write(text) || closed) return;
    let timer: NodeJS.Timeout | undefined;
    const stalled = new Promise<void>(
      (r) => (timer = setTimeout(() => ((closed = true), res.destroy(), r()), src.stallMs ?? STALL_MS)),
    );
    await Promise.race([new Promise((r) => res.once("drain", r)), gone, stalled]);
    clearTimeout(timer);
  };
  const read = async (count: number) => {
    const r: Entries = await src.redis.xread("COUNT", count, "STREAMS", src.streamKey, last);
    return (r?.[0]?.[1] ?? []).map(([id, fields]) => ((last = id), parse(fields)));
  };
  await write("retry: 2000\n\n");
  let sent = 0;
  let idle = 0;
  try {
    while (!closed) {
      // a small first message, so the page paints the start of a long transcript at once
      const events = await read(sent === 0 ? 100 : 1000);
      if (events.length) {
        idle = 0;
        await write(`id: ${last}\ndata: ${JSON.stringify(events)}\n\n`);
        sent += events.length;
        continue;
      }
      const state = await src.state();
      if (state === "completed" || state === "failed" || state === "unknown") {
        // the job is over: whatever was written just before the end, then `end`
        for (let rest = await read(1000); rest.length; rest = await read(1000))
          await write(`id: ${last}\ndata: ${JSON.stringify(rest)}\n\n`);
        await write(`event: end\ndata: ${JSON.stringify({ state })}\n\n`);
        break;
      }
      await src.hub.wait(src.streamKey, last, POLL_MS);
      if (++idle % 15 === 0) await write(": keep-alive\n\n");
    }
  } catch {
    // Redis went away: the browser reconnects (from the last id it got)
  } finally {
    if (!res.destroyed) res.end();
  }
}
