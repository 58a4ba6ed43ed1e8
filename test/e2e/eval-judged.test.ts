// `patchbay eval run SET --candidates 3` where a verify judges each instance's candidates, end to
// end as docs/eval.md's best-of-K block runs it: the real CLI, a real worker (`patchbay worker`),
// Docker, Redis of this test's own and BullMQ's flows. The model is the Anthropic-compatible fake
// (test/support/fake-anthropic.ts), which tells each instance's three conversations apart, so its
// candidates differ: one makes the gold edits, one an edit verify passes that fixes nothing (a
// smaller patch, so the job picks it where both pass), one an edit verify fails. Then what the run
// made: one judged job per instance, its children `<job>-C1..3`, every candidate graded in its own
// directory, the pick's files at the instance's top, a summary whose best-of-3 is the picks'
// share resolved beside pass@1 and the oracle's pass@3, a second run that adds and grades
// nothing, and no candidate shown the instance's tests.
//
// Needs: Docker with the sandbox image, redis-server.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, ensureBuilt, ROOT, spawnPatchbay } from "../support/cli-helpers.js";
import { startRedis } from "../support/cluster.js";
import { firstLine, makeTaskSets, type Edit, type RepoSpec, type TaskSets } from "../support/eval-sets.js";
import {
  reply,
  startFakeAnthropic,
  text,
  toolUse,
  type FakeAnthropic,
  type Policy,
} from "../support/fake-anthropic.js";
import { reportJsonProblems, runSummaryProblems } from "../support/swebench-shapes.js";

const MARK = "<!-- example: test/e2e/eval-judged.test.ts -->";
const sh = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
/** The two instances judged: both Python, so no image beyond the sandbox's. */
const IDS = ["fixtures__leap-4", "fixtures__roman-3"];
/** An edit that verify (the repository's unittest) passes and that fixes nothing. */
const NOOP: Edit[] = [{ path: "NOTES.txt", new: "x\n" }];
/** An edit that verify fails: a test of its own that fails. */
const BROKEN: Edit[] = [
  {
    path: "test_zz_candidate.py",
    new: "import unittest\n\n\nclass Candidate(unittest.TestCase):\n    def test_it(self):\n        self.fail('wrong')\n",
  },
];
/** Per instance, what its conversations 1, 2, 3 (in the order they reach the model) edit. */
const plans = (s: RepoSpec): (Edit[] | "gold")[] =>
  s.id === IDS[0] ? ["gold", NOOP, BROKEN] : ["gold", BROKEN, BROKEN];

/** The `$ ` command of docs/eval.md's best-of-K block. */
function exampleCommand(): string {
  const doc = readFileSync(join(ROOT, "docs/eval.md"), "utf8");
  const at = doc.indexOf(MARK);
  expect(at, `docs/eval.md has no block marked ${MARK}`).toBeGreaterThan(0);
  const block = /```[a-z]*\n([\s\S]*?)```/.exec(doc.slice(at))![1]!;
  const lines = block.split("\n").filter((l) => l.startsWith("$ "));
  expect(lines).toHaveLength(1);
  return lines[0]!.slice(2);
}

/**
 * The fake model: a conversation's instance is the one whose problem's first line its task holds;
 * each new conversation of an instance takes the instance's next number, which its tool_use ids
 * carry; its first turn makes that number's edits, every later one is the final answer.
 */
function judgedPolicy(specs: RepoSpec[]): Policy {
  const next = specs.map(() => 0);
  return ({ body }) => {
    const msgs: { role: string; content: unknown }[] = body.messages;
    const task = JSON.stringify(msgs[0]?.content ?? "");
    const i = specs.findIndex((s) => task.includes(JSON.stringify(firstLine(s.problem)).slice(1, -1)));
    if (i < 0) return reply(text("No instance of this test's set is in this task."));
    let conv: number | undefined;
    let step = 0;
    for (const m of msgs) {
      if (m.role !== "assistant" || !Array.isArray(m.content)) continue;
      step++;
      for (const b of m.content as { type: string; id?: string }[]) {
        const at = b.type === "tool_use" ? /^toolu_i\d+_c(\d+)_/.exec(b.id ?? "") : null;
        if (at) conv = Number(at[1]);
      }
    }
    conv ??= ++next[i]!;
    if (step > 0) return reply(text(`Conversation ${conv} of ${specs[i]!.id} is done.`));
    const plan = plans(specs[i]!)[(conv - 1) % 3]!;
    const edits = plan === "gold" ? specs[i]!.fix.edits : plan;
    return reply(
      ...edits.map((e, k) =>
        toolUse(
          "str_replace_based_edit_tool",
          e.old === undefined
            ? { command: "create", path: `/workspace/${e.path}`, file_text: e.new }
            : { command: "str_replace", path: `/workspace/${e.path}`, old_str: e.old, new_str: e.new },
          `toolu_i${i}_c${conv}_${k}`,
        ),
      ),
    );
  };
}

