// Whether a sandbox's container still runs, watched while something waits on it. A container that
// dies does not always end the streams of its execs: under gVisor, when the sandbox's kernel dies
// (its own threads hit the pids limit, say), an exec's attach and stream stay open and a call
// through it would wait forever, past the job's timeout. So every wait on the container (a shell
// command, an exec, a file-agent request) is raced against this: while any is pending, the
// container is inspected every `everyMs`; once it is seen stopped, every pending and later call
// fails at once with the reason. Nothing is polled while nothing waits (between model turns).
import type { Box } from "../backend/types.js";
import { settleWithin } from "../core/timeout.js";
import { SandboxLostError } from "../core/errors.js";

const INSPECT_WAIT_MS = 10_000;

export class Liveness {
  private pending = 0;
  private timer?: NodeJS.Timeout;
  private polling = false;
  private reason?: string;
  private readonly listeners = new Set<(why: string) => void>();

  constructor(
    private readonly box: Pick<Box, "state">,
    private readonly everyMs = 2000,
  ) {}

  /** Set once the container was seen stopped. */
  get gone(): string | undefined {
    return this.reason;
  }

  /** Resolves like `work`, or rejects with SandboxLostError once the container is seen stopped. */
  async guard<T>(work: Promise<T>): Promise<T> {
    if (this.reason) {
      work.catch(() => {});
      throw new SandboxLostError(this.reason);
    }
    let onGone!: (why: string) => void;
    const gone = new Promise<never>((_, reject) => (onGone = (why) => reject(new SandboxLostError(why))));
    this.listeners.add(onGone);
    if (this.pending++ === 0) this.schedule();
    try {
      return await Promise.race([work, gone]);
    } catch (err) {
      // The engine refusing a call because the container is not running is the same news,
      // sooner than a poll: asked once now, so that the reason carries the exit code.
      if (!this.reason && !(err instanceof SandboxLostError) && notRunning(err)) await this.poll(true);
      if (this.reason && !(err instanceof SandboxLostError)) throw new SandboxLostError(this.reason);
      throw err;
    } finally {
      this.listeners.delete(onGone);
      if (--this.pending === 0) clearTimeout(this.timer);
      work.catch(() => {}); // a call given up on may still fail later
    }
  }

  /** Marks the container gone (e.g. seen stopped elsewhere): pending calls fail with `why`. */
  lost(why: string): void {
    if (this.reason) return;
    this.reason = why;
    clearTimeout(this.timer);
    for (const l of [...this.listeners]) l(why);
  }

  private schedule(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.poll(), this.everyMs);
    this.timer.unref?.();
  }

  private async poll(now = false): Promise<void> {
    if (this.polling || this.reason || (this.pending === 0 && !now)) return;
    this.polling = true;
    try {
      // A box that is gone says so; a backend that cannot say (the engine away) decides nothing.
      const state = await settleWithin(
        this.box.state().catch(() => undefined),
        INSPECT_WAIT_MS,
      );
      if (state && !state.running)
        this.lost(`the sandbox's container stopped (exit code ${state.exitCode ?? "unknown"})`);
    } finally {
      this.polling = false;
      if (!this.reason && this.pending > 0) this.schedule();
    }
  }
}

/** The engine refusing a call into a container that is not running (409, or 500 from an exec: "… is not running"). */
const notRunning = (err: unknown) =>
  [409, 500].includes((err as { statusCode?: number } | null)?.statusCode ?? 0) &&
  /not running/i.test(String((err as Error).message));
