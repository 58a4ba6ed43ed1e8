// The scripted model's file (docs/operations.md#trying-patchbay-without-a-key), parsed and checked:
// pure text in, a Script out, or a ScriptFileError naming each bad field with its line. Two forms:
// a YAML or JSON script of turns with per-task matching, or a job's recorded transcript.jsonl whose
// model answers are replayed in order. The model that plays a Script is src/agent/scripted.ts.
import { runInNewContext } from "node:vm";
import { count } from "../core/count.js";
import { isMap, LineCounter, parseDocument, type Document } from "yaml";
import { z } from "zod";
import { kinded } from "../core/errors.js";
import { suggest } from "../core/suggest.js";

/** The most bytes a script or transcript file may have. */
export const MAX_SCRIPT_BYTES = 1024 * 1024;
/** The most scripts in a file, turns in a script and tool calls in a turn. */
export const SCRIPT_LIMITS = { scripts: 100, turns: 200, calls: 20, textChars: 100_000 } as const;

/** One tool call of a scripted turn: the tool's name and its input, as the model would send them. */
export interface ScriptedCall {
  /** The tool's name (bash, str_replace_based_edit_tool, edit_file, a custom or MCP tool). */
  tool: string;
  /** The tool's input object. */
  input: Record<string, unknown>;
}

/** One answer of the scripted model: its text and its tool calls (none: the model ends its turn). */
export interface ScriptedTurn {
  /** The answer's text, if any. */
  text?: string;
  /** The tool calls, in order. */
  calls: ScriptedCall[];
}

/** One script: the tasks it answers and its turns. */
export interface ScriptEntry {
  /** Its name in errors and logs (`name:`, else `scripts[i]`). */
  name: string;
  /** A task matches when it contains this text (case-insensitive), or this regex matches; absent: every task. */
  match?: { text: string } | { regex: RegExp };
  /** The answers, one per model request. */
  turns: ScriptedTurn[];
}

/** A parsed script file: its scripts, first match wins. */
export interface Script {
  /** "script" for a file of turns, "transcript" for a replayed transcript.jsonl. */
  kind: "script" | "transcript";
  /** The scripts, in the file's order. */
  scripts: ScriptEntry[];
}

/** A script file that cannot be used: one line per problem, each naming the file, the line and the field. */
export class ScriptFileError extends kinded("config") {
  constructor(readonly problems: string[]) {
    super(problems.join("\n"));
  }
}

const text = z.string().max(SCRIPT_LIMITS.textChars);
const Call = z
  .object({ tool: z.string().min(1).max(200), input: z.record(z.string(), z.unknown()).default({}) })
  .strict();
const Turn = z
  .object({ text: text.optional(), calls: z.array(Call).max(SCRIPT_LIMITS.calls).default([]) })
  .strict()
  .refine((t) => t.text !== undefined || t.calls.length > 0, { error: "a turn needs text:, calls:, or both" });
const Entry = z
  .object({
    name: z.string().min(1).max(100).optional(),
    match: z.string().min(1).max(1000).optional(),
    turns: z.array(Turn).min(1).max(SCRIPT_LIMITS.turns),
  })
  .strict()
  .superRefine((s, ctx) => {
    if (s.turns.at(-1)!.calls.length)
      ctx.addIssue({
        code: "custom",
        path: ["turns", s.turns.length - 1],
        message: "the last turn must have no calls: it is the model's final answer (text: what it did)",
      });
  });
const File = z.object({ scripts: z.array(Entry).min(1).max(SCRIPT_LIMITS.scripts) }).strict();

/** A `match:` value: `/regex/flags` is a regular expression, anything else a case-insensitive substring. */
export function matcherOf(match: string | undefined): ScriptEntry["match"] {
  if (match === undefined) return undefined;
  const re = /^\/(.+)\/([a-z]*)$/s.exec(match);
  if (!re) return { text: match.toLowerCase() };
  // g and y would make test() remember where it stopped, so one task's match would change the next's.
  if (/[^imsu]/.test(re[2]!)) throw new Error(`a regex's flags are i, m, s, u (got "${re[2]}")`);
  return { regex: new RegExp(re[1]!, re[2]) };
}

