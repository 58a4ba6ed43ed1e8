// The library's public API as src/index.ts exports it, held to issue 42's rule: an option bag is a
// named interface, exported from src/index.ts, never an inline object type; and every exported
// declaration, and every public member of an exported class or interface, has a TSDoc comment
// (the options' defaults in `@default`). Pure: TypeScript's checker on src/, no build (the built
// .d.ts is test/package.test.ts's).
import { resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");

interface Findings {
  inlineBags: string[];
  unexportedOptions: string[];
  undocumented: string[];
}

function findings(): Findings {
  const program = ts.createProgram([resolve(ROOT, "src/index.ts")], {
    strict: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    noEmit: true,
  });
  const checker = program.getTypeChecker();
  const index = checker.getSymbolAtLocation(program.getSourceFile(resolve(ROOT, "src/index.ts"))!)!;
  const real = (s: ts.Symbol) => (s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s);
  const exportsOf = checker.getExportsOfModule(index);
  const exported = new Set(exportsOf.map(real));
  const out: Findings = { inlineBags: [], unexportedOptions: [], undocumented: [] };
  const where = (n: ts.Node) => {
    const sf = n.getSourceFile();
    return `${sf.fileName.slice(ROOT.length + 1)}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1}`;
  };
  const documented = (n: ts.Node) => ts.getJSDocCommentsAndTags(n).length > 0;

  const params = (name: string, fn: ts.SignatureDeclarationBase) => {
    for (const p of fn.parameters) {
      if (!p.type) continue;
      const literal = ts.isUnionTypeNode(p.type)
        ? p.type.types.find(ts.isTypeLiteralNode)
        : ts.isTypeLiteralNode(p.type)
          ? p.type
          : undefined;
      if (literal && literal.members.length > 0) out.inlineBags.push(`${where(p)} ${name}(${p.name.getText()})`);
      const refs: ts.TypeReferenceNode[] = [];
      const walk = (n: ts.Node): void => (ts.isTypeReferenceNode(n) && refs.push(n), ts.forEachChild(n, walk));
      walk(p.type);
      for (const r of refs) {
        const sym = checker.getSymbolAtLocation(r.typeName);
        const own =
          sym !== undefined &&
          (real(sym).declarations ?? []).some((x) => x.getSourceFile().fileName.startsWith(`${ROOT}/src/`));
        if (sym && own && /Options$/.test(sym.name) && !exported.has(real(sym)))
          out.unexportedOptions.push(`${where(p)} ${name}(${p.name.getText()}): ${sym.name}`);
      }
    }
  };

  for (const ex of exportsOf) {
    // A class exported as a type only (Shell, Files: reached through a Sandbox) is not made by callers.
    const typeOnly = (ex.declarations ?? []).some(
      (e) => ts.isExportSpecifier(e) && (e.isTypeOnly || e.parent.parent.isTypeOnly),
    );
    for (const d of real(ex).declarations ?? []) {
      const statement = ts.isVariableDeclaration(d) ? d.parent.parent : d;
      if (!documented(statement)) out.undocumented.push(`${where(d)} ${ex.name}`);
      if (ts.isFunctionDeclaration(d)) params(ex.name, d);
      if (ts.isVariableDeclaration(d) && d.initializer && ts.isArrowFunction(d.initializer))
        params(ex.name, d.initializer);
      if (!ts.isClassDeclaration(d) && !ts.isInterfaceDeclaration(d)) continue;
      const overloaded = new Set(
        d.members.filter((m) => ts.isMethodDeclaration(m) && !m.body).map((m) => m.name!.getText()),
      );
      for (const m of d.members) {
        const hidden =
          (ts.getCombinedModifierFlags(m) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) !== 0 ||
          (m.name !== undefined && ts.isPrivateIdentifier(m.name));
        if (hidden || ts.isIndexSignatureDeclaration(m) || ts.isClassStaticBlockDeclaration(m)) continue;
        const name = ts.isConstructorDeclaration(m) ? `${ex.name}.constructor` : `${ex.name}.${m.name?.getText()}`;
        if ((ts.isConstructorDeclaration(m) && !typeOnly) || ts.isMethodDeclaration(m) || ts.isMethodSignature(m))
          params(name, m);
        // A constructor is the class's to describe; an overloaded method's body is not seen by a caller.
        if (ts.isConstructorDeclaration(m) || (ts.isMethodDeclaration(m) && m.body && overloaded.has(m.name.getText())))
          continue;
        if (!documented(m)) out.undocumented.push(`${where(m)} ${name}`);
      }
    }
  }
  return out;
}

describe("the public API (src/index.ts)", () => {
  const f = findings();

  it("takes no inline option bag: each is a named interface", () => {
    expect(f.inlineBags).toEqual([]);
  });

  it("exports every options interface its functions and methods take", () => {
    expect(f.unexportedOptions).toEqual([]);
  });

  it("has a TSDoc comment on every export and every public member", () => {
    expect(f.undocumented).toEqual([]);
  });

  it("keeps SandboxRuntime as a deprecated alias of Backend", () => {
    const text = ts.sys.readFile(resolve(ROOT, "src/index.ts"))!;
    expect(text).toMatch(
      /\/\*\* @deprecated use Backend[^*]*\*\/\nexport type SandboxRuntime = import\("\.\/backend\/types\.js"\)\.Backend;/,
    );
  });
});
