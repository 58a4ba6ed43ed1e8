// A warm pool per worker: sandboxes created, started, with shell, supervisor and file agent
// attached, before a job needs one, so a job's dequeue→ready is the repo load alone. Kept per
// image/limits/runtime (the default one, plus the latest other one jobs asked for); for a worker,
// a spare per free slot and one more, so that busy slots hold no idle sandboxes. Beside them, a
// bare box (bare-box.ts: the engine's part of a sandbox alone, ~4 MB) of the default kind for each
// slot whose job will verify and has not taken one yet: its verify will want a sandbox, and when
// many jobs reach verify at once, about half of each one's making is done already. Refilled in
// the background one at a time, and only while none of the worker's own jobs is being set up (it
// never competes with a job for the CPU). A pool sandbox serves one job at most: taking it removes
// it from the pool for good. Pool sandboxes carry the worker's owner and queue labels, so the
// reaper removes a dead worker's pool like its jobs' sandboxes; close() removes them on drain.
import { DEFAULT_IMAGE, defaults } from "../core/config/config.js";
import { defaultLimits, makeBareBox, Sandbox, type BareBox, type SandboxOptions } from "./sandbox.js";
import type { Backend } from "../backend/types.js";

export const POOL_LABEL = "patchbay.pool";

export interface PoolOptions {
  /** Warm sandboxes kept per kind at most; 0 turns the pool off. */
  size: number;
  /**
   * How many of the worker's slots have no job in them. The pool then keeps a spare for each free
   * slot and one for the next slot to free, at most `size`: a worker whose slots are all busy holds
   * one spare, not `size` (a spare is a sandbox's memory, ~20 MB, idle until a slot frees). Call
   * slotsChanged() when a slot frees. Without it, `size` spares.
   */
  freeSlots?: () => number;
  /**
   * The jobs in the worker's slots that will run verify there, by job id, with the kind of sandbox
   * it takes. The pool keeps a bare box of its default kind (takeBare) for each such job of that
   * kind that has not taken one, at most `size`. Without it, none.
   */
  slotsToVerify?: () => Iterable<readonly [string, Kind]>;
  /** The image of the default kind (a worker's PATCHBAY_IMAGE); default patchbay's own. */
  image?: string;
  /** Where a bare box the pool no longer wants goes (a worker's background removals); default: removed at once. */
  discardBare?: (b: BareBox) => void;
  owner?: string;
  labels?: Record<string, string>;
  log?: (msg: string) => void;
  /** Kinds kept warm at once (the default one and the latest others asked for). */
  maxKinds?: number;
  /** What runs its sandboxes (default: the configured backend). */
  backend?: Backend;
  /** The worker's PATCHBAY_ALLOW_PTRACE: its warm sandboxes are made with it, and only a job asking the same takes one. */
  allowPtrace?: boolean;
  /** What every job does first in a new sandbox, done ahead while it waits (e.g. the private git store); a failure is ignored. */
  prepare?: (sb: Sandbox) => Promise<void>;
  /** Where a discarded warm sandbox goes (a worker's background removals); default: removed at once. */
  discard?: (sb: Sandbox) => void;
  /** The runtime of the default kind (a worker's PATCHBAY_RUNTIME, which every job then runs under); default runc. */
  runtime?: SandboxOptions["runtime"];
}

/** A sandbox's kind: what a pool keeps apart (the engine's seccomp profile follows allowPtrace). */
export type SandboxKind = Pick<SandboxOptions, "image" | "limits" | "runtime" | "allowPtrace">;
type Kind = SandboxKind;

export class SandboxPool {
  private readonly idle = new Map<string, Sandbox[]>();
  /** Kinds to keep warm, most recently asked for last. */
  private readonly kinds = new Map<string, Kind>();
  private setups = 0;
  private closed = false;
  private wake?: () => void;
  private readonly loop: Promise<void>;
  private failures = 0;
  /** Bare boxes of the default kind, waiting (see PoolOptions.slotsToVerify). */
  private readonly bare: BareBox[] = [];
  /** The jobs that took a bare box (forgotten once they leave their slots). */
  private readonly bareTakenBy = new Set<string>();
  /** Sandboxes made and taken since start, and bare boxes (for tests and the bench). */
  readonly stats = { made: 0, taken: 0, missed: 0, bareMade: 0, bareTaken: 0 };

