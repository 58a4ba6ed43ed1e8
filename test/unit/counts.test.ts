// Guards that every count in src/ (CLI, worker logs, reports, the dashboard's server-rendered text and
// its browser scripts) goes through one pluralizer (count/plural of src/core/count.ts, PB.count in the
// browser), so none reads "1 jobs": fails naming file:line for a number printed before a plural noun by
// hand (`${n} files`, `n + " files"`), a "file(s)" or an ad-hoc `=== 1 ? "" : "s"`. Pure: TypeScript's
// parser on src/.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");

/**
 * Words ending in "s" that follow a value in src/ and are not a plural noun (verbs, units, ...): a
 * value before one of these is not a count. Add a word here only when it is not a noun.
 */
const NOT_NOUNS = new Set(
  (
    "is was has does as its this yes always unless plus lets says keeps takes runs holds knows answers " +
    "waits refuses allows looks needs carries appears ms egress"
  ).split(" "),
);

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : /\.(ts|js)$/.test(e.name) && !/\.d\.ts$/.test(e.name)
        ? [join(dir, e.name)]
        : [],
  );
}

/** Words that end a noun phrase's start: "5 of the files" is no count of files. */
const FUNCTION_WORDS = new Set("of in on at to for and or the a an with from by per not than into".split(" "));

const isPlural = (w: string | undefined) =>
  // A word ending in "ss" (address, process) is singular.
  w !== undefined && w.length > 2 && /[^s]s$/.test(w) && !NOT_NOUNS.has(w);

/** The plural noun `text` starts with (after at most one space, "files" or "tool calls"), if it starts with one. */
function pluralNoun(text: string): string | undefined {
  const [, w1, w2] = /^ ?([a-z]+)\b(?: ([a-z]+)\b)?/.exec(text) ?? [];
  if (isPlural(w1)) return w1;
  return w1 && !FUNCTION_WORDS.has(w1) && !NOT_NOUNS.has(w1) && isPlural(w2) ? `${w1} ${w2}` : undefined;
}

/** Verbs that agree with a count (`n === 1 ? "does" : "do"`) and other pairs that are not a noun and its plural. */
const NOT_PAIRS = new Set(["do", "does", "is", "are", "has", "have", "was", "were", "http", "https"]);

/** Whether two texts are a noun and its plural (" file)" and " files)", "y" and "ies", "" and "s"). */
function pluralPair(a: string, b: string): boolean {
  if (NOT_PAIRS.has(a.trim()) && NOT_PAIRS.has(b.trim())) return false;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  let j = 0;
  while (j < a.length - i && j < b.length - i && a[a.length - 1 - j] === b[b.length - 1 - j]) j++;
  const pair = [a.slice(i, a.length - j), b.slice(i, b.length - j)].sort().join("|");
  return ["|s", "|es", "ies|y"].includes(pair);
}

const isString = (n: ts.Node) => ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n);
/** The operand that ends `n` (the right of a chain of `+`). */
const lastOperand = (n: ts.Node): ts.Node =>
  ts.isBinaryExpression(n) ? lastOperand(n.right) : ts.isParenthesizedExpression(n) ? lastOperand(n.expression) : n;

/** Every hand-made count in the file at `path`, as "file:line: what". */
export function handCounts(path: string, text = readFileSync(path, "utf8")): string[] {
  const rel = relative(ROOT, path);
  const kind = path.endsWith(".js") ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, kind);
  const out: string[] = [];
  const at = (n: ts.Node, what: string) =>
    out.push(`${rel}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1}: ${what}`);
  const visit = (n: ts.Node): void => {
    if (ts.isTemplateExpression(n))
      for (const span of n.templateSpans) {
        const noun = pluralNoun(span.literal.text);
        // `${x ? "done " : ""}jobs` is a word chosen, not a count.
        const chosen =
          ts.isConditionalExpression(span.expression) &&
          [span.expression.whenTrue, span.expression.whenFalse].some((b) => isString(b) || ts.isTemplateExpression(b));
        // `${host} rate limits`, `${plural(n, "master")} serving slots`: a name or a noun already said.
        const named = /(^|\.)(host|path|file|name|id|\w+Id)$|^(count|plural)\(/.test(span.expression.getText());
        if (noun && !chosen && !named) at(span, `\${${span.expression.getText()}} ${noun}`);
      }
    if (ts.isBinaryExpression(n) && n.operatorToken.kind === ts.SyntaxKind.PlusToken && isString(n.right)) {
      const noun = pluralNoun((n.right as ts.StringLiteral).text);
      if (noun && /^ /.test((n.right as ts.StringLiteral).text) && !isString(lastOperand(n.left)))
        at(n.right, `${lastOperand(n.left).getText()} + " ${noun}"`);
    }
    if ((ts.isStringLiteral(n) || ts.isTemplateLiteralToken(n)) && /[a-z]\(s\)/.test(n.text.replace(/http\(s\)/g, "")))
      at(n, `"${/\w+\(s\)/.exec(n.text)![0]}"`);
    // `n === 1 ? "" : "s"`, `n === 1 ? "time" : "times"`: a plural chosen by hand.
    const branches = ts.isConditionalExpression(n) ? [n.whenTrue, n.whenFalse] : [];
    if (
      ts.isConditionalExpression(n) &&
      (branches.some((b) => isString(b) && (b as ts.StringLiteral).text === "s") ||
        (branches.every(isString) &&
          pluralPair(...(branches.map((b) => (b as ts.StringLiteral).text) as [string, string]))))
    )
      at(n, `an ad-hoc plural: ${n.getText()}`);
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

describe("counts", () => {
  it("finds each shape of hand-made count (the scan itself)", () => {
    const found = handCounts(
      join(ROOT, "src/x.ts"),
      [
        "const a = `${jobs.length} jobs`;",
        'const b = n + " files";',
        'const c = "3 file(s)";',
        'const d = `${n} turn${n === 1 ? "" : "s"}`;',
        "const e = `${id} says ${count(n, 'job')}`;",
        'const f = "a" + " files";',
        'const g = `${n} more ${n === 1 ? "time" : "times"}`;',
      ].join("\n"),
    );
    expect(found).toEqual([
      "src/x.ts:1: ${jobs.length} jobs",
      'src/x.ts:2: n + " files"',
      'src/x.ts:3: "file(s)"',
      'src/x.ts:4: an ad-hoc plural: n === 1 ? "" : "s"',
      'src/x.ts:7: an ad-hoc plural: n === 1 ? "time" : "times"',
    ]);
  });

  it("prints every count in src/ through count()/plural() (src/core/count.ts) or PB.count in the browser", () => {
    const found = sources(join(ROOT, "src")).flatMap((f) => handCounts(f));
    expect(
      found,
      "print a count with count(n, noun) of src/core/count.ts (PB.count in the dashboard's scripts); " +
        "if the word is not a noun, add it to NOT_NOUNS in test/unit/counts.test.ts",
    ).toEqual([]);
  });
});
