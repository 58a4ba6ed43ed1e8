// The chaos soak (issue: nothing lost under chaos), short enough for CI: 12 scripted 12-turn jobs
// over 4 worker processes on their own queue, a private Redis (AOF) and a private Docker engine,
// while workers are killed (SIGKILL, SIGTERM), Redis is restarted and the engine is restarted at
// chosen points of a job's life. Every job completes, exactly once; nothing is left on the engine;
// every live worker takes a job afterwards. Prints the model requests paid against an undisturbed
// run. `npm run soak` is the longer, configurable version (test/support/soak.ts). 12 turns, not 8:
// with checkpoints that skip git after read-only turns, a batch of 8-turn jobs once ended before
// the engine restart came.
//
// Backend: Docker (private engines killed and restarted).
import { describe, expect, it } from "vitest";
import { soak } from "../support/soak.js";

describe("soak under chaos", () => {
  it("every job completes exactly once, nothing leaks, no worker is wedged", async () => {
    const r = await soak({
      jobs: 12,
      turns: 12,
      workers: 4,
      kills: 4,
      terms: 2,
      redisRestarts: 1,
      engineRestarts: 1,
      log: (l) => console.log(l),
    });
    expect(r.statuses).toEqual({ completed: 12 });
    expect(r.notOnce).toEqual([]);
    expect(r.leftovers).toBe(0);
    expect(r.wedged).toEqual([]);
    // The chaos happened (a kill may find its job already done, and is then skipped).
    expect(r).toMatchObject({ redisRestarts: 1, engineRestarts: 1 });
    expect(r.kills + r.terms).toBeGreaterThan(0);
  }, 900_000);
});
