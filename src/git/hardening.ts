// The one hardening and the one environment of every git process patchbay runs on a host: a job's
// clone on the worker (src/job/repo/clone.ts) and publish's bare cache on the publishing host
// (src/campaign/publish-git.ts, and the tracker's `ls-remote` through it). src/git/run.ts puts both
// on every run. A caller says only what differs for its step, in words, never as a `-c` of its own:
// which transports the step may use, whether the user's git config applies, and (the clone of a job
// held to a host list) that no HTTP redirect is followed. test/git-hardening.test.ts records every
// git process both callers start and holds them to this file.
//
// Git inside a box (the baseline, the patch, the store) is the sandbox's and has its own config.
import type { HostEnv } from "../core/config/config.js";

/** One `git -c key=value` every host git gets, and why. */
export interface Hardening {
  key: string;
  value: string;
  why: string;
}

/** The list: each option is one every git subcommand patchbay runs accepts (git ignores a key a command does not read). */
export const HARDENING: readonly Hardening[] = [
  {
    key: "core.hooksPath",
    value: "/dev/null",
    why: "no hook runs, neither the repo's nor the user's (post-checkout, pre-push, reference-transaction)",
  },
  {
    key: "core.fsmonitor",
    value: "false",
    why: "no fsmonitor hook or daemon is started from a repo's or the user's config",
  },
  { key: "submodule.recurse", value: "false", why: "a repo's .gitmodules makes git fetch or check out nothing else" },
  {
    key: "protocol.allow",
    value: "never",
    why: "no transport but those the step names below (no remote helper found on PATH)",
  },
  {
    key: "protocol.ext.allow",
    value: "never",
    why: "ext:: runs a command as a URL: never, whatever the user's config says",
  },
  {
    key: "protocol.fd.allow",
    value: "never",
    why: "fd:: talks over the caller's file descriptors: never, whatever the user's config says",
  },
  {
    key: "transfer.fsckObjects",
    value: "true",
    why: "objects are checked as they arrive: a tree with a .git or .. entry is refused before it is stored",
  },
  {
    key: "fetch.fsck.zeroPaddedFilemode",
    value: "ignore",
    why: "a mode old git wrote zero-padded is history, not an attack: such repos still clone and publish",
  },
  {
    key: "gc.auto",
    value: "0",
    why: "no automatic gc: it would start a process of its own that outlives the group's kill",
  },
  { key: "maintenance.auto", value: "false", why: "no automatic maintenance, for the same reason" },
  {
    key: "core.quotePath",
    value: "false",
    why: "names in git's output as their bytes, not octal escapes (run.ts escapes control characters itself)",
  },
];

/** `-c key=value` for each option of the list, in order. */
export const hardeningArgs = (): string[] => HARDENING.flatMap((h) => ["-c", `${h.key}=${h.value}`]);

/**
 * The transports a step may use: `remote` for a URL (https, http, ssh, git), `local` for a path or
 * file: URL. A step that talks to no remote names none.
 */
export type Transport = "remote" | "local";
export const TRANSPORTS: Readonly<Record<Transport, readonly string[]>> = {
  remote: ["https", "http", "ssh", "git"],
  local: ["file"],
};

/**
 * What a step adds to the list, the only `-c` a caller can ask for: its transports allowed, and
 * `followRedirects: false` for a clone held to a host list (a redirect could lead off it). The
 * credential helper's `-c` is src/git/credentials.ts's.
 */
export interface StepConfig {
  transports?: readonly Transport[];
  /** false: an HTTP redirect is not followed; undefined: git's own rule (the first request's). */
  followRedirects?: false;
}

export function stepArgs(step: StepConfig): string[] {
  const allowed = [...new Set((step.transports ?? []).flatMap((t) => TRANSPORTS[t]))];
  return [
    ...allowed.flatMap((p) => ["-c", `protocol.${p}.allow=always`]),
    ...(step.followRedirects === false ? ["-c", "http.followRedirects=false"] : []),
  ];
}

/** Set by the operator's shell or a hook, these would point git at another repo, index or object store. */
export const REPO_VARS: readonly string[] = [
  "GIT_DIR",
  "GIT_WORK_TREE",
  "GIT_INDEX_FILE",
  "GIT_OBJECT_DIRECTORY",
  "GIT_ALTERNATE_OBJECT_DIRECTORIES",
  "GIT_COMMON_DIR",
  "GIT_NAMESPACE",
  "GIT_CEILING_DIRECTORIES",
  "GIT_DISCOVERY_ACROSS_FILESYSTEM",
];

/** These would replace the transports a step names (GIT_ALLOW_PROTOCOL overrides every protocol.* key). */
export const PROTOCOL_VARS: readonly string[] = ["GIT_ALLOW_PROTOCOL", "GIT_PROTOCOL_FROM_USER"];

/** Config given in the environment: the user's, so kept for a step with the user's config and dropped for the others. */
const isEnvConfig = (v: string) =>
  v === "GIT_CONFIG_PARAMETERS" || v === "GIT_CONFIG_COUNT" || /^GIT_CONFIG_(KEY|VALUE)_\d+$/.test(v);

/**
 * The environment of a host git: the host's, without the variables above and without traces (they
 * would print what git sends, a credential helper's answer among it, to stderr). No prompt: git's
 * own off, ssh's askpass never, and git runs in a session of its own (run.ts) with no terminal for
 * ssh to ask on. GIT_SSH_COMMAND is the host's if set, else the user's core.sshCommand stands.
 *
 * `userConfig`: a step that talks to a remote keeps the user's system and global config (credential
 * helpers, insteadOf, proxies, core.sshCommand); every other step has none at all, so no filter,
 * autocrlf or alias of the host's applies to a repo's files.
 */
export function gitEnv(host: HostEnv, userConfig: boolean): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...host, GIT_TERMINAL_PROMPT: "0", SSH_ASKPASS_REQUIRE: "never" };
  const dropped = new Set([...REPO_VARS, ...PROTOCOL_VARS]);
  for (const v of Object.keys(env)) {
    if (dropped.has(v) || v.startsWith("GIT_TRACE") || v === "GIT_CURL_VERBOSE" || (!userConfig && isEnvConfig(v)))
      delete env[v];
  }
  return userConfig ? env : { ...env, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };
}
