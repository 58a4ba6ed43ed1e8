// docs/security.md's "Boundaries" is a table of every boundary (phases, processes, sources, id
// namespaces, texts a forge, a terminal or a web page renders), each row naming what holds it and
// the tests that hold it as `test/FILE.test.ts › a substring of a test's title`. This test reads
// those tables and holds them to the tests: every named file exists and has a `describe`, `it` or
// `test` whose title holds the substring, so a renamed or removed test fails here. A row that names
// no test is either *pending* (its change is being merged) or **no test** (a gap), and each of those
// must be on its list below, by its first cell, word for word: a new row without a test fails, and
// so does a list entry whose row now names a test (take it off the list). Both lists only shrink.
// Pure: files only, no Docker, Redis or network.
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(new URL("../..", import.meta.url).pathname);
const DOC = "docs/security.md";

/** The kinds of boundary, each a `###` table under `## Boundaries`, in this order. */
const KINDS = ["Phases", "Processes", "Sources", "Id namespaces", "Texts a forge, a terminal or a web page renders"];

/**
 * Rows whose change another branch is bringing (issue 41): each says `*pending: issue 41 (…)*` in
 * its test column. Whoever merges that change names its test in the row and takes it off here.
 */
const PENDING: string[] = [];

/** Boundaries that no test holds yet (gaps), each `**no test**` in its test column. A test for one takes it off. */
const NO_TEST = ["a root helper the OOM killer takes"];

// ---------------------------------------------------------------------------------------------
// The tables
// ---------------------------------------------------------------------------------------------

type Row = { kind: string; key: string; heldBy: string; test: string; n: number };

/** The doc's lines outside fenced code blocks, with their line numbers (1-based). */
function prose(md: string): { line: string; n: number }[] {
  const out: { line: string; n: number }[] = [];
  let fence: string | undefined;
  md.split("\n").forEach((line, i) => {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (m) {
      if (fence === undefined) fence = m[1]!;
      else if (m[1]!.startsWith(fence)) fence = undefined;
      return;
    }
    if (fence === undefined) out.push({ line, n: i + 1 });
  });
  return out;
}

/** A table row's cells, trimmed (`\|` is a pipe inside a cell). */
const cellsOf = (line: string) =>
  line
    .replace(/\\\|/g, "\u0000")
    .trim()
    .replace(/^\||\|$/g, "")
    .split("|")
    .map((c) => c.replace(/\u0000/g, "|").trim());

/** Each `###` kind under `## Boundaries`: its header cells and its body rows. */
function boundaries(md: string): { kind: string; header: string[]; rows: Row[] }[] {
  const lines = prose(md);
  const start = lines.findIndex((l) => l.line.trim() === "## Boundaries");
  if (start < 0) throw new Error(`${DOC} has no "## Boundaries" section`);
  const end = lines.findIndex((l, i) => i > start && /^##\s/.test(l.line));
  const kinds: { kind: string; header: string[]; rows: Row[] }[] = [];
  let tableLine = 0;
  for (const { line, n } of lines.slice(start + 1, end < 0 ? undefined : end)) {
    const h = /^###\s+(.*?)\s*$/.exec(line);
    if (h) {
      kinds.push({ kind: h[1]!, header: [], rows: [] });
      tableLine = 0;
      continue;
    }
    const cur = kinds.at(-1);
    if (!cur || !line.trimStart().startsWith("|")) {
      tableLine = 0;
      continue;
    }
    tableLine++;
    const cells = cellsOf(line);
    if (tableLine === 1) cur.header = cells;
    else if (tableLine > 2)
      cur.rows.push({ kind: cur.kind, key: cells[0]!, heldBy: cells.at(-2)!, test: cells.at(-1)!, n });
    if (tableLine > 2 && cells.length !== cur.header.length)
      throw new Error(`${DOC}:${n}: ${cells.length} cells, the header has ${cur.header.length}`);
  }
  return kinds;
}

/** A test named in a row: `test/FILE.test.ts › a substring of its title`. */
const REF = /^(test\/[A-Za-z0-9_./-]+\.test\.ts) › (.+)$/;
const codeSpans = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
const isPending = (cell: string) => /^\*pending: issue \d+ \([^)]+\)\*$/.test(cell);
const isNoTest = (cell: string) => cell.startsWith("**no test**");

const norm = (s: string) => s.replace(/\s+/g, " ").trim();

