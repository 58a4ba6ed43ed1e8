// The npm package as a user gets it: `npm pack`, installed into an empty project (the core alone:
// no engine warning, a bounded count of packages), imported from plain Node, type-checked by a
// strict TypeScript consumer, the CLI's --help and the queue client loading nothing heavy or
// optional, each optional feature without its packages naming the `npm i` to run, and its
// non-TypeScript assets (Lua, the browser's JS and CSS, ...) shipped and loaded from it once the
// dashboard's optional packages are added.
//
// Backend: Docker (images, compose, the package's default sandbox).
import { execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DIST_CLI, ensureBuilt, patchbay, ROOT } from "../support/cli-helpers.js";
import { startRedis } from "../support/cluster.js";
import { OPTIONAL } from "../../src/core/optional.js";

const run = promisify(execFile);
const DENY_HEAVY = join(ROOT, "test/fixtures/deny-heavy-imports.mjs");
const DENY_OPTIONAL = join(ROOT, "test/fixtures/deny-optional-imports.mjs");
const PKG = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  peerDependencies: Record<string, string>;
};
/** Half of what `npm i patchbay` installed when every feature was a dependency (484 packages). */
const CORE_PACKAGES_MAX = 242;
const SRC = join(ROOT, "src");
/** Every asset under src/ (what src/core/assets.ts loads), by its path there. */
const ASSETS = readdirSync(SRC, { recursive: true, withFileTypes: true })
  .filter((e) => e.isFile() && /\.(lua|py|sh|js|css)$/.test(e.name))
  .map((e) => relative(SRC, join(e.parentPath, e.name)));
const srcText = (p: string) => readFileSync(join(SRC, p), "utf8");

