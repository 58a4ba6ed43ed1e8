// The eval's task sets (test/support/eval-sets.ts) keep their word about their tests: each
// instance's test command, run on this host (the fixtures' code is the project's own) at the base
// commit with the test patch and again with the gold patch too, read by the eval's parsers, gives
// exactly the FAIL_TO_PASS and PASS_TO_PASS lists the set records, and nothing fails with the fix.
// The npm instance's `npm ci` reaches the registry from this host, as egress-npm.test.ts's lockfile does.
//
// Backend: none (git, python3, node and npm on the host, in temporary directories).
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseTestOutput } from "../../src/eval/parse/index.js";
import type { EvalInstance, TestStatus } from "../../src/eval/types.js";
import { makeTaskSets, type TaskSets } from "../support/eval-sets.js";

const tmp = mkdtempSync(join(tmpdir(), "pb-eval-lists-"));
let sets: TaskSets;
beforeAll(async () => {
  sets = await makeTaskSets(join(tmp, "set"));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The instance's tests run at base + test patch (+ gold patch), each test's status as the eval reads it. */
function statuses(x: EvalInstance, withGold: boolean): Record<string, TestStatus> {
  const w = mkdtempSync(join(tmp, "w-"));
  execFileSync("git", ["clone", "-q", x.patchbay.repo, w]);
  execFileSync("git", ["checkout", "-q", x.base_commit], { cwd: w });
  const patches = withGold ? [x.test_patch, x.patch!] : [x.test_patch];
  patches.forEach((p, i) => {
    writeFileSync(join(tmp, `p${i}.patch`), p);
    execFileSync("git", ["apply", join(tmp, `p${i}.patch`)], { cwd: w });
  });
  for (const cmd of [x.patchbay.setup ?? []].flat())
    execFileSync("bash", ["-c", cmd], { cwd: w, stdio: "ignore", timeout: 300_000 });
  const run = spawnSync("bash", ["-c", x.patchbay.test.command], { cwd: w, encoding: "utf8", timeout: 120_000 });
  const { format, file } = x.patchbay.test;
  const text = format === "junit" ? readFileSync(join(w, file!), "utf8") : run.stdout + run.stderr;
  return parseTestOutput(format, text);
}

describe("each instance's tests, run on the host", () => {
  it("fail and pass as FAIL_TO_PASS and PASS_TO_PASS say, and nothing fails with the fix", () => {
    for (const x of sets.instances) {
      const before = statuses(x, false);
      const after = statuses(x, true);
      const names = [...new Set([...Object.keys(before), ...Object.keys(after)])];
      const f2p = names.filter((n) => before[n] !== "PASSED" && after[n] === "PASSED");
      const p2p = names.filter((n) => before[n] === "PASSED" && after[n] === "PASSED");
      expect({ id: x.instance_id, f2p: f2p.sort(), p2p: p2p.sort() }).toEqual({
        id: x.instance_id,
        f2p: [...x.FAIL_TO_PASS].sort(),
        p2p: [...x.PASS_TO_PASS].sort(),
      });
      expect(names.filter((n) => after[n] !== "PASSED")).toEqual([]);
    }
  }, 600_000);
});
