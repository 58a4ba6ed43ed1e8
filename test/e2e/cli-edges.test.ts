// The rough edges a new user hits (issue 25 §3), each through the real part: the `patchbay` CLI as a
// process (bin/patchbay.js, built dist/), a Redis of this test's own, worker processes and runJob on
// the local backend (test/support/backend.ts), the real SDK against the scripted server.
//
// Backend: local (worker processes: `LOCAL_WORKER_ENV`; `runJob` in a script and `run --local` on
// it too).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ClientOptionsError, PatchbayClient } from "../../src/queue/client.js";
import { settleWithin, withTimeout } from "../../src/core/timeout.js";
import { formatEvent } from "../../src/cli/format.js";
import { BIN, ensureBuilt, patchbay, REFUSED_REDIS, ROOT, spawnPatchbay } from "../support/cli-helpers.js";
import { LOCAL_WORKER_ENV } from "../support/backend.js";
import { removeDir, startRedis, startWorkerProc } from "../support/cluster.js";
import { startFakeAnthropic, type FakeAnthropic } from "../support/fake-anthropic.js";
import { byTurn, clampScript } from "../support/scripts.js";

const CLAMP = join(ROOT, "examples/clamp");
const tmp = () => mkdtempSync(join(tmpdir(), "pb-edges-"));