/** Parses a script file's text; a name ending in .jsonl is a recorded transcript. */
export function parseScriptFile(textIn: string, file: string): Script {
  if (Buffer.byteLength(textIn) > MAX_SCRIPT_BYTES)
    throw new ScriptFileError([`${file}: over ${count(MAX_SCRIPT_BYTES, "byte")} (the limit of a script file)`]);
  return file.endsWith(".jsonl") ? parseTranscript(textIn, file) : parseScript(textIn, file);
}

/** The line of the node at `path`, or of the nearest node above it that exists. */
function lineOf(doc: Document, lc: LineCounter, path: (string | number)[]): number {
  for (let p = path; ; p = p.slice(0, -1)) {
    const node = (p.length ? doc.getIn(p, true) : doc.contents) as { range?: [number, number, number] } | null;
    if (node?.range) return lc.linePos(node.range[0]).line;
    if (!p.length) return 1;
  }
}

const pathText = (path: readonly PropertyKey[]) =>
  path.reduce<string>((s, k) => (typeof k === "number" ? `${s}[${k}]` : s ? `${s}.${String(k)}` : String(k)), "");

/** The keys each level of a script file has, for a did-you-mean. */
const KEYS = {
  file: ["scripts"],
  script: ["name", "match", "turns"],
  turn: ["text", "calls"],
  call: ["tool", "input"],
};

/** An issue in words; an unknown key with the known key it is likely a typo of. */
function issueText(i: z.core.$ZodIssue, path: (string | number)[]): string {
  if (i.code !== "unrecognized_keys") return i.message;
  const level = path.length === 0 ? "file" : path.length === 2 ? "script" : path.length === 4 ? "turn" : "call";
  const known = KEYS[level];
  return i.keys
    .map((k) => {
      const like = suggest(k, known);
      return `unknown key "${k}"${like ? ` (did you mean ${like}?)` : ""}; the keys here are ${known.join(", ")}`;
    })
    .join("; ");
}

function parseScript(source: string, file: string): Script {
  const lc = new LineCounter();
  const doc = parseDocument(source, { lineCounter: lc, uniqueKeys: true, prettyErrors: false });
  if (doc.errors.length)
    throw new ScriptFileError(
      doc.errors.slice(0, 20).map((e) => `${file}:${lc.linePos(e.pos[0]).line}: ${e.message.split("\n")[0]}`),
    );
  if (!isMap(doc.contents))
    throw new ScriptFileError([`${file}:1: a script file is a mapping: scripts: [{ match?, turns: [...] }, ...]`]);
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    throw new ScriptFileError([`${file}: ${(err as Error).message}`]);
  }
  const parsed = File.safeParse(raw);
  if (!parsed.success)
    throw new ScriptFileError(
      parsed.error.issues.slice(0, 50).map((i) => {
        const path = i.path as (string | number)[];
        return `${file}:${lineOf(doc, lc, path)}: ${pathText(path) || "(top)"}: ${issueText(i, path)}`;
      }),
    );
  const problems: string[] = [];
  const scripts = parsed.data.scripts.map((s, i): ScriptEntry => {
    let match: ScriptEntry["match"];
    try {
      match = matcherOf(s.match);
    } catch (err) {
      problems.push(
        `${file}:${lineOf(doc, lc, ["scripts", i, "match"])}: scripts[${i}].match: ${(err as Error).message}`,
      );
    }
    return { name: s.name ?? `scripts[${i}]`, ...(match ? { match } : {}), turns: s.turns };
  });
  if (problems.length) throw new ScriptFileError(problems);
  return { kind: "script", scripts };
}

