// `patchbay eval` end to end, through docs/eval.md's worked example run as written: a worker with
// the scripted model (test/support/eval-sets.ts's script replays each instance's gold edits, one
// deliberately wrong), Redis of this test's own, Docker, and the task sets' local git repos. Then
// what the run made: SWE-bench's files in SWE-bench's shapes, the outcomes known in advance, a
// second run that adds no job and grades nothing, the gold predictions all resolved by `eval
// grade`, `eval compare` naming the one instance that differs, the run recorded for the
// dashboard, and the instance's tests never in what the agent saw.
//
// Needs: Docker with the sandbox image (and the per-repo Node image, built here), redis-server.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, ensureBuilt, patchbay, ROOT } from "../support/cli-helpers.js";
import { startRedis } from "../support/cluster.js";
import { makeTaskSets, scriptFor, WRONG_ID, type TaskSets } from "../support/eval-sets.js";
import { buildNodeImage } from "../support/node-image.js";
import { reportJsonProblems, runSummaryProblems } from "../support/swebench-shapes.js";

const MARK = "<!-- example: test/e2e/eval.test.ts -->";
const sh = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;

/** The `$ ` commands of docs/eval.md's worked example. */
function exampleCommands(): string[] {
  const doc = readFileSync(join(ROOT, "docs/eval.md"), "utf8");
  const at = doc.indexOf(MARK);
  expect(at, `docs/eval.md has no block marked ${MARK}`).toBeGreaterThan(0);
  const block = /```[a-z]*\n([\s\S]*?)```/.exec(doc.slice(at))![1]!;
  return block
    .split("\n")
    .filter((l) => l.startsWith("$ "))
    .map((l) => l.slice(2));
}

