// Every command that takes --out writes into a directory that does not exist yet (and its missing
// parents), as `run` always did: `campaign status --out DIR` failed with ENOENT. The list of such
// commands is read from the command tables, so a new one is covered here or this test fails.
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Command } from "../../src/cli/command.js";
import { submitCommands } from "../../src/cli/submit.js";
import { inspectCommands } from "../../src/cli/inspect.js";
import { adminCommands } from "../../src/cli/admin.js";
import { batchCommands } from "../../src/cli/batch-command.js";
import { campaignCommands } from "../../src/cli/campaign-command.js";
import { webCommands } from "../../src/cli/web.js";
import { ensureBuilt, patchbay, ROOT } from "../support/cli-helpers.js";
import { LOCAL_WORKER_ENV } from "../support/backend.js";
import { removeDir, startRedis, startWorkerProc } from "../support/cluster.js";
import { startFakeAnthropic, type FakeAnthropic } from "../support/fake-anthropic.js";
import { byTurn, clampScript } from "../support/scripts.js";

const CLAMP = join(ROOT, "examples/clamp");
const ALL: Record<string, Command> = {
  ...submitCommands,
  ...inspectCommands,
  ...adminCommands,
  ...batchCommands,
  ...campaignCommands,
  ...webCommands,
};
/** The commands this file runs with an --out that does not exist (view's --out is a file: its directory). */
const COVERED = ["run", "result", "batch wait", "batch run", "campaign run", "campaign status", "view"];

describe("--out DIR that does not exist yet", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let dir: string;
  const q = "q-out-dirs";
  const env = () => ({ ...LOCAL_WORKER_ENV, ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "test-key" });
  const pb = (args: string[]) =>
    patchbay([...args, ...(args[0] === "view" ? [] : ["--queue", q, "--redis-url", redis.url])], env(), {
      timeoutMs: 180_000,
    });
  /** A fresh path two levels below a directory that does not exist. */
  const missing = (name: string) => join(dir, name, "not", "there");

  beforeAll(async () => {
    await ensureBuilt();
    redis = await startRedis();
    fake = await startFakeAnthropic(byTurn(clampScript()));
    dir = mkdtempSync(join(tmpdir(), "pb-out-dirs-"));
  });

  afterAll(async () => {
    await fake?.close();
    await redis?.stop();
    if (dir) removeDir(dir);
  });

  it("is every command that takes --out (a new one must be added here)", () => {
    const withOut = Object.entries(ALL)
      .filter(([, c]) => c.options && "out" in c.options)
      .map(([name]) => name)
      .sort();
    expect(withOut).toEqual([...COVERED].sort());
  });

  it("campaign status --out makes DIR, with no worker (the reported ENOENT)", async () => {
    const file = join(dir, "c.yaml");
    writeFileSync(file, "name: outdirs\ntask: nothing\nrepos:\n  - git: https://git.invalid/a.git\n");
    const sub = await pb(["campaign", "submit", file]);
    expect(sub.code, sub.stderr).toBe(0);
    const out = missing("campaign-status");
    const st = await pb(["campaign", "status", "outdirs", "--out", out]);
    expect(st.code, st.stderr).toBe(0);
    expect(readdirSync(out).sort()).toEqual(["summary.json", "summary.md"]);
  });

  it("run, result, batch run, batch wait, campaign run and view make DIR (through a worker)", async () => {
    const w = startWorkerProc({ ...env(), REDIS_URL: redis.url, PATCHBAY_QUEUE: q });
    try {
      await w.waitFor(new RegExp(`ready: queue ${q}`));
      const job = ["--repo", CLAMP, "--task", "Make the failing tests pass."];
      const runOut = missing("run");
      const ran = await pb(["run", ...job, "--out", runOut, "--json"]);
      expect(ran.code, ran.stderr).toBe(0);
      expect(readdirSync(runOut)).toContain("patch.diff");
      const id = (JSON.parse(ran.stdout) as { jobId: string }).jobId;

      const resultOut = missing("result");
      const res = await pb(["result", id, "--out", resultOut]);
      expect(res.code, res.stderr).toBe(0);
      expect(readdirSync(resultOut).sort()).toEqual([
        "patch.diff",
        "result.json",
        "transcript.html",
        "transcript.jsonl",
      ]);

      const viewOut = join(missing("view"), "page.html");
      const view = await pb(["view", join(runOut, "transcript.jsonl"), "--out", viewOut]);
      expect(view.code, view.stderr).toBe(0);
      expect(existsSync(viewOut)).toBe(true);

      const tasks = join(dir, "tasks.jsonl");
      writeFileSync(tasks, JSON.stringify({ task: "Make the failing tests pass.", repo: { path: CLAMP } }) + "\n");
      const batchOut = missing("batch-run");
      const br = await pb(["batch", "run", tasks, "--name", "outdirs-b", "--out", batchOut]);
      expect(br.code, br.stderr).toBe(0);
      expect(readdirSync(batchOut)).toContain("summary.json");
      const waitOut = missing("batch-wait");
      const bw = await pb(["batch", "wait", "outdirs-b", "--out", waitOut]);
      expect(bw.code, bw.stderr).toBe(0);
      expect(readdirSync(waitOut)).toContain("summary.md");

      // A repository that cannot be fetched: the job fails, and the results are written all the same.
      const file = join(dir, "run.yaml");
      writeFileSync(file, "name: outdirs-run\ntask: nothing\nrepos:\n  - git: https://git.invalid/b.git\n");
      const campaignOut = missing("campaign-run");
      const cr = await pb(["campaign", "run", file, "--out", campaignOut]);
      expect(cr.code, cr.stderr).not.toBe(2);
      expect(readdirSync(campaignOut)).toEqual(expect.arrayContaining(["summary.json", "summary.md"]));
    } finally {
      await w.stop();
    }
  }, 600_000);
});
