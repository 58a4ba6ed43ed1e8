// Which backend a test's sandboxes run on, said by each file: the local backend
// (src/backend/local.ts, a host directory per box) for job, worker, batch, resume and verify-loop
// logic; Docker for what only Docker shows (isolation, limits, gVisor, the engine's failures). And
// the few looks into a job's sandbox a test needs, the same on both.
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { loadConfig, type Config } from "../../src/core/config/config.js";
import { backendOf, type BackendKind } from "../../src/backend/index.js";
import { docker } from "../../src/backend/docker.js";
import { LABEL } from "../../src/backend/owner.js";
import type { Backend } from "../../src/backend/types.js";

/** The local backend: pass it as `backend` to runJob, Sandbox.create, SandboxPool. */
export const localBackend = (): Backend => backendOf("local");

/** A worker process's environment for the local backend (with startWorkerProc). */
export const LOCAL_WORKER_ENV: Readonly<Record<string, string>> = {
  PATCHBAY_BACKEND: "local",
  PATCHBAY_TEST_BACKENDS: "1",
};

/** An in-process worker's config for the local backend (startWorker's `config`): this environment's, with `extra` over it. */
export const localWorkerConfig = (extra: Record<string, string> = {}): Config =>
  loadConfig({ ...process.env, ...LOCAL_WORKER_ENV, ...extra });

/** Where the local backend keeps its boxes (LocalBackend's default base; the same for worker processes). */
const LOCAL_BASE = join(tmpdir(), "patchbay-local");

const run = (file: string, args: string[]) =>
  new Promise<{ code: number; output: string }>((resolve) => {
    execFile(file, args, { maxBuffer: 1 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, output: stdout + stderr }),
    );
  });

/**
 * Runs `sh -c cmd` as the agent (uid 1000) in the sandbox called `name`, made by this process or
 * another (a worker process): on Docker by `docker exec`, on the local backend by entering its
 * box's namespaces as the backend does (the box's pid 1 is the child of the unshare whose pid it
 * keeps in init.pid). Its exit code and output.
 */
export async function execIn(kind: BackendKind, name: string, cmd: string): Promise<{ code: number; output: string }> {
  if (kind === "docker") {
    const exec = await docker()
      .getContainer(name)
      .exec({ Cmd: ["sh", "-c", cmd], User: "1000:1000", AttachStdout: true, AttachStderr: true });
    const stream = (await exec.start({})) as NodeJS.ReadableStream;
    let output = "";
    const sink = new Writable({ write: (d: Buffer, _enc, next) => ((output += d.toString()), next()) });
    docker().modem.demuxStream(stream, sink, sink);
    await new Promise<void>((done) => {
      stream.on("end", done);
      stream.on("close", done);
      stream.on("error", done);
    });
    return { code: (await exec.inspect()).ExitCode ?? -1, output };
  }
  const pid = Number(readFileSync(join(LOCAL_BASE, name, "init.pid"), "utf8"));
  const ns = [`--mount=/proc/${pid}/ns/mnt`, `--pid=/proc/${pid}/ns/pid_for_children`, `--net=/proc/${pid}/ns/net`];
  return run("nsenter", [
    ...ns,
    "--",
    "env",
    "-i",
    "-C",
    "/workspace",
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "setpriv",
    "--reuid=1000",
    "--regid=1000",
    "--groups=1000",
    "--inh-caps=-all",
    "--",
    "sh",
    "-c",
    cmd,
  ]);
}

/**
 * Resolves once `sh -c cmd` succeeds in the sandbox (polled, as the agent's uid): e.g. once a
 * command of the agent's has really started. A tool_call event is emitted before its command runs,
 * so on a loaded machine a cancel sent on that event alone may land before the command begins.
 */
export async function untilInSandbox(kind: BackendKind, name: string, cmd: string): Promise<void> {
  while ((await execIn(kind, name, cmd).catch(() => ({ code: -1 }))).code !== 0) await sleep(100);
}

/** The sandbox of a job, by its sandbox_ready event (a warm pool's sandbox carries no job label). */
export async function jobSandbox(
  jobId: string,
  client: { watch(id: string): AsyncIterable<{ type: string; container?: string }> },
): Promise<string> {
  for await (const e of client.watch(jobId)) if (e.type === "sandbox_ready" && e.container) return e.container;
  throw new Error(`job ${jobId} ended without a sandbox`);
}

/**
 * True while anything of the sandbox is left: on Docker its container or its volume, on the
 * local backend its box's directory (removed after every process in the box ended).
 */
export async function sandboxLeft(kind: BackendKind, name: string): Promise<boolean> {
  if (kind === "local") return existsSync(join(LOCAL_BASE, name));
  const found = async (p: Promise<unknown>) =>
    p.then(
      () => true,
      () => false,
    );
  return (
    (await found(docker().getContainer(name).inspect())) || (await found(docker().getVolume(`${name}-ws`).inspect()))
  );
}

/** Removes the local backend's boxes of a queue (a SIGKILLed worker's warm pool, an owner "elsewhere"). */
export async function removeLocalQueueBoxes(queue: string): Promise<void> {
  await localBackend().reap(async (labels) => labels[LABEL.queue] === queue);
}
