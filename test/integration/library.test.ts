// The package entry, used the way an agent builder would: a sandbox and the tools with their own loop.
//
// Backend: Docker (images, compose, the package's default sandbox).
import { describe, expect, it } from "vitest";
import * as patchbay from "../../src/index.js";

describe("library entry", () => {
  it("exports the sandbox, the tools, the job, the queue and the contracts", () => {
    for (const name of [
      "Sandbox",
      "TextEditor",
      "BashTool",
      "runTool",
      "Toolbox",
      "runJob",
      "runAgentLoop",
      "AnthropicModel",
      "PatchbayClient",
      "enqueue",
      "enqueueBatch",
      "waitForResult",
      "cancel",
      "status",
      "result",
      "watch",
      "startWorker",
      "JobSpec",
      "parseJobSpec",
      "reap",
      "list",
      "closeDefaultClient",
      "JobNotFoundError",
      "JobConflictError",
      "WaitTimeoutError",
      "workerLogger",
    ]) {
      expect(patchbay, name).toHaveProperty(name);
    }
  });

  it("drives a sandbox with runTool from a hand-written loop", async () => {
    const sb = await patchbay.Sandbox.create({ labels: { "patchbay.test": "1" } });
    try {
      const calls = [
        {
          id: "t1",
          name: "str_replace_based_edit_tool",
          input: { command: "create", path: "/workspace/hello.py", file_text: "print('hi')\n" },
        },
        { id: "t2", name: "bash", input: { command: "python3 /workspace/hello.py" } },
      ];
      const out = [];
      for (const c of calls) out.push(await patchbay.runTool(sb, c));
      expect(out.map((o) => [o.content, o.isError])).toEqual([
        ["File created successfully at: /workspace/hello.py", false],
        ["hi", false],
      ]);
      expect(out.every((o) => o.durationMs >= 0)).toBe(true);
    } finally {
      await sb.destroy();
    }
  });
});