  constructor(private readonly opts: PoolOptions) {
    const d = normalise({ image: opts.image, runtime: opts.runtime });
    this.kinds.set(d.key, d.kind);
    this.loop = opts.size > 0 ? this.refill() : Promise.resolve();
  }

  /** How many bare boxes are waiting. */
  get bareSize(): number {
    return this.bare.length;
  }

  /** How many warm sandboxes are waiting, in all. */
  get size(): number {
    let n = 0;
    for (const list of this.idle.values()) n += list.length;
    return n;
  }

  /**
   * A warm sandbox for these options, or undefined (the caller creates one). One whose deadline
   * leaves less than `minLifeSec`, or whose connections dropped, is removed instead.
   */
  take(opts: Kind, minLifeSec: number): Sandbox | undefined {
    if (this.closed || this.opts.size <= 0) return undefined;
    // A box's seccomp profile is set when it is made: never one other than the job asks for.
    if ((opts.allowPtrace === true) !== (this.opts.allowPtrace === true)) return undefined;
    const { key, kind } = normalise(opts);
    this.kinds.delete(key);
    this.kinds.set(key, kind);
    for (const k of [...this.kinds.keys()].slice(0, Math.max(0, this.kinds.size - (this.opts.maxKinds ?? 2)))) {
      if (k === this.defaultKey) continue;
      this.kinds.delete(k);
      for (const sb of this.idle.get(k)?.splice(0) ?? []) this.discard(sb);
    }
    const list = this.idle.get(key) ?? [];
    while (list.length) {
      const sb = list.shift()!;
      if (sb.alive && sb.deadline - Date.now() / 1000 >= minLifeSec) {
        this.stats.taken++;
        this.poke();
        return sb;
      }
      this.discard(sb);
    }
    this.stats.missed++;
    this.poke();
    return undefined;
  }

  /**
   * A bare box for a sandbox of these options (finish it with Sandbox.create(opts, bare)), or
   * undefined: only of the default kind, and only one whose deadline leaves `minLifeSec`. `jobId`:
   * the job it is for, which the pool then makes none for (see PoolOptions.slotsToVerify).
   */
  takeBare(opts: Kind, minLifeSec: number, jobId?: string): BareBox | undefined {
    if (this.closed || this.opts.size <= 0 || !this.opts.slotsToVerify) return undefined;
    if ((opts.allowPtrace === true) !== (this.opts.allowPtrace === true)) return undefined;
    if (normalise(opts).key !== this.defaultKey) return undefined;
    while (this.bare.length) {
      const b = this.bare.shift()!;
      if (b.deadline - Date.now() / 1000 >= minLifeSec) {
        if (jobId !== undefined) this.bareTakenBy.add(jobId);
        this.stats.bareTaken++;
        this.poke();
        return b;
      }
      this.removeBare(b);
    }
    return undefined;
  }

