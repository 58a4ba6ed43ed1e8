// Git in the container: the baseline tree when a repo is loaded, and the final patch against it.
// Both trees are written from throwaway indexes, so the agent's own index, commits, branches and
// stashes don't matter, and nothing in the repo's own config (filters, diff.noprefix, external
// diff, textconv, color…) applies.
import { isUtf8 } from "node:buffer";
import { PRIVATE_DIR } from "../sandbox/docker.js";
import type { Sandbox } from "../sandbox/sandbox.js";

export interface PatchResult {
  /** `git diff --binary` from the baseline tree to the final working tree; "" when nothing changed. */
  patch: string;
  diffstat: string;
  filesChanged: string[];
  /** Size of `patch` in bytes (UTF-8). */
  bytes: number;
  /** Always false on a returned result: an oversized patch throws PatchTooLargeError instead. */
  truncated: boolean;
  /** The tree the patch leads to (in the private store). */
  tree: string;
}

export interface PatchOptions {
  maxBytes?: number;
  /** The previous round's patch tree and the tree right after its verify: what that verify changed is left out. */
  afterVerify?: { patchTree: string; verifyTree: string };
}

/** Git ran in the sandbox and failed: the workspace's doing while the sandbox still runs, not the host's. */
export class GitStepError extends Error {}

export const DEFAULT_PATCH_MAX_BYTES = 50 * 1024 * 1024;

/** A patch over the bound is never cut (a cut patch does not apply); the stat and file list still come along. */
export class PatchTooLargeError extends Error {
  readonly truncated = true;
  constructor(
    readonly maxBytes: number,
    readonly diffstat: string,
    readonly filesChanged: string[],
  ) {
    super(`the patch is larger than ${maxBytes} bytes (${filesChanged.length} files changed); it was not returned because a truncated patch would not apply`);
  }
}

// Both the baseline and the final tree are hashed from the files as they are on disk into a
// private store at /patchbay (root's tmpfs, mode 0700: the agent can neither read nor plant
// objects there), by root git under a configuration that is ours alone: no system, global or repo
// config, no hooks, no fsmonitor, and an info/attributes that switches off every attribute the
// repo's .gitattributes could use to rewrite content (filters, text/eol conversion, ident,
// working-tree-encoding). So neither a repo-supplied filter nor a planted object can make the
// patch differ from the bytes on disk. The workspace's own .git is the agent's, and untrusted.
const STORE = `${PRIVATE_DIR}/git`;
const ATTRIBUTES = "* -text !eol -filter -ident !diff !merge !working-tree-encoding\n";
const GIT = `set -euo pipefail
export GIT_DIR=${STORE} GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 HOME=${PRIVATE_DIR} XDG_CONFIG_HOME=${PRIVATE_DIR}
G=(git -c safe.directory='*' -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.autocrlf=false -c core.safecrlf=false \
-c core.symlinks=true -c core.filemode=true -c core.ignorecase=false -c core.precomposeunicode=false -c core.bigFileThreshold=512m \
-c commit.gpgSign=false -c user.name=patchbay -c user.email=patchbay@localhost)
umask 077
if [ ! -d ${STORE} ]; then
  "\${G[@]}" init -q --bare ${STORE}
  printf '%s' '${ATTRIBUTES}' > ${STORE}/info/attributes
fi
cd /workspace
`;

// As the agent (setpriv drops to uid 1000 with no capabilities): the symlinks the archive API
// refused (NUL-separated pairs on stdin), a repo if there is none (for the agent's convenience),
// then the names the repo tracks, as plain data: git never ignores a tracked file, so those enter
// the baseline even when .gitignore matches them. Then, as root, the baseline tree in the store.
const AGENT_PART = `
while IFS= read -r -d "" n && IFS= read -r -d "" t; do ln -s -- "$t" "$n"; done
A=(git -c safe.directory='*' -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.autocrlf=false -c commit.gpgSign=false -c user.name=patchbay -c user.email=patchbay@localhost)
if [ ! -e .git ]; then
  "\${A[@]}" init -q -b main && "\${A[@]}" add -A && "\${A[@]}" commit -q --no-verify --allow-empty -m "patchbay: baseline"
fi
"\${A[@]}" ls-files -z 2>/dev/null || true`;

