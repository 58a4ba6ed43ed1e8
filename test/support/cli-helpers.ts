// Helpers for the CLI and package tests: the built dist/ (built once, under a lock, when src/ is
// newer), and the `patchbay` command run as a user runs it (bin/patchbay.js, a fresh process).
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const BIN = join(ROOT, "bin/patchbay.js");
export const DIST_CLI = join(ROOT, "dist/cli.js");

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function newestSource(): number {
  let newest = 0;
  for (const e of readdirSync(join(ROOT, "src"), { withFileTypes: true, recursive: true })) {
    if (e.isFile() && /\.(ts|lua|py|sh|js|css)$/.test(e.name))
      newest = Math.max(newest, statSync(join(e.parentPath, e.name)).mtimeMs);
  }
  return newest;
}

const stale = () => !existsSync(DIST_CLI) || newestSource() > statSync(DIST_CLI).mtimeMs;

/** `npm run build` if dist/ is missing or older than src/; one build at a time across test files. */
export async function ensureBuilt(): Promise<void> {
  const lock = join(tmpdir(), `patchbay-build-${Buffer.from(ROOT).toString("hex").slice(-32)}.lock`);
  for (let i = 0; ; i++) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (i > 1200) throw new Error(`build lock ${lock} held for 2 minutes; remove it if no build is running`);
      await sleep(100);
    }
  }
  try {
    if (stale()) {
      try {
        execFileSync("npm", ["run", "build"], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
      } catch (err) {
        // tsc emits despite type errors (in files being edited); only a missing output is fatal here.
        if (!existsSync(DIST_CLI)) throw err;
      }
    }
  } finally {
    rmdirSync(lock);
  }
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs `patchbay args...` with env added to this process's environment. */
export function patchbay(
  args: string[],
  env: Record<string, string> = {},
  opts: { timeoutMs?: number; nodeArgs?: string[]; script?: string } = {},
): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const proc = spawn(process.execPath, [...(opts.nodeArgs ?? []), opts.script ?? BIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    proc.stdout.on("data", (d) => (stdout += d));
    proc.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(
        new Error(
          `patchbay ${args.join(" ")} did not exit in ${opts.timeoutMs ?? 30_000} ms\nstdout: ${stdout}\nstderr: ${stderr}`,
        ),
      );
    }, opts.timeoutMs ?? 30_000);
    proc.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: performance.now() - t0 });
    });
  });
}

/** A `patchbay` process to talk to while it runs (signals, output so far). */
export function spawnPatchbay(
  args: string[],
  env: Record<string, string> = {},
): {
  proc: ChildProcess;
  out: () => { stdout: string; stderr: string };
  exited: Promise<number | null>;
  waitFor(re: RegExp, timeoutMs?: number): Promise<void>;
} {
  const proc = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (d) => (stdout += d));
  proc.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  return {
    proc,
    out: () => ({ stdout, stderr }),
    exited,
    async waitFor(re, timeoutMs = 30_000) {
      const t0 = Date.now();
      while (!re.test(stdout + stderr)) {
        if (proc.exitCode !== null)
          throw new Error(`patchbay exited (${proc.exitCode}) before ${re}:\n${stdout}${stderr}`);
        if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${re}:\n${stdout}${stderr}`);
        await sleep(50);
      }
    },
  };
}

/** A TCP port on loopback where nothing listens (connections are refused at once). */
export const REFUSED_REDIS = "redis://127.0.0.1:9";
