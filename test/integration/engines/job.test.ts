// runJob end to end: real git, the real SDK against the scripted server. Its logic (stop reasons,
// budgets, caching, editor flavours, API errors, repo forms) on the local backend
// (test/support/backend.ts), and in the engine matrix's Podman half on the rootless engine itself;
// what only an engine shows on it: a cancelled job's container and volume removed (gVisor's
// whole job: sandbox-gvisor.test.ts).
//
// Backend: local, but on Docker a whole job under gVisor and a cancellation removing container and
// volume.
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../../src/agent/model.js";
import { runJob } from "../../../src/job/run.js";
import { backendOf, type BackendKind } from "../../../src/backend/index.js";
import type { Sandbox } from "../../../src/sandbox/sandbox.js";
import type { TranscriptEvent } from "../../../src/core/spec/spec.js";
import {
  apiError,
  reply,
  startFakeAnthropic,
  text,
  toolResults,
  toolResultText,
  toolUse,
  type FakeAnthropic,
  type Reply,
} from "../../support/fake-anthropic.js";
import { sandboxLeft, untilInSandbox } from "../../support/backend.js";
import { exists, jobWatchdog } from "../../support/sandbox.js";
import { clampScript, tenToolScript } from "../../support/scripts.js";
import { podman } from "../../support/engine-kind.js";

const CLAMP = new URL("../../../examples/clamp", import.meta.url).pathname;
let fake: FakeAnthropic | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

/** runJob on `opts.backend` (default: the local backend; under the Podman half, the engine). */
async function run(
  script: Reply[] | Parameters<typeof startFakeAnthropic>[0],
  spec: Record<string, unknown> = {},
  opts: {
    signal?: AbortSignal;
    onEvent?: (e: TranscriptEvent) => void;
    onSandbox?: (sb: Sandbox) => void;
    backend?: BackendKind;
  } = {},
) {
  fake = await startFakeAnthropic(script);
  const events: TranscriptEvent[] = [];
  const sandboxes: { name: string; volume: string }[] = [];
  const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 2 });
  const kind = opts.backend ?? (podman ? "docker" : "local");
  const disarm = jobWatchdog("runJob", events, 45_000, kind); // before the test's 60 s
  const result = await runJob(
    { task: "Make the failing tests pass.", repo: { path: CLAMP }, ...spec },
    {
      model,
      backend: backendOf(kind),
      onEvent: (e) => (events.push(e), opts.onEvent?.(e)),
      signal: opts.signal,
      onSandbox: (sb) => (sandboxes.push({ name: sb.name, volume: `${sb.name}-ws` }), opts.onSandbox?.(sb)),
    },
  ).finally(disarm);
  return { result, events, fake, sandboxes };
}

