// `patchbay eval run` and `eval grade` with a task set whose instances name the workers' egress
// credentials (patchbay.network.setup.credentials; src/cli/eval-command.ts): a set is often
// another's file while its jobs are the operator's, and its setup commands would choose what is
// fetched or sent with a credential, so such a set is refused (a usage error naming the instances
// and the flag) unless --with-credentials. A set file on disk; no Redis (the set is refused before
// anything connects). Red team of issue 46.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { evalCommands } from "../../src/cli/eval-command.js";
import { UsageError } from "../../src/cli/command.js";

const record = (id: string, credentials?: string[]) => ({
  instance_id: id,
  repo: "acme/calc",
  base_commit: "0123456789abcdef0123456789abcdef01234567",
  problem_statement: "Division by zero crashes the calculator.",
  test_patch: "diff --git a/t.py b/t.py\n",
  FAIL_TO_PASS: ["test_div (tests.CalcTest.test_div)"],
  PASS_TO_PASS: [],
  patchbay: {
    repo: "/elsewhere/calc",
    test: { command: "python3 -m unittest -v", format: "unittest" },
    ...(credentials ? { network: { setup: { allow: ["registry.example.org"], credentials } } } : {}),
  },
});

function run(command: string, values: Record<string, unknown>, records: unknown[]): Promise<unknown> {
  const dir = mkdtempSync(join(tmpdir(), "pb-eval-cred-"));
  const file = join(dir, "set.jsonl");
  writeFileSync(file, records.map((r) => JSON.stringify(r)).join("\n") + "\n");
  const more = command === "eval grade" ? { predictions: join(dir, "preds.jsonl") } : {};
  return Promise.resolve()
    .then(() =>
      evalCommands[command]!.run({
        values: { name: "n", ...more, ...values },
        positionals: [file],
        config: () => {
          throw new Error("not read");
        },
      }),
    )
    .finally(() => rmSync(dir, { recursive: true, force: true }));
}

describe("a task set naming egress credentials", () => {
  const set = [record("a-1", ["npm-private"]), record("b-2")];

  it.each(["eval run", "eval grade"])(
    "%s refuses it (a usage error naming the instances and the flag) unless --with-credentials",
    async (command) => {
      await expect(run(command, {}, set)).rejects.toThrow(UsageError);
      await expect(run(command, {}, set)).rejects.toThrow(
        /name the workers' egress credentials \(network\.setup\.credentials\): a-1\. .*--with-credentials/,
      );
      // With the flag the credentials pass: the next check (a local repo outside the set's directory) speaks.
      await expect(run(command, { "with-credentials": true }, set)).rejects.toThrow(/outside its own directory/);
      await expect(run(command, {}, [record("b-2")])).rejects.toThrow(/outside its own directory/);
    },
  );
});
