// The dashboard's live transcripts share one Redis connection, whatever the number of pages open:
// each page's stream reads what it has not sent yet with plain (non-blocking) XREADs on the
// dashboard's command connection, and when it has caught up it waits here. The hub holds one
// blocking XREAD over every stream someone waits on (from the oldest position waited for) and wakes
// the waiters of a stream when it has something new. A new stream to watch interrupts the blocking
// read (CLIENT UNBLOCK from the command connection), so nobody waits for the block to time out.
import type { Redis } from "ioredis";
import { duplicateRedis, isCluster, keepConnected } from "../redis/connect.js";

/** How long a Cluster's blocking read lasts (see the constructor). */
const CLUSTER_BLOCK_MS = 250;

type Entries = [string, [string, string[]][]][] | null;

interface Waiter {
  last: string;
  wake: () => void;
}

/** Stream ids ("ms-seq") compared as numbers. */
export function afterId(a: string, b: string): boolean {
  const [am = 0n, as = 0n] = a.split("-").map((x) => BigInt(/^\d+$/.test(x) ? x : "0"));
  const [bm = 0n, bs = 0n] = b.split("-").map((x) => BigInt(/^\d+$/.test(x) ? x : "0"));
  return am > bm || (am === bm && as > bs);
}

export class TranscriptHub {
  private readonly conn: Redis;
  private readonly waiters = new Map<string, Set<Waiter>>();
  private connId?: number;
  /** The keys and ids the blocking read in flight was given. */
  private reading?: Map<string, string>;
  private idle?: () => void;
  private closed = false;
  private readonly loop: Promise<void>;

  /** `commands`: a connection for CLIENT UNBLOCK (never blocked itself); `name`: the hub connection's CLIENT SETNAME. */
  constructor(
    private readonly commands: Redis,
    name: string,
    private blockMs = 5000,
  ) {
    this.conn = duplicateRedis(commands, name);
    this.conn.on("error", () => {}); // ioredis reconnects; the waiters time out meanwhile
    keepConnected(this.conn, () => this.closed);
    // On a Cluster, CLIENT ID and UNBLOCK would go to any node, not the one the read blocks on: the
    // read is short instead, so a new waiter is taken up within CLUSTER_BLOCK_MS.
    if (isCluster(commands)) this.blockMs = Math.min(blockMs, CLUSTER_BLOCK_MS);
    else
      this.conn.on(
        "ready",
        () =>
          void this.conn.client("ID").then(
            (id) => (this.connId = Number(id)),
            () => {},
          ),
      );
    this.loop = this.run();
  }

  /** How many pages wait on the hub now. */
  get size(): number {
    let n = 0;
    for (const s of this.waiters.values()) n += s.size;
    return n;
  }

  /** Resolves when the stream `key` has an entry after `last`, after `ms`, or at close. */
  wait(key: string, last: string, ms: number): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const set = this.waiters.get(key) ?? new Set<Waiter>();
      this.waiters.set(key, set);
      const w: Waiter = {
        last,
        wake: () => {
          clearTimeout(timer);
          set.delete(w);
          if (!set.size && this.waiters.get(key) === set) this.waiters.delete(key);
          resolve();
        },
      };
      const timer = setTimeout(w.wake, ms);
      set.add(w);
      // The read in flight does not cover this one: start it again.
      const reading = this.reading?.get(key);
      if (reading === undefined || afterId(reading, last)) this.interrupt();
      this.idle?.();
    });
  }

  private interrupt(): void {
    if (this.reading && this.connId !== undefined) void this.commands.client("UNBLOCK", this.connId).catch(() => {});
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      if (!this.waiters.size) {
        await new Promise<void>((r) => (this.idle = r));
        this.idle = undefined;
        continue;
      }
      const from = new Map<string, string>();
      for (const [key, set] of this.waiters) {
        let min: string | undefined;
        for (const w of set) if (min === undefined || afterId(min, w.last)) min = w.last;
        from.set(key, min!);
      }
      this.reading = from;
      let res: Entries = null;
      try {
        res = await this.conn.xread("COUNT", 1, "BLOCK", this.blockMs, "STREAMS", ...from.keys(), ...from.values());
      } catch {
        // Redis away, or closed: the waiters' own timers go on; try again shortly
        if (!this.closed) await new Promise((r) => setTimeout(r, 250));
      } finally {
        this.reading = undefined;
      }
      for (const [key, entries] of res ?? []) {
        const newest = entries.at(-1)?.[0];
        if (newest === undefined) continue;
        for (const w of [...(this.waiters.get(key) ?? [])]) if (afterId(newest, w.last)) w.wake();
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const set of [...this.waiters.values()]) for (const w of [...set]) w.wake();
    this.idle?.();
    this.conn.disconnect();
    await this.loop.catch(() => {});
  }
}
