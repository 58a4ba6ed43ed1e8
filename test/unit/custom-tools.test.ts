// A JobSpec's own tools (tools.custom): offered to the model with their schemas, a call checked
// against its schema before it runs, then its command in the sandbox with the input as JSON on
// stdin. Through runJob on the local backend (runJob's logic) with the scripted model.
//
// Backend: local (runJob's logic: a spec's own tools run through the sandbox's exec).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { runJob } from "../../src/job/run.js";
import { parseJobSpec } from "../../src/core/spec/spec.js";
import { localBackend, localWorkerConfig } from "../support/backend.js";
import { reply, startFakeAnthropic, text, toolResults, toolResultText, toolUse } from "../support/fake-anthropic.js";
import { closeScripted, runScripted } from "../support/scripted-job.js";
import { toolRuleProblems } from "../support/tool-rules.js";

const repo = mkdtempSync(join(tmpdir(), "pb-custom-tools-"));
writeFileSync(join(repo, "a.txt"), "a\n");
afterAll(() => rmSync(repo, { recursive: true, force: true }));
afterEach(closeScripted);

const schema = {
  type: "object",
  properties: { path: { type: "string" } },
  required: ["path"],
  additionalProperties: false,
};
const tool = (name: string, command: string, extra: Record<string, unknown> = {}) => ({
  name,
  description: `the ${name} tool`,
  input_schema: schema,
  command,
  ...extra,
});

describe("custom tools in a job (local backend)", () => {
  it("offers them with their schemas, runs a valid call with its input on stdin, refuses an invalid one without running it", async () => {
    const tools = {
      custom: [
        tool("show_input", 'read -r line; echo "uid=$(id -u) cwd=$PWD stdin=$line"'),
        tool("touch_it", "touch ran.txt; echo touched"),
      ],
    };
    const { result, events, fake } = await runScripted(
      [
        reply(toolUse("show_input", { path: "a.txt" })),
        reply(toolUse("touch_it", { path: 5 }), toolUse("touch_it", { file: "x" })),
        reply(text("done")),
      ],
      { repo: { path: repo }, tools },
      "custom-tools",
      localBackend(),
    );
    expect(result.status).toBe("completed");
    const offered = fake.requests[0]!.body.tools;
    expect(offered.map((t: any) => t.name)).toEqual(["bash", "str_replace_based_edit_tool", "show_input", "touch_it"]);
    expect(offered[2]).toEqual({ name: "show_input", description: "the show_input tool", input_schema: schema });
    expect(toolRuleProblems(offered)).toEqual([]);
    const [ok] = toolResults(fake.requests[1]);
    expect(ok.is_error).toBeUndefined();
    expect(toolResultText(ok)).toBe('uid=1000 cwd=/workspace stdin={"path":"a.txt"}');
    const bad = toolResults(fake.requests[2]);
    expect(bad.map((b) => b.is_error)).toEqual([true, true]);
    expect(toolResultText(bad[0])).toMatch(
      /^Invalid input for touch_it: input\/path must be string\. Nothing was run\.$/,
    );
    expect(toolResultText(bad[1])).toMatch(/must have required property 'path'.*must NOT have additional properties/);
    // Nothing ran: the workspace is unchanged.
    expect(result.filesChanged).toEqual([]);
    expect(events.filter((e) => e.type === "tool_call").map((e) => (e as { name: string }).name)).toEqual([
      "show_input",
      "touch_it",
      "touch_it",
    ]);
  });

  it("a failing command is an error with its stderr and exit code; a hanging one is killed at the command timeout", async () => {
    const tools = {
      editor: "edit_file",
      custom: [tool("fails", "echo partial; echo broken >&2; exit 3"), tool("hangs", "sleep 1000 & sleep 1000")],
    };
    const { result, fake } = await runScripted(
      [reply(toolUse("fails", { path: "x" })), reply(toolUse("hangs", { path: "x" })), reply(text("done"))],
      { repo: { path: repo }, tools, commandTimeoutSec: 1 },
      "custom-tools",
      localBackend(),
    );
    expect(result.status).toBe("completed");
    expect(toolRuleProblems(fake.requests[0]!.body.tools)).toEqual([]);
    const [failed] = toolResults(fake.requests[1]);
    expect(failed.is_error).toBe(true);
    expect(toolResultText(failed)).toBe("partial\n[stderr]\nbroken\n[exit code 3]");
    const [hung] = toolResults(fake.requests[2]);
    expect(hung.is_error).toBe(true);
    expect(toolResultText(hung)).toBe("[the command timed out after 1 s and was killed]");
  });

  it("a worker with PATCHBAY_ALLOW_CUSTOM_TOOLS=0 refuses the spec before anything runs", async () => {
    const fake = await startFakeAnthropic([reply(text("never asked"))]);
    try {
      const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
      const spec = { task: "t", repo: { path: repo }, tools: { custom: [tool("lint", "true")] } };
      const err = await runJob(spec, {
        model,
        backend: localBackend(),
        config: localWorkerConfig({ PATCHBAY_ALLOW_CUSTOM_TOOLS: "0" }),
        labels: { "patchbay.test": "custom-tools" },
      }).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(err?.message).toBe(
        "JobSpec refused by this worker's policy: tools.custom: a spec's own tools are not allowed by this worker (PATCHBAY_ALLOW_CUSTOM_TOOLS=1 on the worker allows them)",
      );
      expect(fake.requests).toHaveLength(0);
    } finally {
      await fake.close();
    }
  });
});

describe("tools.custom in the JobSpec", () => {
  const parse = (custom: unknown) => parseJobSpec({ task: "t", repo: { path: "." }, tools: { custom } });
  it("takes a name of the Messages API's pattern that is not a built-in tool's, and a JSON Schema of type object", () => {
    expect(parse([tool("run_tests", "npm test")]).ok).toBe(true);
    expect(parseJobSpec({ task: "t", repo: { path: "." }, tools: "edit_file" }).ok).toBe(true);
    const error = (custom: unknown) => (parse(custom) as { error: string }).error;
    expect(error([tool("run tests", "x")])).toMatch(/tools\.custom\[0\]\.name: must be 1-64 characters/);
    expect(error([tool("a".repeat(65), "x")])).toMatch(/tools\.custom\[0\]\.name: must be 1-64 characters/);
    expect(error([tool("bash", "x")])).toMatch(/tools\.custom\[0\]\.name: must not be a built-in tool's name/);
    expect(error([tool("mcp__x__y", "x")])).toMatch(/tools\.custom\[0\]\.name: must not start with "mcp__"/);
    expect(error([tool("t", "x"), tool("t", "y")])).toMatch(/tools\.custom\[1\]\.name: the name "t" is taken/);
    expect(error([tool("t", "x", { input_schema: { type: "string" } })])).toMatch(
      /tools\.custom\[0\]\.input_schema: must have "type": "object"/,
    );
    expect(error([tool("t", "x", { input_schema: { type: "object", properties: 5 } })])).toMatch(
      /tools\.custom\[0\]\.input_schema: is not a valid JSON Schema/,
    );
    expect(error([{ name: "t", input_schema: schema }])).toMatch(/tools\.custom\[0\]\.command: required/);
    expect(
      (parseJobSpec({ task: "t", repo: { path: "." }, tools: { custum: [] } }) as { error: string }).error,
    ).toMatch(/tools\.custum: unknown key \(did you mean "custom"\?\)/);
  });
});
