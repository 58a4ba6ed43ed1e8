// What a client believes of a heartbeat's published bounds (src/queue/worker-bounds.ts): a fresh
// beat's positive finite bounds only. A key left behind without its expiry, a value from the far
// future, or bounds that are not positive numbers refuse nothing; and a bound names its workers
// in words that agree with their count.
import { describe, expect, it } from "vitest";
import { boundsViolations, publishedBounds } from "../../../src/queue/worker-bounds.js";

const now = 1_000_000_000;
const beat = (v: object) => JSON.stringify(v);

describe("publishedBounds", () => {
  it("believes a fresh beat's bounds", () => {
    expect(publishedBounds(beat({ at: now - 5000, everyMs: 10_000, bounds: { timeoutSec: 3600 } }), now)).toEqual({
      timeoutSec: 3600,
    });
  });

  it("ignores a stale beat, one from the future, and a value that is not a beat", () => {
    expect(
      publishedBounds(beat({ at: now - 31_000, everyMs: 10_000, bounds: { timeoutSec: 1 } }), now),
    ).toBeUndefined();
    expect(publishedBounds(beat({ at: 1, bounds: { timeoutSec: 1 } }), now)).toBeUndefined();
    expect(publishedBounds(beat({ at: now + 3_600_000, bounds: { timeoutSec: 1 } }), now)).toBeUndefined();
    expect(publishedBounds(String(now), now)).toBeUndefined();
    expect(publishedBounds("{not json", now)).toBeUndefined();
    expect(publishedBounds(null, now)).toBeUndefined();
  });

  it("keeps only positive finite bounds of known fields", () => {
    const b = publishedBounds(
      beat({ at: now, bounds: { timeoutSec: -1, maxTurns: 0, "limits.pids": "9", "budget.usd": 2, other: 1 } }),
      now,
    );
    expect(b).toEqual({ "budget.usd": 2 });
    expect(publishedBounds(beat({ at: now, bounds: { timeoutSec: -1 } }), now)).toBeUndefined();
  });
});

describe("boundsViolations", () => {
  it("names the lowest bound and its workers, in words that agree with their count", () => {
    const one = boundsViolations(
      { task: "t", repo: { path: "/r" }, timeoutSec: 500 },
      new Map([["w1", { timeoutSec: 100 }]]),
    );
    expect(one[0]).toContain("the bound of 100 that worker w1 of this queue publishes");
    const two = boundsViolations(
      { task: "t", repo: { path: "/r" }, timeoutSec: 500 },
      new Map([
        ["w1", { timeoutSec: 300 }],
        ["w2", { timeoutSec: 100 }],
      ]),
    );
    expect(two[0]).toContain("the bound of 100 that workers w1, w2 of this queue publish (");
  });
});
