// The patch, made by root git in the box: the final patch against the baseline (baseline.ts), and
// the checkpoints' patches. Git writes both trees from throwaway indexes in the store
// (git-store.ts), so the agent's own index, commits, branches and stashes do not matter, and
// nothing in the repo's own config (filters, diff.noprefix, external diff, textconv, color) applies.
import { count } from "../core/count.js";
import { isUtf8 } from "node:buffer";
import { asset } from "../core/assets.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { ATTRIBUTES, GIT, GitStepError, ROOT, TREE_ID } from "./git-store.js";
import { PatchbayError } from "../core/errors.js";

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
export class PatchTooLargeError extends PatchbayError {
  readonly truncated = true;
  constructor(
    readonly maxBytes: number,
    readonly diffstat: string,
    readonly filesChanged: string[],
  ) {
    super(
      "patch",
      `the patch is larger than ${count(maxBytes, "byte")} (${count(filesChanged.length, "file")} changed); it was not returned because a truncated patch would not apply`,
    );
  }
}

// The scripts (src/job/sh/, after the prelude GIT; each with a header saying what it takes and
// prints): the whole patch in one exec (patch.sh: the final tree staged, then the file list, the
// stat and the binary diff with their sizes, the diff cut at maxBytes + 1 so an oversized patch is
// known without sending it), a checkpoint's patch alone (checkpoint.sh), and the binary diff again
// under new attributes for a patch that was not UTF-8 (rediff.sh).
const PATCH_SCRIPT = GIT + asset("job/sh/patch.sh");
const CHECKPOINT_SCRIPT = GIT + asset("job/sh/checkpoint.sh");
const REDIFF_SCRIPT = GIT + asset("job/sh/rediff.sh");
/** Bound on the file list and on the diffstat of one patch (LIST_MAX in vars.sh). */
export const LIST_MAX = 16 * 1024 * 1024;

export async function computePatch(sb: Sandbox, baseline: string, opts: PatchOptions = {}): Promise<PatchResult> {
  if (!TREE_ID.test(baseline)) throw new Error(`computePatch: bad tree id "${baseline}"`);
  const maxBytes = opts.maxBytes ?? DEFAULT_PATCH_MAX_BYTES;
  const env = [`PB_MAX=${maxBytes}`];
  const r = await sb.exec(["bash", "-c", PATCH_SCRIPT, "patchbay", baseline], {
    env,
    timeoutSec: 600,
    maxBytes: maxBytes + 2 * LIST_MAX + 4096,
    ...ROOT,
  });
  const nl = r.stdout.indexOf(10);
  const [final = "", ...sizes] = r.stdout.subarray(0, Math.max(0, nl)).toString("latin1").split(" ");
  const [nNames = NaN, nStat = NaN, nPatch = NaN] = sizes.map(Number);
  if (
    r.exitCode !== 0 ||
    !TREE_ID.test(final) ||
    sizes.length !== 3 ||
    !(nNames + nStat + nPatch === r.stdout.length - nl - 1)
  ) {
    throw new GitStepError(
      `computePatch: staging and diffing the final tree failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`,
    );
  }
  const body = r.stdout.subarray(nl + 1);
  const filesChanged = body.subarray(0, nNames).toString("utf8").split("\0").filter(Boolean);
  const diffstat = body.subarray(nNames, nNames + nStat).toString("utf8");
  if (nPatch > maxBytes) throw new PatchTooLargeError(maxBytes, diffstat, filesChanged);
  return finish(sb, body.subarray(nNames + nStat, nNames + nStat + nPatch), {
    baseline,
    final,
    diffstat,
    filesChanged,
    maxBytes,
  });
}

/**
 * The patch alone, for a checkpoint: what computePatch's `patch` would be, in fewer processes,
 * with the tree it leads to. With `last` (the previous checkpoint's), an unchanged tree costs no
 * diff. With a patch that is not UTF-8, it is computePatch's.
 */
