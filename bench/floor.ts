// The floor under the throughput goal (ratios.ts), measured in the same run: what one scripted job
// costs this machine with nothing of patchbay in it. A hardened container like a sandbox (created,
// started, removed), the job's own ten commands run in it through one exec, and its eleven model
// requests through the SDK against the scripted server. No shell, supervisor, file agent, repo,
// git, queue or transcript. Whatever runs each job in a fresh container and makes those commands
// and requests cannot get under these core-ms per job, so it cannot go over the ceiling in jobs/min.
// Also the floor under dequeue → ready at 50,000 files: the host's own tar piped into a `tar -x`
// exec in such a container, nothing else (no bounds, no checks), then git's hash of every file
// (`git hash-object --stdin-paths`, nothing written): what any baseline has to compute.
// And the floor of a job that loads a repo and hands back a patch (`repo_job`): the bare job with
// the bench's 1,000-file repo piped in from the host's tar, a git baseline taken before the
// commands and the diff against it after, all in the same one exec. What any design that loads a
// repo and returns a patch must spend on top of the bare job: its ceiling over the bare floor's
// is the most of the throughput goal such a design can reach on this machine.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { AnthropicModel, type Message } from "../src/agent/model.js";
import { defaults, loadConfig } from "../src/core/config/config.js";
import { DockerBackend } from "../src/backend/docker.js";
import { LABEL } from "../src/backend/owner.js";
import type { Box } from "../src/backend/types.js";
import { defaultLimits } from "../src/sandbox/sandbox.js";
import { startFakeAnthropic } from "../test/support/fake-anthropic.js";
import { byTurn, tenToolScript } from "../test/support/scripts.js";
import { log, median, round } from "./lib.js";
import { BENCH_LABEL, makeRepo } from "./speed.js";

/** Busy core-ms of the whole machine since boot (user, nice, system, irq, softirq, steal). */
function machineMs(): number {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  return (f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!) * 10;
}

/** The scripted job's tool calls as one shell script: nine `echo … && ls … | head -3`, one file written. */
function commandsOf(script = tenToolScript()): string {
  const lines: string[] = [];
  for (const r of script) {
    for (const b of ("content" in r ? r.content : []) as {
      type: string;
      name?: string;
      input?: { command?: string; path?: string; file_text?: string };
    }[]) {
      if (b.type !== "tool_use") continue;
      if (b.name === "bash") lines.push(b.input!.command!);
      else lines.push(`printf '%s' '${b.input!.file_text}' > '${b.input!.path}'`);
    }
  }
  return lines.join("\n");
}

