// Git in the container: the baseline tree when a repo is loaded, and the final patch against it.
// Both trees are written from throwaway indexes, so the agent's own index, commits, branches and
// stashes don't matter; the diff runs in a fresh bare repo that borrows the workspace's objects,
// so nothing in the repo's own config (diff.noprefix, external diff, textconv, color…) applies.
import { isUtf8 } from "node:buffer";
import type { Sandbox } from "./sandbox/sandbox.js";

export interface PatchResult {
  /** `git diff --binary` from the baseline tree to the final working tree; "" when nothing changed. */
  patch: string;
  diffstat: string;
  filesChanged: string[];
  /** Size of `patch` in bytes (UTF-8). */
  bytes: number;
  /** Always false on a returned result: an oversized patch throws PatchTooLargeError instead. */
  truncated: boolean;
}

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

// The repo's config may not run hooks or fsmonitor, sign, or rewrite line endings (a machine setting, not the repo's).
const GIT = `GIT=(git -c safe.directory='*' -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.autocrlf=false \
-c core.safecrlf=false -c commit.gpgSign=false -c user.name=patchbay -c user.email=patchbay@localhost)
set -euo pipefail
cd /workspace
`;

// Makes the symlinks the archive API refused (NUL-separated pairs on stdin), and a repo if there is
// none. The baseline is HEAD's tree (so tracked-but-ignored files stay) updated by `git add -A`;
// a ref keeps its objects alive through `git gc`.
const BASELINE_SCRIPT = `${GIT}
while IFS= read -r -d "" n && IFS= read -r -d "" t; do ln -s -- "$t" "$n"; done
if [ ! -e .git ]; then
  "\${GIT[@]}" init -q -b main
  "\${GIT[@]}" add -A
  "\${GIT[@]}" commit -q --no-verify --allow-empty -m "patchbay: baseline"
fi
export GIT_INDEX_FILE=/tmp/patchbay-baseline.index
rm -f "$GIT_INDEX_FILE"
if "\${GIT[@]}" rev-parse -q --verify 'HEAD^{tree}' >/dev/null; then "\${GIT[@]}" read-tree HEAD; fi
"\${GIT[@]}" add -A
tree=$("\${GIT[@]}" write-tree)
"\${GIT[@]}" update-ref refs/patchbay/baseline "$("\${GIT[@]}" commit-tree -m "patchbay: baseline tree" "$tree")"
rm -f "$GIT_INDEX_FILE"
echo "$tree"`;

const DIFF_DIR = "/tmp/patchbay-diff.git";

// Seeding the index with the baseline keeps files that were tracked though ignored; `add -A` then
// records edits, new (non-ignored) files and deletions exactly as they are on disk.
const STAGE_SCRIPT = `${GIT}
export GIT_INDEX_FILE=/tmp/patchbay-final.index
rm -f "$GIT_INDEX_FILE"
"\${GIT[@]}" read-tree "$1"
"\${GIT[@]}" add -A
tree=$("\${GIT[@]}" write-tree)
objects=$("\${GIT[@]}" rev-parse --path-format=absolute --git-path objects)
rm -f "$GIT_INDEX_FILE"
rm -rf ${DIFF_DIR}
git init -q --bare ${DIFF_DIR}
printf '%s\\n' "$objects" > ${DIFF_DIR}/objects/info/alternates
echo "$tree"`;

// The diff repo's config is ours alone: no system or global config either.
const DIFF_ENV = [`GIT_DIR=${DIFF_DIR}`, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"];
const DIFF = ["git", "diff", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--full-index", "--src-prefix=a/", "--dst-prefix=b/"];
const TREE_ID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

/** Runs a script that prints a tree id last. */
async function treeScript(sb: Sandbox, what: string, script: string, args: string[], stdin = ""): Promise<string> {
  const r = await sb.exec(["bash", "-c", script, "patchbay", ...args], { stdin, timeoutSec: 600 });
  const tree = r.stdout.toString("utf8").trim().split("\n").pop() ?? "";
  if (r.exitCode !== 0 || !TREE_ID.test(tree)) throw new Error(`${what} failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
  return tree;
}

/**
 * Makes /workspace a git repo if it is not one (one baseline commit) and returns the tree id of
 * the working tree as it is now. `symlinks` are made first, as the agent's uid.
 */
export function writeBaseline(sb: Sandbox, symlinks: { name: string; target: string }[] = []): Promise<string> {
  const stdin = symlinks.map((l) => `${l.name}\0${l.target}\0`).join("");
  return treeScript(sb, "loadRepo: making the baseline with git", BASELINE_SCRIPT, [], stdin);
}

export async function computePatch(sb: Sandbox, baseline: string, opts: { maxBytes?: number } = {}): Promise<PatchResult> {
  if (!TREE_ID.test(baseline)) throw new Error(`computePatch: bad baseline tree id "${baseline}"`);
  const maxBytes = opts.maxBytes ?? DEFAULT_PATCH_MAX_BYTES;
  const final = await treeScript(sb, "computePatch: staging the final tree (is /workspace/.git intact?)", STAGE_SCRIPT, [baseline]);
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
  return { patch: patch.toString("utf8"), diffstat, filesChanged, bytes: patch.length, truncated: false };
}

async function git(sb: Sandbox, argv: string[], maxBytes?: number) {
  const r = await sb.exec(argv, { env: DIFF_ENV, timeoutSec: 600, ...(maxBytes !== undefined ? { maxBytes } : {}) });
  if (r.exitCode !== 0) throw new Error(`computePatch: ${argv.slice(0, 2).join(" ")} failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
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
  const attributes = bad ? bad.map((f) => `${quotePattern(f)} -diff\n`).join("") : "* -diff\n";
  const w = await sb.exec(["bash", "-c", `mkdir -p ${DIFF_DIR}/info && cat > ${DIFF_DIR}/info/attributes`], { stdin: attributes });
  if (w.exitCode !== 0) throw new Error(`computePatch: writing attributes failed: ${w.stderr.trim()}`);
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
