// The store: the private git repository at /patchbay/git in which every git step of a job runs
// (see the comment on STORE). Here are its paths, the shell prelude every git script starts with,
// and treeScript, which runs a script that prints a tree id. The baseline (baseline.ts), the patch
// and the checkpoints' patches (patch.ts) use them; the scripts are in src/job/sh/.
import { asset } from "../core/assets.js";
import { PRIVATE_DIR } from "../backend/types.js";
import type { PutFile, Sandbox } from "../sandbox/sandbox.js";
import { kinded } from "../core/errors.js";

/** Git ran in the sandbox and failed: the workspace's doing while the sandbox still runs, not the host's. */
export class GitStepError extends kinded("sandbox-step") {}

// Both the baseline and the final tree are hashed from the files as they are on disk into a
// private store at /patchbay (root's tmpfs, mode 0700: the agent can neither read nor plant
// objects there), by root git under a configuration that is ours alone: no system, global or repo
// config, no hooks, no fsmonitor, and an info/attributes that switches off every attribute the
// repo's .gitattributes could use to rewrite content (filters, text/eol conversion, ident,
// working-tree-encoding). So neither a repo-supplied filter nor a planted object can make the
// patch differ from the bytes on disk. The workspace's own .git is the agent's, and untrusted.
export const STORE = `${PRIVATE_DIR}/git`;
export const INDEX = `${PRIVATE_DIR}/baseline.index`;
export const INDEX_TREE = `${PRIVATE_DIR}/baseline.tree`;
/** "<second the baseline's add started> <baseline tree>" while the baseline's index awaits its refresh. */
export const REFRESH = `${PRIVATE_DIR}/baseline.refresh`;
export const ATTRIBUTES = "* -text !eol -filter -ident !diff !merge !working-tree-encoding\n";
/**
 * The prelude of every git script here (src/job/sh/): the shared values as shell variables
 * (vars.sh, GIT_VARS: these constants, held to them by test/unit/assets.test.ts), then the store, our config and
 * the functions the steps share (git-store.sh: `smudge`, `refresh`, `stage`, `as_agent`).
 */
export const GIT_VARS = asset("job/sh/vars.sh");
export const GIT = GIT_VARS + asset("job/sh/git-store.sh");

export const TREE_ID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
export const ROOT = { user: "0:0", cwd: PRIVATE_DIR } as const;

/** Runs a script that prints a tree id last; with the lines before it. */
export async function treeScript(
  sb: Sandbox,
  what: string,
  script: string,
  args: string[],
  stdin: string | Buffer = "",
  env: string[] = [],
  put: PutFile[] = [],
): Promise<{ tree: string; before: string[] }> {
  const r = await sb.exec(["bash", "-c", script, "patchbay", ...args], { stdin, env, timeoutSec: 600, put, ...ROOT });
  const before = r.stdout.toString("utf8").trim().split("\n");
  const tree = before.pop() ?? "";
  if (r.exitCode !== 0 || !TREE_ID.test(tree))
    throw new GitStepError(`${what} failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
  return { tree, before };
}
