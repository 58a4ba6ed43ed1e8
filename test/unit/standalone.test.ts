// `git clone … && npm test` must pass anywhere: nothing the tests, scripts or bench run reads
// outside the repository (the editor conformance cases live in test/fixtures/).
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../support/cli-helpers.js";
import { CASES_URL, loadConformanceCases } from "../support/conformance-cases.js";

function filesUnder(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|mts|js|mjs|cjs|sh|json|jsonl)$/.test(e.name))
    .map((e) => join(e.parentPath, e.name));
}

describe("the repository stands alone", () => {
  it("no test, script, bench, CI or source file reads ../shared (or anything beside the repo)", () => {
    const offenders: string[] = [];
    for (const file of ["test", "scripts", "bench", "src", ".ci", "bin"].flatMap(filesUnder)) {
      if (file.endsWith("standalone.test.ts")) continue;
      const text = readFileSync(file, "utf8");
      if (/\.\.\/shared\b|\.\.\/\.\.\/shared\b|shared\/conformance/.test(text)) offenders.push(relative(ROOT, file));
    }
    expect(offenders).toEqual([]);
  });

  it("the editor conformance cases are a fixture of this repository", () => {
    expect(relative(ROOT, CASES_URL.pathname)).toBe("test/fixtures/editor-cases.jsonl");
    const cases = loadConformanceCases();
    expect(cases.length).toBeGreaterThanOrEqual(20);
    expect(new Set(cases.map((c) => c.id)).size).toBe(cases.length);
  });
});
