// Loads the editor conformance cases (test/fixtures/editor-cases.jsonl, format in editor-cases.md) and runs
// one against any EditorFs: setup through EditorFs.mkdirp/write, assertions through EditorFs.read, so the
// same runner serves the in-memory fs and a real Docker sandbox.
import { readFileSync } from "node:fs";
import { expect } from "vitest";
import type { EditorFlavor, EditorFs, ToolOutput } from "../../src/tools/editor.js";

export const CASES_URL = new URL("../fixtures/editor-cases.jsonl", import.meta.url);

/** File content in a case: a string, or `s` repeated `count` times. */
export type CaseContent = string | { repeat: string; count: number };

export interface ConformanceStep {
  input: Record<string, unknown>;
  expect: { output: string } | { error: string };
}

export interface ConformanceCase {
  id: string;
  tool: EditorFlavor;
  desc?: string;
  setup: { files?: Record<string, CaseContent>; dirs?: string[] };
  steps: ConformanceStep[];
  expect_files: Record<string, CaseContent>;
  compare_lines_unordered?: boolean;
}

export interface EditorLike {
  run(input: unknown): Promise<ToolOutput>;
}

export function loadConformanceCases(url: URL = CASES_URL): ConformanceCase[] {
  return readFileSync(url, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as ConformanceCase);
}

/** The default sandbox directory for a case: absolute, no hidden component. */
export function defaultCaseRoot(c: ConformanceCase): string {
  return `/workspace/case-${c.id}`;
}

export function expandContent(content: CaseContent): string {
  return typeof content === "string" ? content : content.repeat.repeat(content.count);
}

/** Substitutes {ROOT} in every string and object key of a case. */
export function expandRoot<T>(value: T, root: string): T {
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return v.split("{ROOT}").join(root);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === "object") {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.split("{ROOT}").join(root), walk(x)]));
    }
    return v;
  };
  return walk(value) as T;
}

function dirname(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}

/** Creates the case's directories and files under root through the EditorFs. */
export async function setupCase(c: ConformanceCase, fs: EditorFs, root: string): Promise<void> {
  await fs.mkdirp(root);
  for (const dir of c.setup.dirs ?? []) await fs.mkdirp(`${root}/${dir}`);
  for (const [rel, content] of Object.entries(c.setup.files ?? {})) {
    const path = `${root}/${rel}`;
    await fs.mkdirp(dirname(path));
    await fs.write(path, Buffer.from(expandContent(content), "utf8"));
  }
}

/** Compares one step's result; directory listings may compare the lines after the header as a set. */
export function expectStep(actual: ToolOutput, step: ConformanceStep, unordered: boolean, label: string): void {
  const isError = "error" in step.expect;
  const text = "error" in step.expect ? step.expect.error : step.expect.output;
  expect({ isError: actual.isError, content: sortedAfterHeader(actual.content, unordered) }, label).toEqual({
    isError,
    content: sortedAfterHeader(text, unordered),
  });
}

function sortedAfterHeader(text: string, unordered: boolean): string {
  if (!unordered) return text;
  const [header, ...rest] = text.split("\n");
  return [header, ...rest.sort()].join("\n");
}

/**
 * Runs a case end to end: setup, each step in order on one editor instance, then the exact bytes of
 * every expected file. makeEditor gets the case's tool flavour; fsForSetup is the fs the editor works on.
 */
export async function runConformanceCase(
  c: ConformanceCase,
  makeEditor: (flavor: EditorFlavor) => EditorLike,
  fsForSetup: EditorFs,
  root: string = defaultCaseRoot(c),
): Promise<void> {
  const x = expandRoot(c, root);
  await setupCase(x, fsForSetup, root);
  const editor = makeEditor(x.tool);
  for (const [i, step] of x.steps.entries()) {
    const actual = await editor.run(step.input);
    expectStep(
      actual,
      step,
      x.compare_lines_unordered === true,
      `${c.id} step ${i + 1}: ${JSON.stringify(step.input).slice(0, 200)}`,
    );
  }
  for (const [path, content] of Object.entries(x.expect_files)) {
    const actual = Buffer.from(await fsForSetup.read(path));
    expect(
      actual.equals(Buffer.from(expandContent(content), "utf8")),
      `${c.id}: content of ${path}\n${actual.toString("utf8").slice(0, 500)}`,
    ).toBe(true);
  }
}
