// What the engine is and what it can hold a sandbox to (src/backend/engine.ts): pure, no engine.
import { describe, expect, it } from "vitest";
import {
  createProblem,
  describeEngine,
  hostUid,
  limitsEnv,
  limitsProblem,
  type EngineInfo,
} from "../../../src/backend/engine.js";

const rootless = (over: Partial<EngineInfo>): EngineInfo => ({
  name: "podman",
  version: "4.3.1",
  rootless: true,
  cgroup: "v1",
  runtimePath: "/usr/local/libexec/patchbay/patchbay-runc",
  controllers: [],
  uidMap: [
    { container: 0, host: 999, size: 1 },
    { container: 1, host: 200000, size: 65536 },
  ],
  ...over,
});

describe("engine", () => {
  it("Docker, and a rootful Podman, hold limits themselves; a Docker that says it cannot is refused", () => {
    expect(
      limitsProblem({ name: "docker", version: "20.10", rootless: false, cgroup: "v1", limitsSupported: true }),
    ).toBeUndefined();
    expect(
      limitsProblem({ name: "docker", version: "24.0", rootless: true, cgroup: "v1", limitsSupported: false }),
    ).toMatch(
      /^this Docker engine \(rootless\) says it cannot apply memory, pids or cpu limits \(cgroup v1: a rootless Docker needs cgroup v2/,
    );
    expect(limitsProblem(rootless({ rootless: false, runtimePath: "/usr/bin/crun" }))).toBeUndefined();
  });

  it("a rootless Podman on cgroup v1 holds them only through patchbay's wrapper", () => {
    expect(limitsProblem(rootless({}))).toBeUndefined();
    const problem = limitsProblem(rootless({ runtimePath: "/usr/bin/runc" }));
    expect(problem).toMatch(
      /^this rootless Podman runs on cgroup v1, where it silently drops every memory, pids and cpu limit \(its default runtime is \/usr\/bin\/runc\): set it up with `bash scripts\/services.sh --engine podman`/,
    );
    // A runtime that only ends like the wrapper's name is not it.
    expect(limitsProblem(rootless({ runtimePath: "/opt/not-patchbay-runc" }))).toBeDefined();
  });

  it("a rootless Podman on cgroup v2 needs systemd's cgroup manager and memory, pids and cpu delegated", () => {
    const v2 = (over: Partial<EngineInfo>) =>
      rootless({ cgroup: "v2", runtimePath: "/usr/bin/crun", cgroupManager: "systemd", ...over });
    expect(limitsProblem(v2({ controllers: ["cpuset", "cpu", "io", "memory", "pids"] }))).toBeUndefined();
    expect(limitsProblem(v2({ controllers: ["memory", "pids"] }))).toMatch(
      /lacks the cpu controller, so those limits would not hold: delegate them/,
    );
    expect(limitsProblem(v2({ controllers: [] }))).toMatch(/lacks the memory, pids, cpu controllers/);
    // cgroupfs: the service's own cgroup may list every controller, and still no container gets one.
    expect(limitsProblem(v2({ cgroupManager: "cgroupfs", controllers: ["cpu", "memory", "pids"] }))).toMatch(
      /uses the cgroupfs cgroup manager, under which it applies no limits: set cgroup_manager = "systemd"/,
    );
  });

  it("maps container uids to host uids by the engine's map, and says so", () => {
    const e = rootless({});
    expect([hostUid(e, 0), hostUid(e, 1), hostUid(e, 1000), hostUid(e, 65536), hostUid(e, 65537)]).toEqual([
      999,
      200000,
      200999,
      265535,
      undefined,
    ]);
    expect(hostUid({ name: "docker", version: "x", rootless: false, cgroup: "v1" }, 0)).toBeUndefined();
    expect(describeEngine(e, 1000)).toBe(
      "podman 4.3.1, rootless (container root = host uid 999; uid 1000 = host uid 200999), cgroup v1",
    );
    expect(describeEngine({ name: "docker", version: "20.10.24", rootless: false, cgroup: "v2" }, 1000)).toBe(
      "docker 20.10.24, cgroup v2",
    );
  });

  it("refuses a box the engine cannot give: gVisor under Podman, a setup network under a rootless one unless the worker is its user", () => {
    const docker: EngineInfo = {
      name: "docker",
      version: "20.10",
      rootless: false,
      cgroup: "v1",
      limitsSupported: true,
    };
    const mount = [{ source: "/var/tmp/egress/job-1", target: "/patchbay-egress" }];
    expect(createProblem(docker, { runtime: "runsc", mounts: mount }, 0)).toBeUndefined();
    expect(createProblem(rootless({}), { runtime: "runc" }, 0)).toBeUndefined();
    expect(createProblem(rootless({}), { runtime: "runsc" }, 999)).toMatch(
      /^runtime runsc \(gVisor\) is not available under Podman/,
    );
    expect(createProblem(rootless({}), { runtime: "runc", mounts: mount }, 999)).toBeUndefined();
    expect(createProblem(rootless({}), { runtime: "runc", mounts: mount }, 0)).toBe(
      "the setup phase's network under rootless Podman needs the worker to run as the engine's user (uid 999), which alone can reach its proxy socket from the sandbox; this worker runs as uid 0",
    );
    expect(createProblem(rootless({ runtimePath: "/usr/bin/runc" }), { runtime: "runc" }, 999)).toMatch(
      /silently drops every memory, pids and cpu limit/,
    );
  });

  it("gives the wrapper memory bytes, pids, and a cpu quota per 100 ms period", () => {
    expect(limitsEnv({ memoryMb: 512, pids: 128, cpus: 1.5 })).toBe("PATCHBAY_LIMITS=536870912,128,150000,100000");
    expect(limitsEnv({ memoryMb: 1, pids: 32, cpus: 0.25 })).toBe("PATCHBAY_LIMITS=1048576,32,25000,100000");
  });
});
