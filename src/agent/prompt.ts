// The system prompt and the first user message. Pure text.
import type { ToolSet } from "../tools/index.js";
import type { ContentBlock } from "./model.js";

/**
 * The system prompt: how to work, the tools, the verify command, and the operator's own
 * `instructions` (trusted, from the JobSpec), which come before the repository's.
 */
export function systemPrompt(opts: { tools: ToolSet; verify?: string; instructions?: string }): string {
  const editor =
    opts.tools === "edit_file"
      ? "the edit_file tool (old_string must match exactly once; read files with bash first)"
      : "the text editor tool (view files before editing; str_replace needs old_str to match exactly once)";
  return [
    "You are a careful software engineer working in a sandboxed Linux container.",
    "The repository is at /workspace, a git repository. You have a bash tool (a persistent shell, no network access) and " +
      editor +
      ".",
    "Work like this: look around the repository, reproduce the problem (run the tests), make the smallest change that does the task, " +
      "then run the tests again to confirm. Do not reformat or refactor code the task does not need changed. Do not commit; your changes are collected as a patch.",
    opts.verify ? `When you are done, this command must pass: ${opts.verify}` : "",
    "When the task is done, stop and reply with a short summary of what you changed. Do not ask questions: nobody will answer.",
    opts.instructions
      ? `The operator who started this job gives you these instructions:\n<operator-instructions>\n${opts.instructions}\n</operator-instructions>`
      : "",
  ]
    .filter(Boolean)
    .join("\n\n");
}

/** The task as the first user message says it. */
export function taskMessage(task: string): string {
  return `<task>\n${task}\n</task>`;
}

/**
 * The first user message: the repository's instructions block (repo-instructions.ts), if any, as a
 * block of its own before the task, so that it stays in the cached prefix (turn-messages.ts).
 */
export function firstMessage(task: string, repoInstructions?: string): string | ContentBlock[] {
  if (!repoInstructions) return taskMessage(task);
  return [
    { type: "text", text: repoInstructions },
    { type: "text", text: taskMessage(task) },
  ];
}
