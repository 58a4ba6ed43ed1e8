// The scripted model's file (src/agent/script-file.ts), pure: a script of turns parsed into what
// the model plays, every bad file refused with each problem named by its line and field, a
// recorded transcript.jsonl read as one script for every task, and the first matching script
// chosen for a task.
import { describe, expect, it } from "vitest";
import {
  MAX_SCRIPT_BYTES,
  matcherOf,
  parseScriptFile,
  ScriptFileError,
  scriptFor,
} from "../../../src/agent/script-file.js";

const GOOD = `scripts:
  - name: fix
    match: "/clamp|unittest/i"
    turns:
      - text: Let me look.
        calls:
          - tool: bash
            input: { command: ls }
      - text: Done.
  - turns:
      - text: Nothing to do.
`;

/** The problems a bad file is refused with. */
function problems(text: string, file = "s.yaml"): string[] {
  try {
    parseScriptFile(text, file);
  } catch (err) {
    expect(err).toBeInstanceOf(ScriptFileError);
    return (err as ScriptFileError).problems;
  }
  throw new Error("the file was accepted");
}

describe("a script of turns", () => {
  it("parses into scripts, turns and tool calls", () => {
    const s = parseScriptFile(GOOD, "s.yaml");
    expect(s.kind).toBe("script");
    expect(s.scripts.map((x) => x.name)).toEqual(["fix", "scripts[1]"]);
    expect(s.scripts[0]!.turns).toEqual([
      { text: "Let me look.", calls: [{ tool: "bash", input: { command: "ls" } }] },
      { text: "Done.", calls: [] },
    ]);
    expect(s.scripts[1]!.match).toBeUndefined();
  });

  it("is read as JSON too", () => {
    const json = JSON.stringify({ scripts: [{ turns: [{ calls: [{ tool: "bash" }] }, { text: "ok" }] }] });
    expect(parseScriptFile(json, "s.json").scripts[0]!.turns[0]!.calls).toEqual([{ tool: "bash", input: {} }]);
  });

  it("names the line and the field of an unknown key, and the key it is likely a typo of", () => {
    expect(problems(GOOD.replace("      - text: Done.", "      - txt: Done."))).toEqual([
      's.yaml:9: scripts[0].turns[1]: unknown key "txt" (did you mean text?); the keys here are text, calls',
      "s.yaml:9: scripts[0].turns[1]: a turn needs text:, calls:, or both",
    ]);
    expect(problems(GOOD.replace("    match:", "    matches:"))).toEqual([
      's.yaml:2: scripts[0]: unknown key "matches" (did you mean match?); the keys here are name, match, turns',
    ]);
  });

  it("refuses a last turn with calls: a script must end with the model's final answer", () => {
    const p = problems("scripts:\n  - turns:\n      - calls: [{ tool: bash, input: { command: ls } }]\n");
    expect(p).toEqual([
      expect.stringMatching(/^s\.yaml:3: scripts\[0\]\.turns\[0\]: the last turn must have no calls/),
    ]);
  });

  it("refuses a turn with neither text nor calls, and a call with no tool", () => {
    const p = problems("scripts:\n  - turns:\n      - {}\n      - calls: [{ input: {} }]\n      - text: ok\n");
    expect(p).toEqual([
      expect.stringMatching(/^s\.yaml:3: scripts\[0\]\.turns\[0\]: a turn needs text:, calls:, or both/),
      expect.stringMatching(/^s\.yaml:4: scripts\[0\]\.turns\[1\]\.calls\[0\]\.tool: /),
    ]);
  });

  it("refuses a regex with a flag that keeps state, or one that does not compile, naming match:", () => {
    expect(problems("scripts:\n  - match: /a/g\n    turns: [{ text: ok }]\n")).toEqual([
      's.yaml:2: scripts[0].match: a regex\'s flags are i, m, s, u (got "g")',
    ]);
    expect(problems("scripts:\n  - match: /(/\n    turns: [{ text: ok }]\n")).toEqual([
      expect.stringMatching(/^s\.yaml:2: scripts\[0\]\.match: Invalid regular expression/),
    ]);
  });

  it("bounds the file: its size, the scripts, the turns, the calls", () => {
    expect(problems("#".repeat(MAX_SCRIPT_BYTES + 1))).toEqual([expect.stringContaining("over 1048576 bytes")]);
    const turns = Array.from({ length: 201 }, () => ({ text: "x" }));
    expect(problems(JSON.stringify({ scripts: [{ turns }] }))).toEqual([
      expect.stringMatching(/scripts\[0\]\.turns: .*200/),
    ]);
    const calls = Array.from({ length: 21 }, () => ({ tool: "bash" }));
    expect(problems(JSON.stringify({ scripts: [{ turns: [{ calls }, { text: "x" }] }] }))).toEqual([
      expect.stringMatching(/scripts\[0\]\.turns\[0\]\.calls: .*20/),
    ]);
    const scripts = Array.from({ length: 101 }, () => ({ turns: [{ text: "x" }] }));
    expect(problems(JSON.stringify({ scripts }))).toEqual([expect.stringMatching(/^s\.yaml:1: scripts: .*100/)]);
  });

  it("says what a file that is not a script is", () => {
    expect(problems("- a\n- b\n")).toEqual([expect.stringContaining("s.yaml:1: a script file is a mapping")]);
    expect(problems("scripts: [\n")).toEqual([expect.stringMatching(/^s\.yaml:\d+: /)]);
    expect(problems("scripts: []\n")).toEqual([expect.stringMatching(/^s\.yaml:1: scripts: /)]);
  });
});

