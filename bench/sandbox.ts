// Sandbox core and tools: tool-call overhead vs the docker CLI and a fresh API exec,
// sandbox create→ready, a str_replace on a 100 KB file vs a docker cp round trip, and patchbay's
// own time per agent turn with an instant model vs a docker exec.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runAgentLoop } from "../src/agent/loop.js";
import type { ContentBlock, Model } from "../src/agent/model.js";
import { stamped } from "../src/core/spec/spec.js";
import { boundEvent } from "../src/queue/result-bounds.js";
import { Sandbox } from "../src/sandbox/sandbox.js";
import { Toolbox } from "../src/tools/index.js";
import { execFileP, log, median, round, timeMedian } from "./lib.js";

export async function benchShell() {
  const sb = await Sandbox.create({ labels: { "patchbay.bench": "1" } });
  try {
    log("shell round trip: patchbay shell, docker exec (CLI), fresh API exec");
    const shell = await timeMedian(300, () => sb.shell.run("true"));
    const cli = await timeMedian(15, () => execFileP("docker", ["exec", "-u", "1000", sb.name, "true"]));
    const api = await timeMedian(15, async () => {
      const r = await sb.exec(["true"]);
      if (r.exitCode !== 0) throw new Error("exec failed");
    });
    return {
      shell_roundtrip_ms: shell,
      cli_docker_exec_ms: cli,
      api_fresh_exec_ms: api,
      ratio_cli_over_shell: round(cli / shell, 1),
      ratio_api_over_shell: round(api / shell, 1),
    };
  } finally {
    await sb.destroy();
  }
}

export async function benchCreate() {
  log("sandbox create→ready (container + volume + shell + file agent)");
  const made: Sandbox[] = [];
  const ready = await timeMedian(
    9,
    async () => made.push(await Sandbox.create({ labels: { "patchbay.bench": "1" } })),
    1,
  );
  await Promise.all(made.map((s) => s.destroy()));
  const destroy = await timeMedian(
    5,
    async () => {
      const s = await Sandbox.create({ labels: { "patchbay.bench": "1" } });
      const t0 = performance.now();
      await s.destroy();
      return performance.now() - t0;
    },
    0,
  );
  return { create_ready_ms: ready, destroy_ms: destroy };
}

