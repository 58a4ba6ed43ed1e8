// Red team (issue 44): names that become paths. An instance_id names a directory beside the run's
// own files (DIR/preds.jsonl, DIR/summary.json): an instance named like one of them made that
// path a directory, and the run failed writing its summary after grading everything. A run's
// --name names its directory (./patchbay-eval/NAME) and its record in Redis: "." and ".." passed
// the CLI's check, wrote the run's files into ./patchbay-eval or the working directory itself, and
// were then refused by the store's batch-name rule once the whole run had been graded. Pure.
import { describe, expect, it } from "vitest";
import { evalCommands } from "../../../src/cli/eval-command.js";
import { parseTaskSet } from "../../../src/eval/instance.js";

const line = (id: string) =>
  JSON.stringify({
    instance_id: id,
    repo: "o/r",
    base_commit: "abcdef1",
    problem_statement: "p",
    test_patch: "diff --git a/t b/t\n",
    FAIL_TO_PASS: ["t1"],
    PASS_TO_PASS: [],
    patchbay: { repo: "./r", test: { command: "true", format: "unittest" } },
  });

describe("names that become paths", () => {
  it("refuses an instance_id that is one of the run's own file names", () => {
    for (const id of ["summary.json", "preds.jsonl", "Summary.JSON"])
      expect(() => parseTaskSet(line(id), "set.jsonl"), id).toThrow(/set\.jsonl:1: instance_id: .*run's own files/);
    expect(parseTaskSet(line("summary.json2"), "set.jsonl")).toHaveLength(1);
  });

  it("refuses --name . and .. before reading anything", async () => {
    for (const cmd of ["eval run", "eval grade"] as const)
      for (const name of [".", ".."])
        await expect(
          evalCommands[cmd]!.run({
            values: { name, predictions: "p.jsonl" },
            positionals: ["/nonexistent/set.jsonl"],
          } as never),
          `${cmd} --name ${name}`,
        ).rejects.toThrow(/--name takes/);
  });
});
