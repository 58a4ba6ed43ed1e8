// Red team (issue 44): `eval compare` reads two runs' summary.json, which may be someone else's (a
// run shared to compare against). Its table showed a run's outcomes and pass@k keys as they were
// written, so a summary could put terminal escapes on the user's terminal; a summary of another
// shape crashed the command with a TypeError; and a summary.json that is a FIFO blocked it. Each
// is a usage error or inert text now. Backend: none (files on a temporary directory).
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { evalCommands } from "../../src/cli/eval-command.js";
import { runSummary } from "../../src/eval/report.js";

const tmp = mkdtempSync(join(tmpdir(), "pb-eval-compare-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const summary = () =>
  runSummary({
    run: "a",
    model: "m",
    candidates: 1,
    wallMs: 1,
    instanceIds: ["i1"],
    predictions: [{ instance_id: "i1", model_patch: "x" }],
    graded: [{ instance_id: "i1", outcome: "resolved" }],
    accounts: [
      {
        instance_id: "i1",
        outcome: "resolved",
        candidates: 1,
        resolvedCandidates: 1,
        costUsd: 1,
        inputTokens: 1,
        outputTokens: 1,
        jobMs: 1,
        modelMs: 0,
        gradeMs: 1,
        harnessMs: 2,
        jobIds: ["j"],
      },
    ],
  });

function run(name: string, s: unknown): string {
  const dir = join(tmp, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "summary.json"), JSON.stringify(s));
  return dir;
}
const compare = async (a: string, b: string) => {
  const log = vi.spyOn(console, "log").mockImplementation(() => {});
  try {
    await evalCommands["eval compare"]!.run({ values: {}, positionals: [a, b] } as never);
    return log.mock.calls.map((c) => String(c[0])).join("\n");
  } finally {
    log.mockRestore();
  }
};

describe("eval compare on a hostile summary.json", () => {
  it("shows no escape from an outcome or a pass@k key", async () => {
    const good = run("good", summary());
    const s = summary();
    s.patchbay.instances[0]!.outcome = "\x1b]52;c;cHduZWQ=\x07\x1b[2Jresolved" as never;
    s.patchbay.passAtK["\x1b[31m1"] = 1;
    const bad = run("escapes", s);
    const text = await compare(good, bad).catch((err: Error) => err.message);
    expect(text).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/);
  });

  it("names a summary of another shape as a usage error, not a TypeError", async () => {
    const good = run("good2", summary());
    const bad = run("shape", { ...summary(), patchbay: { run: "x" } });
    await expect(compare(good, bad)).rejects.toThrow(/summary/);
    await expect(compare(good, bad)).rejects.not.toBeInstanceOf(TypeError);
  });

  it("does not wait on a summary.json that is a FIFO", () => {
    const dir = join(tmp, "fifo");
    mkdirSync(dir);
    execFileSync("mkfifo", [join(dir, "summary.json")]);
    const good = run("good3", summary());
    const script = `
      import { evalCommands } from ${JSON.stringify(join(import.meta.dirname, "../../src/cli/eval-command.ts"))};
      evalCommands["eval compare"].run({ values: {}, positionals: [${JSON.stringify(good)}, ${JSON.stringify(dir)}] })
        .then(() => console.log("compared"), (e) => console.log("refused: " + e.message));`;
    const out = execFileSync(join(import.meta.dirname, "../../node_modules/.bin/tsx"), ["--eval", script], {
      timeout: 20_000,
      encoding: "utf8",
    });
    expect(out).toMatch(/refused: .*summary/);
  });
});