export async function checkpointDiff(
  sb: Sandbox,
  baseline: string,
  opts: PatchOptions & { last?: { tree: string; patch: string } } = {},
): Promise<{ patch: string; tree: string }> {
  if (!TREE_ID.test(baseline)) throw new Error(`checkpointPatch: bad tree id "${baseline}"`);
  const maxBytes = opts.maxBytes ?? DEFAULT_PATCH_MAX_BYTES;
  const full = async () => computePatch(sb, baseline, opts).then((p) => ({ patch: p.patch, tree: p.tree }));
  const last = opts.last && TREE_ID.test(opts.last.tree) ? opts.last : undefined;
  const r = await sb.exec(["bash", "-c", CHECKPOINT_SCRIPT, "patchbay", baseline, ...(last ? [last.tree] : [])], {
    timeoutSec: 600,
    maxBytes: maxBytes + 128,
    ...ROOT,
  });
  const nl = r.stdout.indexOf(10);
  const tree = r.stdout.subarray(0, Math.max(0, nl)).toString("latin1");
  if ((r.exitCode !== 0 && !r.truncated) || !TREE_ID.test(tree))
    throw new GitStepError(
      `checkpointPatch: staging and diffing failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`,
    );
  if (last && tree === last.tree) return last;
  const patch = r.stdout.subarray(nl + 1);
  if (r.truncated || patch.length > maxBytes) throw new PatchTooLargeError(maxBytes, "", []);
  return isUtf8(patch) ? { patch: patch.toString("utf8"), tree } : full();
}

/** checkpointDiff's patch alone. */
export const checkpointPatch = async (sb: Sandbox, baseline: string, opts: PatchOptions = {}): Promise<string> =>
  (await checkpointDiff(sb, baseline, opts)).patch;

async function finish(
  sb: Sandbox,
  patch: Buffer,
  p: { baseline: string; final: string; diffstat: string; filesChanged: string[]; maxBytes: number },
): Promise<PatchResult> {
  if (!isUtf8(patch)) {
    // Rare (a non-UTF-8 text file changed): those files are diffed again as binary.
    const again = await sb.exec(["bash", "-c", REDIFF_SCRIPT, "patchbay", p.baseline, p.final], {
      stdin: binaryAttributes(patch, p.filesChanged),
      timeoutSec: 600,
      maxBytes: p.maxBytes,
      ...ROOT,
    });
    if (again.exitCode !== 0 && !again.truncated)
      throw new GitStepError(
        `computePatch: diffing again with the non-UTF-8 files as binary failed (exit ${again.exitCode}): ${again.stderr.trim().slice(-600)}`,
      );
    if (again.truncated) throw new PatchTooLargeError(p.maxBytes, p.diffstat, p.filesChanged);
    if (!isUtf8(again.stdout))
      throw new Error("computePatch: the patch is not valid UTF-8 even with the non-UTF-8 files diffed as binary");
    patch = again.stdout;
  }
  return {
    patch: patch.toString("utf8"),
    diffstat: p.diffstat,
    filesChanged: p.filesChanged,
    bytes: patch.length,
    truncated: false,
    tree: p.final,
  };
}

/**
 * A text file that is not UTF-8 (Latin-1, say) would not survive the patch being a JS string:
 * the store's info/attributes that mark such files to be diffed as binary (`-diff`).
 */
function binaryAttributes(patch: Buffer, files: string[]): string {
  const sections = splitSections(patch);
  // One `diff --git` section per file, in --name-only order (renames are off); otherwise all binary.
  const bad = sections.length === files.length ? files.filter((_, i) => !isUtf8(sections[i]!)) : undefined;
  // After our base line: later lines of the same file win.
  return ATTRIBUTES + (bad ? bad.map((f) => `${quotePattern(f)} -diff\n`).join("") : "* -diff\n");
}

/** Splits a diff at each line starting with "diff --git " (hunk lines never do; base85 lines have no spaces). */
function splitSections(patch: Buffer): Buffer[] {
  const starts: number[] = [];
  const marker = Buffer.from("diff --git ");
  for (let i = patch.indexOf(marker); i >= 0; i = patch.indexOf(marker, i + 1))
    if (i === 0 || patch[i - 1] === 0x0a) starts.push(i);
  return starts.map((s, k) => patch.subarray(s, starts[k + 1] ?? patch.length));
}

/** An attributes pattern matching exactly one path from the root: glob characters escaped, C-quoted. */
function quotePattern(file: string): string {
  const glob = "/" + file.replace(/[\\*?[\]]/g, (c) => `\\${c}`);
  return `"${glob.replace(/[\\"]/g, (c) => `\\${c}`).replace(/[\x00-\x1f]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`)}"`;
}