export async function benchFloor() {
  const fake = await startFakeAnthropic(byTurn(tenToolScript()));
  const model = new AnthropicModel({ apiKey: "bench", baseURL: fake.url });
  const commands = commandsOf();
  // The Docker backend alone: a hardened box, no shell, supervisor or file agent.
  const docker = new DockerBackend();
  const container = () =>
    docker.create({
      name: `patchbay-floor-${randomBytes(5).toString("hex")}`,
      image: loadConfig().image,
      limits: defaultLimits(),
      runtime: defaults.sandbox.runtime,
      labels: { [LABEL.managed]: "1", [BENCH_LABEL]: "floor" },
    });
  const removeQuietly = (name: string) => docker.remove(name);
  const exec = async (c: Box) => {
    const p = await c.attach(["bash", "-c", commands], () => {});
    await p.ended;
  };
  const repo1k = makeRepo(1000);
  // The repo in, a baseline, the commands, the patch: one exec, stdin the host's tar of the repo.
  const repoJob = `set -e; tar -x -C /workspace; cd /workspace; git init -q; git add -A; base=$(git write-tree)\n${commands}\ngit add -A; git diff --cached "$base" | wc -c`;
  const execRepo = async (c: Box) => {
    let out = "";
    const p = await c.attach(["bash", "-c", repoJob], (d) => void (out += d.toString()));
    await p.pipeIn(hostTar(repo1k));
    await p.ended;
    const code = await p.exitCode();
    if (code !== 0 || !(Number(out.trim().split("\n").at(-1)) > 0))
      throw new Error(`the floor's repo job failed (${code}): ${out.slice(-500)}`);
  };
  const requests = async () => {
    const messages: Message[] = [{ role: "user", content: "bench task" }];
    for (;;) {
      const r = await model.complete({
        model: loadConfig().model,
        system: [{ type: "text", text: "bench" }],
        messages,
        tools: [],
        maxTokens: 1024,
      });
      messages.push({ role: "assistant", content: r.content });
      const use = r.content.find((b) => b.type === "tool_use") as { id: string } | undefined;
      if (!use) return;
      messages.push({ role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "ok" }] });
    }
  };
  /** A container's whole life around `run`: created, run in, removed. */
  const inFreshContainer = async (run: (c: Box) => Promise<void>) => {
    const c = await container();
    try {
      await run(c);
    } finally {
      await removeQuietly(c.name);
    }
  };
  const measure = async (fn: () => Promise<unknown>) => {
    const m0 = machineMs();
    const t0 = performance.now();
    await fn();
    return { core: machineMs() - m0, wall: performance.now() - t0 };
  };
  try {
    log("floor: a hardened container's lifecycle, the scripted job's commands and model requests, nothing of patchbay");
    const rows: Record<"lifecycle" | "commands" | "bare_job" | "repo_job" | "model", { core: number; wall: number }[]> =
      { lifecycle: [], commands: [], bare_job: [], repo_job: [], model: [] };
    for (let i = 0; i < 9; i++) {
      rows.lifecycle.push(
        await measure(async () => {
          const c = await container();
          await removeQuietly(c.name);
        }),
      );
      const c = await container();
      try {
        rows.commands.push(await measure(() => exec(c)));
      } finally {
        await removeQuietly(c.name);
      }
      rows.bare_job.push(await measure(() => inFreshContainer(exec)));
      rows.repo_job.push(await measure(() => inFreshContainer(execRepo)));
      rows.model.push(await measure(requests));
    }
    for (const r of Object.values(rows)) r.shift(); // warm-up
    const core = (k: keyof typeof rows) => median(rows[k].map((r) => r.core));
    const wall = (k: keyof typeof rows) => round(median(rows[k].map((r) => r.wall)), 1);
    const perJob = core("bare_job") + core("model");
    const perRepoJob = core("repo_job") + core("model");
    log("floor: the host's tar of 50,000 files piped into `tar -x` in such a container");
    const repo = makeRepo(50_000);
    const stream: number[] = [];
    const hash: number[] = [];
    const hostSide = {
      patchbay: [] as { wall: number; core: number }[],
      gnu_tar: [] as { wall: number; core: number }[],
    };
    try {
      for (let i = 0; i < 3; i++) {
        const c = await container();
        try {
          stream.push((await measure(() => pipeTar(c, repo))).wall);
          // What a baseline cannot do without: git's id of every file (computed, not written).
          hash.push((await measure(() => hashFiles(c))).wall);
        } finally {
          await removeQuietly(c.name);
        }
      }
      // The host's side alone, into nowhere: patchbay's (the walk, the reads on its reader thread,
      // the tar and the pack: what ready at 50k files waits on beside the sandbox's tar -x) and
      // GNU tar's. The gap is the per-file cost of a safe reader in Node (no openat: each open
      // resolves /proc/self/fd/N/name) and of the pack, not of anything the sandbox does.
      hostSide.patchbay.push(...hostSidePatchbay(repo, 3));
      for (let i = 0; i < 3; i++) hostSide.gnu_tar.push(hostSideTar(repo));
    } finally {
      rmSync(repo, { recursive: true, force: true });
    }
    const med = (rows: { wall: number; core: number }[]) => ({
      wall_ms: round(median(rows.map((r) => r.wall)), 1),
      core_ms: Math.round(median(rows.map((r) => r.core))),
    });
    return {
      core_ms: {
        lifecycle: core("lifecycle"),
        commands_in_one_exec: core("commands"),
        bare_job: core("bare_job"),
        repo_job: core("repo_job"),
        model_requests: core("model"),
        per_job: perJob,
        per_repo_job: perRepoJob,
      },
      wall_ms: {
        lifecycle: wall("lifecycle"),
        commands_in_one_exec: wall("commands"),
        bare_job: wall("bare_job"),
        repo_job: wall("repo_job"),
        model_requests: wall("model"),
      },
      tar_stream_50k_files_wall_ms: round(median(stream), 1),
      hash_50k_files_wall_ms: round(median(hash), 1),
      host_side_50k_files: { patchbay: med(hostSide.patchbay), gnu_tar: med(hostSide.gnu_tar) },
      // Every core busy with nothing but such jobs.
      ceiling_jobs_per_min: round((cpus().length * 60_000) / perJob, 1),
      // The same with a 1,000-file repo loaded, a baseline and a patch (see above).
      ceiling_with_repo_jobs_per_min: round((cpus().length * 60_000) / perRepoJob, 1),
    };
  } finally {
    rmSync(repo1k, { recursive: true, force: true });
    await fake.close();
  }
}

