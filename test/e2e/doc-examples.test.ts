// Every code block of README.md and docs/*.md works as written (issue 43 §3.1: a walkthrough's
// campaign file failed its own check). test/support/doc-examples.ts finds and classifies the blocks;
// here each is run: commands for real (bash, `patchbay` being bin/patchbay.js) against one private
// Redis, one worker on the local backend talking to the scripted Anthropic server, and one
// dashboard, with the docs' placeholders (`…`, `<batch>`, ID, /srv/repos, github.com/acme) replaced
// by what this test made; a block that starts a server runs until it says it is ready. Files are
// checked by patchbay's own parsers (a campaign file by readCampaign, a JobSpec by parseJobSpec),
// TypeScript is type-checked against the package's types, YAML and JSON parsed. A block that cannot
// run here (a cloud provider, root's services, another host) is marked not-run with its reason and
// still checked: bash -n, and each `patchbay` command and flag it uses accepted by the CLI. A block
// another test runs names that test, which must exist and read the markdown file.
//
// Backend: local (worker processes: `LOCAL_WORKER_ENV`).
import { execFileSync, spawn } from "node:child_process";
import {
  chmodSync,
  cpSync,
  existsSync,
  symlinkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readCampaign } from "../../src/campaign/file.js";
import { parseJobSpec } from "../../src/core/spec/spec.js";
import { LOCAL_WORKER_ENV } from "../support/backend.js";
import { ensureBuilt, spawnPatchbay, ROOT, BIN } from "../support/cli-helpers.js";
import { cli, freePort, removeDir, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { allBlocks, classify, patchbayCalls, scriptOf, type DocBlock } from "../support/doc-examples.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic } from "../support/fake-anthropic.js";
import { byTurn, clampScript, taskOf } from "../support/scripts.js";

const BLOCKS = allBlocks(ROOT).map((b) => ({ ...b, k: classify(b) }));
const where = (b: DocBlock) => `${b.file}:${b.line}`;
const of = <K extends string>(kind: K) => BLOCKS.filter((b) => b.k.kind === kind);
const TOKEN = "doc-examples-token-0123456789";
const QUEUE = "doc-examples";
/** A server's line saying it is up: the worker's and the dashboard's. */
const READY = /ready: queue |\[dashboard\] http/;

describe("the docs' code blocks, as written", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let worker: WorkerProc;
  let dashboard: ReturnType<typeof spawnPatchbay>;
  let work: string;
  let env: Record<string, string>;
  let jobId: string;
  let dashPort: number;

  beforeAll(async () => {
    await ensureBuilt();
    redis = await startRedis();
    work = mkdtempSync(join(tmpdir(), "pb-doc-examples-"));
    // The model: the Clamp fix for a task about clamp, else one new file and a last word.
    fake = await startFakeAnthropic(
      byTurn((body) =>
        /clamp/i.test(taskOf(body))
          ? clampScript()
          : [
              reply(
                toolUse("str_replace_based_edit_tool", {
                  command: "create",
                  path: "/workspace/NOTE",
                  file_text: "x\n",
                }),
              ),
              reply(text("Done: added NOTE.")),
            ],
      ),
    );
    makeFixtures(work);
    // A file block that names itself (`# bump-logger.yaml`) is there for the commands after it.
    for (const b of of("file")) writeNamed(b, work);
    dashPort = await freePort();
    env = {
      ...LOCAL_WORKER_ENV,
      PATH: `${join(work, "bin")}:${process.env.PATH}`,
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: QUEUE,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_DASHBOARD_TOKEN: TOKEN,
      PATCHBAY_API_REPO_ROOTS: join(work, "repos"), // the dashboard's and the workers' (docs/api.md)
      PATCHBAY_LOCAL_REPO_ROOTS: `${join(work, "repos")},${join(work, "remotes")}`, // and the campaign's
      PATCHBAY_URL: `http://127.0.0.1:${dashPort}`,
      PATCHBAY_TOKEN: TOKEN,
      XDG_CACHE_HOME: join(work, "cache"),
      PATCHBAY_CONCURRENCY: "2",
    };
    worker = startWorkerProc(env);
    dashboard = spawnPatchbay(["dashboard", "--port", String(dashPort)], env);
    await Promise.all([worker.waitFor(/ready: queue /, 120_000), dashboard.waitFor(/\[dashboard\] http/, 60_000)]);
    // A finished job for the blocks that name one (ID, <id>).
    const run = await cli(["enqueue", "--repo", join(work, "repos/clamp"), "--task", "Fix clamp."], env);
    expect(run.code, run.stderr).toBe(0);
    jobId = run.stdout.trim();
    expect((await cli(["watch", jobId], env)).code).toBe(0);
  }, 300_000);

  afterAll(async () => {
    dashboard?.proc.kill("SIGTERM");
    await dashboard?.exited;
    await worker?.stop("SIGTERM");
    await fake?.close();
    await redis?.stop();
    if (work) removeDir(work);
  });

  /** What the docs write for things only a reader has, and what this test made for each. */
  function substitute(script: string, server: { port: number } | undefined): string {
    const values: Record<string, string> = {
      PATCHBAY_TOKEN: TOKEN,
      GITHUB_TOKEN: "ghp_doc-examples",
      ANTHROPIC_API_KEY: "test-key",
      REDIS_URL: redis.url,
    };
    return script
      .replace(/\bnpx patchbay\b|\bnode bin\/patchbay\.js\b/g, "patchbay")
      .replace(/\b([A-Z_]+)=…/g, (all, name: string) => {
        if (!(name in values)) throw new Error(`no value for the placeholder ${all}`);
        return `${name}=${values[name]}`;
      })
      .replace(/\/srv\/repos\//g, `${work}/repos/`)
      .replace(/127\.0\.0\.1:7474/g, `127.0.0.1:${dashPort}`)
      .replace(/\b(7474|9464)\b/g, String(server?.port ?? dashPort))
      .replace(/\[(--[^\]]*)\]/g, "$1") // an optional flag, shown in brackets, is run as given
      .replace(/<id>|\bID\b/g, jobId);
  }

  /** Runs a command block in the work directory; a server block until it says it is ready. */
  async function runBlock(b: DocBlock): Promise<{ code: number | null; output: string }> {
    const server = patchbayCalls(scriptOf(b)).some((c) => c[0] === "worker" || c[0] === "dashboard");
    const script = substitute(scriptOf(b), server ? { port: await freePort() } : undefined);
    const proc = spawn("bash", ["-e", "-o", "pipefail", "-c", script], {
      cwd: work,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let output = "";
    proc.stdout.on("data", (d) => (output += d));
    proc.stderr.on("data", (d) => (output += d));
    const exited = new Promise<number | null>((r) => proc.once("exit", (c) => r(c)));
    const t0 = Date.now();
    while (proc.exitCode === null && proc.signalCode === null) {
      if (server && READY.test(output)) {
        // This block's own process group: its server, then bash; a server slow to drain (an OTLP
        // exporter retrying an unreachable collector) is killed, its start being what is checked.
        process.kill(-proc.pid!, "SIGTERM");
        const late = setTimeout(() => process.kill(-proc.pid!, "SIGKILL"), 5_000);
        await exited;
        clearTimeout(late);
        return { code: 0, output };
      }
      if (Date.now() - t0 > 90_000) {
        process.kill(-proc.pid!, "SIGKILL");
        throw new Error(`${where(b)} did not end in 90 s:\n${script}\n${output}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return { code: await exited, output };
  }

  it("classifies every block: an unmarked block that is neither a command nor a known file fails, named", () => {
    const unknown = BLOCKS.flatMap((b) => (b.k.kind === "unknown" ? [b.k.why] : []));
    expect(unknown).toEqual([]);
    expect(BLOCKS.length).toBeGreaterThan(30);
  });

  it.each(of("command").map((b) => [where(b), b] as const))(
    "runs %s",
    async (_, b) => {
      const { code, output } = await runBlock(b);
      expect(code, `${where(b)}:\n${output}\nthe worker:\n${worker.log().slice(-1500)}`).toBe(0);
      // Whatever the block writes to a file (`> fix.diff`) is there and not empty.
      for (const m of scriptOf(b).matchAll(/>\s*([\w./-]+\.\w+)/g)) {
        expect(statSync(join(work, m[1]!)).size, `${where(b)}: ${m[1]}`).toBeGreaterThan(0);
      }
    },
    120_000,
  );

  it.each(of("file").map((b) => [where(b), b] as const))("checks the file %s", async (_, b) => {
    if (b.k.kind !== "file") return;
    await checkFile(b, b.k.format, work);
  });

  it("type-checks every TypeScript block against the package's types", () => {
    const ts = of("file").filter((b) => b.k.kind === "file" && b.k.format === "typescript");
    expect(ts.length).toBeGreaterThan(0);
    typecheck(ts, mkdtempSync(join(work, "ts-")));
  }, 120_000);

  it.each(of("not-run").map((b) => [where(b), b] as const))("checks the not-run %s: syntax and flags", async (_, b) => {
    execFileSync("bash", ["-n", "-c", scriptOf(b)]);
    for (const args of patchbayCalls(scriptOf(b))) {
      // A placeholder (`…`, `<name>`, `$VAR`) stands for some value: any will do for --help.
      const words = args.map((w) => (/^[<$]|…|\.\.\./.test(w) ? "x" : w));
      const r = await cli([...words, "--help"], env, { timeoutMs: 30_000 });
      expect(r.code, `${where(b)}: patchbay ${words.join(" ")}: ${r.stderr}`).toBe(0);
    }
    for (const m of scriptOf(b).matchAll(/npm run ([\w:-]+)/g)) {
      expect(Object.keys(JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts)).toContain(m[1]);
    }
  });

  it.each(of("by-test").map((b) => [where(b), b] as const))("leaves %s to the test it names", (_, b) => {
    if (b.k.kind !== "by-test") return;
    const test = join(ROOT, b.k.test);
    expect(existsSync(test), `${where(b)} names ${b.k.test}, which does not exist`).toBe(true);
    expect(readFileSync(test, "utf8"), `${b.k.test} does not read ${b.file}`).toContain(b.file);
  });

  it("says how many blocks are checked how", () => {
    const count = (k: string) => of(k).length;
    const line = ["command", "file", "output", "not-run", "by-test"].map((k) => `${count(k)} ${k}`).join(", ");
    console.log(`doc examples: ${BLOCKS.length} blocks: ${line}`);
    expect(count("command") + count("file")).toBeGreaterThan(count("not-run") + count("output"));
  });
});

/** The work directory: a `patchbay` on PATH, the repos the docs name, and the files they use. */
function makeFixtures(work: string): void {
  mkdirSync(join(work, "bin"));
  writeFileSync(join(work, "bin/patchbay"), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
  chmodSync(join(work, "bin/patchbay"), 0o755);
  cpSync(join(ROOT, "examples/clamp"), join(work, "repos/clamp"), { recursive: true });
  // The docs' commands run from a clone: examples/api/fix.py and the like are there.
  symlinkSync(join(ROOT, "examples"), join(work, "examples"));
  // README's tour and docs/batches.md: tasks.jsonl, three jobs on the clamp repo.
  const spec = { task: "Fix clamp so that python3 -m unittest -q passes.", repo: { path: join(work, "repos/clamp") } };
  writeFileSync(join(work, "tasks.jsonl"), [1, 2, 3].map((i) => JSON.stringify({ ...spec, priority: i })).join("\n"));
  // docs/campaigns.md's repositories: local git repositories with an npm project each.
  for (const name of ["api", "web"]) {
    const src = join(work, "acme", name);
    mkdirSync(src, { recursive: true });
    const pkg = { name, version: "1.0.0", private: true, scripts: { test: "true", "test:unit": "true" } };
    writeFileSync(join(src, "package.json"), JSON.stringify(pkg, null, 2) + "\n");
    writeFileSync(
      join(src, "package-lock.json"),
      JSON.stringify({ name, version: "1.0.0", lockfileVersion: 3, requires: true, packages: { "": pkg } }, null, 2),
    );
    writeFileSync(join(src, "index.js"), "log.warn('x');\n");
    const git = (...a: string[]) => execFileSync("git", a, { cwd: src, stdio: "ignore" });
    git("init", "-q", "-b", "main");
    git("add", ".");
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "init");
    execFileSync("git", ["clone", "-q", "--bare", src, join(work, "remotes", `${name}.git`)], { stdio: "ignore" });
  }
}

/**
 * A file block that names itself on its first line (`# bump-logger.yaml`), written to the work
 * directory under that name (its acme repositories being this test's), or undefined.
 */
function writeNamed(b: DocBlock, work: string): string | undefined {
  const named = /^(?:#|\/\/)\s*([\w.-]+\.\w+)\s*$/.exec(b.text.split("\n")[0]!);
  if (!named) return undefined;
  const file = join(work, named[1]!);
  // The local backend has no setup network (the egress proxy's bridge needs an engine's box), so the
  // commands run the file without its `network:` line; checkFile reads the file as written.
  const text = b.text
    .replace(/https:\/\/github\.com\/acme\/(\w+)\.git/g, `${work}/remotes/$1.git`)
    .replace(/^network: .*\n/m, "");
  writeFileSync(file, text);
  return file;
}

/** A file block checked by the parser that reads such files. */
async function checkFile(b: DocBlock, format: string, work: string): Promise<void> {
  switch (format) {
    case "campaign": {
      const file = join(work, `block-${b.line}.yaml`);
      writeFileSync(file, b.text);
      await readCampaign(file); // throws CampaignFileError naming every problem
      return;
    }
    case "jobspec":
      parseJobSpec(JSON.parse(b.text));
      return;
    case "jobspec-fragment": {
      const fields = JSON.parse(`{${b.text.replace(/\s\/\/.*$/gm, "").replace(/,\s*$/, "")}}`);
      parseJobSpec({ task: "t", repo: { path: "/tmp" }, ...fields });
      return;
    }
    case "jsonl":
      b.text
        .split("\n")
        .filter((l) => l.trim())
        .forEach((l) => parseJobSpec(JSON.parse(l)));
      return;
    case "json":
      JSON.parse(b.text);
      return;
    case "yaml":
      parseYaml(b.text);
      return;
    case "python": {
      const py = join(work, `block-${b.line}.py`);
      writeFileSync(py, b.text);
      execFileSync("python3", ["-m", "py_compile", py]);
      return;
    }
    case "dockerfile":
      checkDockerfile(b);
      return;
    case "typescript":
      return; // all at once, in one tsc run
    default:
      throw new Error(`${where(b)}: no check for ${format}`);
  }
}

/** Every instruction a Dockerfile may hold, and a per-repo image starting from patchbay's. */
function checkDockerfile(b: DocBlock): void {
  const INSTRUCTIONS =
    /^(FROM|RUN|CMD|LABEL|EXPOSE|ENV|ADD|COPY|ENTRYPOINT|VOLUME|USER|WORKDIR|ARG|ONBUILD|STOPSIGNAL|HEALTHCHECK|SHELL)\s/;
  const lines = b.text.split("\n").filter((l) => l.trim() && !l.startsWith("#"));
  for (const l of lines) expect(l, `${where(b)}: not a Dockerfile instruction`).toMatch(INSTRUCTIONS);
  expect(lines[0]).toMatch(/^FROM patchbay-sandbox:latest\b/);
}

/** tsc over the TypeScript blocks, each a module importing "patchbay" (the built package's types). */
function typecheck(blocks: DocBlock[], dir: string): void {
  blocks.forEach((b) =>
    writeFileSync(join(dir, `${b.file.replace(/\W/g, "_")}_${b.line}.ts`), b.text + "\nexport {};\n"),
  );
  const config = {
    compilerOptions: {
      target: "ES2022",
      module: "NodeNext",
      moduleResolution: "NodeNext",
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: ["node"],
      typeRoots: [join(ROOT, "node_modules/@types")],
      baseUrl: ROOT,
      paths: { patchbay: [join(ROOT, "dist/index.d.ts")] },
    },
    include: ["*.ts"],
  };
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(config));
  writeFileSync(join(dir, "package.json"), '{ "type": "module" }\n'); // ESM, as patchbay is: top-level await
  try {
    execFileSync(join(ROOT, "node_modules/.bin/tsc"), ["-p", dir], { encoding: "utf8" });
  } catch (err) {
    throw new Error(`tsc: ${(err as { stdout?: string }).stdout ?? String(err)}`, { cause: err });
  }
}