export async function benchEditor() {
  const sb = await Sandbox.create({ labels: { "patchbay.bench": "1" } });
  const dir = mkdtempSync(join(tmpdir(), "pb-bench-"));
  try {
    const text =
      Array.from({ length: 1700 }, (_, i) => `line ${String(i).padStart(4, "0")}: ${"lorem ipsum ".repeat(4)}`).join(
        "\n",
      ) + "\n";
    const path = "/workspace/big.txt";
    await sb.files.write(path, Buffer.from(text));
    const box = new Toolbox(sb);
    const swap = (i: number) => (i % 2 ? ["line 0850: ", "LINE 0850: "] : ["LINE 0850: ", "line 0850: "]);
    let k = 0;
    log(`editor: str_replace / view on a ${Buffer.byteLength(text)} byte file, and the docker cp round trip`);
    await box.run({
      id: "x",
      name: "str_replace_based_edit_tool",
      input: { command: "str_replace", path, old_str: "line 0850: ", new_str: "LINE 0850: " },
    });
    const strReplace = await timeMedian(
      40,
      async () => {
        const [o, n] = swap(k++);
        const r = await box.run({
          id: "x",
          name: "str_replace_based_edit_tool",
          input: { command: "str_replace", path, old_str: o, new_str: n },
        });
        if (r.isError) throw new Error(r.content);
      },
      0,
    );
    const view = await timeMedian(40, () =>
      box.run({ id: "x", name: "str_replace_based_edit_tool", input: { command: "view", path } }),
    );
    // A view by an editor that has never had the file (a new Toolbox each time): its 100 KB come out
    // of the sandbox, where the views and edits above find it unchanged and have it not sent again.
    const viewCold = await timeMedian(40, () =>
      new Toolbox(sb).run({ id: "x", name: "str_replace_based_edit_tool", input: { command: "view", path } }),
    );
    // What a user scripts without patchbay: copy out, edit on the host, copy back in.
    let j = 0;
    const dockerCp = await timeMedian(10, async () => {
      const local = join(dir, "big.txt");
      await execFileP("docker", ["cp", `${sb.name}:${path}`, local]);
      const [o, n] = swap(j++ + k);
      writeFileSync(local, readFileSync(local, "utf8").replace(o!, n!));
      await execFileP("docker", ["cp", local, `${sb.name}:${path}`]);
    });
    return {
      file_bytes: Buffer.byteLength(text),
      str_replace_ms: strReplace,
      view_ms: view,
      view_cold_ms: viewCold,
      docker_cp_roundtrip_ms: dockerCp,
      ratio_docker_cp_over_str_replace: round(dockerCp / strReplace, 1),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await sb.destroy();
  }
}

/**
 * patchbay's own time per turn with an instant model: the agent loop (runAgentLoop) on a model that
 * answers from a script in-process, 20 turns of mixed bash and editor calls in one sandbox, each
 * turn's wall time (from one model request to the next) minus the model's own time, and its parts:
 * the tool's round trip, the transcript events (stamped, bounded and serialized as the worker
 * appends them; the Redis write itself is not in it), and the rest (the loop: the next request's
 * assembly, usage and cost, the checks of the answer). Beside it, `docker exec -u 1000 <box> true`
 * from the CLI in the same run: what one command costs done the usual way.
 */
export async function benchTurn() {
  const sb = await Sandbox.create({ labels: { "patchbay.bench": "1" } });
  try {
    // A source file of ~8 KB that the turns view and edit, and a few for bash to look at. The bash
    // calls are shell builtins: a program's own start (fork, exec, its run) is the command's time,
    // not patchbay's, and would hide what this row measures.
    const src = Array.from({ length: 200 }, (_, i) => `def f${i}(x):\n    return x + ${i}\n`).join("\n");
    await sb.files.mkdirp("/workspace/pkg");
    await sb.shell.run(`cd /workspace && for i in 1 2 3 4 5; do echo "print($i)" > pkg/m$i.py; done`);
    const calls = (run: number): { name: string; input: Record<string, unknown> }[] => {
      const e = (input: Record<string, unknown>) => ({ name: "str_replace_based_edit_tool", input });
      const b = (command: string) => ({ name: "bash", input: { command } });
      const p = `/workspace/pkg/mod${run}.py`;
      return [
        e({ command: "create", path: p, file_text: src }),
        b("cd /workspace/pkg && echo *"),
        e({ command: "view", path: p }),
        b(`test -f ${p} && echo exists`),
        e({ command: "str_replace", path: p, old_str: "return x + 10\n", new_str: "return x + 1000\n" }),
        b("cd /workspace; pwd"),
        e({ command: "view", path: p, view_range: [1, 40] }),
        b(`read -r first < ${p}; echo "$first"`),
        e({ command: "str_replace", path: p, old_str: "def f20(x):", new_str: "def f20(x, y=0):" }),
        b("echo $((1 + 2 + 3))"),
        e({ command: "insert", path: p, insert_line: 3, insert_text: "# checked\n" }),
        b(`printf '%s\\n' ${p}`),
        e({ command: "view", path: "/workspace/pkg" }),
        b("echo $(< /workspace/pkg/m1.py)"),
        e({ command: "str_replace", path: p, old_str: "return x + 199", new_str: "return x - 199" }),
        b(`[ -s ${p} ] && echo non-empty`),
        e({ command: "view", path: p }),
        b("echo done && pwd"),
        e({ command: "str_replace", path: p, old_str: "# checked\n", new_str: "" }),
        b("export BENCH_TURN=1; echo $BENCH_TURN"),
      ];
    };
    const zero = { inputTokens: 10, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 };
    const turns: { wall: number; model: number; tool: number; events: number }[] = [];
    const runs = 4; // the first one warms up V8 and is left out
    log(`turn: ${runs} × 20 turns of bash and editor calls on an instant model, and docker exec (CLI)`);
    for (let run = 0; run < runs; run++) {
      const script = calls(run);
      const box = new Toolbox(sb);
      let modelMs = 0;
      let toolMs = 0;
      let eventMs = 0;
      let last: number | undefined;
      const per: typeof turns = [];
      const model: Model = {
        complete: async (req) => {
          const t0 = performance.now();
          if (last !== undefined) per.push({ wall: t0 - last, model: modelMs, tool: toolMs, events: eventMs });
          const n = req.messages.filter((m) => m.role === "assistant").length;
          const call = script[n];
          const content: ContentBlock[] = call
            ? [{ type: "tool_use", id: `toolu_bench_${n}`, name: call.name, input: call.input }]
            : [{ type: "text", text: "Done." }];
          const res = { content, stopReason: call ? "tool_use" : "end_turn", usage: zero, model: "instant" };
          const t1 = performance.now();
          modelMs = t1 - t0;
          toolMs = eventMs = 0;
          last = t0;
          return res;
        },
      };
      const out = await runAgentLoop({
        model,
        modelName: "claude-sonnet-4-5",
        system: "You are a bench.",
        task: "Edit the module.",
        tools: box.definitions(),
        runTool: async (block, signal) => {
          const t0 = performance.now();
          const r = await box.run(block, signal);
          toolMs += performance.now() - t0;
          if (r.isError) throw new Error(`bench turn: ${block.name} failed: ${r.content}`);
          return r;
        },
        emit: (e) => {
          const t0 = performance.now();
          JSON.stringify(boundEvent(stamped(e, "bench-turn", 1)));
          eventMs += performance.now() - t0;
        },
        maxTurns: 30,
      });
      if (out.status !== "completed" || out.turns !== script.length + 1)
        throw new Error(`bench turn: ended ${out.status} after ${out.turns} turns`);
      if (run > 0) turns.push(...per);
    }
    const own = turns.map((t) => t.wall - t.model);
    const parts = {
      tool_ms_median: round(median(turns.map((t) => t.tool)), 3),
      events_ms_median: round(median(turns.map((t) => t.events)), 3),
      loop_ms_median: round(median(turns.map((t) => t.wall - t.model - t.tool - t.events)), 3),
      model_ms_median: round(median(turns.map((t) => t.model)), 4),
    };
    // Each run's turns alternate, editor first: even ones are the editor's, odd ones bash's.
    const bashOwn = turns.filter((_, i) => i % 2 === 1).map((t) => t.wall - t.model);
    const editorOwn = turns.filter((_, i) => i % 2 === 0).map((t) => t.wall - t.model);
    const cli = await timeMedian(15, () => execFileP("docker", ["exec", "-u", "1000", sb.name, "true"]));
    const turnOwn = round(median(own), 3);
    return {
      turns: turns.length,
      turn_own_ms_median: turnOwn,
      turn_own_ms_p90: round([...own].sort((a, b) => a - b)[Math.floor(own.length * 0.9)]!, 3),
      editor_turn_own_ms_median: round(median(editorOwn), 3),
      bash_turn_own_ms_median: round(median(bashOwn), 3),
      parts,
      docker_exec_ms: cli,
      ratio_docker_exec_over_turn: round(cli / turnOwn, 1),
    };
  } finally {
    await sb.destroy();
  }
}
