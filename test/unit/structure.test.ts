// The numbers anyone can measure from the sources, held: no import cycles, no upward imports
// between layers, no function in src/ over 80 lines, process.env read by src/core/config/config.ts alone, and
// `extends Error` in src/core/errors.ts alone (every other error class has a kind). Pure: TypeScript's
// parser on src/, no build.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : /\.ts$/.test(e.name) && !/\.d\.ts$/.test(e.name)
        ? [join(dir, e.name)]
        : [],
  );
}

/**
 * The layers, lowest first: a module imports only from its own layer or below (docs/architecture.md
 * draws the same table as a tree). core/, redis/ and observability/ are the base every layer uses.
 * A file directly in src/ is an entry point (cli.ts, index.ts): above every layer, imported by none.
 */
const DIR_LAYER: Record<string, number> = {
  core: 0,
  redis: 0,
  observability: 0,
  backend: 1,
  git: 1,
  sandbox: 2,
  net: 2,
  tools: 3,
  agent: 4,
  job: 5,
  queue: 6,
  batch: 7,
  campaign: 8,
  eval: 8,
  web: 9,
  cli: 10,
};
const ENTRY = 11;
function layer(rel: string): number {
  const r = rel.replace(/^src\//, "");
  if (!r.includes("/")) return ENTRY;
  const dir = r.split("/")[0]!;
  if (!(dir in DIR_LAYER))
    throw new Error(`src/${dir}/ has no layer: give it one in test/unit/structure.test.ts (and docs/architecture.md)`);
  return DIR_LAYER[dir]!;
}

interface Facts {
  longFunctions: string[];
  envReads: Set<string>;
  errorClasses: Map<string, string[]>;
  imports: Map<string, { to: string; typeOnly: boolean }[]>;
}

/** Parses every module under `root`/src (paths in the facts are relative to `root`). */
function measure(root = ROOT): Facts {
  const facts: Facts = { longFunctions: [], envReads: new Set(), errorClasses: new Map(), imports: new Map() };
  for (const file of sources(join(root, "src"))) {
    const rel = relative(root, file);
    const sf = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
    const line = (pos: number) => sf.getLineAndCharacterOfPosition(pos).line;
    const imports: { to: string; typeOnly: boolean }[] = [];
    facts.imports.set(rel, imports);
    const visit = (n: ts.Node): void => {
      if (
        (ts.isFunctionDeclaration(n) ||
          ts.isMethodDeclaration(n) ||
          ts.isArrowFunction(n) ||
          ts.isFunctionExpression(n) ||
          ts.isConstructorDeclaration(n)) &&
        n.body
      ) {
        const len = line(n.body.getEnd()) - line(n.getStart()) + 1;
        if (len > 80) facts.longFunctions.push(`${rel}:${line(n.getStart()) + 1} (${len} lines)`);
      }
      if (ts.isPropertyAccessExpression(n) && n.getText() === "process.env") facts.envReads.add(rel);
      if (
        ts.isHeritageClause(n) &&
        n.types.some((t) => /^(Error|TypeError|RangeError)$/.test(t.expression.getText()))
      ) {
        const cls = ts.isClassLike(n.parent) ? (n.parent.name?.getText() ?? "(anonymous)") : "?";
        facts.errorClasses.set(rel, [...(facts.errorClasses.get(rel) ?? []), cls]);
      }
      if (
        (ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) &&
        n.moduleSpecifier &&
        ts.isStringLiteral(n.moduleSpecifier) &&
        n.moduleSpecifier.text.startsWith(".")
      ) {
        const typeOnly = ts.isImportDeclaration(n) ? !!n.importClause?.isTypeOnly : n.isTypeOnly;
        imports.push({
          to: relative(root, resolve(dirname(file), n.moduleSpecifier.text.replace(/\.js$/, ".ts"))),
          typeOnly,
        });
      }
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return facts;
}

/** Value-import cycles (Tarjan's strongly connected components of more than one module). */
function cycles(imports: Facts["imports"]): string[][] {
  let next = 0;
  const index = new Map<string, number>(),
    low = new Map<string, number>(),
    stack: string[] = [],
    on = new Set<string>(),
    found: string[][] = [];
  const connect = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    on.add(v);
    for (const { to: w, typeOnly } of imports.get(v) ?? []) {
      if (typeOnly || !imports.has(w)) continue;
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const c: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      on.delete(w);
      c.push(w);
    } while (w !== v);
    if (c.length > 1) found.push(c);
  };
  for (const v of imports.keys()) if (!index.has(v)) connect(v);
  return found;
}

/** Every rule's breaches: what the tests below expect to be empty for the real tree. */
function problems(facts: Facts) {
  return {
    cycles: cycles(facts.imports).map((c) => [...c].sort().join(" <-> ")),
    upward: [...facts.imports].flatMap(([from, list]) =>
      list.filter(({ to }) => layer(to) > layer(from)).map(({ to }) => `${from} -> ${to}`),
    ),
    longFunctions: facts.longFunctions,
    envReads: [...facts.envReads].filter((f) => f !== "src/core/config/config.ts"),
    errorClasses: [...facts.errorClasses.keys()].filter((f) => f !== "src/core/errors.ts"),
  };
}

describe("the structure of src/", () => {
  const facts = measure();

  it("measures something (the parse found the sources)", () => {
    expect(facts.imports.size).toBeGreaterThan(100);
    expect(facts.envReads.has("src/core/config/config.ts")).toBe(true);
    expect(facts.errorClasses.get("src/core/errors.ts")).toEqual(["PatchbayError"]);
  });

  it("has no import cycles", () => {
    expect(problems(facts).cycles).toEqual([]);
  });

  it("has no upward imports: a layer imports from itself or below (types too)", () => {
    expect(problems(facts).upward).toEqual([]);
  });

  it("has no function over 80 lines", () => {
    expect(problems(facts).longFunctions).toEqual([]);
  });

  it("reads process.env in src/core/config/config.ts alone", () => {
    expect([...facts.envReads]).toEqual(["src/core/config/config.ts"]);
  });

  it("declares `extends Error` in src/core/errors.ts alone: every other error has a kind", () => {
    expect([...facts.errorClasses.keys()]).toEqual(["src/core/errors.ts"]);
  });
});

// The rules above pass only if they can fail: a tree with one planted breach of each, measured the
// same way, must show exactly those breaches.
describe("the structure rules catch a planted breach of each", () => {
  const root = mkdtempSync(join(tmpdir(), "pb-structure-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const plant = (rel: string, text: string) => {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  };
  plant("src/core/errors.ts", "export class PatchbayError extends Error {}\n");
  plant("src/core/config/config.ts", "export const env = process.env;\n");
  plant("src/job/run.ts", 'import { main } from "../cli/main.js";\nexport const run = main;\n');
  plant("src/cli/main.ts", "export const main = 1;\n");
  plant("src/queue/a.ts", 'import { b } from "./b.js";\nexport const a = () => b;\n');
  plant("src/queue/b.ts", 'import { a } from "./a.js";\nexport const b = () => a;\n');
  plant("src/tools/long.ts", `export function long() {\n${"  void 0;\n".repeat(80)}}\n`);
  plant("src/agent/env.ts", "export const home = process.env.HOME;\n");
  plant("src/web/oops.ts", "export class Oops extends Error {}\n");
  plant("src/index.ts", 'export { run } from "./job/run.js";\n');
  const found = problems(measure(root));

  it("an upward import, a cycle, a long function, process.env outside config, `extends Error` outside errors", () => {
    expect(found).toEqual({
      cycles: ["src/queue/a.ts <-> src/queue/b.ts"],
      upward: ["src/job/run.ts -> src/cli/main.ts"],
      longFunctions: ["src/tools/long.ts:1 (82 lines)"],
      envReads: ["src/agent/env.ts"],
      errorClasses: ["src/web/oops.ts"],
    });
  });

  it("a folder of src/ with no layer", () => {
    plant("src/misc/x.ts", 'import { run } from "../job/run.js";\nexport const x = run;\n');
    expect(() => problems(measure(root))).toThrow("src/misc/ has no layer");
  });
});
