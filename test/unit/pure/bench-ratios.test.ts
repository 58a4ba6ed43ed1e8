// The bench's same-run ratios to the floor (bench/ratios.ts, issue 29's goals), pure: each divides
// the row it names by the floor's, says its goal and whether it holds; a ratio whose rows did not
// run is left out. The ratios whose baseline is in their own section (best-of-N against one
// candidate, npm ci with the egress proxy terminating TLS against the same through a tunnel) need
// no floor.
import { describe, expect, it } from "vitest";
import { floorRatios, sameRunRatios } from "../../../bench/ratios.js";

const floor = {
  core_ms: { per_job: 850, bare_job: 805 },
  wall_ms: { bare_job: 650 },
  tar_stream_50k_files_wall_ms: 1700,
  hash_50k_files_wall_ms: 300,
  host_side_50k_files: { patchbay: { wall_ms: 2300, core_ms: 3000 }, gnu_tar: { wall_ms: 210, core_ms: 200 } },
  ceiling_jobs_per_min: 141,
  ceiling_with_repo_jobs_per_min: 84.6,
};

describe("floorRatios", () => {
  it("divides each goal's row by the floor's and says whether the goal holds", () => {
    const r = floorRatios({
      floor,
      jobs: { "1x4_pool": { jobs_per_min: 42.3 } },
      overhead: {
        pool_background_removal: {
          job_overhead_ms: 975,
          cpu_core_ms_per_job: { container: 300, worker: 200, total: 1700 },
        },
      },
      ready: { dequeue_to_ready_ms: { "1000_pool": 99, "50000_pool": 2600 } },
    })!;
    expect(r["throughput_1x4"]).toMatchObject({ value: 0.3, goal: ">= 0.75", met: false });
    expect(r["reachable_throughput"]).toMatchObject({ value: 0.6, goal: "reported", met: true });
    expect(r["throughput_1x4_of_repo_floor"]).toMatchObject({ value: 0.5, goal: "reported", met: true });
    expect(r["job_overhead"]).toMatchObject({ value: 1.5, goal: "<= 1.6", met: true });
    expect(r["cpu_per_job"]).toMatchObject({ value: 2, goal: "reported", met: true });
    expect(r["ready_50k"]).toMatchObject({ value: 1.3, goal: "<= 1.3", met: true });
    expect(r["ready_50k_reach"]).toMatchObject({ value: 1.15, goal: "reported" });
    expect(r["host_side_cpu_50k"]).toMatchObject({ value: 15, goal: "reported" });
    expect(r["ready_1k_pool_ms"]).toMatchObject({ value: 99, goal: "<= 100", met: true });
  });

  it("leaves out what did not run, and gives nothing without the floor", () => {
    expect(floorRatios({ jobs: { "1x4_pool": { jobs_per_min: 40 } } })).toBeUndefined();
    expect(Object.keys(floorRatios({ floor, ready: { dequeue_to_ready_ms: { "1000_pool": 150 } } })!)).toEqual([
      "reachable_throughput",
      "ready_50k_reach",
      "host_side_cpu_50k",
      "ready_1k_pool_ms",
    ]);
    expect(floorRatios({ floor, ready: { dequeue_to_ready_ms: { "1000_pool": 150 } } })!["ready_1k_pool_ms"]!.met).toBe(
      false,
    );
    // A floor from before the hash row: no ready ratio rather than a wrong one.
    const { hash_50k_files_wall_ms: _, ceiling_with_repo_jobs_per_min: __, host_side_50k_files: ___, ...old } = floor;
    expect(floorRatios({ floor: old, ready: { dequeue_to_ready_ms: { "50000_pool": 2600 } } })).toEqual({});
  });
});

describe("sameRunRatios", () => {
  it("divides the job with 4 candidates by the same job with 1, against 1.3, with no floor", () => {
    const r = sameRunRatios({ candidates: { wall_ms: { candidates_1: 8000, candidates_4: 10400 } } });
    expect(r["candidates_4_of_1"]).toMatchObject({ value: 1.3, goal: "<= 1.3", met: true });
    const over = sameRunRatios({ candidates: { wall_ms: { candidates_1: 8000, candidates_4: 12000 } } });
    expect(over["candidates_4_of_1"]).toMatchObject({ value: 1.5, met: false });
  });

  it("divides npm ci's setup with the proxy terminating TLS by the same through a tunnel, against 1.5", () => {
    const r = sameRunRatios({ egress: { setup_ms: { tunnel: 6000, terminate: 9000 } } });
    expect(r["egress_terminate_of_tunnel"]).toMatchObject({ value: 1.5, goal: "<= 1.5", met: true });
    const over = sameRunRatios({ egress: { setup_ms: { tunnel: 6000, terminate: 9600 } } });
    expect(over["egress_terminate_of_tunnel"]).toMatchObject({ value: 1.6, met: false });
    // Only the egress ratio when only egress ran; none when an arm has no median.
    expect(Object.keys(r)).toEqual(["egress_terminate_of_tunnel"]);
    expect(sameRunRatios({ egress: { setup_ms: { terminate: 9000 } } })).toEqual({});
  });

  it("leaves the ratio out where the section did not run or lacks a row", () => {
    expect(sameRunRatios({ floor })).toEqual({});
    expect(sameRunRatios({ candidates: { wall_ms: { candidates_4: 12000 } } })).toEqual({});
  });
});
