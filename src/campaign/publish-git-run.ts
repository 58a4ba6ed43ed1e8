// How publishing (publish-git.ts) runs host git: its errors, the remote a publish talks to, and what
// a publish step differs in. src/git/run.ts gives every run the hardening, the environment, the
// timeout and bounds, the process-group kill and the scrubbing, the same as a job's clone. The
// credentials live on the publishing host: a forge token reaches git only through src/git/credentials.ts's
// env-only helper (never on argv, never in a file); without one, git uses the user's own
// (credential helpers, SSH agent).
import type { HostEnv } from "../core/config/config.js";
import { PatchbayError, type ErrorKind } from "../core/errors.js";
import { credentialHelper, redact, scrub, splitUrl, type GitCredential } from "../git/credentials.js";
import { runGit as hostGit, type GitOut, type GitRun } from "../git/run.js";

export type { GitOut } from "../git/run.js";

/** Why a publish step failed; each maps to the error kind the caller acts on. */
export type PublishFailure = "rights" | "missing" | "patch" | "usage" | "git" | "timeout";
const KINDS: Record<PublishFailure, ErrorKind> = {
  rights: "config",
  missing: "not-found",
  patch: "patch",
  usage: "usage",
  git: "repo",
  timeout: "timeout",
};

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
  if (!url || url.startsWith("-") || /[\0\r\n]/.test(url))
    throw new PublishError("usage", `not a repository URL: ${JSON.stringify(redact(url).slice(0, 200))}`);
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

/** A publish step's git: everything but what src/git/run.ts decides for every host git. */
export type PublishRun = Omit<GitRun, "userConfig" | "transports" | "auth" | "secrets" | "followRedirects"> & {
  /** A network step: the user's git config applies (helpers, insteadOf, proxies, sshCommand), and the remote's auth. Else none of it. */
  remote?: Remote;
};

/**
 * What a publish step differs in: a network step talks to the remote over any transport a campaign's
 * URL may name (a URL, or a local path: a campaign of local repos), with the user's git config and
 * the remote's auth; a local step in the bare cache talks to nothing and has no config of the host's.
 */
export function runGit(args: string[], run: PublishRun): Promise<GitOut> {
  const { remote, ...rest } = run;
  return hostGit(
    args,
    remote
      ? { ...rest, userConfig: true, transports: ["remote", "local"], auth: remote.auth, secrets: remote.secrets }
      : { ...rest, userConfig: false },
  );
}

/** The error for a failed run: a timeout is its own kind; what git said, scrubbed, ends the message. */
export function gitFailure(what: string, out: GitOut, reason: PublishFailure = "git"): PublishError {
  return new PublishError(out.timedOut ? "timeout" : reason, `${what}: ${out.stderr || `git exited with ${out.code}`}`);
}