/** The host's own tar of `dir` (`tar -C dir -cf - .`), as a stream. */
const hostTar = (dir: string) =>
  spawn("tar", ["-C", dir, "-cf", "-", "."], { stdio: ["ignore", "pipe", "inherit"] }).stdout;

/** `tar -C dir -cf - .` on the host into `tar -x` in the container (the bench's own repo: nothing hostile). */
async function pipeTar(box: Box, dir: string): Promise<void> {
  let err = "";
  const p = await box.attach(["tar", "-x", "-C", "/workspace"], (d, s) => void (s === 2 && (err += d.toString())));
  await p.pipeIn(hostTar(dir));
  await p.ended;
  const ExitCode = await p.exitCode();
  if (ExitCode !== 0) throw new Error(`tar -x in the container failed (${ExitCode}): ${err}`);
}

/** git's blob id of every file under /workspace, computed in one process, nothing written. */
async function hashFiles(box: Box): Promise<void> {
  let err = "";
  const p = await box.attach(
    ["bash", "-c", "cd /workspace && find . -type f | git hash-object --stdin-paths > /dev/null"],
    (d, s) => void (s === 2 && (err += d.toString())),
  );
  await p.ended;
  const code = await p.exitCode();
  if (code !== 0) throw new Error(`git hash-object in the container failed (${code}): ${err}`);
}

/**
 * patchbay's host side of a load alone, as a worker runs it (dist/, so build first: under tsx its
 * reader thread would run TypeScript through a loader): the repo's archive read to nowhere and its
 * pack made, in a fresh node process, `runs` times after one to warm it. Wall and the process's CPU
 * (its reader threads too) of each.
 */
function hostSidePatchbay(dir: string, runs: number): { wall: number; core: number }[] {
  // CommonJS -e with import() (an --input-type flag would pass to the reader thread and fail it).
  const code = `(async () => {
    const { repoArchive } = await import(${JSON.stringify(new URL("../dist/job/repo/load.js", import.meta.url).href)});
    for (let i = 0; i <= ${runs}; i++) {
      const c0 = process.cpuUsage(), t0 = performance.now();
      const a = await repoArchive({ path: process.argv[1] });
      for await (const _ of a.stream);
      await a.blobs.finish();
      await a.cleanup();
      const c = process.cpuUsage(c0);
      if (i > 0) console.log(JSON.stringify({ wall: performance.now() - t0, core: (c.user + c.system) / 1000 }));
    }
  })().catch((e) => { console.error(e); process.exit(1); });`;
  const r = spawnSync(process.execPath, ["-e", code, dir], { encoding: "utf8" });
  if (r.status !== 0)
    throw new Error(`the host side's run failed (is dist/ built? npm run build): ${r.stderr.slice(-500)}`);
  return r.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { wall: number; core: number });
}

/** GNU tar's read of the same directory into /dev/null: wall, and its CPU (bash's `times` of its children). */
function hostSideTar(dir: string): { wall: number; core: number } {
  const t0 = performance.now();
  const r = spawnSync("bash", ["-c", 'tar -C "$1" -cf - . > /dev/null && times', "bash", dir], { encoding: "utf8" });
  const wall = performance.now() - t0;
  if (r.status !== 0) throw new Error(`tar of the bench repo failed: ${r.stderr}`);
  const secs = (t: string) =>
    Number(/^(\d+)m([\d.]+)s$/.exec(t)?.[1] ?? NaN) * 60 + Number(/^(\d+)m([\d.]+)s$/.exec(t)?.[2] ?? NaN);
  const [user, sys] = r.stdout.trim().split("\n").at(-1)!.trim().split(/\s+/);
  return { wall, core: (secs(user!) + secs(sys!)) * 1000 };
}
