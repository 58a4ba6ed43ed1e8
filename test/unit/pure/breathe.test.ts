// Guards that the repo loaders share one slice of each event-loop turn (src/job/repo/breathe.ts):
// however many repos a worker loads at once, a timer waits about one slice, and every load goes on
// in turn rather than one running alone to its end.
import { describe, expect, it } from "vitest";
import { breathe, mayGoOn, SLICE_MS } from "../../../src/job/repo/breathe.js";

const STEP_MS = 5;

/** A loader's step: STEP_MS of synchronous work, as a repo walk's or pack's step is. */
function work(): void {
  const end = Date.now() + STEP_MS;
  while (Date.now() < end);
}

/**
 * Runs `loaders` loads of `steps` steps each, the way the loaders breathe. Returns, for each turn of
 * the event loop after the synchronous start, how many steps each loader took in it.
 */
async function run(loaders: number, steps: number, perStep: boolean): Promise<number[][]> {
  // A timer that fires every turn counts the turns; each step notes the turn it ran in.
  let turn = 0;
  let ticking = true;
  const tick = () => {
    turn++;
    if (ticking) setTimeout(tick, 0);
  };
  setTimeout(tick, 0);
  const taken: number[][] = [];
  const load = async (id: number) => {
    for (let i = 0; i < steps; i++) {
      if (perStep) await breathe();
      else if (!mayGoOn()) await breathe(); // most steps with no promise (the walk's and the packer's way)
      work();
      const row = (taken[turn] ??= new Array<number>(loaders).fill(0));
      row[id]!++;
    }
  };
  await Promise.all(Array.from({ length: loaders }, (_, id) => load(id)));
  ticking = false;
  expect(taken.flat().reduce((a, b) => a + b, 0)).toBe(loaders * steps);
  // Turn 0 is the synchronous start, before the event loop's first turn: not a turn.
  return taken.slice(1).filter(Boolean);
}

const SLICE_STEPS = SLICE_MS / STEP_MS;
const sum = (row: number[]) => row.reduce((a, b) => a + b, 0);

describe("breathe", () => {
  it("lets loaders at once hold a turn of the event loop for one slice, not one each", async () => {
    const turns = await run(8, 25, false);
    // One slice and a step of each other loader. With a slice per loader, a turn ran all eight
    // loaders' slices (about 80 steps).
    expect(Math.max(...turns.map(sum))).toBeLessThanOrEqual(SLICE_STEPS + 8 + 2);
  });

  it("has every waiting loader go on each turn, and the slice go round", async () => {
    const turns = await run(8, 25, false);
    // Until a loader ends, every loader takes a step in every turn: with the slice to one loader a
    // turn, the others would stand still while the event loop does other work.
    const whole = turns.slice(0, Math.min(...Array.from({ length: 8 }, (_, id) => lastTurn(turns, id))));
    for (const row of whole) expect(row.every((n) => n > 0)).toBe(true);
    // The slice's holder (the loader with the most steps) changes from turn to turn.
    const holders = whole.map((row) => row.indexOf(Math.max(...row)));
    for (let t = 1; t < holders.length; t++) expect(holders[t]).not.toBe(holders[t - 1]);
    // And reaches nearly every loader before any ends (the synchronous start's holder aside): with
    // the slice to the same loader each turn, it ends in the second turn.
    expect(new Set(holders).size).toBeGreaterThanOrEqual(8 - 2);
  });

  it("bounds a turn the same where each step awaits breathe", async () => {
    const turns = await run(8, 15, true);
    expect(Math.max(...turns.map(sum))).toBeLessThanOrEqual(SLICE_STEPS + 8 + 2);
  });
  it("goes on at once while the slice lasts", async () => {
    await breathe(); // a fresh slice, if this turn's was spent
    const t0 = Date.now();
    let waits = 0;
    for (let i = 0; i < 100 && Date.now() - t0 < 5; i++) {
      const p = breathe();
      let done = false;
      void p.then(() => (done = true));
      await Promise.resolve();
      if (!done) waits++;
      await p;
    }
    expect(waits).toBe(0);
  });
});

/** The turn in which a loader took its last step. */
function lastTurn(turns: number[][], id: number): number {
  for (let t = turns.length - 1; t >= 0; t--) if (turns[t]![id]! > 0) return t;
  return -1;
}
