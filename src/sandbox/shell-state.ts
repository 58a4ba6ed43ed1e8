// What of a shell's state a fresh shell may start from, as data: its exported variables and its
// working directory. After setup (src/job/prepare.ts) the setup shell is asked for them, then
// killed with everything else of the agent's uid, and the agent's shell starts fresh from them:
// a venv's activation (PATH, VIRTUAL_ENV) or a `cd` carry over, while nothing of setup's (a
// function, a trap, a background job, a shell taken over by ptrace) runs on. What the old shell
// prints is hostile: it is parsed strictly and bounded, and the new shell gets it only as
// variables (single-quoted by the worker), never as code it sources or evals.
import { asset } from "../core/assets.js";

/** A shell's state as data: its working directory and exported variables. */
export interface ShellState {
  cwd: string;
  env: [name: string, value: string][];
}

/** Bounds on a captured state: bytes of names and values in all, and variables. */
export const STATE_MAX_BYTES = 256 * 1024;
export const STATE_MAX_VARS = 4096;

const START = "PBSTATE\0"; // capture-state.sh's markers
const END = "PBSTATEEND";

// Run in the shell whose state is taken; its header says what it prints.
export const CAPTURE_STATE = asset("sandbox/sh/capture-state.sh");
// Run by a fresh shell after the variables are set, before it takes commands (see startScript).
const START_STATE = asset("sandbox/sh/start-state.sh");

// Names never carried: the ones bash reads as code or options at its start or later (BASH_ENV,
// ENV, SHELLOPTS, BASHOPTS, PS0-PS4 with xtrace, PROMPT_COMMAND), the dynamic loader's hooks that
// would load setup's code into every process the agent starts (LD_PRELOAD, LD_AUDIT), bash's own
// state (PWD, SHLVL, IFS, history), the settings that change how the shell reads patchbay's
// protocol or calls its functions (TMOUT, a read's timeout; FUNCNEST), patchbay's shell variables
// (__pb*), and the terminal settings every agent shell gets (TERM, PAGER, GIT_PAGER: see
// supervisor.ts). A name that is not an identifier (an exported function's BASH_FUNC_f%%) never
// passes NAME. What does carry is data that may still name setup's files, as any environment does
// (a venv's PATH): the agent phase runs the repo's code anyway; what must not happen is setup's
// code running on by itself.
const DENY = [
  "LD_PRELOAD",
  "LD_AUDIT",
  "ENV",
  "SHELLOPTS",
  "PS0",
  "PS1",
  "PS2",
  "PS3",
  "PS4",
  "PROMPT_COMMAND",
  "IFS",
  "PWD",
  "OLDPWD",
  "SHLVL",
  "_",
  "CDPATH",
  "GLOBIGNORE",
  "EXECIGNORE",
  "POSIXLY_CORRECT",
  "TERM",
  "PAGER",
  "GIT_PAGER",
  "TMOUT",
  "FUNCNEST",
];
const DENY_PREFIX = ["BASH", "HIST", "__pb"];
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
// Carried where the state has them, but never unset where it has not: a shell without them is
// of no use to the agent (a setup shell taken over answers with next to nothing).
const NEVER_UNSET = ["PATH", "HOME"];

/** Whether `name` may be carried into a fresh shell as a variable. */
export function carried(name: string): boolean {
  return NAME.test(name) && !DENY.includes(name) && !DENY_PREFIX.some((p) => name.startsWith(p));
}

/**
 * The state in a captured shell's output (CAPTURE_STATE's), or undefined where it is not there
 * whole, is over the bounds, or its directory is not absolute. Variables that may not be carried
 * (see carried) and values that were not UTF-8 (they could not be given back byte for byte) are
 * left out.
 */
export function parseShellState(output: string): ShellState | undefined {
  const at = output.indexOf(START);
  if (at < 0) return undefined;
  const parts = output.slice(at + START.length).split("\0");
  const cwd = parts[0] ?? "";
  if (!cwd.startsWith("/") || cwd.includes("\uFFFD")) return undefined;
  const env: [string, string][] = [];
  let bytes = cwd.length;
  for (let i = 1; ; i += 2) {
    const name = parts[i];
    if (name === undefined || parts[i + 1] === undefined) return undefined; // no end marker: not whole
    if (name === END) break;
    const value = parts[i + 1]!;
    if ((bytes += name.length + value.length) > STATE_MAX_BYTES || env.length >= STATE_MAX_VARS) return undefined;
    if (carried(name) && !value.includes("\uFFFD")) env.push([name, value]);
  }
  return { cwd, env };
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Bash text, run by a fresh shell before it takes commands, that makes it start from `state`: the
 * variables set and exported as the worker quoted them (plain assignments), then start-state.sh:
 * the exported variables it has but `state` has not (the image's, which setup unset) unset where
 * they may be carried at all (PATH and HOME never), and into the state's directory (else /workspace).
 */
export function startScript(state: ShellState): string {
  const words = (xs: string[]) => xs.map(quote).join(" ");
  const lines = [
    ...state.env.map(([n, v]) => `builtin export ${n}=${quote(v)}`),
    `__pb_keep=(${words([...state.env.map(([n]) => n), ...DENY, ...NEVER_UNSET])})`,
    `__pb_prefix=(${words(DENY_PREFIX)})`,
    `__pb_cwd=${quote(state.cwd)}`,
  ];
  return `${lines.join("\n")}\n${START_STATE}`;
}
