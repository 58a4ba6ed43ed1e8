// How the repo loaders share the worker's event loop with everything else it does. No I/O but a
// timer. Sync fs calls are ~20x cheaper than async ones per small file, so the loaders read a repo
// in synchronous steps and breathe between them. The steps of every load in the process share one
// slice of each turn of the event loop: once SLICE_MS of a turn is spent, every loader waits for
// the next turn, where each waiting loader takes a step (every load goes on) and one of them the
// rest of the slice, each in turn. A worker loading 50 repos at once thus holds its event loop
// (lock renewals, other jobs' tools and model replies) for about one slice and a step of each load
// a turn, not one slice per load (50 loads: 2.5 s).
// 50 ms: within the 100 ms p99 delay the density row holds the worker to, and enough of each turn
// that 50 loads at once go as fast as with a slice each (20 ms shared made their path to ready up
// to four times longer while the other jobs' work took the rest of each turn).
export const SLICE_MS = 50;
let sliceStart = performance.now(); // monotonic: a clock set back would make a step endless
/** Loaders waiting for the next turn; the first had the last slice (see release). */
let line: (() => void)[] = [];
let turn: NodeJS.Immediate | undefined;

/**
 * A new turn: every loader in line goes on, the one that had the last slice last. Each passes its
 * check at once, so each takes a step; the first to take its step has the rest of the slice, and
 * is first in line again once it is spent, the others behind it in the order they went on.
 */
function release(): void {
  turn = undefined;
  sliceStart = performance.now();
  const went = line;
  line = [];
  for (const go of went.slice(1)) go();
  went[0]?.();
}

/** Waits while this turn's slice is spent (see above); at once when it is not. */
export async function breathe(): Promise<void> {
  while (!mayGoOn())
    await new Promise<void>((resolve) => {
      line.push(resolve);
      turn ??= setImmediate(release);
    });
}
/** Whether a loop may go on without `breathe` (a promise less per step, where steps are many). */
export const mayGoOn = () => performance.now() - sliceStart < SLICE_MS;
