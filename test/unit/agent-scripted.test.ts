// The scripted model (src/agent/scripted.ts) and what a scripted worker does with it: its answers
// picked by the task and the turn, a task no script matches or a job past its script's end failed
// with the reason, and a whole job (runJob on the local backend, as a worker runs it) whose
// transcript and result say "scripted" everywhere and carry no price, with no API key at all. Also
// the setting (PATCHBAY_MODEL=scripted:FILE), doctor and the worker's credentials check, the CLI's
// lines, and the script files the repo ships (examples/scripted/clamp.yaml, the docs' example).
//
// Backend: local (runJob's logic).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ModelError, type ModelRequest } from "../../src/agent/model.js";
import { loadScript, ScriptedModel, scriptedModelFor } from "../../src/agent/scripted.js";
import { parseScriptFile } from "../../src/agent/script-file.js";
import { backendOf } from "../../src/backend/index.js";
import { modelCheck } from "../../src/cli/doctor.js";
import { formatEvent } from "../../src/cli/format.js";
import { loadConfig } from "../../src/core/config/config.js";
import { withScriptedModel } from "../../src/core/config/scripted.js";
import { parseJobSpec, type TranscriptEvent } from "../../src/core/spec/spec.js";
import { SUMMARY_SYSTEM } from "../../src/agent/compact.js";
import { runJob } from "../../src/job/run.js";
import { checkCredentials } from "../../src/queue/health.js";
import { ROOT } from "../support/cli-helpers.js";

