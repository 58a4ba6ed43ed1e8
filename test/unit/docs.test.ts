// The docs stay true to the code, so a doc that falls behind fails here. Every relative link in
// README.md, CHANGELOG.md, docs/*.md and docs/history/*.md resolves to a file, and its #anchor to a
// heading of that file (GitHub's slug rules); the lists docs/jobspec.md keeps (event types and their
// fields, statuses and their exit codes, JobSpec and JobResult fields) are exactly
// src/core/spec/spec.ts's; the variables docs/operations.md lists under "Read by loadConfig" are
// exactly the keys of src/core/config/config.ts's `Env` (read from the source), and nothing read
// from process.env goes unlisted; the layer table of docs/architecture.md lists exactly the folders
// of src/ with the layers test/unit/structure.test.ts gives them (its DIR_LAYER, read from the source),
// and each word its glossary defines is defined once.
// Pure: files and the schemas, no Docker, Redis or network.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { exitCodeFor } from "../../src/cli/exit.js";
import {
  Budget,
  EVENT_TYPES,
  JOB_STATUSES,
  JobResult,
  JobSpec,
  Limits,
  Network,
  TranscriptEvent,
} from "../../src/core/spec/spec.js";

const ROOT = resolve(new URL("../..", import.meta.url).pathname);
const read = (rel: string) => readFileSync(join(ROOT, rel), "utf8");
const mdIn = (dir: string) =>
  readdirSync(join(ROOT, dir))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `${dir}/${f}`);
const DOCS = ["README.md", "CHANGELOG.md", ...mdIn("docs"), ...mdIn("docs/history")];

// ---------------------------------------------------------------------------------------------
// Markdown, as far as these checks need it
// ---------------------------------------------------------------------------------------------

/** The lines outside fenced code blocks, with their line numbers (1-based). */
function prose(md: string): { line: string; n: number }[] {
  const out: { line: string; n: number }[] = [];
  let fence: string | undefined;
  md.split("\n").forEach((line, i) => {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (m) {
      if (fence === undefined) fence = m[1]![0]!.repeat(m[1]!.length);
      else if (m[1]!.startsWith(fence)) fence = undefined;
      return;
    }
    if (fence === undefined) out.push({ line, n: i + 1 });
  });
  return out;
}

const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;

/** A heading's anchor as GitHub makes it: the rendered text, lower case, punctuation but - and _ dropped, spaces as -. */
function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // links and images: their text
    .replace(/<[^>]+>/g, "") // HTML tags
    .replace(/[`*]/g, ""); // code and emphasis marks (the text inside stays)
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, "")
    .replace(/ /g, "-");
}

/** Every anchor a file's headings make, duplicates numbered as GitHub numbers them (x, x-1, x-2). */
function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const { line } of prose(md)) {
    const m = HEADING.exec(line);
    if (!m) continue;
    const base = slug(m[2]!);
    const k = seen.get(base) ?? 0;
    seen.set(base, k + 1);
    out.add(k === 0 ? base : `${base}-${k}`);
  }
  return out;
}

/** Links and images outside code: [text](target) and ![alt](target). */
function links(md: string): { target: string; n: number }[] {
  const out: { target: string; n: number }[] = [];
  for (const { line, n } of prose(md)) {
    const text = line.replace(/(`+).+?\1/g, ""); // a code span holds no link
    for (const m of text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g))
      out.push({ target: m[1]!, n });
  }
  return out;
}

/** The lines of the section under the heading whose text is `title`, up to the next heading of its level or higher. */
function section(md: string, title: string): string[] {
  const lines = prose(md).map((l) => l.line);
  const start = lines.findIndex((l) => HEADING.exec(l)?.[2] === title);
  if (start < 0) throw new Error(`no heading "${title}"`);
  const level = HEADING.exec(lines[start]!)![1]!.length;
  const end = lines.findIndex((l, i) => i > start && (HEADING.exec(l)?.[1]?.length ?? 7) <= level);
  return lines.slice(start + 1, end < 0 ? undefined : end);
}

