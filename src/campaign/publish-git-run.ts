// Host git for publishing (publish-git.ts): one runner with a hard timeout, bounded output and every
// message scrubbed of credentials, and the remote a publish talks to. The credentials live on the
// publishing host: a forge token reaches git only through git-auth.ts's env-only helper (never on
// argv, never in a file); without one, git uses the user's own (credential helpers, SSH agent).
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import type { HostEnv } from "../core/config/config.js";
import { PatchbayError, type ErrorKind } from "../core/errors.js";
import { credentialHelper, redact, scrub, splitUrl, type GitCredential } from "../git/auth.js";

/** Why a publish step failed; each maps to the error kind the caller acts on. */
export type PublishFailure = "rights" | "missing" | "patch" | "usage" | "git" | "timeout";
const KINDS: Record<PublishFailure, ErrorKind> = { rights: "config", missing: "not-found", patch: "patch", usage: "usage", git: "repo", timeout: "timeout" };

/** A publish step that failed for one repository (the others go on). Its message holds no credential. */
export class PublishError extends PatchbayError {
  constructor(
    readonly reason: PublishFailure,
    message: string,
    options?: ErrorOptions,
  ) {
    super(KINDS[reason], message, options);
  }
}

/** What a local step needs: the bare repo, and git's environment (without the user's config). */
export interface Local {
  gitDir: string;
  env: HostEnv;
  timeoutMs: number;
}

export const DEFAULT_TIMEOUT_MS = 5 * 60_000;

/** The remote as git is given it (no userinfo), as messages show it, and how git authenticates to it. */
export interface Remote {
  url: string;
  shown: string;
  /** The host messages name ("local" for a path). */
  host: string;
  auth?: { args: string[]; env: Record<string, string> };
  secrets: string[];
}

/**
 * A forge token (`credential`) or the URL's own userinfo is fed to git by the env-only helper, for
 * http(s) only: over SSH git authenticates with the user's keys and agent, a token has no use there.
 */
export function remoteOf(url: string, credential?: GitCredential): Remote {
  if (!url || url.startsWith("-") || /[\0\r\n]/.test(url)) throw new PublishError("usage", `not a repository URL: ${JSON.stringify(redact(url).slice(0, 200))}`);
  const split = splitUrl(url);
  const cred = credential ?? split.credential;
  // The token is the password; a user name alone is a token too (as in a URL's userinfo).
  const secrets = [...split.secrets, ...(credential ? [credential.password || credential.username] : [])];
  const host = split.host ?? /^(?:[^@/:]+@)?([^/:]+):/.exec(url)?.[1] ?? "local";
  const shown = scrub(redact(split.url), secrets);
  const http = split.protocol === "http" || split.protocol === "https";
  const auth = http && cred && split.host ? credentialHelper(split.protocol!, split.host, cred) : undefined;
  return { url: split.url, shown, host, auth, secrets: [...new Set(secrets.filter(Boolean))] };
}

// Hooks, fsmonitor and submodules off for every run; objects checked as they arrive; no automatic gc
// (it would detach a process of its own); ext:: (a command as a URL) never. file:// stays as the
// user's git config has it.
const HARDEN = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "submodule.recurse=false", "-c", "transfer.fsckObjects=true", "-c", "protocol.ext.allow=never", "-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "core.quotePath=false"];
// Set by the operator's shell, these would point git at another repo or index.
const REPO_VARS = ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES"];

export interface GitRun {
  env: HostEnv;
  timeoutMs: number;
  /** A network step: the user's git config applies (helpers, insteadOf, proxies, sshCommand) and the remote's auth. Else none of it. */
  remote?: Remote;
  /** The bare repository (`--git-dir`). */
  gitDir?: string;
  input?: string | Buffer;
  extraEnv?: Record<string, string>;
  /** Bytes of stdout kept at most: past it git is killed and `overflow` set. */
  maxStdout?: number;
  /** A directory (the publish cache's clone) git may grow to at most this size: past it git is killed and `tooLarge` set. */
  maxDir?: { dir: string; bytes: number };
}

export interface GitOut {
  code: number;
  stdout: string;
  /** Git's last lines, scrubbed and printable. */
  stderr: string;
  timedOut: boolean;
  overflow: boolean;
  /** Killed because `maxDir` grew past its bound. */
  tooLarge?: boolean;
}

