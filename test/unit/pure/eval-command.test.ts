// `patchbay eval run`'s own words (src/cli/eval-command.ts): the summary line puts best-of-K (the
// pick a verify made resolved) beside pass@1 and the oracle pass@K, only where a verify judged
// instances; and --verify is checked as a JobSpec's verify before anything is read or enqueued.
// Pure: no Redis, no set file (the flag is refused before the set is read).
import { describe, expect, it } from "vitest";
import { evalCommands, summaryLines } from "../../../src/cli/eval-command.js";
import { UsageError } from "../../../src/cli/command.js";
import { runSummary } from "../../../src/eval/report.js";
import type { InstanceAccount } from "../../../src/eval/types.js";

const account = (id: string, over: Partial<InstanceAccount>): InstanceAccount => ({
  instance_id: id,
  outcome: "unresolved",
  candidates: 4,
  resolvedCandidates: 0,
  costUsd: 0,
  inputTokens: 0,
  outputTokens: 0,
  jobMs: 0,
  modelMs: 0,
  gradeMs: 0,
  harnessMs: 0,
  jobIds: [],
  ...over,
});

const summary = (accounts: InstanceAccount[]) =>
  runSummary({
    run: "r",
    model: "m",
    candidates: 4,
    wallMs: 0,
    instanceIds: accounts.map((a) => a.instance_id),
    predictions: [],
    graded: [],
    accounts,
  });

describe("eval run's summary line", () => {
  it("shows pass@1, best-of-K and the oracle pass@K side by side where a verify judged", () => {
    const s = summary([
      account("a", { resolvedCandidates: 1, picked: 3, outcome: "resolved" }),
      account("b", { resolvedCandidates: 2, picked: 1, outcome: "unresolved" }),
    ]);
    expect(summaryLines(s)[2]).toBe(
      "pass@1 37.5%; best-of-4 50.0% (2 instances judged by verify); pass@4 100.0% (oracle)",
    );
  });

  it("has no best-of-K where no verify judged (K independent jobs)", () => {
    const s = summary([account("a", { resolvedCandidates: 1, outcome: "resolved" })]);
    expect(summaryLines(s)[2]).toBe("pass@1 25.0%; pass@4 100.0% (oracle)");
  });
});

describe("eval run --verify", () => {
  const run = (verify: string) =>
    evalCommands["eval run"]!.run({
      values: { name: "n", verify },
      positionals: ["/nonexistent/set.jsonl"],
      config: () => {
        throw new Error("not read");
      },
    });

  it("refuses an empty command or one over the JobSpec's bound, naming the flag", async () => {
    await expect(run("  ")).rejects.toThrow(UsageError);
    await expect(run("  ")).rejects.toThrow(/^--verify takes a command.*must be a non-empty command/);
    await expect(run("x".repeat(64 * 1024 + 1))).rejects.toThrow(/^--verify .*must be at most 65536 characters/);
  });
});
