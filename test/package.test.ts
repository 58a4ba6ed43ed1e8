// The npm package as a user gets it: `npm pack`, installed into an empty project, imported from
// plain Node, type-checked by a strict TypeScript consumer, and the CLI's --help loading nothing heavy.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DIST_CLI, ensureBuilt, patchbay, ROOT } from "./cli-helpers.js";

const run = promisify(execFile);
const DENY_HEAVY = join(ROOT, "test/fixtures/deny-heavy-imports.mjs");

describe("the npm package", () => {
  const dir = mkdtempSync(join(tmpdir(), "pb-package-"));
  const consumer = join(dir, "consumer");
  let files: string[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    const { stdout } = await run("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], { cwd: ROOT });
    const [pack] = JSON.parse(stdout) as [{ filename: string; files: { path: string }[] }];
    files = pack.files.map((f) => f.path);
    mkdirSync(consumer);
    writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    await run("npm", ["install", join(dir, pack.filename), "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"], { cwd: consumer, timeout: 180_000 });
  }, 240_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("holds dist/, bin/, the sandbox image recipe, README and LICENSE, and nothing of the repo's own", () => {
    expect(files).toEqual(expect.arrayContaining(["package.json", "README.md", "LICENSE", "bin/patchbay.js", "dist/index.js", "dist/index.d.ts", "dist/cli.js", "images/sandbox/Dockerfile"]));
    const foreign = files.filter((f) => /^(test|bench|scripts|\.ci|src|examples|node_modules)\//.test(f) || /\.ts$/.test(f.replace(/\.d\.ts$/, "")) || f.endsWith(".map"));
    expect(foreign).toEqual([]);
  });

  it("runtime dependencies: no TypeScript runner; the types of the public API come from dependencies", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    for (const dev of ["tsx", "typescript", "vitest", "esbuild"]) expect(Object.keys(pkg.dependencies)).not.toContain(dev);
    expect(Object.keys(pkg.dependencies)).toContain("@types/dockerode"); // Sandbox's public types name dockerode's
  });

  it("imports from plain Node (ESM), no loader", async () => {
    const script = join(consumer, "check.mjs");
    writeFileSync(
      script,
      `import { enqueue, waitForResult, closeDefaultClient, PatchbayClient, Sandbox, TextEditor, runJob, startWorker, parseJobSpec, JobNotFoundError } from "patchbay";
const fns = { enqueue, waitForResult, closeDefaultClient, PatchbayClient, Sandbox, TextEditor, runJob, startWorker, parseJobSpec, JobNotFoundError };
const missing = Object.entries(fns).filter(([, f]) => typeof f !== "function").map(([n]) => n);
console.log(JSON.stringify({ missing, ok: parseJobSpec({ task: "t", repo: { git: "https://example.com/r.git" } }).ok }));`,
    );
    const { stdout } = await run(process.execPath, [script], { cwd: consumer });
    expect(JSON.parse(stdout)).toEqual({ missing: [], ok: true });
  });

  it("type-checks in a strict nodenext consumer with skipLibCheck off", async () => {
    writeFileSync(
      join(consumer, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { strict: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022", skipLibCheck: false, noEmit: true, types: ["node"] }, include: ["index.ts"] }),
    );
    writeFileSync(
      join(consumer, "index.ts"),
      `import { enqueue, waitForResult, PatchbayClient, Sandbox, runTool, type JobSpec, type JobResult, type ExecResult } from "patchbay";
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
console.log(result.status, states, out.isError, exec, bad);
`,
    );
    const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
    const r = await run(process.execPath, [tsc, "-p", consumer], { cwd: consumer }).catch((err: { stdout: string }) => ({ stdout: err.stdout, failed: true }));
    expect(r.stdout).toBe("");
  }, 180_000);

  it("the installed `patchbay` command runs; --help imports no BullMQ, Redis, Docker or SDK code", async () => {
    const bin = join(consumer, "node_modules/.bin/patchbay");
    const version = await patchbay(["--version"], {}, { script: bin });
    expect(version.stdout.trim()).toBe((JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version);
    for (const args of [["--help"], ["run", "--help"], ["list", "--help"], ["image"]]) {
      const r = await patchbay(args, {}, { script: bin, nodeArgs: ["--import", DENY_HEAVY] });
      expect(r.stderr + r.stdout, args.join(" ")).not.toMatch(/patchbay loaded/);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(args[0] === "image" ? 2 : 0);
    }
    // The guard works: a command that needs the queue does trip it.
    const status = await patchbay(["status", "1"], {}, { script: DIST_CLI, nodeArgs: ["--import", DENY_HEAVY] });
    expect(status.stderr).toMatch(/patchbay loaded (bullmq|ioredis)/);
  });
});
