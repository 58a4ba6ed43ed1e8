// The reaper removes labelled containers and volumes whose owner is gone or whose deadline passed.
//
// Backend: Docker (the hardened container and its image).
import { describe, expect, it } from "vitest";
import { docker } from "../../../src/backend/docker.js";
import { localOwnerAlive } from "../../../src/backend/owner.js";
import { reap } from "../../../src/sandbox/reaper.js";
import { cgroupLimits, exists } from "../../support/sandbox.js";
import { podman } from "../../support/engine-kind.js";
import { Sandbox } from "../../../src/sandbox/sandbox.js";

describe("reaper (real engine)", () => {
  it("reaps orphans and expired sandboxes, keeps live ones", async () => {
    // Other test files run workers whose reapers sweep the same engine every second. So that only
    // this reap() judges these sandboxes, the orphan's owner is on another host (others trust it
    // until its deadline) and the "expired" one expires in a minute, with this reap() run two
    // minutes in the future.
    const ORPHAN = "elsewhere:1:gone";
    const orphan = await Sandbox.create({ owner: ORPHAN, labels: { "patchbay.test": "1" } });
    const expired = await Sandbox.create({ deadlineSec: 60, labels: { "patchbay.test": "1" } });
    const live = await Sandbox.create({ labels: { "patchbay.test": "1" } });
    try {
      const report = await reap(
        (owner, labels) => (owner === ORPHAN ? Promise.resolve(false) : localOwnerAlive(owner, labels)),
        undefined,
        Date.now() + 120_000,
      );
      expect(report.containers).toEqual(expect.arrayContaining([orphan.name, expired.name]));
      expect(report.containers).not.toContain(live.name);
      expect(report.volumes).toEqual(expect.arrayContaining([`${orphan.name}-ws`, `${expired.name}-ws`]));
      for (const s of [orphan, expired]) {
        expect(await exists("container", s.name)).toBe(false);
        expect(await exists("volume", `${s.name}-ws`)).toBe(false);
      }
      expect(await exists("container", live.name)).toBe(true);
      expect((await live.shell.run("echo ok")).output).toBe("ok\n");
    } finally {
      await Promise.all([orphan.destroy(), expired.destroy(), live.destroy()]);
    }
    expect(await exists("container", live.name)).toBe(false);
    expect(await exists("volume", `${live.name}-ws`)).toBe(false);
  });

  it("destroy is idempotent and concurrent-safe", async () => {
    const sb = await Sandbox.create({ labels: { "patchbay.test": "1" } });
    expect(await exists("volume", `${sb.name}-ws`)).toBe(true);
    await Promise.all([sb.destroy(), sb.destroy()]);
    expect(await exists("container", sb.name)).toBe(false);
    expect(await exists("volume", `${sb.name}-ws`)).toBe(false);
    await sb.destroy(); // once more, after the fact: still fine
    expect(await exists("volume", `${sb.name}-ws`)).toBe(false);
  });

  it("applies the limits it is given", async () => {
    const sb = await Sandbox.create({
      limits: { memoryMb: 300, cpus: 0.5, pids: 64 },
      labels: { "patchbay.test": "1" },
    });
    try {
      // As the kernel holds the container (its cgroups), under either engine.
      expect(await cgroupLimits(sb)).toEqual({ memory: 300 * 1024 * 1024, pids: 64, cpus: 0.5 });
      const info = await docker().getContainer(sb.name).inspect();
      // As the engine says: a rootless Podman on cgroup v1 shows no limits of its own (it drops them; the wrapper applies them).
      if (!podman)
        expect(info.HostConfig).toMatchObject({
          Memory: 300 * 1024 * 1024,
          MemorySwap: 300 * 1024 * 1024,
          NanoCpus: 5e8,
          PidsLimit: 64,
        });
      expect(info.HostConfig).toMatchObject({ ReadonlyRootfs: true, NetworkMode: "none", Init: true });
      // The capabilities any process of the container can ever hold: KILL, SETGID, SETUID and
      // DAC_OVERRIDE (bits 5, 6, 7, 1), for root's helpers; Podman lists CapDrop as the caps it dropped.
      expect((await sb.exec(["grep", "CapBnd", "/proc/self/status"])).stdout.toString()).toMatch(
        /^CapBnd:\s+00000000000000e2$/m,
      );
      if (!podman) expect(info.HostConfig.CapDrop).toEqual(["ALL"]);
      expect(info.HostConfig.SecurityOpt).toContain("no-new-privileges");
      // No host path is mounted: the only mount is the job's own volume.
      expect(info.Mounts.map((m) => [m.Type, m.Destination, m.Name])).toEqual([
        ["volume", "/workspace", `${sb.name}-ws`],
      ]);
      // (Podman lists the named volume among Binds too, as "name:/workspace:…": no host path either.)
      expect((info.HostConfig.Binds ?? []).filter((b) => !b.startsWith(`${sb.name}-ws:/workspace:`))).toEqual([]);
      expect(info.HostConfig.Privileged).toBe(false);
      expect(info.Config.Labels).toMatchObject({
        patchbay: "1",
        "patchbay.worker": expect.any(String),
        "patchbay.deadline": expect.stringMatching(/^\d+$/),
      });
    } finally {
      await sb.destroy();
    }
  });
});
