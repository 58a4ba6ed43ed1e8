// Git in the container: the final patch against the baseline (baseline.ts), and the checkpoints'
// patches. Both trees are written from throwaway indexes in the private store (git-store.ts), so
// the agent's own index, commits, branches and stashes don't matter, and nothing in the repo's own
// config (filters, diff.noprefix, external diff, textconv, color…) applies.
import { isUtf8 } from "node:buffer";
import { PRIVATE_DIR } from "../runtime/types.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { ATTRIBUTES, GIT, GitStepError, INDEX, INDEX_TREE, REFRESH, ROOT, STORE, TREE_ID } from "./git-store.js";

export { GitStepError } from "./git-store.js";

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

// Seeding the index with the baseline keeps files that were tracked though ignored; `add -A` then
// records edits, new (non-ignored) files and deletions exactly as they are on disk.
// The final tree's index, from the kept baseline index where it is this baseline's (the stat
// cache), else from the baseline tree; then everything on disk added.
const stageIndex = (index: string) => `if [ -f ${REFRESH} ]; then refresh "$1"; fi
export GIT_WORK_TREE=/workspace GIT_INDEX_FILE=${index}
[ -e "$GIT_INDEX_FILE.lock" ] && rm -f "$GIT_INDEX_FILE.lock" # left by a run killed at its timeout
t=; [ -f ${INDEX_TREE} ] && t=$(< ${INDEX_TREE})
if [ -f ${INDEX} ] && [ "$t" = "$1" ]; then cp ${INDEX} "$GIT_INDEX_FILE"; else "\${G[@]}" read-tree "$1"; fi
"\${G[@]}" add -A
`;
const STAGE = `${GIT}${stageIndex(`${PRIVATE_DIR}/final.index`)}
tree=$("\${G[@]}" write-tree)
printf '%s' '${ATTRIBUTES}' > ${STORE}/info/attributes
`;

