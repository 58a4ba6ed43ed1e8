// The verify snapshots a worker killed with SIGKILL leaves on its host (each up to twice a
// workspace's size) are removed by the next worker's sweep: those of processes that are gone, and
// any older than the bound. No Docker.
import { spawnSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sweepSnapshots } from "../../src/job/verify.js";

const dir = mkdtempSync(join(tmpdir(), "pb-sweep-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("sweepSnapshots", () => {
  it("removes the snapshots of dead processes and old ones, keeps the live and this process's own", async () => {
    const dead = spawnSync(process.execPath, ["-e", "0"]).pid;
    const live = spawn("sleep", ["30"]);
    const make = (name: string) => (
      mkdirSync(join(dir, name)),
      writeFileSync(join(dir, name, "workspace.tar"), "x"),
      join(dir, name)
    );
    const gone = make(`patchbay-verify-${dead}-aaaaaa`);
    const running = make(`patchbay-verify-${live.pid}-bbbbbb`);
    const mine = make(`patchbay-verify-${process.pid}-cccccc`);
    const old = make(`patchbay-verify-${live.pid}-dddddd`);
    utimesSync(old, new Date(Date.now() - 48 * 3600_000), new Date(Date.now() - 48 * 3600_000));
    const other = make("patchbay-clone-eeeeee");
    try {
      expect(await sweepSnapshots(dir)).toBe(2);
      expect([gone, running, mine, old, other].map(existsSync)).toEqual([false, true, true, false, true]);
    } finally {
      live.kill("SIGKILL");
    }
  });
});