function gitEnv(run: GitRun): NodeJS.ProcessEnv {
  // No prompt: git's own off; ssh's askpass never, and git runs in a session of its own (detached)
  // with no terminal for ssh to ask on. GIT_SSH_COMMAND is not set for it: the user's core.sshCommand stands.
  const env: NodeJS.ProcessEnv = { ...run.env, GIT_TERMINAL_PROMPT: "0", SSH_ASKPASS_REQUIRE: "never" };
  for (const v of REPO_VARS) delete env[v];
  // Traces would print what git sends (a helper's answer among it) to stderr.
  for (const v of Object.keys(env)) if (v.startsWith("GIT_TRACE") || v === "GIT_CURL_VERBOSE") delete env[v];
  const local = run.remote ? {} : { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };
  return { ...env, ...local, ...run.remote?.auth?.env, ...run.extraEnv };
}

/** A remote's messages reach git's stderr: control characters (terminal escapes) are shown escaped. */
export const printable = (text: string) => text.replace(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

/** Git in its own process group (a transport helper is killed with it), killed whole at the timeout. */
export function runGit(args: string[], run: GitRun): Promise<GitOut> {
  const maxStdout = run.maxStdout ?? 1024 * 1024;
  const argv = [...HARDEN, ...(run.remote?.auth?.args ?? []), ...(run.gitDir ? [`--git-dir=${run.gitDir}`] : []), ...args];
  return new Promise((resolve, reject) => {
    const child = spawn("git", argv, { env: gitEnv(run), stdio: [run.input === undefined ? "ignore" : "pipe", "pipe", "pipe"], detached: true });
    const kill = () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    };
    let [stdout, stderr, cut, timedOut, overflow] = ["", "", false, false, false];
    const timer = setTimeout(() => ((timedOut = true), kill()), run.timeoutMs);
    // The directory's size, looked at twice a second while git writes into it.
    let tooLarge = false;
    const max = run.maxDir;
    const watch = max && setInterval(() => void dirBytes(max.dir).then((n) => n > max.bytes && !tooLarge && ((tooLarge = true), kill()), () => {}), 500);
    child.stdout!.setEncoding("utf8").on("data", (c: string) => {
      if (overflow) return;
      stdout += c;
      if (stdout.length > maxStdout) [overflow, stdout] = [true, stdout.slice(0, maxStdout)];
      if (overflow) kill();
    });
    child.stderr!.setEncoding("utf8").on("data", (c: string) => {
      stderr += c;
      if (stderr.length > 8000) [stderr, cut] = [stderr.slice(-4000), true];
    });
    if (child.stdin) {
      child.stdin.on("error", () => {}); // git may exit before reading it all; its status says why
      child.stdin.end(run.input);
    }
    child.on("error", (err) => (clearTimeout(timer), clearInterval(watch), reject(err)));
    child.on("close", (code) => {
      clearTimeout(timer);
      clearInterval(watch);
      // Secrets are hidden in whole lines, before anything is cut (a cut could leave half a token).
      const lines = stderr.split("\n").slice(cut ? 1 : 0);
      const tail = printable(scrub(lines.join("\n").trim(), run.remote?.secrets).split("\n").slice(-8).join("\n")).slice(-1000);
      resolve({ code: code ?? -1, stdout, stderr: timedOut ? `killed after ${run.timeoutMs} ms${tail ? `: ${tail}` : ""}` : tail, timedOut, overflow, ...(tooLarge ? { tooLarge } : {}) });
    });
  });
}

/** The error for a failed run: a timeout is its own kind; what git said, scrubbed, ends the message. */
export function gitFailure(what: string, out: GitOut, reason: PublishFailure = "git"): PublishError {
  return new PublishError(out.timedOut ? "timeout" : reason, `${what}: ${out.stderr || `git exited with ${out.code}`}`);
}

/** The bytes of every file under `dir` (0 when it is not there). */
export async function dirBytes(dir: string): Promise<number> {
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  const sizes = await Promise.all(entries.filter((e) => e.isFile()).map((e) => fs.stat(path.join(e.parentPath, e.name)).then((st) => st.size, () => 0)));
  return sizes.reduce((a, b) => a + b, 0);
}
