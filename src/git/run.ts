// Running host git: the one place patchbay spawns git on a host (test/git-hardening.test.ts holds
// every other file of src/ to that). Each run gets hardening.ts's list and environment plus what its
// step names, in a process group of its own that is killed whole at the timeout, on the caller's
// abort, past the output bound or past the size bound of a directory it writes (a transport helper,
// git-remote-http, fetches packs itself and would go on writing after its parent git is gone). What
// git says comes back scrubbed of URL userinfo and the step's secrets, with its control characters
// shown escaped.
import { spawn } from "node:child_process";
import type { HostEnv } from "../core/config/config.js";
import { scrub } from "./credentials.js";
import { gitEnv, hardeningArgs, stepArgs, type StepConfig } from "./hardening.js";

/** One host git run: what the step differs in, and its bounds. */
export interface GitRun extends StepConfig {
  /** The host's environment (config.hostEnv): PATH, HOME, proxies, SSH_AUTH_SOCK, GIT_SSH_COMMAND. */
  env: HostEnv;
  /** Past it the process group is killed and `timedOut` set. */
  timeoutMs: number;
  /** A step that talks to a remote (clone, fetch, ls-remote, push): the user's git config applies. Else none of it. */
  userConfig: boolean;
  /** The credential helper (src/git/credentials.ts's credentialHelper): `-c` on argv, the secret in the environment. */
  auth?: { args: readonly string[]; env: Readonly<Record<string, string>> };
  /** Values hidden in git's messages, besides URL userinfo (hidden always). */
  secrets?: readonly string[];
  /** `--git-dir`: the bare repository the step works in. */
  gitDir?: string;
  /** Where git runs; `/` when not given, never the process's own directory. */
  cwd?: string;
  input?: string | Buffer;
  /** Variables the step sets (GIT_INDEX_FILE for a temporary index, the commit's author and dates). */
  extraEnv?: Readonly<Record<string, string>>;
  /** Characters of stdout kept at most: past it git is killed and `overflow` set. @default 1 MiB */
  maxStdout?: number;
  /** Stdout as it streams, kept nowhere else: a true return stops git (killed, `overflow` set). */
  onStdout?: (chunk: string) => boolean;
  /** A directory git writes into: its size is looked at twice a second, and past `bytes` git is killed and `tooLarge` set. */
  maxDir?: { dir: string; bytes: number };
  /** Aborted: the process group is killed and `aborted` set. */
  signal?: AbortSignal;
}

export interface GitOut {
  code: number;
  stdout: string;
  /** Git's last lines, scrubbed and printable ("killed after …: " before them on a timeout). */
  stderr: string;
  timedOut: boolean;
  overflow: boolean;
  aborted: boolean;
  /** The bytes `maxDir` held when git was killed for passing its bound. */
  tooLarge?: number;
}

const DEFAULT_MAX_STDOUT = 1024 * 1024;

/** The argv and environment a run gives git: the list, the step's own, the credential helper, then the caller's arguments. */
export function gitCommand(args: readonly string[], run: GitRun): { argv: string[]; env: NodeJS.ProcessEnv } {
  const argv = [
    ...hardeningArgs(),
    ...stepArgs(run),
    ...(run.auth?.args ?? []),
    ...(run.gitDir ? [`--git-dir=${run.gitDir}`] : []),
    ...args,
  ];
  return { argv, env: { ...gitEnv(run.env, run.userConfig), ...run.auth?.env, ...run.extraEnv } };
}