/** The body rows of the first table in `lines`, each as its cells (header and separator left out). */
function tableRows(lines: string[]): string[][] {
  const first = lines.findIndex((l) => l.trimStart().startsWith("|"));
  if (first < 0) throw new Error("no table");
  const rows: string[][] = [];
  for (let i = first; i < lines.length && lines[i]!.trimStart().startsWith("|"); i++) {
    const cells = lines[i]!.replace(/\\\|/g, "\u0000")
      .trim()
      .replace(/^\||\|$/g, "")
      .split("|")
      .map((c) => c.replace(/\u0000/g, "|").trim());
    rows.push(cells);
  }
  return rows.slice(2); // the header row and the |---| row
}

/** The names in a cell: every `code span` in it. */
const names = (cell: string | undefined) => [...(cell ?? "").matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

const sorted = (xs: Iterable<string>) => [...xs].sort();

// ---------------------------------------------------------------------------------------------
// The code's lists
// ---------------------------------------------------------------------------------------------

/** The keys of `const Env = z.object({...})` in src/core/config/config.ts, read from its syntax tree (spreads, .extend and .merge followed). */
function envKeys(): string[] {
  const path = join(ROOT, "src/core/config/config.ts");
  const sf = ts.createSourceFile(path, readFileSync(path, "utf8"), ts.ScriptTarget.Latest, true);
  const vars = new Map<string, ts.Expression>();
  const collect = (n: ts.Node): void => {
    if (ts.isVariableDeclaration(n) && ts.isIdentifier(n.name) && n.initializer) vars.set(n.name.text, n.initializer);
    ts.forEachChild(n, collect);
  };
  collect(sf);
  const seen = new Set<string>();
  const keysOf = (e: ts.Expression): string[] => {
    if (ts.isObjectLiteralExpression(e)) {
      return e.properties.flatMap((p) => {
        if (ts.isSpreadAssignment(p)) return keysOf(p.expression);
        const name = p.name;
        return name && (ts.isIdentifier(name) || ts.isStringLiteral(name)) ? [name.text] : [];
      });
    }
    // z.object({...}), and a chain on it: .extend({...}), .merge(Other), .superRefine(fn), …
    if (ts.isCallExpression(e))
      return [
        ...(ts.isPropertyAccessExpression(e.expression) ? keysOf(e.expression.expression) : []),
        ...e.arguments.flatMap(keysOf),
      ];
    if (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e))
      return keysOf(e.expression);
    if (ts.isIdentifier(e) && vars.has(e.text) && !seen.has(e.text)) {
      seen.add(e.text);
      return keysOf(vars.get(e.text)!);
    }
    return [];
  };
  const env = vars.get("Env");
  if (!env)
    throw new Error(
      "src/core/config/config.ts has no `const Env`: say in this test where the environment's schema went",
    );
  seen.add("Env");
  return keysOf(env);
}

/** Files under a directory of the repo, recursively. */
function filesUnder(dir: string, ext: RegExp): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && ext.test(e.name))
    .map((e) => join(e.parentPath, e.name));
}

// ---------------------------------------------------------------------------------------------

describe("the docs' links", () => {
  it("GitHub's slugs, as this test makes them", () => {
    expect(slug('What "verified means verified" costs (2026-12-01)')).toBe(
      "what-verified-means-verified-costs-2026-12-01",
    );
    expect(slug("Benchmarks (`npm run bench`)")).toBe("benchmarks-npm-run-bench");
    expect(slug("The worker's policy")).toBe("the-workers-policy");
    expect(slug("Credentials for `{ git }` repos")).toBe("credentials-for--git--repos");
    expect(slug("Read by [loadConfig](x.md) — *now*")).toBe("read-by-loadconfig--now");
    expect(slug("PATCHBAY_RETENTION_SEC")).toBe("patchbay_retention_sec");
    expect([...anchors("# A\n## A\n```\n# not a heading\n```\n## A\n")]).toEqual(["a", "a-1", "a-2"]);
  });

  for (const doc of DOCS) {
    it(`every relative link in ${doc} resolves, anchors included`, () => {
      const broken: string[] = [];
      for (const { target, n } of links(read(doc))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:: not this test's to check
        const [rawPath, rawAnchor] = target.split("#", 2) as [string, string | undefined];
        const path = decodeURIComponent(rawPath);
        const file =
          path === "" ? join(ROOT, doc) : path.startsWith("/") ? join(ROOT, path) : resolve(ROOT, dirname(doc), path);
        const where = `${doc}:${n}: ${target}`;
        if (!file.startsWith(ROOT + "/") && file !== ROOT) broken.push(`${where} (outside the repository)`);
        else if (!existsSync(file)) broken.push(`${where} (no file ${relative(ROOT, file)})`);
        else if (rawAnchor !== undefined) {
          if (!file.endsWith(".md")) broken.push(`${where} (an anchor into a file that is not markdown)`);
          else if (!anchors(readFileSync(file, "utf8")).has(decodeURIComponent(rawAnchor)))
            broken.push(`${where} (no heading #${rawAnchor} in ${relative(ROOT, file)})`);
        }
      }
      expect(broken).toEqual([]);
    });
  }
});