describe("patchbay eval, as docs/eval.md's worked example runs it", { timeout: 900_000 }, () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let dir: string;
  let sets: TaskSets;
  const outputs: { command: string; code: number | null; output: string }[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    await buildNodeImage();
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), "pb-eval-"));
    sets = await makeTaskSets(dir);
    scriptFor(sets);
    writeFileSync(join(dir, "gold.jsonl"), sets.gold.map((p) => JSON.stringify(p) + "\n").join(""));
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env))
      if (v !== undefined && !/^(ANTHROPIC_|PATCHBAY_|VITEST)/.test(k)) env[k] = v;
    env.REDIS_URL = redis.url;
    const script = [`cd ${sh(dir)}`, "T=$(mktemp -d)"];
    exampleCommands().forEach((c, i) => {
      const command = c.replace(/(^|[\s($|;&])patchbay(?= )/g, `$1${sh(process.execPath)} ${sh(BIN)}`);
      if (command.trimEnd().endsWith("&"))
        script.push(
          `${command.replace(/&\s*$/, "")} > "$T/out.${i}" 2>&1 &`,
          `echo $! >> "$T/pids"`,
          `echo 0 > "$T/rc.${i}"`,
        );
      else script.push(`{ ${command}\n} > "$T/out.${i}" 2>&1; echo $? > "$T/rc.${i}"`);
    });
    script.push(`kill $(cat "$T/pids") 2>/dev/null; wait; echo "$T"`);
    const r = await run(script.join("\n") + "\n", dir, env);
    const t = r.output.trim().split("\n").at(-1)!;
    exampleCommands().forEach((command, i) =>
      outputs.push({
        command,
        code: existsSync(join(t, `rc.${i}`)) ? Number(readFileSync(join(t, `rc.${i}`), "utf8")) : null,
        output: existsSync(join(t, `out.${i}`)) ? readFileSync(join(t, `out.${i}`), "utf8") : "(not run)",
      }),
    );
    rmSync(t, { recursive: true, force: true });
  }, 900_000);

  afterAll(async () => {
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const out = (n: number) => outputs[n]!;

  it("runs every command of the example; each exits 0", () => {
    expect(outputs.map((o) => o.command)).toEqual([
      "patchbay worker --scripted script.yaml --concurrency 4 &",
      "patchbay eval run set.jsonl --name first",
      "patchbay eval run set.jsonl --name first",
      "patchbay eval grade set.jsonl --predictions gold.jsonl --name gold",
      "patchbay eval compare patchbay-eval/gold patchbay-eval/first",
      "patchbay eval run set.jsonl --name twice --candidates 2",
    ]);
    for (const o of outputs.slice(1))
      expect({ command: o.command, code: o.code }, o.output).toEqual({ command: o.command, code: 0 });
  });

  it("eval run: preds.jsonl, a report.json per instance and a summary in SWE-bench's shapes; the wrong one unresolved", () => {
    const run = join(dir, "patchbay-eval/first");
    const ids = sets.instances.map((i) => i.instance_id);
    const preds = readFileSync(join(run, "preds.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(preds.map((p) => p.instance_id).sort()).toEqual([...ids].sort());
    for (const p of preds) expect(p.model_patch, p.instance_id).toMatch(/^diff --git /);
    for (const id of ids) {
      const report = JSON.parse(readFileSync(join(run, id, "report.json"), "utf8"));
      expect(reportJsonProblems(report), id).toEqual([]);
      expect(report[id].resolved, id).toBe(id !== WRONG_ID);
      expect(readFileSync(join(run, id, "transcript.jsonl"), "utf8")).toContain('"type":"job_finished"');
    }
    const s = JSON.parse(readFileSync(join(run, "summary.json"), "utf8"));
    expect(runSummaryProblems(s)).toEqual([]);
    expect(s).toMatchObject({
      total_instances: ids.length,
      submitted_instances: ids.length,
      completed_instances: ids.length,
      resolved_instances: ids.length - 1,
      unresolved_instances: 1,
      unresolved_ids: [WRONG_ID],
      schema_version: 2,
    });
    // The scripted model costs nothing; the harness's overhead is measured per instance.
    expect(s.patchbay).toMatchObject({ run: "first", candidates: 1, costUsd: 0, costPerResolvedUsd: 0 });
    expect(s.patchbay.passAtK["1"]).toBeCloseTo((ids.length - 1) / ids.length);
    for (const a of s.patchbay.instances) {
      expect(a.jobMs, a.instance_id).toBeGreaterThan(0);
      expect(a.gradeMs, a.instance_id).toBeGreaterThan(0);
      expect(a.harnessMs, a.instance_id).toBe(Math.max(0, a.jobMs - a.modelMs) + a.gradeMs);
    }
    expect(s.patchbay.harnessMs.median).toBeGreaterThan(0);
    const ms = (k: "jobMs" | "modelMs" | "gradeMs") =>
      s.patchbay.instances.map((a: Record<string, number>) => a[k]).sort((x: number, y: number) => x - y)[
        ids.length >> 1
      ];
    // Read after the second run, which graded nothing: the wall time is still the first run's.
    expect(s.patchbay.wallMs).toBeGreaterThan(ms("jobMs"));
    console.log(
      `eval first: ${ids.length} instances; harness overhead per instance median ${s.patchbay.harnessMs.median} ms ` +
        `(job ${ms("jobMs")} ms, model ${ms("modelMs")} ms, grading ${ms("gradeMs")} ms); wall ${s.patchbay.wallMs} ms`,
    );
    expect(out(1).output).toMatch(new RegExp(`resolved ${ids.length - 1} of ${ids.length} instances`));
  });

  it("a second eval run adds no job and grades nothing again", () => {
    const second = out(2).output;
    expect(second).toMatch(/0 jobs enqueued|already there/);
    expect(second.match(/graded before/g)?.length).toBe(sets.instances.length);
  });

  it("eval grade: every gold patch resolves its instance", () => {
    const s = JSON.parse(readFileSync(join(dir, "patchbay-eval/gold/summary.json"), "utf8"));
    expect(runSummaryProblems(s)).toEqual([]);
    expect(s.resolved_instances).toBe(sets.instances.length);
    expect(s.error_ids).toEqual([]);
  });

  it("eval compare names the one instance that differs", () => {
    expect(out(4).output).toContain(WRONG_ID);
    const others = sets.instances.map((i) => i.instance_id).filter((id) => id !== WRONG_ID);
    for (const id of others) expect(out(4).output).not.toContain(id);
  });

  it("eval run --candidates 2: two jobs per instance, pass@1 and pass@2, the second candidate's files", () => {
    const run = join(dir, "patchbay-eval/twice");
    const s = JSON.parse(readFileSync(join(run, "summary.json"), "utf8"));
    expect(runSummaryProblems(s)).toEqual([]);
    const n = sets.instances.length;
    expect(s.patchbay.candidates).toBe(2);
    expect(Object.keys(s.patchbay.passAtK).sort()).toEqual(["1", "2"]);
    // The scripted model answers each candidate alike: pass@2 is pass@1.
    expect(s.patchbay.passAtK["1"]).toBeCloseTo((n - 1) / n);
    expect(s.patchbay.passAtK["2"]).toBeCloseTo((n - 1) / n);
    for (const a of s.patchbay.instances) {
      expect(a.candidates, a.instance_id).toBe(2);
      expect(a.jobIds, a.instance_id).toHaveLength(2);
      expect(a.resolvedCandidates, a.instance_id).toBe(a.instance_id === WRONG_ID ? 0 : 2);
      const second = JSON.parse(readFileSync(join(run, a.instance_id, "candidate-2", "report.json"), "utf8"));
      expect(reportJsonProblems(second)).toEqual([]);
    }
    // One prediction per instance in preds.jsonl: the first candidate's, as SWE-bench takes one.
    expect(readFileSync(join(run, "preds.jsonl"), "utf8").trim().split("\n")).toHaveLength(n);
    expect(out(5).output).toMatch(new RegExp(`${n * 2} jobs enqueued`));
    expect(out(5).output).toMatch(/pass@1 \d+\.\d%; pass@2 \d+\.\d%/);
  });

  it("the agent never saw the instance's tests: no transcript holds a line the test patch adds", () => {
    const run = join(dir, "patchbay-eval/first");
    for (const inst of sets.instances) {
      const added = inst.test_patch
        .split("\n")
        .filter((l) => l.startsWith("+") && !l.startsWith("+++") && l.trim().length > 12)
        .map((l) => l.slice(1).trim());
      expect(added.length, inst.instance_id).toBeGreaterThan(0);
      const transcript = readFileSync(join(run, inst.instance_id, "transcript.jsonl"), "utf8");
      for (const line of added)
        expect(transcript.includes(JSON.stringify(line).slice(1, -1)), `${inst.instance_id}: ${line}`).toBe(false);
    }
  });

  it("a set naming a local repo outside its own directory is refused (exit 2), unless --repos-anywhere", async () => {
    const sub = join(dir, "elsewhere");
    mkdirSync(sub);
    const inst = {
      ...sets.instances[0]!,
      patchbay: { ...sets.instances[0]!.patchbay, repo: `../${basename(sets.instances[0]!.patchbay.repo)}` },
    };
    writeFileSync(join(sub, "set.jsonl"), JSON.stringify(inst) + "\n");
    writeFileSync(join(sub, "none.jsonl"), "");
    const args = [
      "eval",
      "grade",
      join(sub, "set.jsonl"),
      "--predictions",
      join(sub, "none.jsonl"),
      "--name",
      "scope",
      "--out",
      join(sub, "out"),
    ];
    const refused = await patchbay(args);
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toContain(`${inst.instance_id}: ${sets.instances[0]!.patchbay.repo}`);
    expect(refused.stderr).toContain("--repos-anywhere");
    const allowed = await patchbay([...args, "--repos-anywhere"]);
    expect(allowed.code, allowed.stderr).toBe(0);
  });

  it("the run is recorded in Redis for the dashboard's eval page", async () => {
    const { Redis } = await import("ioredis");
    const r = new Redis(redis.url);
    try {
      const keys = await r.keys("*eval*");
      expect(keys.join(" ")).toContain("first");
    } finally {
      r.disconnect();
    }
  });
});

/** Runs a bash script; resolves to its exit code and its stdout and stderr together. */
function run(
  script: string,
  cwd: string,
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const p = spawn("bash", ["-c", script], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    p.stdout.on("data", (d) => (output += d));
    p.stderr.on("data", (d) => (output += d));
    p.on("exit", (code) => resolve({ code, output }));
  });
}