const tmp = () => mkdtempSync(join(tmpdir(), "pb-job-"));
const sh = (cwd: string, cmd: string) =>
  execFileSync("bash", ["-c", cmd], { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

describe("runJob: the Clamp fix", () => {
  it("fixes the bug through a refused ambiguous edit, and the patch applies to a pristine copy", async () => {
    const { result, events, fake } = await run(clampScript(), { verify: "python3 -m unittest -q" });
    expect(result.status).toBe("completed");
    expect(result.stopReason).toBe("end_turn");
    expect(result.turns).toBe(6);
    expect(result.filesChanged).toEqual(["clamp.py"]);
    expect(result.verify?.exitCode).toBe(0);
    expect(result.patch).toMatch(/- {8}return lo\n\+ {8}return hi/);

    // What the model saw: failing tests, the ambiguous edit refused, the unique one applied, tests passing.
    const results = fake.requests.slice(1).map((r) => toolResults(r)[0]);
    expect(toolResultText(results[0])).toMatch(/FAILED \(failures=1\)/);
    expect(toolResultText(results[0])).toMatch(/\[exit code 1\]$/);
    expect(results[2]).toMatchObject({ is_error: true });
    expect(toolResultText(results[2])).toBe(
      "No replacement was performed. Multiple occurrences of old_str `return lo` in lines [7, 9]. Please ensure it is unique",
    );
    expect(results[3].is_error).toBeUndefined();
    expect(toolResultText(results[4])).toMatch(/^OK$/m);

    // The patch applies to a pristine copy and the tests pass there.
    const dir = tmp();
    try {
      cpSync(CLAMP, dir, { recursive: true });
      writeFileSync(join(dir, "fix.patch"), result.patch);
      sh(dir, "git apply fix.patch && rm fix.patch");
      expect(readFileSync(join(dir, "clamp.py"), "utf8")).toMatch(/if v > hi:\n {8}return hi/);
      expect(sh(dir, "python3 -m unittest -q 2>&1")).toMatch(/OK/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }

    // The transcript replays the conversation the server saw.
    const replay: unknown[] = [];
    for (const e of events) {
      if (e.type === "model_request") replay.push(...(e.newMessages ?? []));
      if (e.type === "model_response") replay.push({ role: "assistant", content: e.content });
    }
    const last = fake.requests.at(-1)!.body;
    const strip = (x: unknown) => JSON.parse(JSON.stringify(x, (k, v) => (k === "cache_control" ? undefined : v)));
    expect(strip(replay.slice(0, last.messages.length))).toEqual(strip(last.messages));
    expect(events.map((e) => e.type)).toEqual(
      expect.arrayContaining([
        "job_started",
        "sandbox_ready",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "verify",
        "patch",
        "job_finished",
      ]),
    );
    expect(events.at(-1)).toMatchObject({ type: "job_finished", status: "completed" });
  });

  it("sends built-in tools schema-less, one cache breakpoint on the newest message, and is_error results", async () => {
    const { fake } = await run(clampScript());
    const body = fake.requests[2]!.body;
    expect(body.tools).toEqual([
      { type: "bash_20250124", name: "bash" },
      { type: "text_editor_20250728", name: "str_replace_based_edit_tool", max_characters: 16000 },
    ]);
    const breakpoints = JSON.stringify(body).match(/"cache_control"/g) ?? [];
    expect(breakpoints.length).toBeLessThanOrEqual(4);
    expect(body.messages.at(-1).content.at(-1).cache_control).toEqual({ type: "ephemeral" });
    expect(body.system.at(-1).cache_control).toEqual({ type: "ephemeral" });
    expect(fake.requests.every((r) => r.stream)).toBe(true);
  });
});

describe("runJob on Docker: what only Docker shows", () => {
  it("cancellation during a command stops it, keeps the patch of what was done, and removes the container and its volume", async () => {
    const ctl = new AbortController();
    // Aborted once the command is running: after its tool_call, once its first step shows in the sandbox.
    let sandbox: Sandbox | undefined;
    const onEvent = (e: TranscriptEvent) =>
      e.type === "tool_call" &&
      void untilInSandbox("docker", sandbox!.name, "grep -qx x /workspace/clamp.py").then(() => ctl.abort("cancelled"));
    const { result, events, fake, sandboxes } = await run(
      [
        reply(toolUse("bash", { command: "echo x >> /workspace/clamp.py; sleep 300; echo never" })),
        reply(text("never asked")),
      ],
      {},
      { signal: ctl.signal, onEvent, onSandbox: (sb) => (sandbox = sb), backend: "docker" },
    );
    expect(result).toMatchObject({ status: "cancelled", turns: 1, error: "the job was cancelled" });
    expect(result.filesChanged).toEqual(["clamp.py"]);
    expect(result.patch).toMatch(/\+x\n/);
    // The command was stopped by the cancellation, not finished, and the model was not asked again.
    const types = events.map((e) => e.type);
    expect(types.slice(types.indexOf("tool_call"))).toEqual(["tool_call", "tool_result", "patch", "job_finished"]);
    const tr = events.find((e) => e.type === "tool_result");
    expect(tr).toMatchObject({
      isError: true,
      output: expect.stringMatching(/the command was stopped: the job is ending/),
    });
    expect(JSON.stringify(tr)).not.toMatch(/never/);
    expect(fake.requests).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ type: "job_finished", status: "cancelled" });
    expect(sandboxes).toHaveLength(1);
    expect(await exists("container", sandboxes[0]!.name)).toBe(false);
    expect(await exists("volume", sandboxes[0]!.volume)).toBe(false);
  });
});

describe("runJob: prompt caching", () => {
  it("re-reads the history from cache every turn of a long job", async () => {
    const { events } = await run(tenToolScript(12));
    const usage = events.flatMap((e) => (e.type === "model_response" ? [e.usage] : []));
    expect(usage).toHaveLength(13);
    for (const [i, u] of usage.entries()) {
      if (i === 0) continue;
      // All but the newest turn comes from cache; what is read fresh stays small.
      expect(u.cacheReadTokens, `turn ${i + 1}`).toBeGreaterThan(usage[i - 1]!.cacheReadTokens);
      expect(u.inputTokens, `turn ${i + 1}`).toBeLessThan(u.cacheReadTokens);
    }
  });
});

describe("runJob: editor flavours", () => {
  it("text_editor_20250124 (str_replace_editor) fixes the same bug", async () => {
    const { result, fake } = await run(clampScript("str_replace_editor"), { tools: "text_editor_20250124" });
    expect(result).toMatchObject({ status: "completed", filesChanged: ["clamp.py"] });
    expect(fake.requests[0]!.body.tools).toEqual([
      { type: "bash_20250124", name: "bash" },
      { type: "text_editor_20250124", name: "str_replace_editor" },
    ]);
  });

  it("edit_file (plain JSON-schema tools) for models without built-in tools", async () => {
    const script = [
      reply(toolUse("edit_file", { path: "/workspace/clamp.py", old_string: "return lo", new_string: "return hi" })),
      reply(
        toolUse("edit_file", {
          path: "/workspace/clamp.py",
          old_string: "    if v > hi:\n        return lo",
          new_string: "    if v > hi:\n        return hi",
        }),
      ),
      reply(text("fixed")),
    ];
    const { result, fake } = await run(script, { tools: "edit_file", verify: "python3 -m unittest -q" });
    expect(result).toMatchObject({ status: "completed", verify: { exitCode: 0 } });
    expect(
      fake.requests[0]!.body.tools.map((t: { name: string; input_schema?: unknown }) => [
        t.name,
        Boolean(t.input_schema),
      ]),
    ).toEqual([
      ["bash", true],
      ["edit_file", true],
    ]);
    expect(toolResultText(toolResults(fake.requests[1])[0])).toMatch(/appears 2 times/);
  });
});

describe("runJob: stop reasons and budgets", () => {
  const loopForever = () => reply(toolUse("bash", { command: "echo again" }));

  it("max_turns ends with its own status and still gives the patch", async () => {
    const { result } = await run(
      [reply(toolUse("bash", { command: "echo change >> /workspace/clamp.py" })), loopForever(), loopForever()],
      { maxTurns: 2 },
    );
    expect(result.status).toBe("max_turns");
    expect(result.turns).toBe(2);
    expect(result.filesChanged).toEqual(["clamp.py"]);
  });

  it("usd budget ends with budget_exceeded", async () => {
    const big = {
      input_tokens: 200_000,
      output_tokens: 10,
      cache_read_input_tokens: 0,
      cache_creation_input_tokens: 0,
    };
    const { result, events } = await run([{ ...loopForever(), usage: big } as Reply, loopForever()], {
      budget: { usd: 0.1 },
      model: "claude-sonnet-5-5",
    });
    expect(result.status).toBe("budget_exceeded");
    expect(result.costUsd).toBeCloseTo(0.4001, 6); // 200k in at $2/MTok + 10 out at $10/MTok
    expect(events.find((e) => e.type === "budget")).toMatchObject({ limit: "usd", max: 0.1 });
  });

  // Budgets are checked against the running total: every turn here is under budget on its own.
  const perTurn = (
    usage: Partial<
      Record<"input_tokens" | "output_tokens" | "cache_read_input_tokens" | "cache_creation_input_tokens", number>
    >,
  ) => [
    ...Array.from(
      { length: 8 },
      () =>
        ({
          ...loopForever(),
          usage: {
            input_tokens: 0,
            output_tokens: 0,
            cache_read_input_tokens: 0,
            cache_creation_input_tokens: 0,
            ...usage,
          },
        }) as Reply,
    ),
    reply(text("done")),
  ];
  it.each([
    // 1000 input tokens a turn, budget 3500: 3000 after turn 3 is under, 4000 after turn 4 is over.
    ["inputTokens", { input_tokens: 1000 }, { inputTokens: 3500 }, 4000],
    // Cache reads and writes count as input too.
    [
      "inputTokens",
      { input_tokens: 200, cache_read_input_tokens: 500, cache_creation_input_tokens: 300 },
      { inputTokens: 3500 },
      4000,
    ],
    ["outputTokens", { output_tokens: 1000 }, { outputTokens: 3500 }, 4000],
    // $0.012 a turn (1000 in at $2/MTok + 1000 out at $10/MTok), budget $0.04: $0.036, then $0.048.
    ["usd", { input_tokens: 1000, output_tokens: 1000 }, { usd: 0.04 }, 0.048],
  ] as const)(
    "the %s budget, crossed only by the running total, stops after turn 4, not earlier, not later",
    async (limit, usage, budget, used) => {
      const { result, events, fake } = await run(perTurn(usage), { budget, model: "claude-sonnet-5-5" });
      expect(result.status).toBe("budget_exceeded");
      expect(result.turns).toBe(4);
      expect(fake.requests).toHaveLength(4);
      expect(events.filter((e) => e.type === "tool_call")).toHaveLength(3); // the 4th turn's call is not run
      expect(events.find((e) => e.type === "budget")).toMatchObject({ limit, max: Object.values(budget)[0], used });
      expect(result.error).toMatch(new RegExp(`budget ${limit} exceeded`));
      if (limit === "usd") expect(result.costUsd).toBeCloseTo(0.048, 9);
    },
  );

  it("output and input token budgets", async () => {
    const out = await run([{ ...loopForever(), usage: { output_tokens: 500 } } as Reply], {
      budget: { outputTokens: 100 },
    });
    expect(out.result.status).toBe("budget_exceeded");
    expect(out.result.error).toMatch(/outputTokens/);
    await fake!.close();
    const inp = await run(
      [{ ...loopForever(), usage: { input_tokens: 5000, cache_read_input_tokens: 5000 } } as Reply],
      { budget: { inputTokens: 8000 } },
    );
    expect(inp.result.status).toBe("budget_exceeded");
    expect(inp.result.error).toMatch(/inputTokens/);
  });

  it("max_tokens continues once, then stops", async () => {
    const cut = (): Reply => ({ kind: "message", content: [text("I was saying")], stop_reason: "max_tokens" });
    const { result, fake } = await run([cut(), reply(text("done"))]);
    expect(result.status).toBe("completed");
    expect(JSON.stringify(fake.requests[1]!.body.messages.at(-1))).toMatch(/cut off at the output token limit/);
    await fake.close();
    const twice = await run([cut(), cut()]);
    expect(twice.result).toMatchObject({ status: "failed", stopReason: "max_tokens" });
  });

  it("pause_turn sends the conversation back; refusal fails the job", async () => {
    const paused = await run([
      { kind: "message", content: [text("thinking")], stop_reason: "pause_turn" },
      reply(text("done")),
    ]);
    expect(paused.result).toMatchObject({ status: "completed", turns: 2 });
    expect(paused.fake.requests[1]!.body.messages.at(-1).role).toBe("assistant");
    await paused.fake.close();
    const refused = await run([{ kind: "message", content: [], stop_reason: "refusal" }]);
    expect(refused.result).toMatchObject({ status: "failed", stopReason: "refusal" });
  });

  it("wall-clock timeout during a long command ends with status timeout and the patch", async () => {
    const { result, events, sandboxes } = await run(
      [reply(toolUse("bash", { command: "echo x >> /workspace/clamp.py; sleep 300" }))],
      { timeoutSec: 15 },
    );
    expect(result.status).toBe("timeout");
    expect(result.filesChanged).toEqual(["clamp.py"]);
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({
      isError: true,
      output: expect.stringMatching(/the command was stopped/),
    });
    expect(await sandboxLeft("local", sandboxes[0]!.name)).toBe(false);
  });

  it("a job cancelled before it starts makes no sandbox and asks no model", async () => {
    const ctl = new AbortController();
    ctl.abort("cancelled");
    const { result, events, fake, sandboxes } = await run([reply(text("never asked"))], {}, { signal: ctl.signal });
    expect(result).toMatchObject({ status: "cancelled", turns: 0, error: "the job was cancelled before it started" });
    expect(sandboxes).toEqual([]);
    expect(fake.requests).toHaveLength(0);
    expect(events.map((e) => e.type)).toEqual(["job_started", "job_finished"]);
  });

  it("cancellation during setup ends with status cancelled, not failed", async () => {
    const ctl = new AbortController();
    // The setup command runs right after sandbox_ready.
    const onEvent = (e: TranscriptEvent) => e.type === "sandbox_ready" && ctl.abort("cancelled");
    const { result, events, fake, sandboxes } = await run(
      [reply(text("never asked"))],
      { setup: "sleep 30" },
      { signal: ctl.signal, onEvent },
    );
    expect(result).toMatchObject({ status: "cancelled", turns: 0 });
    expect(result.error).toMatch(/during setup: sleep 30/);
    expect(fake.requests).toHaveLength(0);
    expect(events.find((e) => e.type === "setup")).toMatchObject({ command: "sleep 30" });
    expect(await sandboxLeft("local", sandboxes[0]!.name)).toBe(false);
  });

  it("a 529 then success: the job succeeds and the transcript shows the retry", async () => {
    const { result, events } = await run([apiError(529, "Overloaded"), reply(text("nothing to do"))]);
    expect(result.status).toBe("completed");
    expect(events.find((e) => e.type === "model_retry")).toMatchObject({
      retry: 1,
      status: 529,
      error: expect.stringMatching(/Overloaded/),
    });
  });

  it("a 400 fails the job with the API's message", async () => {
    const { result } = await run([apiError(400, "messages.0.content: bad block")]);
    expect(result.status).toBe("failed");
    expect(result.error).toMatch(/400.*messages\.0\.content: bad block/);
  });
});

describe("runJob: repo forms and what the patch carries", () => {
  const makeFiles = () => [
    reply(
      toolUse("bash", {
        command:
          "printf 'new\\n' > /workspace/added.txt && printf '\\x00\\x01\\x02\\xff' > /workspace/blob.bin && sed -i '9s/return lo/return hi/' /workspace/clamp.py",
      }),
    ),
    reply(text("done")),
  ];
  const forms: [string, () => { spec: Record<string, unknown>; commit?: string; cleanup: () => void }][] = [
    ["path", () => ({ spec: { repo: { path: CLAMP } }, cleanup() {} })],
    [
      "git",
      () => {
        const dir = tmp();
        cpSync(CLAMP, dir, { recursive: true });
        sh(
          dir,
          "git init -q -b main && git add -A && git -c user.name=t -c user.email=t@t commit -qm init && git tag v1",
        );
        return {
          spec: { repo: { git: dir, ref: "v1" } },
          commit: sh(dir, "git rev-parse v1").trim(),
          cleanup: () => rmSync(dir, { recursive: true, force: true }),
        };
      },
    ],
    [
      "archive",
      () => {
        const dir = tmp();
        sh(dir, `tar -C ${JSON.stringify(join(CLAMP, ".."))} -czf repo.tar.gz clamp`);
        return {
          spec: { repo: { archive: join(dir, "repo.tar.gz") } },
          cleanup: () => rmSync(dir, { recursive: true, force: true }),
        };
      },
    ],
  ];

  it("the agent's first tool finds its own git repo, made from the baseline while the first request was out", async () => {
    const { result, fake } = await run([
      reply(
        toolUse("bash", {
          command: "git log --format=%s && git status --porcelain | wc -l && git rev-parse 'HEAD^{tree}'",
        }),
      ),
      reply(text("looked")),
    ]);
    expect(result.status).toBe("completed");
    // The same tree git makes of the repo on the host: the agent's HEAD is the baseline, and clean.
    const copy = tmp();
    cpSync(CLAMP, copy, { recursive: true });
    const tree = sh(copy, "git init -q && git add -A && git write-tree").trim();
    expect(toolResultText(toolResults(fake.requests[1])[0])).toBe(`patchbay: baseline\n0\n${tree}`);
    rmSync(copy, { recursive: true, force: true });
  });

  it("a repo that cannot be loaded fails the job with a clear error, without a retry", async () => {
    const { result } = await run([reply(text("never asked"))], { repo: { path: "/nonexistent/repo" } });
    expect(result).toMatchObject({ status: "failed", error: "repo.path: /nonexistent/repo does not exist" });
    expect(fake!.requests).toHaveLength(0); // the model was never asked
  });

  it.each(forms)(
    "repo as %s: new file, binary file and edit in a patch that git apply reproduces",
    async (_form, make) => {
      const { spec, commit, cleanup } = make();
      try {
        const { result } = await run(makeFiles(), spec);
        expect(result.status).toBe("completed");
        // A { git } repo's result names the commit its patch applies to (what a campaign publishes onto).
        expect(result.baseCommit).toBe(commit);
        expect(result.filesChanged.sort()).toEqual(["added.txt", "blob.bin", "clamp.py"]);
        expect(result.patch).toMatch(/GIT binary patch/);
        const copy = tmp();
        cpSync(CLAMP, copy, { recursive: true });
        writeFileSync(join(copy, "x.patch"), result.patch);
        sh(copy, "git apply x.patch && rm x.patch");
        expect([...readFileSync(join(copy, "blob.bin"))]).toEqual([0, 1, 2, 255]);
        expect(readFileSync(join(copy, "added.txt"), "utf8")).toBe("new\n");
        expect(sh(copy, "python3 -m unittest -q 2>&1")).toMatch(/OK/);
        rmSync(copy, { recursive: true, force: true });
      } finally {
        cleanup();
      }
    },
  );
});