describe("docs/jobspec.md lists what src/core/spec/spec.ts defines", () => {
  const md = read("docs/jobspec.md");

  it("every transcript event type, each with exactly its fields", () => {
    const rows = tableRows(section(md, "Transcript events"));
    expect(sorted(rows.map((r) => names(r[0])[0]!))).toEqual(sorted(EVENT_TYPES));
    expect(rows.length).toBe(EVENT_TYPES.length); // none twice
    const base = new Set(["ts", "jobId", "attempt", "type"]);
    for (const row of rows) {
      const type = names(row[0])[0]!;
      const schema = TranscriptEvent.options.find((o) => o.shape.type.value === type)!;
      expect({ type, fields: sorted(names(row[1])) }).toEqual({
        type,
        fields: sorted(Object.keys(schema.shape).filter((k) => !base.has(k))),
      });
    }
  });

  it("every job status, with the exit code run, watch and batch wait give it", () => {
    const rows = tableRows(section(md, "Statuses"));
    expect(sorted(rows.map((r) => names(r[0])[0]!))).toEqual(sorted(JOB_STATUSES));
    expect(rows.length).toBe(JOB_STATUSES.length);
    for (const row of rows) {
      const status = names(row[0])[0]!;
      expect({ status, exit: Number(row[2]) }).toEqual({ status, exit: exitCodeFor(status) });
    }
  });

  it("every JobResult field", () => {
    const rows = tableRows(section(md, "JobResult"));
    expect(sorted(rows.map((r) => names(r[0])[0]!))).toEqual(sorted(Object.keys(JobResult.shape)));
  });

  it("every JobSpec field, limits, budget and network ones included", () => {
    const fields = tableRows(section(md, "Fields")).map((r) => names(r[0])[0]!);
    const under = (prefix: string) =>
      sorted(new Set(fields.filter((f) => f.startsWith(`${prefix}.`)).map((f) => f.split(".")[1]!)));
    expect(sorted(new Set(fields.map((f) => f.split(".")[0]!)))).toEqual(sorted(Object.keys(JobSpec.shape)));
    expect(under("limits")).toEqual(sorted(Object.keys(Limits.shape)));
    expect(under("budget")).toEqual(sorted(Object.keys(Budget.shape)));
    expect(under("network")).toEqual(sorted(Object.keys(Network.shape)));
    expect(new Set(fields).size).toBe(fields.length);
  });
});

describe("docs/operations.md lists the environment the code reads", () => {
  const md = read("docs/operations.md");
  const listed = tableRows(section(md, "Read by loadConfig")).map((r) => names(r[0])[0]!);
  const elsewhere = tableRows(section(md, "Read elsewhere")).flatMap((r) => names(r[0]));
  const env = envKeys();

  it("exactly the keys of src/core/config/config.ts's Env, each once", () => {
    expect(env.length).toBeGreaterThan(10); // the parse found the schema
    expect(sorted(listed)).toEqual(sorted(env));
    expect(new Set(listed).size).toBe(listed.length);
  });

  it("what is read elsewhere is not loadConfig's, and is read somewhere", () => {
    expect(elsewhere.filter((v) => env.includes(v))).toEqual([]); // moved into core/config/config.ts: move its row up
    const sources = [
      ...filesUnder("src", /\.ts$/),
      ...filesUnder("scripts", /\.(sh|ts|mjs)$|^[^.]+$/) /* scripts without an extension too (podman/patchbay-runc) */,
      join(ROOT, "docker-compose.yml"),
    ]
      .map((f) => readFileSync(f, "utf8"))
      .join("\n");
    expect(elsewhere.filter((v) => !new RegExp(`\\b${v}\\b`).test(sources))).toEqual([]);
  });

  it("every process.env.X in src/ is listed", () => {
    const read = new Set(
      filesUnder("src", /\.ts$/).flatMap((f) =>
        [...readFileSync(f, "utf8").matchAll(/process\.env\.([A-Z_][A-Z0-9_]*)/g)].map((m) => m[1]!),
      ),
    );
    expect(sorted(read).filter((v) => !listed.includes(v) && !elsewhere.includes(v))).toEqual([]);
  });
});