describe("the npm package", () => {
  const dir = mkdtempSync(join(tmpdir(), "pb-package-"));
  const consumer = join(dir, "consumer");
  let files: string[] = [];
  let installLog = "";

  beforeAll(async () => {
    await ensureBuilt();
    const { stdout } = await run("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], {
      cwd: ROOT,
    });
    const [pack] = JSON.parse(stdout) as [{ filename: string; files: { path: string }[] }];
    files = pack.files.map((f) => f.path);
    mkdirSync(consumer);
    writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    const installed = await run(
      "npm",
      ["install", join(dir, pack.filename), "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"],
      { cwd: consumer, timeout: 180_000 },
    );
    installLog = installed.stdout + installed.stderr;
  }, 240_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("holds dist/, bin/, the sandbox image recipe, README and LICENSE, and nothing of the repo's own", () => {
    expect(files).toEqual(
      expect.arrayContaining([
        "package.json",
        "README.md",
        "LICENSE",
        "bin/patchbay.js",
        "dist/index.js",
        "dist/index.d.ts",
        "dist/cli.js",
        "images/sandbox/Dockerfile",
      ]),
    );
    const foreign = files.filter(
      (f) =>
        /^(test|bench|scripts|\.ci|src|examples|node_modules)\//.test(f) ||
        /\.ts$/.test(f.replace(/\.d\.ts$/, "")) ||
        f.endsWith(".map"),
    );
    expect(foreign).toEqual([]);
  });

  it("holds every asset (Lua, the browser's JS and CSS, ...) beside the modules that load them", () => {
    expect(ASSETS).toEqual(
      expect.arrayContaining([
        "queue/lua/finish-job-8.lua",
        "web/lua/job-rows-n.lua",
        "web/assets/transcript.js",
        "web/assets/style.css",
      ]),
    );
    const missing = ASSETS.map((p) => `dist/${p}`).filter((p) => !files.includes(p));
    expect(missing).toEqual([]);
  });

  it("runtime dependencies: no TypeScript runner, no dockerode types (the public API names none: the strict consumer below checks it)", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    for (const dev of ["tsx", "typescript", "vitest", "esbuild"])
      expect(Object.keys(pkg.dependencies)).not.toContain(dev);
    expect(Object.keys(pkg.dependencies)).not.toContain("@types/dockerode");
    expect(Object.keys(pkg.devDependencies)).toContain("@types/dockerode");
  });

  it("imports from plain Node (ESM), no loader, and loads no optional package", async () => {
    const script = join(consumer, "check.mjs");
    writeFileSync(
      script,
      `import { enqueue, waitForResult, closeDefaultClient, PatchbayClient, Sandbox, TextEditor, runJob, startWorker, parseJobSpec, JobNotFoundError } from "patchbay";
const fns = { enqueue, waitForResult, closeDefaultClient, PatchbayClient, Sandbox, TextEditor, runJob, startWorker, parseJobSpec, JobNotFoundError };
const missing = Object.entries(fns).filter(([, f]) => typeof f !== "function").map(([n]) => n);
console.log(JSON.stringify({ missing, ok: parseJobSpec({ task: "t", repo: { git: "https://example.com/r.git" } }).ok }));`,
    );
    const { stdout } = await run(process.execPath, ["--import", DENY_OPTIONAL, script], { cwd: consumer });
    expect(JSON.parse(stdout)).toEqual({ missing: [], ok: true });
    // The guard works: an optional package's import trips it (installed or not).
    const tripped = await run(process.execPath, ["--import", DENY_OPTIONAL, "-e", 'await import("fastify/x.js")'], {
      cwd: consumer,
    }).catch((err: { stderr: string }) => ({ stderr: err.stderr }));
    expect(tripped.stderr).toContain("patchbay loaded fastify/x.js");
  });

  it("type-checks in a strict nodenext consumer with skipLibCheck off", async () => {
    writeFileSync(
      join(consumer, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: "nodenext",
          moduleResolution: "nodenext",
          target: "es2022",
          skipLibCheck: false,
          noEmit: true,
          types: ["node"],
        },
        include: ["index.ts"],
      }),
    );
    writeFileSync(
      join(consumer, "index.ts"),
      `import { enqueue, waitForResult, PatchbayClient, Sandbox, runTool, type JobSpec, type JobResult, type ExecResult, type Backend, type SandboxRuntime, type ListOptions, type WaitForBatchOptions, type RunJobOptions } from "patchbay";
const spec: JobSpec = { task: "fix it", repo: { path: "." }, timeoutSec: 60 };
const id: string = await enqueue(spec);
const result: JobResult = await waitForResult(id, { timeoutMs: 1000 });
const client = new PatchbayClient({ queueName: "q" });
const states: string[] = (await client.list({ limit: 3 })).map((j) => j.state);
const sb: Sandbox = await Sandbox.create();
const out = await runTool(sb, { id: "1", name: "bash", input: { command: "true" } });
const exec: ExecResult | undefined = undefined;
// @ts-expect-error the types are real: a JobSpec needs a repo
const bad: JobSpec = { task: "no repo" };
// The option bags are named types, and the old name of Backend still works.
const listed: ListOptions = { limit: 3, states: ["failed"] };
const waiting: WaitForBatchOptions = { pollMs: 100 };
const old: SandboxRuntime | undefined = undefined as Backend | undefined;
const run: RunJobOptions = { backend: old };
console.log(result.status, states, out.isError, exec, bad, listed, waiting, run);
`,
    );
    const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
    const r = await run(process.execPath, [tsc, "-p", consumer], { cwd: consumer }).catch(
      (err: { stdout: string }) => ({ stdout: err.stdout, failed: true }),
    );
    expect(r.stdout).toBe("");
  }, 180_000);

  it("the installed `patchbay` command runs; --help imports no BullMQ, Redis, Docker, SDK or optional code", async () => {
    const bin = join(consumer, "node_modules/.bin/patchbay");
    const version = await patchbay(["--version"], {}, { script: bin });
    expect(version.stdout.trim()).toBe(
      (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version,
    );
    for (const args of [["--help"], ["run", "--help"], ["list", "--help"], ["dashboard", "--help"], ["image"]]) {
      const r = await patchbay(args, {}, { script: bin, nodeArgs: ["--import", DENY_HEAVY] });
      expect(r.stderr + r.stdout, args.join(" ")).not.toMatch(/patchbay loaded/);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(args[0] === "image" ? 2 : 0);
    }
    // The guard works: a command that needs the queue does trip it.
    const status = await patchbay(["status", "1"], {}, { script: DIST_CLI, nodeArgs: ["--import", DENY_HEAVY] });
    expect(status.stderr).toMatch(/patchbay loaded (bullmq|ioredis)/);
  });

  it("installs the core alone: no engine warning on this Node, under half the packages every feature made", () => {
    expect(installLog).not.toMatch(/EBADENGINE|Unsupported engine/);
    const lock = JSON.parse(readFileSync(join(consumer, "node_modules/.package-lock.json"), "utf8")) as {
      packages: Record<string, unknown>;
    };
    const names = Object.keys(lock.packages).map((p) => p.replace(/^.*node_modules\//, ""));
    expect(names.length).toBeGreaterThan(100); // the count is of a real install
    expect(names.length).toBeLessThan(CORE_PACKAGES_MAX);
    const optional = Object.keys(PKG.peerDependencies).filter((name) => names.includes(name));
    expect(optional).toEqual([]);
  });

  it("an optional feature without its packages fails naming the `npm i` that adds them", async () => {
    const installed = join(consumer, "node_modules/patchbay");
    const script = join(consumer, "optional.mjs");
    writeFileSync(
      script,
      `import { AnthropicModel, startTracing } from "patchbay";
import { makeForge } from ${JSON.stringify(pathToFileURL(join(installed, "dist/campaign/forge/hosts.js")).href)};
const failure = (p) => p.then(() => "no error", (e) => \`\${e.name}: \${e.message}\`);
const provider = (name) => ({ name, bedrock: { region: "us-east-1", files: [] }, vertex: { region: "us-east5", projectId: "p", adcFile: "/nonexistent" } });
const request = { model: "claude-sonnet-4-5", system: [], messages: [{ role: "user", content: "hi" }], tools: [], maxTokens: 10 };
const repo = { host: "h", path: "o/r" };
console.log(JSON.stringify({
  bedrock: await failure(new AnthropicModel({ provider: provider("bedrock") }).complete(request)),
  vertex: await failure(new AnthropicModel({ provider: provider("vertex") }).complete(request)),
  github: await failure(makeForge({ host: "h", kind: "github", apiUrl: "http://127.0.0.1:9" }, "t").findOpen(repo, "a", "b")),
  gitlab: await failure(makeForge({ host: "h", kind: "gitlab", apiUrl: "http://127.0.0.1:9" }, "t").findOpen(repo, "a", "b")),
  otel: await failure(startTracing({ telemetry: { enabled: true, url: "http://127.0.0.1:9/v1/traces", headers: {}, serviceName: "s", resourceAttributes: {}, scheduleDelayMs: 1000 } })),
}));`,
    );
    const { stdout } = await run(process.execPath, [script], { cwd: consumer });
    const failures = JSON.parse(stdout) as Record<keyof typeof OPTIONAL, string>;
    for (const [feature, message] of Object.entries(failures)) {
      const f = OPTIONAL[feature as keyof typeof OPTIONAL];
      expect(message, feature).toMatch(/^MissingPackageError: /);
      expect(message, feature).toContain(`${f.name} needs the package ${f.packages[0]}, which is not installed`);
      expect(message, feature).toContain(`npm i ${f.packages.join(" ")}`);
    }
    // The dashboard, from the command line: one line naming the command, exit 1.
    const redis = await startRedis();
    try {
      const r = await patchbay(
        ["dashboard", "--port", "0"],
        { REDIS_URL: redis.url },
        { script: join(consumer, "node_modules/.bin/patchbay") },
      );
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`npm i ${OPTIONAL.dashboard.packages.join(" ")}`);
      // A Bedrock worker without Bedrock's SDK: unhealthy from its start, its log naming the `npm i`,
      // so it takes no job only to fail it.
      const worker = spawn(join(consumer, "node_modules/.bin/patchbay"), ["worker", "--queue", "pkg-bedrock"], {
        cwd: consumer,
        env: { ...process.env, REDIS_URL: redis.url, PATCHBAY_PROVIDER: "bedrock", AWS_REGION: "us-east-1" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let log = "";
      const said = new Promise<void>((resolve) => {
        const read = (b: Buffer) => {
          log += b.toString();
          if (log.includes(`npm i ${OPTIONAL.bedrock.packages.join(" ")}`)) resolve();
        };
        worker.stdout.on("data", read);
        worker.stderr.on("data", read);
      });
      const exited = new Promise((resolve) => worker.on("exit", resolve));
      await Promise.race([said, exited, new Promise((r) => setTimeout(r, 60_000))]);
      worker.kill("SIGTERM");
      await exited;
      expect(log).toContain(`npm i ${OPTIONAL.bedrock.packages.join(" ")}`);
    } finally {
      await redis.stop();
    }
  });

  it("loads its assets once installed, the dashboard's packages added: a batch's Lua script, the dashboard's scripts, styles and jobs list, `patchbay view`", async () => {
    // The dashboard's optional packages, as docs/operations.md's table says, at the versions patchbay names.
    await run(
      "npm",
      [
        "install",
        ...OPTIONAL.dashboard.packages.map((name) => `${name}@${PKG.peerDependencies[name]}`),
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        "--ignore-scripts",
      ],
      { cwd: consumer, timeout: 180_000 },
    );
    const installed = join(consumer, "node_modules/patchbay");
    const redis = await startRedis();
    try {
      // A Lua script of the installed package (the batch index's finish, with its include), run by
      // the installed module; a job enqueued through the public API for the jobs list below.
      const script = join(consumer, "assets.mjs");
      writeFileSync(
        script,
        `import { Redis } from "ioredis";
import { PatchbayClient } from "patchbay";
import { batchKeys, recordFinished } from ${JSON.stringify(pathToFileURL(join(installed, "dist/queue/batch-index.js")).href)};
const url = process.argv[2];
const redis = new Redis(url);
const bk = batchKeys("pkg", "b1");
await redis.hset(bk.lines, "1", "b1-L1");
await redis.hset(bk.meta, "total", "1");
const result = { status: "completed", jobId: "b1-L1", costUsd: 0.25, usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 }, turns: 1, timings: { totalMs: 5 }, filesChanged: [] };
const recorded = await recordFinished(redis, "pkg", { id: "b1", line: 1 }, "b1-L1", 1, result, { ttlSec: 3600 });
const meta = await redis.hgetall(bk.meta);
const c = new PatchbayClient({ redisUrl: url, queueName: "pkg" });
const id = await c.enqueue({ task: "the package's own job", repo: { git: "https://example.com/r.git" } });
await c.close();
redis.disconnect();
console.log(JSON.stringify({ recorded, meta, id }));`,
      );
      // The queue client loads no optional package, the dashboard's now installed included.
      const { stdout } = await run(process.execPath, ["--import", DENY_OPTIONAL, script, redis.url], { cwd: consumer });
      const out = JSON.parse(stdout) as { recorded: boolean; meta: Record<string, string>; id: string };
      expect(out.recorded).toBe(true);
      expect(out.meta).toMatchObject({ total: "1", done: "1", "n:completed": "1", spent: "0.25" });
      expect(Number(out.meta.finishedAt)).toBeGreaterThan(0);

      // The installed dashboard serves the files as they are in src/, and lists the job (its Lua).
      const bin = join(consumer, "node_modules/.bin/patchbay");
      const token = "package-test-dashboard-token-01";
      const auth = { headers: { authorization: `Bearer ${token}` } }; // every request needs it, reads too
      const p = spawn(process.execPath, [bin, "dashboard", "--port", "0"], {
        cwd: consumer,
        env: { ...process.env, REDIS_URL: redis.url, PATCHBAY_QUEUE: "pkg", PATCHBAY_DASHBOARD_TOKEN: token },
        stdio: ["ignore", "ignore", "pipe"],
      });
      let err = "";
      p.stderr.on("data", (d) => (err += d));
      const exited = new Promise<number | null>((r) => p.once("exit", (code) => r(code)));
      try {
        while (!/\[dashboard\] \S+/.test(err) && p.exitCode === null) await new Promise((r) => setTimeout(r, 50));
        const url = /\[dashboard\] (http:\/\/127\.0\.0\.1:\d+)\//.exec(err)?.[1];
        expect(url, err).toBeDefined();
        for (const name of ["transcript.js", "jobs.js", "job.js", "batches.js", "style.css"]) {
          const r = await fetch(`${url}/static/${name}`, auth);
          expect(r.status, name).toBe(200);
          expect(await r.text(), name).toBe(srcText(`web/assets/${name}`));
        }
        const list = (await (await fetch(`${url}/api/jobs`, auth)).json()) as { jobs: { id: string; task: string }[] };
        expect(list.jobs.map((j) => [j.id, j.task])).toEqual([[out.id, "the package's own job"]]);
      } finally {
        p.kill("SIGTERM");
        expect(await exited).toBe(0);
      }
    } finally {
      await redis.stop();
    }
    // `patchbay view`: the renderer, the viewer's boot script and the stylesheet inlined.
    const transcript = join(consumer, "t.jsonl");
    writeFileSync(
      transcript,
      JSON.stringify({
        type: "job_started",
        jobId: "pkg-view-1",
        attempt: 1,
        ts: "2025-01-01T00:00:00.000Z",
        spec: { task: "t", repo: { path: "/r" } },
      }) + "\n",
    );
    const view = await patchbay(
      ["view", transcript, "-o", "-"],
      {},
      { script: join(consumer, "node_modules/.bin/patchbay") },
    );
    expect(view.code, view.stderr).toBe(0);
    expect(view.stdout).toContain(
      `<script>${srcText("web/assets/transcript.js")}\n${srcText("web/assets/view.js")}</script>`,
    );
    expect(view.stdout).toContain(`<style>${srcText("web/assets/style.css")}</style>`);
    expect(view.stdout).toContain("pkg-view-1");
  }, 120_000);
});