/** A transcript's model answers (its last attempt's), each turn's text and tool calls, as one script for every task. */
function parseTranscript(source: string, file: string): Script {
  const byAttempt = new Map<number, ScriptedTurn[]>();
  const lines = source.split("\n");
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n]!.trim();
    if (!line) continue;
    let e: { type?: unknown; attempt?: unknown; content?: unknown };
    try {
      e = JSON.parse(line) as typeof e;
    } catch (err) {
      throw new ScriptFileError([`${file}:${n + 1}: not JSON (${(err as Error).message})`]);
    }
    if (e?.type !== "model_response") continue;
    if (!Array.isArray(e.content))
      throw new ScriptFileError([`${file}:${n + 1}: content: a model_response's content is a list of blocks`]);
    const attempt = typeof e.attempt === "number" ? e.attempt : 1;
    const turns = byAttempt.get(attempt) ?? [];
    byAttempt.set(attempt, turns);
    if (turns.length >= SCRIPT_LIMITS.turns)
      throw new ScriptFileError([`${file}:${n + 1}: more than ${SCRIPT_LIMITS.turns} model answers in one attempt`]);
    turns.push(turnOf(e.content as unknown[]));
  }
  const last = [...byAttempt.keys()].sort((a, b) => b - a)[0];
  if (last === undefined)
    throw new ScriptFileError([`${file}: no model_response event: a transcript.jsonl of a job that ran its model`]);
  return { kind: "transcript", scripts: [{ name: `${file} (attempt ${last})`, turns: byAttempt.get(last)! }] };
}

function turnOf(content: unknown[]): ScriptedTurn {
  const blocks = content.filter((b): b is Record<string, unknown> => typeof b === "object" && b !== null);
  const texts = blocks.filter((b) => b.type === "text" && typeof b.text === "string").map((b) => b.text as string);
  const calls = blocks
    .filter((b) => b.type === "tool_use" && typeof b.name === "string")
    .slice(0, SCRIPT_LIMITS.calls)
    .map((b) => ({
      tool: b.name as string,
      input: typeof b.input === "object" && b.input !== null ? (b.input as Record<string, unknown>) : {},
    }));
  return { ...(texts.length ? { text: texts.join("\n").slice(0, SCRIPT_LIMITS.textChars) } : {}), calls };
}

/** The script that answers a task: the first whose `match` fits (one with none fits every task), or undefined. */
export function scriptFor(script: Script, task: string): ScriptEntry | undefined {
  const text = task.slice(0, MATCH_CHARS);
  const lower = text.toLowerCase();
  return script.scripts.find(
    (s) => !s.match || ("text" in s.match ? lower.includes(s.match.text) : regexMatches(s.match.regex, text)),
  );
}

/**
 * How much of a task a `match:` reads, and how long a regex may take on it. The time is the wall
 * clock's: 100 ms once failed a plain /clamp|unittest/i on a loaded CI host (a new context and a
 * descheduled process), so the bound is what a backtracking regex would exceed, not what a sound one takes.
 */
const MATCH_CHARS = 4000;
const MATCH_MS = 1000;

/**
 * Whether `re` matches `text`, within MATCH_MS: the regex is the operator's, the task is whoever
 * enqueued the job, and a regex that backtracks without end on a task must not stall the worker's
 * event loop (and so its heartbeat). Throws an Error naming the regex when it runs out of time.
 */
function regexMatches(re: RegExp, text: string): boolean {
  try {
    return runInNewContext("re.test(text)", { re, text }, { timeout: MATCH_MS }) === true;
  } catch (err) {
    if ((err as { code?: unknown }).code !== "ERR_SCRIPT_EXECUTION_TIMEOUT") throw err;
    throw new Error(
      `the match ${String(re)} took over ${MATCH_MS} ms on this task: write a match that cannot backtrack`,
      { cause: err },
    );
  }
}
