// Bounded waits: the timer is cleared either way, and a promise given up on cannot fail unhandled.
// Node's timers hold a signed 32-bit count of ms: a longer delay (over ~24.8 days) fires after 1 ms
// with a TimeoutOverflowWarning. Every duration patchbay takes is bounded well below that
// (MAX_DURATION_MS), and the timers here chain anyway, so a long wait is never a short one.

/** The longest delay one Node timer holds. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** The bound on every duration a spec, a flag, an option or a knob takes: 7 days. */
export const MAX_DURATION_MS = 7 * 24 * 3600 * 1000;
export const MAX_DURATION_SEC = MAX_DURATION_MS / 1000;
export const MAX_DURATION_WORDS = "7 days";

/** setTimeout for any delay: chained timers past MAX_TIMER_MS (Infinity never fires). Returns the clear function. */
export function longTimeout(fn: () => void, ms: number, unref = false): () => void {
  let timer: NodeJS.Timeout | undefined;
  const arm = (left: number) => {
    if (left === Infinity) return;
    const step = Math.min(Math.max(0, left), MAX_TIMER_MS);
    timer = setTimeout(() => (left > MAX_TIMER_MS ? arm(left - MAX_TIMER_MS) : fn()), step);
    if (unref) timer.unref();
  };
  arm(Number.isNaN(ms) ? 0 : ms);
  return () => clearTimeout(timer);
}

/** `p`, or a rejection with `message` once `ms` have passed. */
export function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let clear = () => {};
  p.catch(() => {});
  return Promise.race([
    p,
    new Promise<never>((_, reject) => (clear = longTimeout(() => reject(new Error(message)), ms))),
  ]).finally(() => clear());
}

/** `p`'s value, or undefined once `ms` have passed (a wait that decides nothing when it runs out). */
export function settleWithin<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let clear = () => {};
  p.catch(() => {});
  return Promise.race([p, new Promise<undefined>((r) => (clear = longTimeout(() => r(undefined), ms)))]).finally(() =>
    clear(),
  );
}