describe("a recorded transcript.jsonl", () => {
  const response = (attempt: number, content: unknown[]) =>
    JSON.stringify({ type: "model_response", attempt, turn: 1, content, stopReason: "end_turn" });

  it("replays its last attempt's answers, their text and tool calls in order, for every task", () => {
    const lines = [
      JSON.stringify({ type: "job_started", attempt: 1, spec: { task: "t" } }),
      response(1, [{ type: "text", text: "old" }]),
      response(2, [
        { type: "text", text: "Looking." },
        { type: "tool_use", id: "toolu_1", name: "bash", input: { command: "ls" } },
      ]),
      JSON.stringify({ type: "tool_result", attempt: 2, output: "a" }),
      response(2, [{ type: "text", text: "Done." }]),
    ];
    const s = parseScriptFile(lines.join("\n") + "\n", "transcript.jsonl");
    expect(s.kind).toBe("transcript");
    expect(s.scripts).toHaveLength(1);
    expect(s.scripts[0]!.turns).toEqual([
      { text: "Looking.", calls: [{ tool: "bash", input: { command: "ls" } }] },
      { text: "Done.", calls: [] },
    ]);
    expect(scriptFor(s, "any task at all")).toBe(s.scripts[0]);
  });

  it("names the line that is not JSON, and a transcript with no model answer", () => {
    expect(problems(`${response(1, [])}\n{oops\n`, "transcript.jsonl")).toEqual([
      expect.stringMatching(/^transcript\.jsonl:2: not JSON/),
    ]);
    expect(problems(`{"type":"job_started"}\n`, "transcript.jsonl")).toEqual([
      expect.stringContaining("no model_response event"),
    ]);
  });
});

describe("which script answers a task", () => {
  const s = parseScriptFile(GOOD, "s.yaml");

  it("the first whose match fits; a script with no match fits every task", () => {
    expect(scriptFor(s, "Fix CLAMP")?.name).toBe("fix");
    expect(scriptFor(s, "run python3 -m unittest")?.name).toBe("fix");
    expect(scriptFor(s, "something else")?.name).toBe("scripts[1]");
  });

  it("none when nothing fits", () => {
    const only = parseScriptFile("scripts:\n  - match: Clamp\n    turns: [{ text: ok }]\n", "s.yaml");
    expect(scriptFor(only, "fix the CLAMP bug")?.name).toBe("scripts[0]"); // a substring, case-insensitive
    expect(scriptFor(only, "something else")).toBeUndefined();
  });

  it("a match is a substring unless written /regex/flags", () => {
    expect(matcherOf("a.b")).toEqual({ text: "a.b" });
    expect(matcherOf("/a.b/i")).toEqual({ regex: /a.b/i });
    expect(matcherOf(undefined)).toBeUndefined();
  });
});