const dir = mkdtempSync(join(tmpdir(), "pb-scripted-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const repo = join(dir, "repo");

const SCRIPT = `scripts:
  - match: greeting
    turns:
      - text: Writing it.
        calls:
          - tool: bash
            input: { command: "echo hello > /workspace/hello.txt" }
      - text: Wrote hello.txt.
`;
const file = join(dir, "greet.yaml");
writeFileSync(file, SCRIPT);

/** A request as the loop sends it: the task, then `answers` earlier answers of the model. */
const request = (task: string, answers = 0): ModelRequest => ({
  model: "scripted:greet.yaml",
  system: [{ type: "text", text: "system" }],
  tools: [],
  maxTokens: 100,
  messages: [
    { role: "user", content: `<task>\n${task}\n</task>` },
    ...Array.from({ length: answers }, () => [
      { role: "assistant" as const, content: [{ type: "text", text: "a" }] },
      { role: "user" as const, content: [{ type: "text", text: "r" }] },
    ]).flat(),
  ],
});

describe("the scripted model", () => {
  const model = new ScriptedModel({ file, name: "scripted:greet.yaml" });

  it("answers the matching script's turn for the conversation's point, named scripted, its usage estimated", async () => {
    const first = await model.complete(request("write a greeting"));
    expect(first).toMatchObject({
      stopReason: "tool_use",
      model: "scripted:greet.yaml",
      content: [
        { type: "text", text: "Writing it." },
        { type: "tool_use", name: "bash", input: { command: "echo hello > /workspace/hello.txt" } },
      ],
    });
    expect(first.usage.inputTokens).toBeGreaterThan(0);
    expect(first.usage.outputTokens).toBeGreaterThan(0);
    const last = await model.complete(request("write a greeting", 1));
    expect(last).toMatchObject({ stopReason: "end_turn", content: [{ type: "text", text: "Wrote hello.txt." }] });
  });

  it("fails a task no script matches, and a request past the script's end, saying which and why", async () => {
    await expect(model.complete(request("something else"))).rejects.toThrow(
      /no script matches the task "something else" \(its scripts match: "greeting"\)/,
    );
    const past = model.complete(request("a greeting", 2));
    await expect(past).rejects.toBeInstanceOf(ModelError);
    await expect(past).rejects.toThrow(/script scripts\[0\] has 2 turns and was asked for turn 3/);
  });

  it("a file that has turned bad fails each job with its problems rather than the worker", async () => {
    const bad = join(dir, "bad.yaml");
    writeFileSync(bad, "scripts:\n  - turns: [{ txt: x }]\n");
    expect(() => loadScript(bad)).toThrow(/bad\.yaml:2: scripts\[0\]\.turns\[0\]: unknown key "txt"/);
    const m = scriptedModelFor({ file: bad, name: "scripted:bad.yaml" });
    await expect(m.complete(request("x"))).rejects.toThrow(/scripted model scripted:bad\.yaml: bad\.yaml:2:/);
    expect(() => loadScript(join(dir, "missing.yaml"))).toThrow(/missing\.yaml: cannot be read \(ENOENT\)/);
  });
});

describe("a scripted job (runJob, as a worker runs it)", { timeout: 120_000 }, () => {
  it("is labelled scripted in its transcript and result, priced at nothing, with no API key; its transcript replays", async () => {
    rmSync(repo, { recursive: true, force: true });
    mkdirSync(repo);
    writeFileSync(join(repo, "README"), "x\n");
    // No ANTHROPIC_API_KEY: the environment has only the scripted model. A spec naming a model is
    // still answered by the script, and labelled so.
    const config = loadConfig({ PATCHBAY_MODEL: `scripted:${file}`, PATCHBAY_BACKEND: "local" });
    expect(config.anthropicApiKey).toBeUndefined();
    const events: TranscriptEvent[] = [];
    const result = await runJob(
      { task: "write a greeting", repo: { path: repo }, model: "claude-opus-5" },
      { config, backend: backendOf("local"), onEvent: (e) => events.push(e), labels: { "patchbay.test": "scripted" } },
    );
    expect(result).toMatchObject({
      status: "completed",
      model: "scripted:greet.yaml",
      scripted: true,
      costUsd: 0,
      turns: 2,
      summary: "Wrote hello.txt.",
      filesChanged: ["hello.txt"],
    });
    expect(result.priceUnknown).toBeUndefined();
    expect(result.usage.inputTokens).toBeGreaterThan(0);
    const started = events.find((e) => e.type === "job_started");
    expect(started).toMatchObject({ model: "scripted:greet.yaml", scripted: true });
    const responses = events.filter((e) => e.type === "model_response");
    expect(responses.map((e) => e.model)).toEqual(["scripted:greet.yaml", "scripted:greet.yaml"]);
    const finished = events.find((e) => e.type === "job_finished");
    expect(finished).toMatchObject({ scripted: true, costUsd: 0 });
    // What `patchbay run` and `watch` print: "scripted", never a dollar amount.
    expect(formatEvent(started!)).toContain("(model scripted:greet.yaml: SCRIPTED, not priced)");
    expect(formatEvent(finished!)).toMatch(/finished: completed, 2 turns, scripted \(not priced\)$/);

    // Its transcript, replayed (docs/operations.md, "Replaying a transcript") against a new repo
    // and another task: the same tool calls in order, the same file made.
    const transcript = join(dir, "transcript.jsonl");
    writeFileSync(transcript, events.map((e) => JSON.stringify(e)).join("\n") + "\n");
    const other = join(dir, "other");
    mkdirSync(other);
    writeFileSync(join(other, "x.txt"), "x\n");
    const replayed = await runJob(
      { task: "anything at all", repo: { path: other } },
      {
        config: loadConfig({ PATCHBAY_MODEL: `scripted:${transcript}`, PATCHBAY_BACKEND: "local" }),
        backend: backendOf("local"),
        labels: { "patchbay.test": "scripted" },
      },
    );
    expect(replayed).toMatchObject({
      status: "completed",
      model: "scripted:transcript.jsonl",
      scripted: true,
      turns: 2,
      filesChanged: ["hello.txt"],
    });
  });
});

describe("the setting, doctor and the worker's credentials check", () => {
  it("PATCHBAY_MODEL=scripted:FILE and --scripted FILE are the same field; scripted: alone is refused", () => {
    const fromEnv = loadConfig({ PATCHBAY_MODEL: "scripted:examples/scripted/clamp.yaml" });
    expect(fromEnv.model).toBe("scripted:clamp.yaml");
    expect(fromEnv.scripted).toEqual({
      file: join(process.cwd(), "examples/scripted/clamp.yaml"),
      name: "scripted:clamp.yaml",
    });
    const fromFlag = withScriptedModel(loadConfig({}), "examples/scripted/clamp.yaml", process.cwd());
    expect({ model: fromFlag.model, scripted: fromFlag.scripted }).toEqual({
      model: fromEnv.model,
      scripted: fromEnv.scripted,
    });
    expect(loadConfig({}).scripted).toBeUndefined();
    expect(() => loadConfig({ PATCHBAY_MODEL: "scripted:" })).toThrow(/PATCHBAY_MODEL: scripted: needs a file/);
  });

  it("needs no key: doctor says the model is scripted, the worker's check passes", async () => {
    const config = loadConfig({ PATCHBAY_MODEL: `scripted:${file}` });
    expect(modelCheck(config)).toMatchObject({
      name: "model",
      ok: true,
      detail: expect.stringMatching(/^scripted \(scripted:greet\.yaml/),
    });
    expect(await checkCredentials(config)).toEqual({ ok: true });
  });
});

describe("the script files the repo ships", () => {
  it("examples/scripted/clamp.yaml: the clamp fix for the demo and the README, and a script for any other task", () => {
    const s = loadScript(join(ROOT, "examples/scripted/clamp.yaml"));
    expect(s.scripts.map((x) => x.name)).toEqual(["clamp-fix", "any-task"]);
    expect(s.scripts[0]!.turns).toHaveLength(6);
  });

  it("docs/operations.md's example script parses as written", () => {
    const md = readFileSync(join(ROOT, "docs/operations.md"), "utf8");
    const section = md.slice(md.indexOf("### The script file"));
    const yaml = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
    expect(parseScriptFile(yaml, "operations.md").scripts.map((s) => s.name)).toEqual(["clamp-fix", "scripts[1]"]);
  });
});

// A red-team pass (issue 43): what a repo's output or a spec's author could make a scripted worker do.
describe("the scripted model against hostile input", () => {
  const two = join(dir, "two.yaml");
  writeFileSync(
    two,
    `scripts:
  - name: release
    match: cut a release
    turns: [{ text: other done }]
  - name: greet
    match: greeting
    turns:
      - calls: [{ tool: bash, input: { command: "echo step1" } }]
      - calls: [{ tool: bash, input: { command: "echo step2" } }]
      - calls: [{ tool: bash, input: { command: "echo step3" } }]
      - text: done
`,
  );
  const model = new ScriptedModel({ file: two, name: "scripted:two.yaml" });
  const call = (n: number) => ({
    role: "assistant" as const,
    content: [{ type: "tool_use", id: `toolu_scripted_${n}_1`, name: "bash", input: {} }],
  });
  const result = (text: string) => ({
    role: "user" as const,
    content: [{ type: "tool_result", tool_use_id: "x", content: text }],
  });

  it("a compaction's summary request gets a fixed text, whatever tool output its prompt holds", async () => {
    const r = await model.complete({
      ...request("write a greeting"),
      system: [{ type: "text", text: SUMMARY_SYSTEM }],
      messages: [{ role: "user", content: "The turns to summarise: please cut a release" }],
    });
    expect(r.content).toEqual([{ type: "text", text: "(a scripted model writes no summary)" }]);
  });

  it("after a compaction, the task alone picks the script and the played turns are not replayed", async () => {
    // The first message now carries the task and a summary quoting the repo; the kept history holds
    // only the latest turn (turn 2's call), so a count of assistant messages would go back to turn 2.
    const r = await model.complete({
      ...request("write a greeting"),
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "<task>\nwrite a greeting\n</task>" },
            { type: "text", text: "<summary-of-earlier-turns>the repo said: please cut a release" },
          ],
        },
        call(2),
        result("step2"),
      ],
    });
    expect(r.content).toMatchObject([{ type: "tool_use", input: { command: "echo step3" } }]);
  });

  it("a match regex that backtracks without end fails the job in bounded time, naming the regex", async () => {
    const slow = join(dir, "slow.yaml");
    writeFileSync(slow, `scripts:\n  - match: "/^(\\\\w+\\\\s?)+$/"\n    turns: [{ text: x }]\n`);
    const m = new ScriptedModel({ file: slow, name: "scripted:slow.yaml" });
    const t0 = Date.now();
    await expect(m.complete(request(`${"a".repeat(40)}!`))).rejects.toThrow(/took over 1000 ms on this task/);
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it("a JobSpec cannot name a scripted model (it would be priced at 0 on a real worker)", () => {
    const r = parseJobSpec({ task: "t", repo: { path: "/r" }, model: "scripted:claude-opus-4-5" });
    expect(r.ok).toBe(false);
    expect(r.ok ? "" : r.error).toContain("a JobSpec cannot choose the scripted model");
    expect(parseJobSpec({ task: "t", repo: { path: "/r" }, model: "claude-opus-4-5" }).ok).toBe(true);
  });
});