describe("the rough edges, through the CLI and the library", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  const clients: PatchbayClient[] = [];
  const dirs: string[] = [];
  const dir = () => {
    const d = tmp();
    dirs.push(d);
    return d;
  };
  const client = (queueName: string) => {
    const c = new PatchbayClient({ redisUrl: redis.url, queueName });
    clients.push(c);
    return c;
  };
  /** patchbay against this test's Redis, on a queue given by flag. */
  const pb = (queue: string, args: string[], env: Record<string, string> = {}) =>
    patchbay([...args, "--queue", queue, "--redis-url", redis.url], env);

  beforeAll(async () => {
    await ensureBuilt();
    redis = await startRedis();
    fake = await startFakeAnthropic(byTurn(clampScript()));
  });

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await fake?.close();
    await redis?.stop();
    for (const d of dirs) removeDir(d);
  });

  describe("durations are bounded (Node's timers overflow past ~24.8 days and fire at once)", () => {
    it("--timeout past 7 days is refused, naming the flag and the bound, before Redis is reached", async () => {
      const r = await patchbay([
        "run",
        "--repo",
        CLAMP,
        "--task",
        "x",
        "--timeout",
        "99999999",
        "--redis-url",
        REFUSED_REDIS,
      ]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/--timeout: must be at most 604800 \(seconds, 7 days\) \(got 99999999\)/);
    });

    it("a duration knob past 7 days is refused, naming the variable and the bound", async () => {
      const r = await patchbay(["status", "x", "--redis-url", REFUSED_REDIS], { PATCHBAY_LOCK_MS: "99999999999" });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/PATCHBAY_LOCK_MS: must be at most 604800000 ms \(7 days; got 99999999999\)/);
      const t = await patchbay(["status", "x", "--redis-url", REFUSED_REDIS], { PATCHBAY_MAX_TIMEOUT_SEC: "99999999" });
      expect(t.stderr).toMatch(/PATCHBAY_MAX_TIMEOUT_SEC: must be at most 604800 \(7 days; got 99999999\)/);
    });

    it("a wait past Node's timer range does not end at once (the timers chain)", async () => {
      const never = new Promise<never>(() => {});
      const order: string[] = [];
      const long = withTimeout(never, 2 ** 31 + 5, "overflowed").catch(() => order.push("long"));
      const settle = settleWithin(never, 2 ** 32).then(() => order.push("settle"));
      // A 20 ms timer: an overflowed one (1 ms) would fire first; ordered by Node's timer lists, not by a clock.
      await new Promise((r) => setTimeout(r, 20));
      order.push("20ms");
      expect(order).toEqual(["20ms"]);
      void long;
      void settle;
    });

    it("waitForResult refuses a timeoutMs past 7 days", async () => {
      await expect(client("q-dur").waitForResult("x", { timeoutMs: 3e9 })).rejects.toThrow(
        /timeoutMs must be a number of ms from 0 to 604800000 \(7 days\) \(got 3000000000\)/,
      );
    });
  });

  it("a waiting job cancelled with no worker is cancelled at once for status, list, result and watch", async () => {
    const q = "q-cancel-waiting";
    const e = await pb(q, ["enqueue", "--repo", CLAMP, "--task", "never taken"]);
    expect(e.code, e.stderr).toBe(0);
    const id = e.stdout.trim();
    expect(e.stderr).toContain(`patchbay: next: patchbay watch ${id} --queue ${q} --redis-url ${redis.url}`);
    const c = await pb(q, ["cancel", id]);
    expect(c.code, c.stderr).toBe(0);
    const st = await pb(q, ["status", id, "--json"]);
    expect(JSON.parse(st.stdout)[0]).toMatchObject({
      id,
      outcome: "cancelled",
      state: "completed",
      error: "the job was cancelled before it started",
    });
    expect((await pb(q, ["status", id])).stdout).toBe(`${id}\tcancelled\tthe job was cancelled before it started\n`);
    const list = await pb(q, ["list", "--json"]);
    expect(JSON.parse(list.stdout).find((j: { id: string }) => j.id === id)).toMatchObject({ outcome: "cancelled" });
    expect((await pb(q, ["list"])).stdout).toMatch(new RegExp(`^${id}\\s+cancelled\\s`, "m"));
    const res = await pb(q, ["result", id, "--json"]);
    expect(res.code).toBe(1); // it did not complete
    expect(JSON.parse(res.stdout)).toMatchObject({ status: "cancelled", jobId: id });
    expect(res.stderr).toMatch(new RegExp(`job ${id} cancelled`));
    const w = await pb(q, ["watch", id]);
    expect(w.code).toBe(5); // cancelled
    expect(w.stderr).toMatch(new RegExp(`job ${id} cancelled`));
    // The wait list no longer holds it: a worker that starts now has nothing to take.
    expect(await client(q).queue.getWaitingCount()).toBe(0);
  });

  describe("PatchbayClient's options and runJob's handles", () => {
    it("an unknown option is refused at run time, naming what it probably meant", () => {
      // @ts-expect-error: `queue` is not an option (queueName is): TypeScript refuses it too
      expect(() => new PatchbayClient({ queue: "x", redisUrl: redis.url })).toThrow(ClientOptionsError);
      expect(() => new PatchbayClient({ queue: "x" } as never)).toThrow(
        /unknown option "queue" \(did you mean "queueName"\?\); the options are redisUrl, queueName, unrefWhenIdle, connectionName, config/,
      );
      expect(() => new PatchbayClient({ queueName: 5 } as never)).toThrow(/queueName: /);
    });

    it("a script that runs one job with runJob holds nothing of ours once runJob returns, and exits by itself", async () => {
      const d = dir();
      const script = join(d, "one-job.mjs");
      writeFileSync(
        script,
        `import { runJob } from ${JSON.stringify(join(ROOT, "dist/index.js"))};
const r = await runJob({ task: "Fix the failing tests.", repo: { path: ${JSON.stringify(CLAMP)} } });
// Right after runJob: what still keeps the event loop alive (stdio pipes are the test's, not ours).
console.log(JSON.stringify({ status: r.status, resources: process.getActiveResourcesInfo() }));
`,
      );
      const r = await patchbay(
        [],
        { ...LOCAL_WORKER_ENV, ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "test-key" },
        { script, timeoutMs: 120_000 },
      );
      expect(r.code, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { status: string; resources: string[] };
      expect(out.status).toBe("completed");
      // No timer and no socket. (The stdio pipes are the test's; a ProcessWrap is the local backend's box
      // process, killed with the box and being reaped: it ends by itself, as the exit shows.)
      expect(out.resources.filter((x) => !/^(PipeWrap|TTYWrap|ProcessWrap)$/.test(x))).toEqual([]);
    });
  });

  describe("a local repo of the wrong kind is refused at the client", () => {
    it("--repo FILE, --archive DIR and a batch line with a file as its path", async () => {
      const d = dir();
      const file = join(d, "not-a-dir.txt");
      writeFileSync(file, "x\n");
      const r = await patchbay(["run", "--repo", file, "--task", "x", "--redis-url", REFUSED_REDIS]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        /--repo: \S+not-a-dir\.txt is a file; it must be the repository's directory \(a tar or tar\.gz goes in \{ archive \}: --archive FILE\)/,
      );
      const a = await patchbay(["enqueue", "--archive", d, "--task", "x", "--redis-url", REFUSED_REDIS]);
      expect(a.code).toBe(2);
      expect(a.stderr).toMatch(/--archive: \S+ is a directory; it must be a tar or tar\.gz file/);
      const tasks = join(d, "tasks.jsonl");
      writeFileSync(
        tasks,
        [
          JSON.stringify({ task: "ok", repo: { path: CLAMP } }),
          JSON.stringify({ task: "bad", repo: { path: file } }),
        ].join("\n") + "\n",
      );
      for (const args of [
        ["enqueue", "--batch", tasks],
        ["batch", "submit", tasks],
      ]) {
        const b = await patchbay([...args, "--redis-url", REFUSED_REDIS]);
        expect(b.code, args.join(" ")).toBe(2);
        expect(b.stderr, args.join(" ")).toMatch(
          /tasks\.jsonl:2: invalid JobSpec: repo\.path: \S+not-a-dir\.txt is a file/,
        );
      }
    });
  });

  it("a worker without Anthropic credentials warns at start and takes no job until it has some", async () => {
    const q = "q-no-credentials";
    const e = await pb(q, ["enqueue", "--repo", CLAMP, "--task", "needs a model"]);
    const id = e.stdout.trim();
    const sdkDir = dir(); // no SDK profile either
    const w = startWorkerProc({
      ...LOCAL_WORKER_ENV,
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: q,
      ANTHROPIC_API_KEY: "",
      ANTHROPIC_AUTH_TOKEN: "",
      ANTHROPIC_PROFILE: "",
      ANTHROPIC_CONFIG_DIR: sdkDir,
      ANTHROPIC_BASE_URL: fake.url,
    });
    try {
      await w.waitFor(new RegExp(`ready: queue ${q}, concurrency \\d+ \\(paused until healthy\\)`));
      expect(w.log()).toMatch(
        /WARN unhealthy: no Anthropic credentials: set ANTHROPIC_API_KEY \(or ANTHROPIC_AUTH_TOKEN, or an SDK profile\) where the worker runs; paused, taking no jobs/,
      );
      expect((await client(q).status(id)).state).toBe("waiting");
    } finally {
      await w.stop("SIGTERM");
    }
  });

  describe("hints carry the queue and the Redis", () => {
    it("run --queue Q: the no-worker hint and the Ctrl-C hints name --queue and --redis-url", async () => {
      const out = join(dir(), "out");
      const p = spawnPatchbay([
        "run",
        "--repo",
        CLAMP,
        "--task",
        "waits",
        "--queue",
        "q-hint",
        "--redis-url",
        redis.url,
        "--out",
        out,
      ]);
      await p.waitFor(/start one with: /);
      expect(p.out().stderr).toContain(`start one with: npx patchbay worker --queue q-hint --redis-url ${redis.url}`);
      p.proc.kill("SIGINT");
      expect(await p.exited).toBe(130);
      const id = /job (\S+) enqueued/.exec(p.out().stderr)![1];
      expect(p.out().stderr).toContain(`follow it: patchbay watch ${id} --queue q-hint --redis-url ${redis.url}`);
      expect(p.out().stderr).toContain(`stop it: patchbay cancel ${id} --queue q-hint --redis-url ${redis.url}`);
    });

    it("the library's no-worker warning names the queue's flags", async () => {
      const c = client("q-hint-lib");
      const id = await c.enqueue({ task: "waits", repo: { path: CLAMP } });
      const warned = new Promise<Error>((resolve) => {
        const on = (w: Error & { code?: string }) =>
          w.code === "PATCHBAY_NO_WORKER" && (process.off("warning", on), resolve(w));
        process.on("warning", on);
      });
      const ctl = new AbortController();
      const waiting = c.waitForResult(id, { signal: ctl.signal }).catch(() => {});
      const w = await warned;
      ctl.abort();
      await waiting;
      expect(w.message).toContain(`(npx patchbay worker --queue q-hint-lib --redis-url ${redis.url})`);
    });
  });

  it("run --local runs the job here as a worker would: the same result, transcript, files and exit code as run through a worker", async () => {
    const q = "q-local-vs-worker";
    const env = { ...LOCAL_WORKER_ENV, ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "test-key" };
    const w = startWorkerProc({ ...env, REDIS_URL: redis.url, PATCHBAY_QUEUE: q });
    const job = ["--repo", CLAMP, "--task", "Make the failing tests pass.", "--verify", "python3 -m unittest -q"];
    const [queuedOut, localOut] = [join(dir(), "queued"), join(dir(), "local")];
    try {
      await w.waitFor(new RegExp(`ready: queue ${q}`));
      const queued = await patchbay(["run", ...job, "--out", queuedOut, "--queue", q, "--redis-url", redis.url], env, {
        timeoutMs: 120_000,
      });
      const local = await patchbay(["run", ...job, "--out", localOut, "--local"], env, { timeoutMs: 120_000 });
      for (const r of [queued, local]) {
        expect(r.code, r.stderr).toBe(0);
        expect(r.stderr).toMatch(/turn 1: 1 tool call/);
        expect(r.stderr).toMatch(/patchbay: job \S+ completed; 1 file changed; patch: \S+patch\.diff/);
      }
      const read = (d: string) => ({
        result: JSON.parse(readFileSync(join(d, "result.json"), "utf8")) as Record<string, unknown>,
        types: readFileSync(join(d, "transcript.jsonl"), "utf8")
          .trim()
          .split("\n")
          .map((l) => (JSON.parse(l) as { type: string }).type),
        patch: readFileSync(join(d, "patch.diff"), "utf8"),
        html: readFileSync(join(d, "transcript.html"), "utf8"),
      });
      const [a, b] = [read(queuedOut), read(localOut)];
      expect(b.result).toMatchObject({
        status: a.result.status,
        verified: true,
        filesChanged: a.result.filesChanged,
        turns: a.result.turns,
      });
      // The same tokens (the scripted server's cache splits them between reads and writes by what it saw before).
      const tokens = (r: Record<string, unknown>) => {
        const u = r.usage as Record<string, number>;
        return { in: u.inputTokens! + u.cacheReadTokens! + u.cacheWriteTokens!, out: u.outputTokens };
      };
      expect(tokens(b.result)).toEqual(tokens(a.result));
      expect(b.patch).toBe(a.patch);
      expect(b.types).toEqual(a.types);
      expect(b.html).toMatch(/^<!doctype html>/i);
      // --out that holds files is refused without --force (before anything runs), and taken with it.
      const again = await patchbay(["run", ...job, "--out", localOut, "--local"], env);
      expect(again.code).toBe(2);
      expect(again.stderr).toMatch(/--out \S+ is not empty \(4 entries\): pass --force/);
      expect(typeof a.result.model).toBe("string");
      expect(b.result.model).toBe(a.result.model);
      const noQueue = await patchbay(["run", ...job, "--local", "--queue", q]);
      expect(noQueue.code).toBe(2);
      expect(noQueue.stderr).toMatch(/--local runs the job in this process, with no queue: --queue does not apply/);
    } finally {
      await w.stop("SIGTERM");
    }
  });

  it("an unknown model id: a warning at enqueue, the model in the result, its cost unknown, and a USD budget on it refused", async () => {
    const env = { ...LOCAL_WORKER_ENV, ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "test-key" };
    const e = await pb("q-model", ["enqueue", "--repo", CLAMP, "--task", "t", "--model", "claude-sonet-4-5"]);
    expect(e.code, e.stderr).toBe(0);
    expect(e.stderr).toMatch(
      /^patchbay: warning: model 'claude-sonet-4-5' is not one this version of patchbay knows .*its cost is unknown/m,
    );
    expect(e.stderr).not.toMatch(/\(node:\d+\)/);
    const known = await pb("q-model", [
      "enqueue",
      "--repo",
      CLAMP,
      "--task",
      "t",
      "--model",
      "claude-haiku-4-5-20251001",
    ]);
    expect(known.stderr).not.toMatch(/warning/);
    const spec = join(dir(), "spec.json");
    writeFileSync(spec, JSON.stringify({ model: "claude-made-up-1", budget: { usd: 1 } }));
    const budget = await pb("q-model", ["enqueue", "--spec", spec, "--repo", CLAMP, "--task", "t"]);
    expect(budget.code).toBe(2);
    expect(budget.stderr).toMatch(
      /invalid JobSpec: budget\.usd: the price of model 'claude-made-up-1' is unknown, so a USD budget cannot be held/,
    );
    const out = join(dir(), "out");
    const r = await patchbay(
      [
        "run",
        "--local",
        "--repo",
        CLAMP,
        "--task",
        "Make the failing tests pass.",
        "--model",
        "claude-made-up-1",
        "--out",
        out,
      ],
      env,
      { timeoutMs: 120_000 },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/patchbay: warning: model 'claude-made-up-1' is not one/);
    const result = JSON.parse(readFileSync(join(out, "result.json"), "utf8"));
    expect(result).toMatchObject({ status: "completed", model: "claude-made-up-1", priceUnknown: true, costUsd: 0 });
    expect(result.usage.outputTokens).toBeGreaterThan(0);
  });

  describe("small ones", () => {
    const inDir = (cwd: string, args: string[], env: Record<string, string> = {}) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const p = spawn(process.execPath, [BIN, ...args], {
          cwd,
          env: { ...process.env, ...env },
          stdio: ["ignore", "pipe", "pipe"],
        });
        let stdout = "";
        let stderr = "";
        p.stdout.on("data", (d) => (stdout += d));
        p.stderr.on("data", (d) => (stderr += d));
        p.on("exit", (code) => resolve({ code, stdout, stderr }));
      });

    it("-v is --version; a misspelt flag gets a did-you-mean; batch commands point to batch list", async () => {
      const v = await patchbay(["-v"]);
      expect(v.code).toBe(0);
      expect(v.stdout.trim()).toBe((await patchbay(["--version"])).stdout.trim());
      const typo = await patchbay(["run", "--repo", CLAMP, "--task", "t", "--verfiy", "x"]);
      expect(typo.code).toBe(2);
      expect(typo.stderr).toMatch(/Unknown option '--verfiy' \(did you mean --verify\?\)/);
      const b = await patchbay(["batch", "status"]);
      expect(b.code).toBe(2);
      expect(b.stderr).toMatch(/missing <batch> \(patchbay batch list shows batch ids\)/);
      const w = await patchbay(["watch", "--help"]);
      expect(w.stdout).toMatch(/1 failed, or an error \(Redis unreachable, unknown id\); 2 usage error\.$/m);
    });

    it("a Redis URL that is not redis:// is refused clearly; the hint to start Redis fits where the command runs", async () => {
      const flag = await patchbay(["status", "x", "--redis-url", "http://127.0.0.1:6379"]);
      expect(flag.code).toBe(2);
      expect(flag.stderr).toMatch(
        /--redis-url: Redis URL http:\/\/127\.0\.0\.1:6379: not a redis:\/\/, rediss:\/\/, redis\+sentinel:\/\/ or redis\+cluster:\/\/ URL; the forms are redis:\/\//,
      );
      const env = await patchbay(["status", "x"], { REDIS_URL: "http://127.0.0.1:6379" });
      expect(env.code).toBe(1);
      expect(env.stderr).toMatch(/REDIS_URL: Redis URL http:\/\/127\.0\.0\.1:6379: not a redis:\/\//);
      const inRepo = await inDir(ROOT, ["status", "x", "--redis-url", REFUSED_REDIS]);
      expect(inRepo.stderr).toMatch(/start it \(npm run services\)/);
      const elsewhere = await inDir(dir(), ["status", "x", "--redis-url", REFUSED_REDIS]);
      expect(elsewhere.code).toBe(1);
      expect(elsewhere.stderr).not.toMatch(/npm run services/);
      expect(elsewhere.stderr).toMatch(/start it \(e\.g\. redis-server --maxmemory-policy noeviction\)/);
    });

    it("batch submit prints its next step; view refuses a file that is not a transcript", async () => {
      const d = dir();
      const tasks = join(d, "tasks.jsonl");
      writeFileSync(tasks, JSON.stringify({ task: "one", repo: { path: CLAMP } }) + "\n");
      const s = await pb("q-next", ["batch", "submit", tasks, "--name", "nx"]);
      expect(s.code, s.stderr).toBe(0);
      expect(s.stdout.trim()).toBe("nx");
      expect(s.stderr).toContain(
        `patchbay: next: patchbay batch wait nx --queue q-next --redis-url ${redis.url} --out DIR`,
      );
      const v = await patchbay(["view", tasks]);
      expect(v.code).toBe(1);
      expect(v.stderr).toMatch(/tasks\.jsonl is not a transcript: none of its 1 line is a transcript event/);
      expect(existsSync(join(d, "tasks.html"))).toBe(false);
    });

    it("progress lines: a stopped setup says so (not exit 124); one turn, one file", () => {
      const base = { ts: "2026-01-01T00:00:00.000Z", jobId: "j", attempt: 1 };
      expect(formatEvent({ ...base, type: "setup", command: "npm ci", exitCode: 124, outputTail: "", ms: 5 })).toBe(
        "00:00:00 setup: npm ci → stopped (timed out or cancelled) (5 ms)",
      );
      expect(formatEvent({ ...base, type: "job_finished", status: "completed", costUsd: 0, turns: 1 })).toBe(
        "00:00:00 finished: completed, 1 turn, $0.00",
      );
      expect(formatEvent({ ...base, type: "patch", filesChanged: ["a"], diffstat: "", bytes: 3 })).toBe(
        "00:00:00 patch: 1 file, 3 bytes",
      );
    });
  });
});
