// The scripted model: a Model that answers from a script file (src/agent/script-file.ts) instead of
// an API, so a worker runs jobs with no key and at no cost (`patchbay worker --scripted FILE`,
// PATCHBAY_MODEL=scripted:FILE). It keeps no state between requests: the task picks the script
// (first match wins) and the number of answers already in the conversation picks the turn, so one
// model serves any number of jobs at once. Its usage is estimated from the request's size and its
// name is `scripted:<file's basename>`, which no price matches: nothing is ever priced.
import { readFileSync, statSync } from "node:fs";
import { basename } from "node:path";
import { count } from "../core/count.js";
import { SUMMARY_SYSTEM } from "./compact.js";
import type { ScriptedModelConfig } from "../core/config/scripted.js";
import { ModelError, type ContentBlock, type Model, type ModelRequest, type ModelResponse } from "./model.js";
import { MAX_SCRIPT_BYTES, parseScriptFile, ScriptFileError, scriptFor, type Script } from "./script-file.js";
import { REPO_INSTRUCTIONS_TAG } from "./repo-instructions.js";
import { estimateTokens } from "./window.js";

/** Reads and checks a script file (bounded: a bigger file is refused before it is read). */
export function loadScript(file: string): Script {
  let size: number;
  try {
    size = statSync(file).size;
  } catch (err) {
    throw new ScriptFileError([
      `${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    ]);
  }
  if (size > MAX_SCRIPT_BYTES)
    throw new ScriptFileError([
      `${file}: ${count(size, "byte")}, over ${MAX_SCRIPT_BYTES} (the limit of a script file)`,
    ]);
  return parseScriptFile(readFileSync(file, "utf8"), basename(file));
}

/** The task a request's conversation carries: its first user message, without the <task> wrapper. */
export function taskOfRequest(req: Pick<ModelRequest, "messages">): string {
  const first = req.messages[0]?.content;
  // The first text block only: after a compaction the first message also carries the summary,
  // which holds tool output (a repo's words), and must not choose the script. The repository's
  // instructions block, before the task, is the repo's words too: passed over.
  const block =
    typeof first === "string"
      ? first
      : first?.find(
          (b) => b.type === "text" && typeof b.text === "string" && !b.text.startsWith(REPO_INSTRUCTIONS_TAG),
        );
  const raw = typeof block === "string" ? block : typeof block?.text === "string" ? block.text : "";
  return /^<task>\n([\s\S]*)\n<\/task>$/.exec(raw)?.[1] ?? raw;
}

/**
 * How many of the script's turns the conversation has played: the highest turn number in the
 * scripted tool-use ids of its assistant messages (this model's own words, which no tool output can
 * forge), else the count of its assistant messages. A compaction drops old turns, so a count alone
 * would go back and replay them.
 */
export function turnsPlayed(req: Pick<ModelRequest, "messages">): number {
  let played = 0;
  for (const m of req.messages) {
    if (m.role !== "assistant" || typeof m.content === "string") continue;
    for (const b of m.content) {
      const n =
        b.type === "tool_use" && typeof b.id === "string" ? /^toolu_scripted_(\d+)_/.exec(b.id)?.[1] : undefined;
      if (n !== undefined) played = Math.max(played, Number(n));
    }
  }
  return played || req.messages.filter((m) => m.role === "assistant").length;
}

/** A Model that plays a script: the same answers for the same task, no API, no key, no cost. */
export class ScriptedModel implements Model {
  /** The model's name in every event and result: `scripted:<file's basename>`. */
  readonly name: string;
  private readonly script: Script;

  /** Reads the file now: a bad one throws a ScriptFileError naming each problem. */
  constructor(readonly config: ScriptedModelConfig) {
    this.name = config.name;
    this.script = loadScript(config.file);
  }

  /** Answers one request with its script's next turn; a task no script matches, or a turn past the script's end, is a ModelError. */
  async complete(req: ModelRequest): Promise<ModelResponse> {
    if (req.signal?.aborted) throw Object.assign(new Error("the request was aborted"), { name: "AbortError" });
    // The loop's compaction asking for a summary gets a fixed one, never a script's turn: its prompt
    // holds tool output (a repo's words), and it is no turn of the job.
    if (req.system.some((b) => b.type === "text" && b.text === SUMMARY_SYSTEM))
      return {
        content: [{ type: "text", text: "(a scripted model writes no summary)" }],
        stopReason: "end_turn",
        model: this.name,
        usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
      };
    const task = taskOfRequest(req);
    let entry: ReturnType<typeof scriptFor>;
    try {
      entry = scriptFor(this.script, task);
    } catch (err) {
      throw new ModelError(`scripted model ${this.name}: ${(err as Error).message}`);
    }
    if (!entry)
      throw new ModelError(
        `scripted model ${this.name}: no script matches the task ${JSON.stringify(task.slice(0, 120))} (its scripts match: ${this.script.scripts.map((s) => (s.match ? ("text" in s.match ? JSON.stringify(s.match.text) : String(s.match.regex)) : "any task")).join(", ")}); add a script whose match: fits, or one with no match: for every task`,
      );
    const turn = turnsPlayed(req);
    const t = entry.turns[turn];
    if (!t)
      throw new ModelError(
        `scripted model ${this.name}: script ${entry.name} has ${count(entry.turns.length, "turn")} and was asked for turn ${turn + 1} (the job went on past its final answer, e.g. a failed verify fed back)`,
      );
    const content: ContentBlock[] = [
      ...(t.text !== undefined ? [{ type: "text", text: t.text }] : []),
      ...t.calls.map((c, i) => ({
        type: "tool_use",
        id: `toolu_scripted_${turn + 1}_${i + 1}`,
        name: c.tool,
        input: c.input,
      })),
    ];
    return {
      content,
      stopReason: t.calls.length ? "tool_use" : "end_turn",
      model: this.name,
      usage: {
        inputTokens: estimateTokens({ system: req.system, tools: req.tools, messages: req.messages }),
        outputTokens: estimateTokens(content),
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
      },
    };
  }
}

/**
 * A job's scripted model. The worker checked the file at its start; a file edited since into one
 * that cannot be used fails each job with the file's problems (a ModelError the queue does not retry).
 */
export function scriptedModelFor(config: ScriptedModelConfig): Model {
  try {
    return new ScriptedModel(config);
  } catch (err) {
    if (!(err instanceof ScriptFileError)) throw err;
    return {
      complete: () => Promise.reject(new ModelError(`scripted model ${config.name}: ${err.message}`)),
    };
  }
}
