// Real processes for end-to-end tests: a private redis-server, patchbay workers and CLI calls.
// Every process started here is ended here, by its own pid.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const BIN = new URL("../../bin/patchbay.js", import.meta.url).pathname;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A redis-server of this test's own (AOF on, so a restart keeps the queue), on loopback. */
export async function startRedis(): Promise<{
  url: string;
  port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
}> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "pb-redis-"));
  let proc: ChildProcess | undefined;
  const start = async () => {
    proc = spawn(
      "redis-server",
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        dir,
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--maxmemory-policy",
        "noeviction",
        "--save",
        "",
      ],
      { stdio: "ignore" },
    );
    for (let i = 0; i < 100; i++) {
      if (await pingable(port)) return;
      await sleep(50);
    }
    throw new Error(`redis-server on ${port} did not start`);
  };
  const stop = async () => {
    const p = proc;
    proc = undefined;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill("SIGTERM");
    await exited;
  };
  await start();
  return { url: `redis://127.0.0.1:${port}`, port, start, stop: async () => stop() };
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

async function pingable(port: number): Promise<boolean> {
  const { Socket } = await import("node:net");
  return new Promise((resolve) => {
    const s = new Socket();
    s.setTimeout(300);
    s.once("error", () => resolve(false));
    s.once("timeout", () => (s.destroy(), resolve(false)));
    s.connect(port, "127.0.0.1", () => s.write("PING\r\n"));
    s.once("data", (d) => (s.destroy(), resolve(d.toString().includes("PONG"))));
  });
}

export interface WorkerProc {
  proc: ChildProcess;
  pid: number;
  log: () => string;
  exited: Promise<number | null>;
  /** Resolves when the worker's log matches. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function startWorkerProc(env: Record<string, string>, args: string[] = []): WorkerProc {
  const proc = spawn(process.execPath, [BIN, "worker", ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  proc.stdout.on("data", (d) => (out += d));
  proc.stderr.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  return {
    proc,
    pid: proc.pid!,
    log: () => out,
    exited,
    async waitFor(re, timeoutMs = 30_000) {
      const t0 = Date.now();
      while (!re.test(out)) {
        if (proc.exitCode !== null) throw new Error(`worker exited (${proc.exitCode}) before ${re}:\n${out}`);
        if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${re} in worker log:\n${out}`);
        await sleep(50);
      }
    },
    async stop(signal = "SIGTERM") {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
}

export function cli(
  args: string[],
  env: Record<string, string>,
  opts: { timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    proc.stdout.on("data", (d) => (stdout += d));
    proc.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`patchbay ${args.join(" ")} timed out\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, opts.timeoutMs ?? 120_000);
    proc.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Removes the sandboxes of a test's own queue, on Docker (containers and volumes) and on the local
 * backend (its boxes). Workers killed with SIGKILL leave their warm pool behind, and an owner id
 * "elsewhere" keeps other reapers off it.
 */
export async function removeQueueSandboxes(queue: string): Promise<void> {
  const { docker } = await import("../../src/backend/docker.js");
  const { LABEL } = await import("../../src/backend/owner.js");
  const filters = { label: [`${LABEL.queue}=${queue}`] };
  for (const c of await docker().listContainers({ all: true, filters }))
    await docker()
      .getContainer(c.Id)
      .remove({ force: true })
      .catch(() => {});
  const { Volumes } = await docker().listVolumes({ filters });
  for (const v of Volumes ?? [])
    await docker()
      .getVolume(v.Name)
      .remove()
      .catch(() => {});
  const { removeLocalQueueBoxes } = await import("./backend.js");
  await removeLocalQueueBoxes(queue);
}