// The diff runs in the bare store with no work tree, so only our info/attributes apply.
const DIFF_ENV = [`GIT_DIR=${STORE}`, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1", `HOME=${PRIVATE_DIR}`, `XDG_CONFIG_HOME=${PRIVATE_DIR}`];
const DIFF = ["git", "-c", "safe.directory=*", "diff", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--full-index", "--src-prefix=a/", "--dst-prefix=b/"];
/** DIFF as words of a bash script. */
const DIFF_SH = DIFF.map((a) => `'${a}'`).join(" ");
/** Bound on the file list and on the diffstat of one patch. */
const LIST_MAX = 16 * 1024 * 1024;

// One exec for the whole patch: stage the final tree, then the file list, the stat and the binary
// diff, each into the private store (the diff cut at maxBytes + 1, so an oversized patch is known
// without sending it), then a header with their sizes and the three files. The diff runs in the
// bare store with no work tree, so only our info/attributes apply.
const PATCH_SCRIPT = `${STAGE}
unset GIT_WORK_TREE GIT_INDEX_FILE
cd ${PRIVATE_DIR}
D=(${DIFF_SH})
set +o pipefail
part() { local out=$1 max=$2; shift 2; "\${D[@]}" "$@" "$BASE" "$tree" | head -c "$max" > "$out"; local s=\${PIPESTATUS[0]}; [ "$s" = 0 ] || [ "$s" = 141 ]; }
BASE=$1
part ${PRIVATE_DIR}/out.names ${LIST_MAX} --name-only -z
part ${PRIVATE_DIR}/out.stat ${LIST_MAX} --stat=120
part ${PRIVATE_DIR}/out.patch "$((PB_MAX + 1))" --binary
# (find, not stat: coreutils' stat calls statx with AT_NO_AUTOMOUNT, which gVisor 20221219 refuses)
printf '%s %s %s %s\\n' "$tree" $(find ${PRIVATE_DIR}/out.names ${PRIVATE_DIR}/out.stat ${PRIVATE_DIR}/out.patch -printf '%s ')
cat ${PRIVATE_DIR}/out.names ${PRIVATE_DIR}/out.stat ${PRIVATE_DIR}/out.patch`;

export async function computePatch(sb: Sandbox, baseline: string, opts: PatchOptions = {}): Promise<PatchResult> {
  if (!TREE_ID.test(baseline)) throw new Error(`computePatch: bad tree id "${baseline}"`);
  const maxBytes = opts.maxBytes ?? DEFAULT_PATCH_MAX_BYTES;
  const env = [`PB_MAX=${maxBytes}`];
  const r = await sb.exec(["bash", "-c", PATCH_SCRIPT, "patchbay", baseline], { env, timeoutSec: 600, maxBytes: maxBytes + 2 * LIST_MAX + 4096, ...ROOT });
  const nl = r.stdout.indexOf(10);
  const [final = "", ...sizes] = r.stdout.subarray(0, Math.max(0, nl)).toString("latin1").split(" ");
  const [nNames = NaN, nStat = NaN, nPatch = NaN] = sizes.map(Number);
  if (r.exitCode !== 0 || !TREE_ID.test(final) || sizes.length !== 3 || !(nNames + nStat + nPatch === r.stdout.length - nl - 1)) {
    throw new GitStepError(`computePatch: staging and diffing the final tree failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
  }
  const body = r.stdout.subarray(nl + 1);
  const filesChanged = body.subarray(0, nNames).toString("utf8").split("\0").filter(Boolean);
  const diffstat = body.subarray(nNames, nNames + nStat).toString("utf8");
  if (nPatch > maxBytes) throw new PatchTooLargeError(maxBytes, diffstat, filesChanged);
  return finish(sb, body.subarray(nNames + nStat, nNames + nStat + nPatch), { baseline, final, diffstat, filesChanged, maxBytes });
}

// A checkpoint needs the patch alone, after every turn that may have changed files: the final
// tree staged as above, its id, then only the binary diff, straight out (the exec's bound cuts
// it); no diff at all when the tree is the last checkpoint's ($2). Few processes: on these
// machines each one costs more than git's hashing of a 1,000-file tree.
const CHECKPOINT_SCRIPT = `${GIT}${stageIndex(`${PRIVATE_DIR}/checkpoint.index`)}tree=$("\${G[@]}" write-tree)
echo "$tree"
[ "$tree" != "\${2:-}" ] || exit 0
unset GIT_WORK_TREE GIT_INDEX_FILE
cd ${PRIVATE_DIR}
printf '%s' '${ATTRIBUTES}' > ${STORE}/info/attributes
exec ${DIFF_SH} --binary "$1" "$tree"`;

/**
 * The patch alone, for a checkpoint: what computePatch's `patch` would be, in fewer processes,
 * with the tree it leads to. With `last` (the previous checkpoint's), an unchanged tree costs no
 * diff. With a patch that is not UTF-8, it is computePatch's.
 */
export async function checkpointDiff(sb: Sandbox, baseline: string, opts: PatchOptions & { last?: { tree: string; patch: string } } = {}): Promise<{ patch: string; tree: string }> {
  if (!TREE_ID.test(baseline)) throw new Error(`checkpointPatch: bad tree id "${baseline}"`);
  const maxBytes = opts.maxBytes ?? DEFAULT_PATCH_MAX_BYTES;
  const full = async () => computePatch(sb, baseline, opts).then((p) => ({ patch: p.patch, tree: p.tree }));
  const last = opts.last && TREE_ID.test(opts.last.tree) ? opts.last : undefined;
  const r = await sb.exec(["bash", "-c", CHECKPOINT_SCRIPT, "patchbay", baseline, ...(last ? [last.tree] : [])], { timeoutSec: 600, maxBytes: maxBytes + 128, ...ROOT });
  const nl = r.stdout.indexOf(10);
  const tree = r.stdout.subarray(0, Math.max(0, nl)).toString("latin1");
  if ((r.exitCode !== 0 && !r.truncated) || !TREE_ID.test(tree)) throw new GitStepError(`checkpointPatch: staging and diffing failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`);
  if (last && tree === last.tree) return last;
  const patch = r.stdout.subarray(nl + 1);
  if (r.truncated || patch.length > maxBytes) throw new PatchTooLargeError(maxBytes, "", []);
  return isUtf8(patch) ? { patch: patch.toString("utf8"), tree } : full();
}

/** checkpointDiff's patch alone. */
export const checkpointPatch = async (sb: Sandbox, baseline: string, opts: PatchOptions = {}): Promise<string> => (await checkpointDiff(sb, baseline, opts)).patch;

async function finish(sb: Sandbox, patch: Buffer, p: { baseline: string; final: string; diffstat: string; filesChanged: string[]; maxBytes: number }): Promise<PatchResult> {
  if (!isUtf8(patch)) {
    // Rare (a non-UTF-8 text file changed): those files are diffed again as binary.
    await markBinary(sb, patch, p.filesChanged);
    const again = await git(sb, [...DIFF, "--binary", p.baseline, p.final], p.maxBytes);
    if (again.truncated) throw new PatchTooLargeError(p.maxBytes, p.diffstat, p.filesChanged);
    if (!isUtf8(again.stdout)) throw new Error("computePatch: the patch is not valid UTF-8 even with the non-UTF-8 files diffed as binary");
    patch = again.stdout;
  }
  return { patch: patch.toString("utf8"), diffstat: p.diffstat, filesChanged: p.filesChanged, bytes: patch.length, truncated: false, tree: p.final };
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
