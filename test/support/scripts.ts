// Scripted conversations for the fake Anthropic server: the Clamp fix (tests, demo) and a
// ten-tool-call job (bench, throughput tests).
import { reply, text, toolUse, type Reply } from "./fake-anthropic.js";

export const CLAMP_AMBIGUOUS = {
  command: "str_replace",
  path: "/workspace/clamp.py",
  old_str: "return lo",
  new_str: "return hi",
};
export const CLAMP_FIX = {
  command: "str_replace",
  path: "/workspace/clamp.py",
  old_str: "    if v > hi:\n        return lo",
  new_str: "    if v > hi:\n        return hi",
};

/** The Clamp fix as Claude would do it: run the tests, look, a refused edit, a unique edit, tests pass. */
export function clampScript(editor = "str_replace_based_edit_tool"): Reply[] {
  return [
    reply(text("Let me run the tests first."), toolUse("bash", { command: "cd /workspace && python3 -m unittest -q" })),
    reply(toolUse(editor, { command: "view", path: "/workspace/clamp.py" })),
    reply(text("The upper bound returns lo; it should return hi."), toolUse(editor, CLAMP_AMBIGUOUS)),
    reply(text("`return lo` occurs twice; I'll include the condition."), toolUse(editor, CLAMP_FIX)),
    reply(toolUse("bash", { command: "python3 -m unittest -q 2>&1 | tail -3" })),
    reply(text("Fixed clamp(): values above hi now return hi instead of lo. All 3 tests pass.")),
  ];
}

/** A job of `n` cheap tool calls (one per turn) and a final answer. */
export function tenToolScript(n = 10): Reply[] {
  const calls = Array.from({ length: n }, (_, i) =>
    i === n - 1
      ? reply(
          toolUse("str_replace_based_edit_tool", {
            command: "create",
            path: `/workspace/notes-${i}.txt`,
            file_text: `note ${i}\n`,
          }),
        )
      : reply(toolUse("bash", { command: `echo step ${i} && ls /workspace | head -3` })),
  );
  return [...calls, reply(text("Done."))];
}

/**
 * A policy that answers every conversation from the same script by its turn (the number of
 * assistant messages so far), so many jobs can share one fake server in any interleaving.
 */
export function byTurn(script: Reply[] | ((body: any) => Reply[])) {
  return ({ body }: { body: any }): Reply => {
    const s = typeof script === "function" ? script(body) : script;
    const turn = (body.messages as { role: string }[]).filter((m) => m.role === "assistant").length;
    return s[turn] ?? { kind: "error", status: 400, message: `script has no turn ${turn}` };
  };
}

/** The task text of a request's conversation (the first user message). */
export function taskOf(body: any): string {
  const first = body.messages?.[0]?.content;
  return typeof first === "string" ? first : (first ?? []).map((b: any) => b.text ?? "").join("");
}
