// The contract's names and a spec's identity, each defined once and derived everywhere else: job
// statuses (the schema, exit codes, the batch CLI), editor tools (the schema, the --tools flag, the
// tools' defaults), a spec's hash (the queue's job-id check and batch hashes, checkpoints), and which
// tool calls can change files (the tools say; checkpoints ask).
import { describe, expect, it } from "vitest";
import { batchCommands } from "../../../src/cli/batch-command.js";
import { exitCodeFor, STATUS_EXIT, worstExitCode } from "../../../src/cli/exit.js";
import { SPEC_USAGE, specFrom } from "../../../src/cli/spec-flags.js";
import { mayChangeFiles, specHash as checkpointSpecHash } from "../../../src/job/checkpoint.js";
import { batchHash } from "../../../src/batch/batch-file.js";
import { EditorTool, JobSpec, JobStatus } from "../../../src/core/spec/spec.js";
import { canonicalJson, specHash } from "../../../src/core/spec/hash.js";
import { DEFAULT_EDITOR_TOOL, EDITOR_TOOLS, JOB_STATUSES } from "../../../src/core/spec/names.js";
import { EDITOR_TOOL_NAMES, readOnly } from "../../../src/tools/editor-text.js";
import { editorDefinition } from "../../../src/tools/editor-tool.js";
import { TextEditor } from "../../../src/tools/editor.js";
import { EditFileTool } from "../../../src/tools/edit-file.js";
import { MemFs } from "../../support/memfs.js";

describe("job statuses", () => {
  it("the schema, the exit codes and the batch CLI use the one list", () => {
    expect(JobStatus.options).toEqual([...JOB_STATUSES]);
    expect(Object.keys(STATUS_EXIT).sort()).toEqual([...JOB_STATUSES].sort());
    expect(JOB_STATUSES.map(exitCodeFor)).toEqual([0, 3, 1, 4, 4, 5, 4]);
    expect(batchCommands["batch retry"]!.usage).toContain(
      `--status STATUS        repeatable or comma-separated: ${JOB_STATUSES.join(", ")}`,
    );
  });

  it("a status that is no status is a failure, whatever its name (the table is not an object's prototype)", () => {
    for (const s of ["constructor", "toString", "__proto__", "hasOwnProperty", "running", ""])
      expect(exitCodeFor(s), s).toBe(1);
    expect(worstExitCode(["completed", "constructor"])).toBe(1);
  });

  it("many jobs' exit code is the worst job's", () => {
    expect(worstExitCode([])).toBe(0);
    expect(worstExitCode(["completed", "cancelled"])).toBe(5);
    expect(worstExitCode(["cancelled", "max_turns", "completed"])).toBe(4);
    expect(worstExitCode(["budget_exceeded", "verify_failed"])).toBe(3);
    expect(worstExitCode(["verify_failed", "failed", "completed"])).toBe(1);
  });
});

describe("editor tools", () => {
  it("the schema, --tools and the tools' default use the one list and the one default", () => {
    expect(EditorTool.options).toEqual([...EDITOR_TOOLS]);
    expect(SPEC_USAGE).toContain(`--tools ${EDITOR_TOOLS.join("|")}`);
    for (const t of EDITOR_TOOLS) expect(specFrom({ task: "t", repo: "/r", tools: t }).tools).toBe(t);
    expect(() => specFrom({ task: "t", repo: "/r", tools: "vim" })).toThrow(
      /--tools takes one of text_editor_20250728, text_editor_20250124, edit_file/,
    );
    expect(new TextEditor(new MemFs()).flavor).toBe(DEFAULT_EDITOR_TOOL);
    expect(editorDefinition(DEFAULT_EDITOR_TOOL, 9)).toEqual({
      type: DEFAULT_EDITOR_TOOL,
      name: "str_replace_based_edit_tool",
      max_characters: 9,
    });
    expect(editorDefinition("text_editor_20250124", 9)).toEqual({
      type: "text_editor_20250124",
      name: "str_replace_editor",
    });
  });

  it("only an editor's view is read-only; checkpoints ask the tools", () => {
    expect(EDITOR_TOOL_NAMES).toEqual(["str_replace_based_edit_tool", "str_replace_editor"]);
    const cases: [{ name: string; input?: unknown }, boolean][] = [
      [{ name: "str_replace_based_edit_tool", input: { command: "view", path: "/workspace" } }, true],
      [{ name: "str_replace_editor", input: { command: "view", path: "/workspace/a" } }, true],
      [{ name: "str_replace_based_edit_tool", input: { command: "str_replace", path: "/workspace/a" } }, false],
      [{ name: "str_replace_editor", input: { command: "undo_edit", path: "/workspace/a" } }, false],
      [{ name: "bash", input: { command: "view" } }, false],
      [{ name: "edit_file", input: { command: "view", path: "/workspace/a" } }, false],
      [{ name: "str_replace_based_edit_tool", input: null }, false],
      [{ name: "str_replace_based_edit_tool", input: "view" }, false],
      [{ name: "str_replace_based_edit_tool" }, false],
    ];
    for (const [block, ro] of cases) {
      expect(readOnly(block), JSON.stringify(block)).toBe(ro);
      expect(mayChangeFiles(block), JSON.stringify(block)).toBe(!ro);
    }
  });

  it("an edit_file call that says `command: view` still writes, and counts as a change", async () => {
    const fs = new MemFs();
    const input = { command: "view", path: "/workspace/new.txt", old_string: "", new_string: "written\n" };
    expect((await new EditFileTool(fs).run(input)).isError).toBe(false);
    expect(new TextDecoder().decode(await fs.read("/workspace/new.txt"))).toBe("written\n");
    expect(mayChangeFiles({ name: "edit_file", input })).toBe(true);
  });
});

describe("a spec's identity", () => {
  const a = {
    task: "t",
    repo: { git: "https://example.org/r.git", ref: "main" },
    limits: { memoryMb: 512, pids: 64 },
    setup: ["a", "b"],
  };
  const reordered = {
    setup: ["a", "b"],
    limits: { pids: 64, memoryMb: 512 },
    repo: { ref: "main", git: "https://example.org/r.git" },
    task: "t",
  };

  it("does not depend on the order of keys, at any depth", () => {
    expect(canonicalJson(reordered)).toBe(canonicalJson(a));
    expect(specHash(reordered)).toBe(specHash(a));
    expect(specHash(a)).toMatch(/^[0-9a-f]{32}$/);
  });

  it("does depend on every value, and on the order of arrays", () => {
    expect(specHash({ ...a, setup: ["b", "a"] })).not.toBe(specHash(a));
    expect(specHash({ ...a, limits: { memoryMb: 512, pids: 65 } })).not.toBe(specHash(a));
    expect(specHash({ ...a, repo: { git: "https://example.org/r.git" } })).not.toBe(specHash(a));
  });

  it("is the same for checkpoints as for the queue, however the spec's keys came", () => {
    const parsed = JobSpec.parse(a);
    expect(checkpointSpecHash(reordered as JobSpec)).toBe(checkpointSpecHash(parsed));
    expect(checkpointSpecHash(parsed)).toBe(specHash(parsed));
    expect(batchHash([{ line: 1, spec: reordered }])).toBe(batchHash([{ line: 1, spec: parsed }]));
  });
});
