// The change put on a target that moved past the job's base: `git merge-tree --write-tree` in the
// bare repo (no working tree), with the job's base as the merge base, as a cherry-pick has it. Git
// 2.39 takes no --merge-base (2.40 does): the merge is of two stand-in commits, the tip's tree and
// the change's, each with one parent, a root commit of the base's tree, so that root is the only
// merge base whatever the histories (a target rewritten past the base too). They stay in the cache
// unreferenced; the commit published is made from the merged tree on the tip itself.
import { count } from "../core/count.js";
import { printable } from "../git/run.js";
import { gitFailure, runGit, type Local } from "./publish-git-run.js";

export type Merged = { kind: "tree"; tree: string } | { kind: "conflict"; files: string[]; detail: string };

/** Conflicting files named at most, and the characters of one name and of git's messages. */
const MAX_FILES = 100;
const MAX_NAME = 300;
const MAX_DETAIL = 2000;

// Fixed: the stand-ins are the same for the same trees.
const STAND_IN = {
  GIT_AUTHOR_NAME: "patchbay",
  GIT_AUTHOR_EMAIL: "patchbay@localhost",
  GIT_AUTHOR_DATE: "@0 +0000",
  GIT_COMMITTER_NAME: "patchbay",
  GIT_COMMITTER_EMAIL: "patchbay@localhost",
  GIT_COMMITTER_DATE: "@0 +0000",
};

async function standIn(repo: Local, tree: string, parent?: string): Promise<string> {
  const out = await runGit(
    ["commit-tree", "--no-gpg-sign", tree, ...(parent ? ["-p", parent] : []), "-m", "patchbay merge stand-in"],
    { ...repo, extraEnv: STAND_IN },
  );
  if (out.code !== 0) throw gitFailure("git commit-tree", out);
  return out.stdout.trim();
}

/** The change (its commit on the base) merged onto the tip, the base being the merge base. */
export async function mergeOnto(repo: Local, base: string, tip: string, commit: string): Promise<Merged> {
  const root = await standIn(repo, `${base}^{tree}`);
  const [ours, theirs] = [await standIn(repo, `${tip}^{tree}`, root), await standIn(repo, `${commit}^{tree}`, root)];
  const out = await runGit(["merge-tree", "--write-tree", "-z", "--name-only", ours, theirs], {
    ...repo,
    maxStdout: 1024 * 1024,
  });
  if (out.code === 0 && !out.overflow) return { kind: "tree", tree: out.stdout.split("\0")[0]!.trim() };
  // A clean merge prints its tree alone: output past the bound is a list of conflicts too.
  if (out.code !== 1 && !out.overflow) throw gitFailure(`git merge-tree of ${commit} onto ${tip}`, out);
  const names = out.stdout.split("\0").slice(1);
  const end = names.indexOf("");
  const files = [...new Set(end < 0 ? names : names.slice(0, end))];
  const shown = files.slice(0, MAX_FILES).map((f) => printable(f).slice(0, MAX_NAME));
  const more =
    files.length > MAX_FILES ? ` (and ${files.length - MAX_FILES} more${out.overflow ? ", at least" : ""})` : "";
  const messages = end < 0 ? "" : conflictMessages(names.slice(end + 1));
  return {
    kind: "conflict",
    files: shown,
    detail:
      `${count(shown.length + (files.length - shown.length), "conflicting file")}${more} on ${tip}:\n${messages}`.slice(
        0,
        MAX_DETAIL,
      ),
  };
}

/**
 * Git's own words for the conflicts ("CONFLICT (content): Merge conflict in f.txt"), from the -z
 * form's groups: a count, that many paths, a type, a message.
 */
function conflictMessages(records: string[]): string {
  const lines: string[] = [];
  for (let i = 0; i < records.length && lines.length < 50;) {
    const n = Number.parseInt(records[i] ?? "", 10);
    if (!Number.isInteger(n) || n < 0) break;
    const [type, message] = [records[i + n + 1] ?? "", records[i + n + 2] ?? ""];
    if (type.startsWith("CONFLICT") || /^error/i.test(message)) lines.push(message.trim());
    i += n + 3;
  }
  return printable(lines.join("\n")).slice(0, MAX_DETAIL);
}
