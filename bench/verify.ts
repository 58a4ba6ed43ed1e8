// What verify judging exactly baseline + patch costs, at 1,000 files, medians of 5:
// - snapshot: the post-setup tar of /workspace to the worker's host (once per attempt, while the
//   first model request is out);
// - a round in a sandbox of its own (created, or taken from a warm pool): the sandbox, the
//   snapshot extracted, the patch applied, the command, the sandbox removed;
// - the same run's baseline, what a round used to cost: the command in a fresh process of the
//   job's own sandbox (one exec), which is what the fresh sandbox replaces.
import { rmSync } from "node:fs";
import { computePatch } from "../src/job/patch.js";
import { loadRepo } from "../src/job/repo/load.js";
import { snapshotMaxBytes, takeSnapshot, verifyInFreshSandbox } from "../src/job/verify.js";
import { SandboxPool } from "../src/sandbox/pool.js";
import { Sandbox } from "../src/sandbox/sandbox.js";
import { log, median, round } from "./lib.js";
import { BENCH_LABEL, makeRepo } from "./speed.js";

const COMMAND = "python3 -c 'import sys; sys.exit(0)'";
const RUNS = 5;

export async function benchVerify() {
  const repo = makeRepo(1000);
  const labels = { [BENCH_LABEL]: "verify" };
  const sb = await Sandbox.create({ labels });
  const pool = new SandboxPool({ size: 1, labels });
  const t = { snapshot: [] as number[], inPlace: [] as number[], fresh: [] as number[], pooled: [] as number[] };
  try {
    const { baseline } = await loadRepo(sb, { path: repo });
    log(`verify: snapshot, a round in place (the old way), in a fresh sandbox and in a pooled one; ${RUNS} each`);
    let snapshot = await takeSnapshot(sb, snapshotMaxBytes(1024));
    for (let i = 0; i < RUNS; i++) {
      await snapshot.remove();
      const t0 = performance.now();
      snapshot = await takeSnapshot(sb, snapshotMaxBytes(1024));
      t.snapshot.push(performance.now() - t0);
    }
    // The agent's change, then its patch: what each round judges.
    await sb.shell.run("cd /workspace && echo changed >> pkg0/mod0.py && echo new > added.txt");
    await sb.killAgentProcesses();
    const patch = await computePatch(sb, baseline);
    try {
      for (let i = 0; i < RUNS; i++) {
        let t0 = performance.now();
        const old = await sb.runFresh(`cd /workspace && { ${COMMAND}\n}`);
        t.inPlace.push(performance.now() - t0);
        if (old.exitCode !== 0) throw new Error(`in place: exit ${old.exitCode}: ${old.output}`);
        for (const [k, make] of [
          ["fresh", () => Sandbox.create({ labels })],
          ["pooled", async () => pool.take({}, 600) ?? Sandbox.create({ labels })],
        ] as const) {
          if (k === "pooled") while (pool.size === 0) await new Promise((r) => setTimeout(r, 50)); // a warm one waits, as between jobs
          t0 = performance.now();
          const r = await verifyInFreshSandbox({ sandbox: make, snapshot, patch, command: COMMAND, timeoutSec: 120 });
          t[k].push(performance.now() - t0);
          if (r.exitCode !== 0) throw new Error(`${k}: exit ${r.exitCode}: ${r.output}`);
        }
      }
    } finally {
      await snapshot.remove();
    }
  } finally {
    await pool.close();
    await sb.destroy();
    rmSync(repo, { recursive: true, force: true });
  }
  const m = (xs: number[]) => round(median(xs), 1);
  return {
    files: 1000,
    snapshot_ms: m(t.snapshot),
    round_in_place_ms: m(t.inPlace),
    round_fresh_sandbox_ms: m(t.fresh),
    round_pooled_sandbox_ms: m(t.pooled),
  };
}