/** The titles of a test file's `describe`, `it` and `test` calls, with any modifier chained on them (`.each`, `.fails`, a conditional one), as written. */
function titles(rel: string): string[] {
  const src = readFileSync(join(ROOT, rel), "utf8");
  const call = /\b(?:describe|it|test)(?:\.\w+(?:\((?:[^()]|\([^()]*\))*\))?)*\(\s*(["'`])((?:\\.|(?!\1)[^\\])*)\1/gs;
  return [...src.matchAll(call)].map((m) => norm(m[2]!.replace(/\\(.)/g, "$1")));
}

const md = readFileSync(join(ROOT, DOC), "utf8");
const kinds = boundaries(md);
const rows = kinds.flatMap((k) => k.rows);

// ---------------------------------------------------------------------------------------------

describe("docs/security.md's boundaries", () => {
  it("has one table for each kind of boundary, each row a boundary, what holds it and its tests", () => {
    expect(kinds.map((k) => k.kind)).toEqual(KINDS);
    for (const k of kinds) {
      expect(k.rows.length, k.kind).toBeGreaterThan(0);
      expect(k.header.slice(-2), k.kind).toEqual(["held by", "test"]);
    }
    const seen = new Map<string, number>();
    for (const r of rows) {
      expect(seen.get(r.key), `${DOC}:${r.n}: "${r.key}" is a row's first cell twice`).toBeUndefined();
      seen.set(r.key, r.n);
      expect(r.heldBy, `${DOC}:${r.n}: "${r.key}" says what holds it with a link to where that is said`).toMatch(
        /\[[^\]]+\]\([^)]+\)/,
      );
    }
  });

  it("every test a row names is there: the file exists and one of its describe, it or test titles holds the words", () => {
    const cache = new Map<string, string[]>();
    const wrong: string[] = [];
    for (const r of rows) {
      for (const span of codeSpans(r.test)) {
        const m = REF.exec(span);
        if (!m) {
          wrong.push(`${DOC}:${r.n}: "${span}" is not \`test/FILE.test.ts › title words\``);
          continue;
        }
        const [, file, words] = m as unknown as [string, string, string];
        if (!existsSync(join(ROOT, file))) {
          wrong.push(`${DOC}:${r.n}: ${file} does not exist`);
          continue;
        }
        if (!cache.has(file)) cache.set(file, titles(file));
        if (!cache.get(file)!.some((t) => t.includes(norm(words))))
          wrong.push(`${DOC}:${r.n}: no describe, it or test in ${file} has "${words}" in its title`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it("a row that names no test is pending or a known gap, on this file's lists, and the lists hold nothing else", () => {
    const wrong: string[] = [];
    const pending: string[] = [];
    const noTest: string[] = [];
    for (const r of rows) {
      const named = codeSpans(r.test).some((s) => REF.test(s));
      if (named) continue;
      if (isPending(r.test)) pending.push(r.key);
      else if (isNoTest(r.test)) noTest.push(r.key);
      else wrong.push(`${DOC}:${r.n}: "${r.key}" names no test, and is neither *pending: issue N (…)* nor **no test**`);
    }
    for (const k of pending)
      if (!PENDING.includes(k)) wrong.push(`"${k}" is pending but not on PENDING: name its test in ${DOC}`);
    for (const k of noTest)
      if (!NO_TEST.includes(k))
        wrong.push(`"${k}" has no test and is not on NO_TEST: write one, and name it in ${DOC}`);
    for (const k of PENDING)
      if (!pending.includes(k))
        wrong.push(`PENDING holds "${k}", which is no pending row of ${DOC} (now tested? take it off)`);
    for (const k of NO_TEST)
      if (!noTest.includes(k))
        wrong.push(`NO_TEST holds "${k}", which is no untested row of ${DOC} (now tested? take it off)`);
    expect(wrong).toEqual([]);
  });

  it("the parser reads a row's tests, and its title search finds titles as written", () => {
    expect(REF.exec("test/a-b.test.ts › some words of it")?.slice(1)).toEqual(["test/a-b.test.ts", "some words of it"]);
    expect(REF.exec("test/unit/a.test.ts › words")?.[1]).toBe("test/unit/a.test.ts");
    expect(REF.test("test/a.test.ts some words")).toBe(false);
    expect(isPending("*pending: issue 41 (the seccomp profile)*")).toBe(true);
    expect(isPending("pending")).toBe(false);
    expect(cellsOf("| a `x \\| y` | b |")).toEqual(["a `x | y`", "b"]);
    // This file's own titles, among them one in backquotes and one that holds a quote.
    const own = titles("test/unit/security-table.test.ts");
    expect(own).toContain("docs/security.md's boundaries");
    expect(own).toContain("the parser reads a row's tests, and its title search finds titles as written");
  });
});
