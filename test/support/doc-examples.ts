// The code blocks of README.md and docs/*.md, as test/e2e/doc-examples.test.ts runs them: each
// fenced block with its file and line, what it is (a command, a file of some kind, shown output,
// a block another test runs, a command that cannot run here), and the commands inside a block.
// Pure: text in, text out; the runner does the I/O.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** One fenced code block of a markdown file. */
export interface DocBlock {
  /** The markdown file, relative to the repository's root. */
  file: string;
  /** The line of the opening fence (1-based). */
  line: number;
  /** The fence's info string's first word, lower case ("" when none). */
  lang: string;
  /** The block's text, without the fences and the fence's indentation, ending in a newline. */
  text: string;
  /** The `<!-- example: ... -->` comment on the line before the fence, its text after "example:". */
  annotation?: string;
}

/** What a block is, and so how the runner checks it. */
export type BlockKind =
  | { kind: "command" }
  | { kind: "not-run"; reason: string }
  | { kind: "output"; reason?: string }
  | { kind: "by-test"; test: string }
  | { kind: "file"; format: FileFormat }
  | { kind: "unknown"; why: string };

/** The files a block may be, each checked by its own parser. */
export type FileFormat =
  "campaign" | "jobspec" | "jobspec-fragment" | "jsonl" | "typescript" | "python" | "yaml" | "json" | "dockerfile";

const ANNOTATION = /^\s*<!--\s*example:\s*(.*?)\s*-->\s*$/;
const FENCE = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/;

/** Every fenced block of a markdown text, with the annotation on the line before it. */
export function extractBlocks(md: string, file: string): DocBlock[] {
  const lines = md.split("\n");
  const out: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, info] = open as unknown as [string, string, string, string];
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const close = FENCE.exec(lines[j]!);
      if (close && close[2]!.startsWith(fence) && close[3] === "") break;
      body.push(lines[j]!.startsWith(indent) ? lines[j]!.slice(indent.length) : lines[j]!.trimStart());
    }
    if (j === lines.length) throw new Error(`${file}:${i + 1}: a code block that is never closed`);
    const note = i > 0 ? ANNOTATION.exec(lines[i - 1]!) : null;
    out.push({
      file,
      line: i + 1,
      lang: info.toLowerCase(),
      text: body.join("\n") + "\n",
      ...(note ? { annotation: note[1]! } : {}),
    });
    i = j;
  }
  return out;
}

/** The markdown files whose blocks are examples: README.md and docs/*.md (not docs/history/, dated logs). */
export function docFiles(root: string): string[] {
  const docs = readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`);
  return ["README.md", ...docs];
}

/** Every block of every documented file. */
export function allBlocks(root: string): DocBlock[] {
  return docFiles(root).flatMap((f) => extractBlocks(readFileSync(join(root, f), "utf8"), f));
}

const SHELL_LANGS = new Set(["sh", "bash", "shell", "console", "shell-session"]);

/** What a block is: its annotation first, else its language and content. */
export function classify(b: DocBlock): BlockKind {
  if (b.annotation !== undefined) return fromAnnotation(b.annotation);
  if (SHELL_LANGS.has(b.lang) || promptLines(b.text).length > 0) return { kind: "command" };
  const format = fileFormat(b);
  if (format) return { kind: "file", format };
  return {
    kind: "unknown",
    why:
      `${b.file}:${b.line}: a code block that is neither a command nor a known file; ` +
      "mark it <!-- example: output --> (shown, not run), <!-- example: not-run: REASON --> or " +
      "<!-- example: test/e2e/FILE.test.ts --> (run by that test) on the line before it",
  };
}

function fromAnnotation(a: string): BlockKind {
  const m = /^([a-z-]+)(?::\s*(.*))?$/.exec(a);
  if (m?.[1] === "output") return { kind: "output", ...(m[2] ? { reason: m[2] } : {}) };
  if (m?.[1] === "not-run" && m[2]) return { kind: "not-run", reason: m[2] };
  if (/^test\/[\w/.-]+\.test\.ts$/.test(a)) return { kind: "by-test", test: a };
  return { kind: "unknown", why: `unknown example annotation "${a}"` };
}

function fileFormat(b: DocBlock): FileFormat | undefined {
  const t = b.text;
  switch (b.lang) {
    case "yaml":
    case "yml":
      return /^\s*repos(File)?:/m.test(t) && /^name:/m.test(t) ? "campaign" : "yaml";
    case "json":
      return /"task"\s*:/.test(t) ? "jobspec" : "json";
    case "jsonc":
      // A part of a JobSpec (keys without the braces), checked as the spec it would be part of.
      return /^\s*"/.test(t) ? "jobspec-fragment" : undefined;
    case "jsonl":
    case "ndjson":
      return "jsonl";
    case "ts":
    case "typescript":
      return "typescript";
    case "py":
    case "python":
      return "python";
    case "dockerfile":
      return "dockerfile";
    default:
      return undefined;
  }
}

/**
 * A `$ `-prompt block's commands (each with its continuation lines), the rest being their output;
 * an empty list when no line starts with a prompt.
 */
export function promptLines(text: string): string[] {
  const out: string[] = [];
  let cont = false;
  for (const line of text.split("\n")) {
    if (cont) out[out.length - 1] += "\n" + line;
    else if (line.startsWith("$ ")) out.push(line.slice(2));
    else continue;
    cont = line.endsWith("\\");
  }
  return out;
}

/** The shell script a command block runs: its prompt lines when it has any, else the whole block. */
export function scriptOf(b: DocBlock): string {
  const prompts = promptLines(b.text);
  return prompts.length ? prompts.join("\n") + "\n" : b.text;
}

/**
 * Every `patchbay ...` invocation of a script, as argument lists (after "patchbay"): the words up
 * to the end of its command (a newline, `;`, `&&`, `||`, `|`, `&`, a redirection), quotes removed,
 * environment assignments and `npx` before it skipped. Continuation lines are joined and comments
 * dropped first. For checking that each command and flag exists.
 */
export function patchbayCalls(script: string): string[][] {
  const joined = script.replace(/\\\n/g, " ").replace(/(^|\s)#.*$/gm, "$1");
  const out: string[][] = [];
  for (const line of joined.split("\n")) {
    let call: string[] | undefined;
    let start = true;
    for (const t of line.matchAll(/"([^"]*)"|'([^']*)'|(&&|\|\||[|;&]|\d?>>?)|([^\s|;&>"']+)/g)) {
      if (t[3] !== undefined) {
        call = undefined;
        start = !t[3].includes(">"); // after a redirection comes its file, not a command
        continue;
      }
      const word = t[1] ?? t[2] ?? t[4]!;
      if (call) call.push(word);
      else if (start && word === "patchbay") out.push((call = []));
      else if (!(start && (/^[A-Za-z_]\w*=/.test(word) || word === "npx"))) start = false;
    }
  }
  return out;
}