  /** A job of this worker is being set up: no refill until the returned function is called. */
  setupStarted(): () => void {
    this.setups++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.setups--;
      this.poke();
    };
  }

  /** A slot of the worker freed (see `freeSlots`): the pool may want one more spare now, and a bare box fewer. */
  slotsChanged(): void {
    this.poke();
  }

  /** How many spares of a kind the pool keeps now: `size`, or fewer while the worker's slots are busy. */
  get wanted(): number {
    const free = this.opts.freeSlots?.();
    return free === undefined ? this.opts.size : Math.min(this.opts.size, Math.max(0, free) + 1);
  }

  /** How many bare boxes the pool keeps now: one for each job to verify of its default kind that has not taken one, at most `size`. */
  get wantedBare(): number {
    const slots = this.opts.slotsToVerify?.();
    if (slots === undefined) return 0;
    const ids = new Set<string>();
    for (const [id, kind] of slots) if (normalise(kind).key === this.defaultKey) ids.add(id);
    for (const id of this.bareTakenBy) if (!ids.has(id)) this.bareTakenBy.delete(id);
    return Math.min(this.opts.size, ids.size - this.bareTakenBy.size);
  }

  /** Stops refilling and removes every warm sandbox and bare box. */
  async close(): Promise<void> {
    this.closed = true;
    this.poke();
    await this.loop;
    const all = [...this.idle.values()].flat();
    this.idle.clear();
    await Promise.all([
      ...all.map((sb) => sb.destroy().catch(() => {})),
      ...this.bare.splice(0).map((b) => b.backend.remove(b.name).catch(() => {})),
    ]);
  }

  private removeBare(b: BareBox): void {
    if (this.opts.discardBare) this.opts.discardBare(b);
    else void b.backend.remove(b.name).catch(() => {}); // a failed removal is retried by the backend and the reaper
  }

  private get defaultKey(): string {
    return normalise({ image: this.opts.image, runtime: this.opts.runtime }).key;
  }

  private discard(sb: Sandbox): void {
    if (this.opts.discard) this.opts.discard(sb);
    else void sb.destroy().catch(() => {});
  }

  private poke(): void {
    this.wake?.();
  }

  private sleep(ms?: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = ms === undefined ? undefined : setTimeout(() => ((this.wake = undefined), resolve()), ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }

  /** Whichever kind is short of sandboxes, the most recently asked for first. */
  private short(): [string, Kind] | undefined {
    const entries = [...this.kinds.entries()].reverse();
    const wanted = this.wanted;
    return entries.find(([key]) => (this.idle.get(key)?.length ?? 0) < wanted);
  }

  /**
   * Spares past what the pool wants now are removed: the worker's slots filled with jobs of another
   * kind, or a free slot fewer, leave the ones made for them idle.
   */
  private trim(): void {
    const wanted = this.wanted;
    for (const list of this.idle.values()) for (const sb of list.splice(wanted)) this.discard(sb);
    for (const b of this.bare.splice(this.wantedBare)) this.removeBare(b);
  }

  /** One bare box of the default kind, kept unless the pool closed meanwhile. */
  private async makeBare(): Promise<void> {
    const b = await makeBareBox({
      ...normalise({ image: this.opts.image, runtime: this.opts.runtime }).kind,
      owner: this.opts.owner,
      labels: { ...this.opts.labels, [POOL_LABEL]: "1" },
      deadlineSec: defaults.sandbox.deadlineSec,
      backend: this.opts.backend,
      allowPtrace: this.opts.allowPtrace === true,
    });
    this.failures = 0;
    this.stats.bareMade++;
    if (this.closed) await b.backend.remove(b.name).catch(() => {});
    else this.bare.push(b);
  }

  private async refill(): Promise<void> {
    while (!this.closed) {
      this.trim();
      const want = this.short();
      if (this.setups > 0 || (!want && this.bare.length >= this.wantedBare)) {
        await this.sleep();
        continue;
      }
      try {
        if (!want) {
          await this.makeBare();
          continue;
        }
        const [key, kind] = want;
        const sb = await Sandbox.create({
          ...kind,
          owner: this.opts.owner,
          labels: { ...this.opts.labels, [POOL_LABEL]: "1" },
          deadlineSec: defaults.sandbox.deadlineSec,
          backend: this.opts.backend,
          allowPtrace: this.opts.allowPtrace === true,
        });
        // Its supervisor too (it starts off a new sandbox's path to ready): a warm one is whole.
        await Promise.all([this.opts.prepare?.(sb).catch(() => {}), sb.shell.supervised().catch(() => {})]);
        this.failures = 0;
        this.stats.made++;
        // Closed meanwhile, or the kind no longer wanted: not kept.
        if (this.closed || !this.kinds.has(key)) await sb.destroy();
        else this.idle.set(key, [...(this.idle.get(key) ?? []), sb]);
      } catch (err) {
        // The engine is down or the image missing: the worker's health gate says so; retry later.
        const ms = Math.min(60_000, 1000 * 2 ** this.failures++);
        this.opts.log?.(`pool: creating a warm sandbox failed (${(err as Error).message}); again in ${ms} ms`);
        await this.sleep(ms);
      }
    }
  }
}

/** The key of a sandbox kind: image, full limits, runtime. */
function normalise(o: Kind): { key: string; kind: Kind } {
  const kind = {
    image: o.image ?? DEFAULT_IMAGE,
    limits: defaultLimits(o.limits),
    runtime: o.runtime ?? defaults.sandbox.runtime,
  };
  const l = kind.limits;
  return {
    key: JSON.stringify([kind.image, kind.runtime, l.memoryMb, l.cpus, l.pids, l.diskMb, l.tmpMb, l.network]),
    kind,
  };
}