/** Runs host git as the header says; rejects only when git cannot be started at all. */
export function runGit(args: readonly string[], run: GitRun): Promise<GitOut> {
  const { argv, env } = gitCommand(args, run);
  return new Promise((resolve, reject) => {
    const child = spawn("git", argv, {
      env,
      // A step with no directory of its own (ls-remote, check-ref-format) runs in `/`, which only
      // root can write: from the process's own directory git would read that repository's
      // .git/config (a core.sshCommand, a credential helper) and run what it names.
      cwd: run.cwd ?? "/",
      stdio: [run.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      detached: true,
    });
    const state = { timedOut: false, overflow: false, aborted: false, tooLarge: undefined as number | undefined };
    const kill = () => killGroup(child.pid);
    const timer = setTimeout(() => ((state.timedOut = true), kill()), run.timeoutMs);
    const onAbort = () => ((state.aborted = true), kill());
    if (run.signal?.aborted) onAbort();
    run.signal?.addEventListener("abort", onAbort);
    const stopWatch = run.maxDir
      ? watchSize(run.maxDir.dir, run.maxDir.bytes, (n) => ((state.tooLarge = n), kill()))
      : () => {};
    const stdout = collectStdout(run, () => ((state.overflow = true), kill()));
    const stderr = new Tail();
    child.stdout!.setEncoding("utf8").on("data", stdout.add);
    child.stderr!.setEncoding("utf8").on("data", (c: string) => stderr.add(c));
    if (child.stdin) {
      child.stdin.on("error", () => {}); // git may exit before reading it all; its status says why
      child.stdin.end(run.input);
    }
    const done = () => (clearTimeout(timer), stopWatch(), run.signal?.removeEventListener("abort", onAbort));
    child.on("error", (err) => (done(), reject(err)));
    child.on("close", (code) => {
      done();
      const tail = stderr.text(run.secrets);
      const said = state.timedOut ? `killed after ${duration(run.timeoutMs)}${tail ? `: ${tail}` : ""}` : tail;
      const { tooLarge, ...flags } = state;
      resolve({
        code: code ?? -1,
        stdout: stdout.text(),
        stderr: said,
        ...flags,
        ...(tooLarge !== undefined ? { tooLarge } : {}),
      });
    });
  });
}

/** SIGKILL to the whole process group git leads (it was started detached: its pid is the group's). */
function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/** Stdout kept up to the bound, or handed to the caller's `onStdout`; `over` once git is to be stopped. */
function collectStdout(run: GitRun, over: () => void): { add: (c: string) => void; text: () => string } {
  const max = run.maxStdout ?? DEFAULT_MAX_STDOUT;
  let [out, stopped] = ["", false];
  const stop = () => {
    stopped = true;
    over();
  };
  const add = (c: string) => {
    if (stopped) return;
    if (run.onStdout) {
      if (run.onStdout(c)) stop();
      return;
    }
    out += c;
    if (out.length > max) {
      out = out.slice(0, max);
      stop();
    }
  };
  return { add, text: () => out };
}

/** Stderr's end, in whole lines: secrets are hidden before anything is cut (a cut could leave half a token). */
class Tail {
  private buf = "";
  private cut = false;
  add(c: string): void {
    this.buf += c;
    if (this.buf.length > 8000) [this.buf, this.cut] = [this.buf.slice(-4000), true];
  }
  text(secrets?: readonly string[]): string {
    const lines = this.buf.split("\n").slice(this.cut ? 1 : 0);
    return printable(scrub(lines.join("\n").trim(), secrets).split("\n").slice(-8).join("\n")).slice(-1000);
  }
}

const duration = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`);

/** A remote's messages reach git's stderr: control characters (terminal escapes) are shown escaped, newlines kept. */
export const printable = (text: string) =>
  text.replace(
    /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );

/** Polls the directory's size twice a second; `over(bytes)` once it holds more than max. Returns the stop. */
function watchSize(dir: string, max: number, over: (bytes: number) => void): () => void {
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void dirBytes(dir)
      .then((n) => n > max && (clearInterval(timer), over(n)))
      .finally(() => (busy = false));
  }, 500);
  return () => clearInterval(timer);
}

/**
 * Apparent bytes under dir (0 when it is not there), by `du` in a child process: a tree of many
 * loose objects is walked off the worker's event loop. BSD du has no -b: there, kilobytes in use.
 */
export function dirBytes(dir: string): Promise<number> {
  const [flags, unit] = process.platform === "linux" ? ["-sb", 1] : ["-sk", 1024];
  return new Promise((resolve) => {
    const du = spawn("du", [flags, dir], { stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    du.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    du.on("error", () => resolve(0));
    du.on("close", () => resolve((Number.parseInt(out, 10) || 0) * unit));
  });
}