const BASELINE_SCRIPT = `${GIT}
env -i HOME=/home/agent PATH="$PATH" LANG=C.UTF-8 GIT_CONFIG_NOSYSTEM=1 \
  setpriv --reuid=1000 --regid=1000 --groups=1000 --inh-caps=-all bash --noprofile --norc -c "$1" > ${PRIVATE_DIR}/tracked
export GIT_WORK_TREE=/workspace GIT_INDEX_FILE=${PRIVATE_DIR}/baseline.index
rm -f "$GIT_INDEX_FILE"
# Tracked names that are files or symlinks now, without ".." or ".git" parts (git would refuse the lot).
while IFS= read -r -d "" n; do
  case "/$n/" in */../*|*/./*|*/.git/*|//*) continue;; esac
  if [ -f "$n" ] || [ -L "$n" ]; then printf '%s\\0' "$n"; fi
done < ${PRIVATE_DIR}/tracked | "\${G[@]}" update-index --add -z --stdin || true
"\${G[@]}" add -A
tree=$("\${G[@]}" write-tree)
"\${G[@]}" update-ref refs/patchbay/baseline-$tree "$("\${G[@]}" commit-tree -m "patchbay: baseline" "$tree")"
rm -f "$GIT_INDEX_FILE" ${PRIVATE_DIR}/tracked
echo "$tree"`;

// Seeding the index with the baseline keeps files that were tracked though ignored; `add -A` then
// records edits, new (non-ignored) files and deletions exactly as they are on disk.
// With "$2 $3" (the previous patch's tree and the tree right after its verify): paths that verify
// changed and that are still as verify left them go back to the previous patch's version, so a
// verify's byproducts never enter a later round's patch.
const STAGE_SCRIPT = `${GIT}
export GIT_WORK_TREE=/workspace GIT_INDEX_FILE=${PRIVATE_DIR}/final.index
rm -f "$GIT_INDEX_FILE"
"\${G[@]}" read-tree "$1"
"\${G[@]}" add -A
if [ $# -ge 3 ]; then
  "\${G[@]}" diff-tree -r -z --no-renames --name-only "$2" "$3" | sort -z > ${PRIVATE_DIR}/by-verify
  "\${G[@]}" diff-index --cached -z --no-renames --name-only "$3" | sort -z > ${PRIVATE_DIR}/since
  comm -z -23 ${PRIVATE_DIR}/by-verify ${PRIVATE_DIR}/since > ${PRIVATE_DIR}/restore
  "\${G[@]}" update-index -z --force-remove --stdin < ${PRIVATE_DIR}/restore
  xargs -0 -r "\${G[@]}" --literal-pathspecs ls-tree -r -z --full-tree "$2" -- < ${PRIVATE_DIR}/restore | "\${G[@]}" update-index -z --index-info
  rm -f ${PRIVATE_DIR}/by-verify ${PRIVATE_DIR}/since ${PRIVATE_DIR}/restore
fi
tree=$("\${G[@]}" write-tree)
"\${G[@]}" update-ref refs/patchbay/final-$tree "$("\${G[@]}" commit-tree -m "patchbay: final" "$tree")"
rm -f "$GIT_INDEX_FILE"
printf '%s' '${ATTRIBUTES}' > ${STORE}/info/attributes
echo "$tree"`;