describe(
  "patchbay eval run --candidates 3 judged by verify, as docs/eval.md's block runs it",
  { timeout: 600_000 },
  () => {
    let redis: Awaited<ReturnType<typeof startRedis>>;
    let fake: FakeAnthropic;
    let worker: ReturnType<typeof spawnPatchbay> | undefined;
    let dir: string;
    let sets: TaskSets;
    let specs: RepoSpec[];
    const runs: { code: number | null; output: string; ms: number }[] = [];
    const run = () => join(dir, "patchbay-eval/judged");
    const json = (...p: string[]) => JSON.parse(readFileSync(join(run(), ...p), "utf8"));

    beforeAll(async () => {
      await ensureBuilt();
      redis = await startRedis();
      dir = mkdtempSync(join(tmpdir(), "pb-eval-judged-"));
      sets = await makeTaskSets(dir);
      specs = IDS.map((id) => sets.specs.find((s) => s.id === id)!);
      // The set of this test: the two instances' lines of the written set (repo paths relative to it).
      const lines = readFileSync(sets.file, "utf8").trim().split("\n");
      writeFileSync(sets.file, lines.filter((l) => IDS.includes(JSON.parse(l).instance_id)).join("\n") + "\n");
      fake = await startFakeAnthropic(judgedPolicy(specs));
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(process.env))
        if (v !== undefined && !/^(ANTHROPIC_|PATCHBAY_|VITEST)/.test(k)) env[k] = v;
      Object.assign(env, { REDIS_URL: redis.url, ANTHROPIC_API_KEY: "test-key", ANTHROPIC_BASE_URL: fake.url });
      worker = spawnPatchbay(["worker", "--concurrency", "4"], env);
      const command = exampleCommand().replace(/(^|[\s($|;&])patchbay(?= )/g, `$1${sh(process.execPath)} ${sh(BIN)}`);
      for (let n = 0; n < 2; n++) runs.push(await bash(command, dir, env));
    }, 600_000);

    afterAll(async () => {
      if (worker && worker.proc.exitCode === null) {
        worker.proc.kill("SIGTERM");
        await worker.exited;
      }
      await redis?.stop();
      await fake?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it("runs the block's command as written; both runs exit 0", () => {
      expect(exampleCommand()).toBe(
        "patchbay eval run set.jsonl --name judged --candidates 3 --verify 'python3 -m unittest'",
      );
      for (const r of runs) expect(r.code, r.output).toBe(0);
      console.log(
        `eval judged: 2 instances x 3 candidates; first run ${Math.round(runs[0]!.ms)} ms, second ${Math.round(runs[1]!.ms)} ms`,
      );
    });

    it("one job per instance with verify and candidates 3, its children -C1..3, each graded in its own directory", () => {
      const s = json("summary.json");
      expect(s.patchbay.instances.map((a: { instance_id: string }) => a.instance_id).sort()).toEqual([...IDS].sort());
      for (const a of s.patchbay.instances) {
        const id: string = a.instance_id;
        const top = json(id, "result.json");
        const job: string = a.jobIds[0].replace(/-C1$/, "");
        expect(job, id).toMatch(/^eval-judged-L[12]$/);
        expect(a.jobIds, id).toEqual([1, 2, 3].map((n) => `${job}-C${n}`));
        expect(
          top.candidates.map((c: { jobId: string }) => c.jobId),
          id,
        ).toEqual(a.jobIds);
        const started = readFileSync(join(run(), id, "transcript.jsonl"), "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
          .find((e) => e.type === "job_started");
        expect(started.spec, id).toMatchObject({ verify: "python3 -m unittest", candidates: 3 });
        for (let n = 1; n <= 3; n++) {
          const report = json(id, `candidate-${n}`, "report.json");
          expect(reportJsonProblems(report), `${id} candidate ${n}`).toEqual([]);
          expect(json(id, `candidate-${n}`, "grade.json").jobId, `${id} candidate ${n}`).toBe(`${job}-C${n}`);
        }
      }
      // The batch holds the two judged jobs and nothing else: the candidates are the jobs' own children.
      expect(runs[0]!.output).toMatch(/\b2 jobs enqueued/);
    });

    it("the pick's files are the instance's: result.json, candidate_picked, report.json, patch.diff, preds.jsonl", () => {
      const preds = readFileSync(join(run(), "preds.jsonl"), "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(preds.map((p) => p.instance_id).sort()).toEqual([...IDS].sort());
      for (const id of IDS) {
        const top = json(id, "result.json");
        expect(top.candidates, id).toHaveLength(3);
        expect(top.picked, id).toBeGreaterThanOrEqual(1);
        const events = readFileSync(join(run(), id, "transcript.jsonl"), "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l));
        expect(
          events.find((e) => e.type === "candidate_picked"),
          id,
        ).toMatchObject({ picked: top.picked });
        const pick = join(run(), id, `candidate-${top.picked}`);
        expect(readFileSync(join(run(), id, "report.json"), "utf8"), id).toBe(
          readFileSync(join(pick, "report.json"), "utf8"),
        );
        const patch = readFileSync(join(pick, "patch.diff"), "utf8");
        expect(readFileSync(join(run(), id, "patch.diff"), "utf8"), id).toBe(patch);
        expect(preds.find((p) => p.instance_id === id).model_patch, id).toBe(patch);
      }
    });

    it("the summary: best-of-3 is the picks' share resolved, beside pass@1 and the oracle's pass@3", () => {
      const s = json("summary.json");
      expect(runSummaryProblems(s)).toEqual([]);
      const p = s.patchbay;
      expect(p).toMatchObject({ run: "judged", candidates: 3, judged: IDS.length });
      let picksResolved = 0;
      let resolvedShare = 0;
      for (const a of p.instances) {
        const top = json(a.instance_id, "result.json");
        expect(a.picked, a.instance_id).toBe(top.picked);
        const resolved = [1, 2, 3].map(
          (n) => json(a.instance_id, `candidate-${n}`, "report.json")[a.instance_id].resolved,
        );
        expect(a.resolvedCandidates, a.instance_id).toBe(resolved.filter(Boolean).length);
        resolvedShare += resolved.filter(Boolean).length / 3;
        if (resolved[a.picked - 1]) picksResolved++;
      }
      expect(p.bestOfK).toBeCloseTo(picksResolved / IDS.length);
      expect(p.passAtK["1"]).toBeCloseTo(resolvedShare / IDS.length);
      expect(p.passAtK["3"]).toBeGreaterThanOrEqual(p.bestOfK);
      // Known in advance: one gold candidate per instance; leap's job picks the smaller patch that fixes
      // nothing, roman's the gold one, the only one verify passed.
      expect(p.passAtK["1"]).toBeCloseTo(1 / 3);
      expect(p.bestOfK).toBeCloseTo(1 / 2);
      expect(p.passAtK["3"]).toBeCloseTo(1);
      expect(runs[0]!.output).toMatch(
        /pass@1 \d+\.\d%; best-of-3 \d+\.\d% \(\d+ instances? judged by verify\); pass@3 \d+\.\d% \(oracle\)/,
      );
      console.log(`eval judged: pass@1 ${p.passAtK["1"]}, best-of-3 ${p.bestOfK}, pass@3 ${p.passAtK["3"]}`);
    });

    it("a second identical run enqueues nothing and grades nothing again", () => {
      const second = runs[1]!.output;
      expect(second).toMatch(/0 jobs enqueued|already there/);
      const progress = second.split("\n").filter((l) => /^patchbay: \[\d+\/\d+\]/.test(l));
      expect(progress).toHaveLength(IDS.length * 3);
      for (const l of progress) expect(l).toContain("graded before");
    });

    it("no candidate saw the instance's tests: no transcript holds a line the test patch adds", () => {
      for (const inst of sets.instances.filter((x) => IDS.includes(x.instance_id))) {
        const added = inst.test_patch
          .split("\n")
          .filter((l) => l.startsWith("+") && !l.startsWith("+++") && l.trim().length > 12)
          .map((l) => l.slice(1).trim());
        expect(added.length, inst.instance_id).toBeGreaterThan(0);
        for (const n of [1, 2, 3]) {
          const transcript = readFileSync(join(run(), inst.instance_id, `candidate-${n}`, "transcript.jsonl"), "utf8");
          expect(transcript).toContain('"type":"job_finished"');
          for (const line of added)
            expect(transcript.includes(JSON.stringify(line).slice(1, -1)), `${inst.instance_id} C${n}: ${line}`).toBe(
              false,
            );
        }
      }
    });
  },
);

/** Runs a command line with bash in `cwd`; resolves to its exit code, its stdout and stderr together, its wall time. */
function bash(
  command: string,
  cwd: string,
  env: Record<string, string>,
): Promise<{ code: number | null; output: string; ms: number }> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const p = spawn("bash", ["-c", command], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    p.stdout.on("data", (d) => (output += d));
    p.stderr.on("data", (d) => (output += d));
    p.on("exit", (code) => resolve({ code, output, ms: performance.now() - t0 }));
  });
}
