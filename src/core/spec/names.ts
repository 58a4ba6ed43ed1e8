// The contract's closed sets of names (job statuses, editor tools) as plain data, with no zod: the
// CLI's --help loads them (src/core/spec/spec.ts re-exports them with their schemas). Pure.

/** A job's final status, in JobResult and job_finished. */
export const JOB_STATUSES = [
  "completed",
  "verify_failed",
  "failed",
  "timeout",
  "budget_exceeded",
  "cancelled",
  "max_turns",
] as const;
export type JobStatusName = (typeof JOB_STATUSES)[number];

/** `text_editor_20250124` adds `undo_edit`; `edit_file` is a plain JSON-schema tool for models without built-in tools. */
export const EDITOR_TOOLS = ["text_editor_20250728", "text_editor_20250124", "edit_file"] as const;
export type EditorToolName = (typeof EDITOR_TOOLS)[number];
/** Applied by the consumer, not by the schema: a parsed spec keeps only what the user wrote. */
export const DEFAULT_EDITOR_TOOL = "text_editor_20250728" satisfies EditorToolName;
