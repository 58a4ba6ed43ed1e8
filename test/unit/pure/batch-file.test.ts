// Batch files and the HTTP API's batch bodies (src/batch/batch-file.ts): lines read in one linear
// pass, blank ones stepped over without a parse, at most MAX_BAD_LINES bad lines read and named, a
// caller's check before a spec's, and the server's parser handing the event loop back. Pure: the
// specs name git URLs, so no path is looked at.
import { setImmediate } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import {
  BatchFileError,
  MAX_BAD_LINES,
  parseBatchFile,
  parseBatchFileYielding,
  type BatchFileOptions,
} from "../../../src/batch/batch-file.js";

const spec = (task: string) => JSON.stringify({ task, repo: { git: "https://example.com/r.git" } });

/** The errors a text's parse throws (a BatchFileError's). */
const errorsOf = (text: string): string[] => {
  try {
    parseBatchFile(text, "b");
  } catch (err) {
    expect(err).toBeInstanceOf(BatchFileError);
    return (err as BatchFileError).errors;
  }
  throw new Error("no problem found");
};

/** The errors parseBatchFileYielding throws, with a check. */
const checkedErrorsOf = async (text: string, opts: BatchFileOptions): Promise<string[]> => {
  const err = await parseBatchFileYielding(text, "b", opts).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(BatchFileError);
  return (err as BatchFileError).errors;
};

describe("parseBatchFile and parseBatchFileYielding", () => {
  it("steps over blank lines of any whitespace without parsing them, and numbers the others", async () => {
    const seen: unknown[] = [];
    const check = (parsed: unknown) => void seen.push(parsed);
    const text = `\n  \r\n\t\n\u00a0\n${spec("a")}\r\n${"\n".repeat(100_000)}${spec("b")}`;
    const lines = await parseBatchFileYielding(text, "b", { check });
    expect(lines.map((l) => [l.line, l.spec.task])).toEqual([
      [5, "a"],
      [100_006, "b"],
    ]);
    expect(seen).toHaveLength(2); // the check sees the two specs only: no blank line is parsed
    expect(errorsOf(`${"\n".repeat(2_000_000)}{"task": "no repo"}\n`)).toEqual([
      "b:2000001: invalid JobSpec: repo: required",
    ]);
  });

  it("reads at most 100 bad lines: a body of 100,000 is named up to there, the rest not read", () => {
    const errors = errorsOf(`${spec("ok")}\n${"x\n".repeat(100_000)}`);
    expect(errors).toHaveLength(MAX_BAD_LINES + 1);
    expect(errors[0]).toMatch(/^b:2: not valid JSON: /);
    expect(errors[MAX_BAD_LINES - 1]).toMatch(/^b:101: not valid JSON: /);
    expect(errors[MAX_BAD_LINES]).toBe("b:102: not read, nor the lines after it: fix the 100 bad lines above first");
    // exactly the limit: every one named, and nothing said of lines not read (there are none)
    const all = errorsOf(`${"{}\n".repeat(MAX_BAD_LINES)}\n\n`);
    expect(all).toHaveLength(MAX_BAD_LINES);
    expect(all.at(-1)).toBe(`b:${MAX_BAD_LINES}: invalid JobSpec: task: required; repo: required`);
  });

  it("a caller's check refuses a line before its spec is checked, named as the line's", async () => {
    const text = [spec("in"), JSON.stringify({ task: "out", repo: { path: "/no/such/dir" } }), "{nope"].join("\n");
    const check = (parsed: unknown) =>
      "path" in (parsed as { repo: object }).repo ? "repo.path: not under the roots" : undefined;
    expect(await checkedErrorsOf(text, { check })).toEqual([
      "b:2: invalid JobSpec: repo.path: not under the roots", // not "does not exist": the path is not looked at
      expect.stringMatching(/^b:3: not valid JSON: /),
    ]);
  });

  it("parseBatchFileYielding reads as parseBatchFile does", async () => {
    const text = `${spec("a")}\n\n${spec("b")}\n`;
    expect(await parseBatchFileYielding(text, "b")).toEqual(parseBatchFile(text, "b"));
    const bad = `${spec("a")}\n${"x\n".repeat(500)}`;
    const thrown = await parseBatchFileYielding(bad, "b").catch((err: unknown) => err);
    expect(thrown).toBeInstanceOf(BatchFileError);
    expect((thrown as BatchFileError).errors).toEqual(errorsOf(bad));
  });

  it("hands the event loop back while it reads, where parseBatchFile holds it to the end", async () => {
    // Each line's check holds the thread 2 ms: 50 lines are 100 ms of work, past the 10 ms a turn.
    const slow = () => {
      const end = performance.now() + 2;
      while (performance.now() < end);
      return undefined;
    };
    const text = Array.from({ length: 50 }, (_, i) => spec(`t${i}`)).join("\n");
    const turnsDuring = async (parse: () => Promise<unknown>) => {
      let turns = 0;
      let done = false;
      const ticking = (async () => {
        while (!done) {
          await setImmediate();
          turns++;
        }
      })();
      await setImmediate(); // the ticker is waiting on its first turn
      const before = turns;
      await parse();
      const during = turns - before;
      done = true;
      await ticking;
      return during;
    };
    expect(await turnsDuring(async () => parseBatchFile(text, "b"))).toBe(0);
    expect(await turnsDuring(() => parseBatchFileYielding(text, "b", { check: slow }))).toBeGreaterThanOrEqual(5);
  });
});
