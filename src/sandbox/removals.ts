// A worker's background removals: a job's result is handed back before its sandbox is removed, so
// the container's removal (~150–300 ms of the engine's time) is off the job's critical path. Bounded:
// at most `concurrency` removals run at once and `maxQueued` more wait; past that, hand() waits for
// room, so a burst of finished jobs holds their slots instead of piling up containers. Counted, for
// the worker's metrics. Never leaked: the drain awaits idle() up to its deadline, and a removal that
// never happens (the worker killed) is the reaper's, by the sandbox's owner and deadline labels.

export interface RemovalOptions {
  /** Removals running at once. */
  concurrency: number;
  /** Removals waiting for a slot; one more hand() waits until there is room. */
  maxQueued: number;
  log?: (msg: string) => void;
}

export interface RemovalStats {
  running: number;
  queued: number;
  /** hand() calls waiting for room (their jobs not yet handed back). */
  blocked: number;
  /** Removals done, and failed (a failed one is the backend's to retry, or the reaper's). */
  removed: number;
  failed: number;
}

export class BackgroundRemovals {
  private running = 0;
  private readonly queue: (() => Promise<void>)[] = [];
  /** hand() calls waiting for room, let in in order. */
  private readonly room: { remove: () => Promise<void>; ok: () => void }[] = [];
  private idleWaiters: (() => void)[] = [];
  private readonly done = { removed: 0, failed: 0 };

  constructor(private readonly opts: RemovalOptions) {}

  get stats(): RemovalStats {
    return { running: this.running, queued: this.queue.length, blocked: this.room.length, ...this.done };
  }

  /** Queues a removal; resolves once it runs or waits in the queue (at once while there is room). */
  hand(remove: () => Promise<void>): Promise<void> {
    if (this.room.length || !this.hasRoom()) return new Promise<void>((ok) => this.room.push({ remove, ok }));
    this.queue.push(remove);
    this.pump();
    return Promise.resolve();
  }

  /** Resolves once nothing runs, waits or is blocked. */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((ok) => this.idleWaiters.push(ok));
  }

  private hasRoom(): boolean {
    return this.running < this.opts.concurrency || this.queue.length < this.opts.maxQueued;
  }

  private isIdle(): boolean {
    return this.running === 0 && this.queue.length === 0 && this.room.length === 0;
  }

  private pump(): void {
    this.start();
    // Blocked hand() calls in order, each queued here (not when its promise settles: no one overtakes it).
    while (this.room.length && this.hasRoom()) {
      const { remove, ok } = this.room.shift()!;
      this.queue.push(remove);
      ok();
      this.start();
    }
  }

  private start(): void {
    while (this.running < this.opts.concurrency && this.queue.length) {
      const remove = this.queue.shift()!;
      this.running++;
      void Promise.resolve()
        .then(remove)
        .then(
          () => void this.done.removed++,
          (err: unknown) => {
            this.done.failed++;
            this.opts.log?.(`removing a sandbox in the background failed: ${(err as Error).message}`);
          },
        )
        .finally(() => {
          this.running--;
          this.pump();
          this.settle();
        });
    }
  }

  private settle(): void {
    if (!this.isIdle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const ok of waiters) ok();
  }
}
