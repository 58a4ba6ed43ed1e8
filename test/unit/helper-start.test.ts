// A helper's start (src/sandbox/supervisor.ts, startHelper) is bounded in time: an engine that never
// answers an exec, or never answers a question about its container, fails the start with a reason
// instead of holding it (and the job, and a test run) for ever; an attach that comes late is ended.
import { describe, expect, it } from "vitest";
import type { Attached, Box } from "../../src/backend/types.js";
import { startHelper } from "../../src/sandbox/supervisor.js";

/** A box whose engine answers nothing: its attach and its state never resolve. */
function silentBox(): Box & { attaches: number } {
  const box = {
    name: "silent",
    attaches: 0,
    attach: () => {
      box.attaches++;
      return new Promise<Attached>(() => {});
    },
    state: () => new Promise<never>(() => {}),
  };
  return box;
}

describe("a helper's start", () => {
  it("fails with a reason once the engine has not answered its exec for startMs", async () => {
    const box = silentBox();
    const t0 = Date.now();
    await expect(startHelper(box, ["python3", "-c", "x"], () => {}, { startMs: 1500 })).rejects.toThrow(
      "the sandbox's python3 did not start within 1.5 s: the engine did not answer its exec",
    );
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(box.attaches).toBe(1);
  });

  it("a start whose attach came but whose ready line never does fails the same way, and the attach is ended", async () => {
    let destroyed = false;
    const proc = {
      write: () => {},
      ended: new Promise<void>(() => {}),
      destroy: () => void (destroyed = true),
    } as unknown as Attached;
    const box = { ...silentBox(), attach: () => Promise.resolve(proc) } as unknown as Box;
    await expect(startHelper(box, ["bash"], () => {}, { startMs: 1200, init: "true\n" })).rejects.toThrow(
      /did not start within 1\.2 s/,
    );
    expect(destroyed).toBe(true);
  });
});
