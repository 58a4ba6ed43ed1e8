// Bounded waits: the timer is cleared either way, and a promise given up on cannot fail unhandled.

/** `p`, or a rejection with `message` once `ms` have passed. */
export function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  p.catch(() => {});
  return Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)))]).finally(() => clearTimeout(timer));
}

/** `p`'s value, or undefined once `ms` have passed (a wait that decides nothing when it runs out). */
export function settleWithin<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  p.catch(() => {});
  return Promise.race([p, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]).finally(() => clearTimeout(timer));
}