describe("README.md is a front door", () => {
  it("at most 200 lines", () => {
    expect(read("README.md").split("\n").length).toBeLessThanOrEqual(200);
  });
});

/** `const DIR_LAYER = { core: 0, … }` in test/unit/structure.test.ts, read from its syntax tree. */
function dirLayers(): Record<string, number> {
  const path = join(ROOT, "test/unit/structure.test.ts");
  const sf = ts.createSourceFile(path, readFileSync(path, "utf8"), ts.ScriptTarget.Latest, true);
  let found: Record<string, number> | undefined;
  const visit = (n: ts.Node): void => {
    if (
      ts.isVariableDeclaration(n) &&
      ts.isIdentifier(n.name) &&
      n.name.text === "DIR_LAYER" &&
      n.initializer &&
      ts.isObjectLiteralExpression(n.initializer)
    ) {
      found = Object.fromEntries(
        n.initializer.properties.map((p) => {
          if (!ts.isPropertyAssignment(p) || !ts.isNumericLiteral(p.initializer))
            throw new Error(`DIR_LAYER: ${p.getText()} is not \`folder: number\``);
          return [ts.isStringLiteral(p.name) ? p.name.text : p.name.getText(), Number(p.initializer.text)];
        }),
      );
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  if (!found)
    throw new Error(
      "test/unit/structure.test.ts has no `const DIR_LAYER = { … }`: say in this test where the layers went",
    );
  return found;
}

describe("docs/architecture.md maps src/", () => {
  const md = read("docs/architecture.md");
  const rows = tableRows(section(md, "The layers"));
  const folders = rows.filter((r) => /^\d+$/.test(r[0] ?? ""));

  it("its layer table lists every folder of src/, each once, with the layer DIR_LAYER gives it", () => {
    const listed = folders.map((r) => {
      const m = /^src\/([^/]+)\/$/.exec(names(r[1])[0] ?? "");
      if (!m) throw new Error(`a layer row's folder is not \`src/<name>/\`: ${r[1]}`);
      return [m[1]!, Number(r[0])] as const;
    });
    expect(listed.length).toBeGreaterThan(10); // the parse found the table
    expect(new Set(listed.map(([d]) => d)).size).toBe(listed.length);
    const dirs = readdirSync(join(ROOT, "src"), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
    expect(sorted(listed.map(([d]) => d))).toEqual(sorted(dirs));
    expect(Object.fromEntries(listed)).toEqual(dirLayers());
  });

  it("its entry row names exactly the files directly in src/", () => {
    const entry = rows.filter((r) => r[0] === "entry");
    expect(entry.length).toBe(1);
    const files = readdirSync(join(ROOT, "src"), { withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith(".ts"))
      .map((e) => `src/${e.name}`);
    expect(sorted(names(entry[0]![3]).filter((n) => n.startsWith("src/")))).toEqual(sorted(files));
  });

  it("its glossary defines each word once", () => {
    const terms = section(md, "Glossary").flatMap((l) =>
      [...l.matchAll(/\*\*([^*]+)\*\*/g)].map((m) => m[1]!.toLowerCase()),
    );
    expect(terms.length).toBeGreaterThan(30); // the parse found the glossary
    expect(terms.filter((t, i) => terms.indexOf(t) !== i)).toEqual([]);
  });
});