// The diff runs in the bare store with no work tree, so only our info/attributes apply.
const DIFF_ENV = [`GIT_DIR=${STORE}`, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1", `HOME=${PRIVATE_DIR}`, `XDG_CONFIG_HOME=${PRIVATE_DIR}`];
const DIFF = ["git", "-c", "safe.directory=*", "diff", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--full-index", "--src-prefix=a/", "--dst-prefix=b/"];
const TREE_ID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
const ROOT = { user: "0:0", cwd: PRIVATE_DIR } as const;

/** Runs a script that prints a tree id last. */
async function treeScript(sb: Sandbox, what: string, script: string, args: string[], stdin = ""): Promise<string> {
  const r = await sb.exec(["bash", "-c", script, "patchbay", ...args], { stdin, timeoutSec: 600, ...ROOT });
  const tree = r.stdout.toString("utf8").trim().split("\n").pop() ?? "";
  if (r.exitCode !== 0 || !TREE_ID.test(tree)) throw new GitStepError(`${what} failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
  return tree;
}

/**
 * Makes /workspace a git repo if it is not one (one baseline commit) and returns the tree id of
 * the working tree as it is now. `symlinks` are made first, as the agent's uid.
 */
export function writeBaseline(sb: Sandbox, symlinks: { name: string; target: string }[] = []): Promise<string> {
  const stdin = symlinks.map((l) => `${l.name}\0${l.target}\0`).join("");
  return treeScript(sb, "loadRepo: making the baseline with git", BASELINE_SCRIPT, [AGENT_PART], stdin);
}

/** The tree of /workspace as it is now (e.g. right after a verify), hashed into the private store. */
export function currentTree(sb: Sandbox, baseline: string): Promise<string> {
  return treeScript(sb, "computePatch: hashing the tree", STAGE_SCRIPT, [baseline]);
}

export async function computePatch(sb: Sandbox, baseline: string, opts: PatchOptions = {}): Promise<PatchResult> {
  const v = opts.afterVerify;
  for (const id of [baseline, ...(v ? [v.patchTree, v.verifyTree] : [])]) if (!TREE_ID.test(id)) throw new Error(`computePatch: bad tree id "${id}"`);
  const maxBytes = opts.maxBytes ?? DEFAULT_PATCH_MAX_BYTES;
  const final = await treeScript(sb, "computePatch: staging the final tree", STAGE_SCRIPT, [baseline, ...(v ? [v.patchTree, v.verifyTree] : [])]);
  const diff = (args: string[], max?: number) => git(sb, [...DIFF, ...args, baseline, final], max);
  const [patchOut, stat, names] = await Promise.all([diff(["--binary"], maxBytes), diff(["--stat=120"]), diff(["--name-only", "-z"])]);
  const filesChanged = names.stdout.toString("utf8").split("\0").filter(Boolean);
  const diffstat = stat.stdout.toString("utf8");
  if (patchOut.truncated) throw new PatchTooLargeError(maxBytes, diffstat, filesChanged);
  let patch = patchOut.stdout;
  if (!isUtf8(patch)) {
    await markBinary(sb, patch, filesChanged);
    const again = await diff(["--binary"], maxBytes);
    if (again.truncated) throw new PatchTooLargeError(maxBytes, diffstat, filesChanged);
    if (!isUtf8(again.stdout)) throw new Error("computePatch: the patch is not valid UTF-8 even with the non-UTF-8 files diffed as binary");
    patch = again.stdout;
  }
  return { patch: patch.toString("utf8"), diffstat, filesChanged, bytes: patch.length, truncated: false, tree: final };
}

async function git(sb: Sandbox, argv: string[], maxBytes?: number) {
  const r = await sb.exec(argv, { env: DIFF_ENV, timeoutSec: 600, ...ROOT, ...(maxBytes !== undefined ? { maxBytes } : {}) });
  if (r.exitCode !== 0) throw new GitStepError(`computePatch: ${argv.slice(0, 2).join(" ")} failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
  return r;
}

/**
 * A text file that is not UTF-8 (Latin-1, say) would not survive the patch being a JS string:
 * such files are marked to be diffed as binary (`-diff` in the diff repo's info/attributes).
 */
async function markBinary(sb: Sandbox, patch: Buffer, files: string[]): Promise<void> {
  const sections = splitSections(patch);
  // One `diff --git` section per file, in --name-only order (renames are off); otherwise all binary.
  const bad = sections.length === files.length ? files.filter((_, i) => !isUtf8(sections[i]!)) : undefined;
  // After our base line: later lines of the same file win.
  const attributes = ATTRIBUTES + (bad ? bad.map((f) => `${quotePattern(f)} -diff\n`).join("") : "* -diff\n");
  const w = await sb.exec(["bash", "-c", `cat > ${STORE}/info/attributes`], { stdin: attributes, ...ROOT });
  if (w.exitCode !== 0) throw new GitStepError(`computePatch: writing attributes failed: ${w.stderr.trim()}`);
}

/** Splits a diff at each line starting with "diff --git " (hunk lines never do; base85 lines have no spaces). */
function splitSections(patch: Buffer): Buffer[] {
  const starts: number[] = [];
  const marker = Buffer.from("diff --git ");
  for (let i = patch.indexOf(marker); i >= 0; i = patch.indexOf(marker, i + 1)) if (i === 0 || patch[i - 1] === 0x0a) starts.push(i);
  return starts.map((s, k) => patch.subarray(s, starts[k + 1] ?? patch.length));
}

/** An attributes pattern matching exactly one path from the root: glob characters escaped, C-quoted. */
function quotePattern(file: string): string {
  const glob = "/" + file.replace(/[\\*?[\]]/g, (c) => `\\${c}`);
  return `"${glob.replace(/[\\"]/g, (c) => `\\${c}`).replace(/[\x00-\x1f]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`)}"`;
}
