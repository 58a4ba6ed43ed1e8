// The numbers anyone can measure from the sources, held: no import cycles, no upward imports
// between layers, no function in src/ over 80 lines, process.env read by src/core/config/config.ts alone, and
// `extends Error` in src/core/errors.ts alone (every other error class has a kind). Pure: TypeScript's
// parser on src/, no build.
//
// Numbers anyone can measure from the sources: no import cycles, no upward imports (the layer map
// in the file), no function over 80 lines in `src/`, `process.env` read only in
// `src/core/config/config.ts`, `extends Error` only in `src/core/errors.ts`.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");

function sources(dir = join(ROOT, "src")): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(join(dir, e.name)) : /\.ts$/.test(e.name) && !/\.d\.ts$/.test(e.name) ? [join(dir, e.name)] : []));
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
  web: 9,
  cli: 10,
};
const ENTRY = 11;
function layer(rel: string): number {
  const r = rel.replace(/^src\//, "");
  if (!r.includes("/")) return ENTRY;
  const dir = r.split("/")[0]!;
  if (!(dir in DIR_LAYER)) throw new Error(`src/${dir}/ has no layer: give it one in test/unit/structure.test.ts (and docs/architecture.md)`);
  return DIR_LAYER[dir]!;
}

interface Facts {
  longFunctions: string[];
  envReads: Set<string>;
  errorClasses: Map<string, string[]>;
  imports: Map<string, { to: string; typeOnly: boolean }[]>;
}

function measure(): Facts {
  const facts: Facts = { longFunctions: [], envReads: new Set(), errorClasses: new Map(), imports: new Map() };
  for (const file of sources()) {
    const rel = relative(ROOT, file);
    const sf = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
    const line = (pos: number) => sf.getLineAndCharacterOfPosition(pos).line;
    const imports: { to: string; typeOnly: boolean }[] = [];
    facts.imports.set(rel, imports);
    const visit = (n: ts.Node): void => {
      if ((ts.isFunctionDeclaration(n) || ts.isMethodDeclaration(n) || ts.isArrowFunction(n) || ts.isFunctionExpression(n) || ts.isConstructorDeclaration(n)) && n.body) {
        const len = line(n.body.getEnd()) - line(n.getStart()) + 1;
        if (len > 80) facts.longFunctions.push(`${rel}:${line(n.getStart()) + 1} (${len} lines)`);
      }
      if (ts.isPropertyAccessExpression(n) && n.getText() === "process.env") facts.envReads.add(rel);
      if (ts.isHeritageClause(n) && n.types.some((t) => /^(Error|TypeError|RangeError)$/.test(t.expression.getText()))) {
        const cls = ts.isClassLike(n.parent) ? (n.parent.name?.getText() ?? "(anonymous)") : "?";
        facts.errorClasses.set(rel, [...(facts.errorClasses.get(rel) ?? []), cls]);
      }
      if ((ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) && n.moduleSpecifier && ts.isStringLiteral(n.moduleSpecifier) && n.moduleSpecifier.text.startsWith(".")) {
        const typeOnly = ts.isImportDeclaration(n) ? !!n.importClause?.isTypeOnly : n.isTypeOnly;
        imports.push({ to: relative(ROOT, resolve(dirname(file), n.moduleSpecifier.text.replace(/\.js$/, ".ts"))), typeOnly });
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
  const index = new Map<string, number>(), low = new Map<string, number>(), stack: string[] = [], on = new Set<string>(), found: string[][] = [];
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

describe("the structure of src/", () => {
  const facts = measure();

  it("measures something (the parse found the sources)", () => {
    expect(facts.imports.size).toBeGreaterThan(100);
    expect(facts.envReads.has("src/core/config/config.ts")).toBe(true);
    expect(facts.errorClasses.get("src/core/errors.ts")).toEqual(["PatchbayError"]);
  });

  it("has no import cycles", () => {
    expect(cycles(facts.imports).map((c) => c.join(" <-> "))).toEqual([]);
  });

  it("has no upward imports: a layer imports from itself or below (types too)", () => {
    const upward = [...facts.imports].flatMap(([from, list]) => list.filter(({ to }) => layer(to) > layer(from)).map(({ to }) => `${from} -> ${to}`));
    expect(upward).toEqual([]);
  });

  it("has no function over 80 lines", () => {
    expect(facts.longFunctions).toEqual([]);
  });

  it("reads process.env in src/core/config/config.ts alone", () => {
    expect([...facts.envReads]).toEqual(["src/core/config/config.ts"]);
  });

  it("declares `extends Error` in src/core/errors.ts alone: every other error has a kind", () => {
    expect([...facts.errorClasses.keys()]).toEqual(["src/core/errors.ts"]);
  });
});
