// The warm pool's size (src/sandbox/pool.ts): a worker's pool keeps a spare for each free slot and
// one more, at most its size, so that a worker whose slots are all busy holds one idle sandbox and
// not one per slot; and a bare box for each slot whose job will verify and has not taken one. The engine's side of the pool (labels, the reaper, a used sandbox never handed
// out again) is test/integration/engines/sandbox-pool.test.ts.
//
// Backend: local (the pool's logic).
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { SandboxPool, type SandboxKind } from "../../src/sandbox/pool.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";
import { localBackend } from "../support/backend.js";

const backend = localBackend();
const labels = { "patchbay.test": "sandbox-pool" };
const taken: Sandbox[] = [];
let pool: SandboxPool | undefined;

afterEach(async () => {
  await pool?.close();
  await Promise.all(taken.splice(0).map((sb) => sb.destroy()));
});

async function until(cond: () => boolean, ms = 60_000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error("timed out");
    await sleep(20);
  }
}

function take(p: SandboxPool, n: number): void {
  for (let i = 0; i < n; i++) {
    const sb = p.take({}, 60);
    expect(sb, `warm sandbox ${i + 1} of ${n}`).toBeDefined();
    taken.push(sb!);
  }
}

describe("the warm pool's size", () => {
  it("keeps a spare per free slot and one more: busy slots hold one idle sandbox, a freed slot refills", async () => {
    let free = 4;
    const p = (pool = new SandboxPool({ size: 4, backend, labels, freeSlots: () => free }));
    // An idle worker: a spare for each of its 4 slots (one more would pass the size).
    await until(() => p.size === 4);
    expect(p.wanted).toBe(4);
    // The free slots change: the pool reaches `size` spares, and stays there (a pool that went on
    // refilling, or kept what it no longer wants, would be past it a second later).
    const settles = async (nowFree: number, size: number, made: number) => {
      free = nowFree;
      p.slotsChanged();
      await until(() => p.size === size);
      await sleep(1000);
      expect(p.size).toBe(size);
      expect(p.stats.made).toBe(made);
    };
    // Four jobs take them: every slot busy, and the pool makes one spare for the next slot to free.
    take(p, 4);
    await settles(0, 1, 5);
    expect(p.wanted).toBe(1);
    // Two jobs end: a spare each for their slots, and the one ahead.
    await settles(2, 3, 7);
    // Jobs of another kind fill those slots (they take none of these): the spares made for them go.
    await settles(0, 1, 7);
  }, 120_000);

  it("without the worker's free slots it keeps its size, and a size of 0 keeps none", async () => {
    const p = (pool = new SandboxPool({ size: 2, backend, labels }));
    await until(() => p.size === 2);
    take(p, 2);
    await until(() => p.size === 2);
    expect(p.stats.made).toBe(4);
    await p.close();
    const off = (pool = new SandboxPool({ size: 0, backend, labels, freeSlots: () => 8 }));
    expect(off.wanted).toBe(0);
    await sleep(500);
    expect(off.size).toBe(0);
    expect(off.take({}, 60)).toBeUndefined();
  }, 120_000);

  it("keeps a bare box for each job to verify that has not taken one, and a sandbox finished from one runs", async () => {
    // The jobs in the worker's slots that will verify, with their kind (the worker's Active.verifies).
    let toVerify: [string, SandboxKind][] = [];
    const p = (pool = new SandboxPool({
      size: 3,
      backend,
      labels,
      freeSlots: () => 3 - toVerify.length,
      slotsToVerify: () => toVerify,
    }));
    await until(() => p.size === 3);
    await sleep(500);
    expect(p.bareSize).toBe(0); // an idle worker: no job will verify
    // Three jobs take a spare each: a bare box for each, and a spare for the next slot to free.
    take(p, 3);
    toVerify = [
      ["j1", {}],
      ["j2", {}],
      ["j3", {}],
    ];
    p.slotsChanged();
    await until(() => p.bareSize === 3 && p.size === 1);
    expect(p.wantedBare).toBe(3);
    // Two reach verify: each takes a bare box, which Sandbox.create finishes into a whole sandbox.
    for (const id of ["j1", "j2"]) {
      const bare = p.takeBare({}, 60, id);
      expect(bare).toBeDefined();
      const sb = await Sandbox.create({}, bare);
      taken.push(sb);
      expect((await sb.shell.run("echo finished")).output.trim()).toBe("finished");
    }
    // Their jobs are still in their slots: no bare box is made again for them.
    await sleep(1000);
    expect(p.bareSize).toBe(1);
    expect(p.stats.bareMade).toBe(3);
    // j2 takes another (a second verify round): j3's box is gone, so one is made for j3 again.
    expect(p.takeBare({}, 60, "j2")).toBeDefined();
    await until(() => p.bareSize === 1);
    expect(p.stats.bareMade).toBe(4);
    // j1 and j2 end, and a job of another kind comes, which verify takes no bare box for: none is
    // made for it, and j3's stays.
    toVerify = [
      ["j3", {}],
      ["j4", { image: "another:image" }],
    ];
    p.slotsChanged();
    await sleep(1000);
    expect(p.bareSize).toBe(1);
    expect(p.takeBare({ image: "another:image" }, 60, "j4")).toBeUndefined();
    // j3 ends without verify: its bare box goes.
    toVerify = [["j4", { image: "another:image" }]];
    p.slotsChanged();
    await until(() => p.bareSize === 0);
    expect(p.stats.bareMade).toBe(4);
  }, 120_000);
});
