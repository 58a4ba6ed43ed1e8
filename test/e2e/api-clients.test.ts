// The HTTP API's two examples as a user runs them: examples/api/fix.py (python3, standard library
// only) and examples/api/fix.sh (curl), against a real dashboard and a worker process on the local
// backend (test/support/backend.ts) with the scripted model. Each enqueues, follows the live events
// to the end and prints the patch; the patch must apply and make the tests pass.
//
// Backend: local (a worker process: `LOCAL_WORKER_ENV`; the HTTP API and its examples are the
// subject).
import { execFile, execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/core/config/config.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { LOCAL_WORKER_ENV } from "../support/backend.js";
import { removeDir, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { startFakeAnthropic, type FakeAnthropic } from "../support/fake-anthropic.js";
import { byTurn, clampScript } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const EXAMPLES = new URL("../../examples/api/", import.meta.url).pathname;
const QUEUE = "api-clients";
const WRITE = "api-clients-write-token-012345";

function run(
  file: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env }, maxBuffer: 16 << 20 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** The patch applied to a fresh copy of the example: the tests pass. */
function expectFixes(patch: string): void {
  const copy = mkdtempSync(join(tmpdir(), "pb-api-clients-"));
  cpSync(CLAMP, copy, { recursive: true });
  writeFileSync(join(copy, "fix.diff"), patch);
  execFileSync("git", ["apply", "fix.diff"], { cwd: copy });
  expect(
    execFileSync("python3", ["-m", "unittest", "-q"], {
      cwd: copy,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    }),
  ).toBe("");
  removeDir(copy);
}

describe("the HTTP API's examples", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let worker: WorkerProc;
  let dash: Dashboard;
  let env: Record<string, string>;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeAnthropic(byTurn(clampScript()));
    worker = startWorkerProc({
      ...LOCAL_WORKER_ENV,
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: QUEUE,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_LOCAL_REPO_ROOTS: `${dirname(CLAMP)},${tmpdir()}`,
    }); // the API's jobs: only under the worker's roots
    await worker.waitFor(new RegExp(`ready: queue ${QUEUE}`));
    const config = loadConfig({
      ...process.env,
      PATCHBAY_API_TOKENS: `examples:write:${WRITE}`,
      PATCHBAY_API_REPO_ROOTS: `${dirname(CLAMP)},${tmpdir()}`,
    });
    dash = await startDashboard({
      port: 0,
      redisUrl: redis.url,
      queueName: QUEUE,
      token: "api-clients-dashboard-token-01",
      config,
    });
    env = { PATCHBAY_URL: dash.url, PATCHBAY_TOKEN: WRITE };
  });

  afterAll(async () => {
    await dash?.close();
    await worker?.stop("SIGTERM");
    await fake?.close();
    await redis?.stop();
  });

  it("fix.py (python3's standard library) enqueues, follows the events to job_finished and prints a patch that applies", async () => {
    const r = await run(
      "python3",
      [
        join(EXAMPLES, "fix.py"),
        "--repo",
        CLAMP,
        "--task",
        "Fix clamp (python client).",
        "--verify",
        "python3 -m unittest -q",
        "--job-id",
        "py-client-1",
      ],
      env,
    );
    expect(r.stderr).toMatch(/job py-client-1 enqueued/);
    expect(r.stderr).toMatch(/turn \d+: str_replace_based_edit_tool/);
    expect(r.stderr).toMatch(/verify: python3 -m unittest -q -> exit 0/);
    expect(r.stderr).toMatch(/finished: completed, 6 turns/);
    expect(r.code).toBe(0);
    expectFixes(r.stdout);
  });

  it("fix.py says what is wrong with a bad spec, by field, and exits 2", async () => {
    const r = await run(
      "python3",
      [join(EXAMPLES, "fix.py"), "--repo", join(tmpdir(), "pb-api-no-such-repo"), "--task", "x"],
      env,
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/POST \/api\/v1\/jobs: 400 invalid JobSpec: repo\.path/);
    expect(r.stderr).toContain(`  repo.path: ${join(tmpdir(), "pb-api-no-such-repo")} does not exist`);
  });

  it("fix.sh (curl) enqueues a spec file, follows the events and prints a patch that applies", async () => {
    const dir = mkdtempSync(join(tmpdir(), "pb-api-clients-"));
    writeFileSync(
      join(dir, "spec.json"),
      JSON.stringify({ task: "Fix clamp (curl client).", repo: { path: CLAMP }, verify: "python3 -m unittest -q" }),
    );
    const r = await run("sh", [join(EXAMPLES, "fix.sh"), join(dir, "spec.json")], env);
    expect(r.stderr).toMatch(/job \S+ enqueued/);
    expect(r.stderr).toMatch(/ {2}job_finished/);
    expect(r.stderr).toMatch(/: completed$/m);
    expect(r.code).toBe(0);
    expectFixes(r.stdout);
    removeDir(dir);
  });
});
