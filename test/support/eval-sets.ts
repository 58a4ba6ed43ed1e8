// The eval's task sets, written for its tests: small git repositories in Python and JavaScript
// (test/support/eval-repos/, one file each), each with the history of a real-looking bug (a
// clean start, the commit that brings the bug, the fix with its tests), turned into instances in
// SWE-bench's format: base_commit the buggy commit, the gold patch the fix without its tests,
// test_patch the tests' diff. Each repository's whole history is under `<dir>/upstream/`; the
// instance's repo is a clone of it at the bug alone. Also the scripted model's file that replays the gold edits (one
// instance deliberately wrong), so an `eval run` has known outcomes.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { stringify } from "yaml";
import type { EvalEnv, EvalInstance, EvalTest, Prediction } from "../../src/eval/types.js";
import { JS_REPOS, PYTHON_REPOS } from "./eval-repos/index.js";
import { NODE_IMAGE } from "./node-image.js";

/** One change of a file: `old` (which must occur exactly once) becomes `new`; no `old`: a new file. */
export interface Edit {
  path: string;
  old?: string;
  new: string;
}

/** One repository of a set: its history, its problem and what its tests are known to do. */
export interface RepoSpec {
  /** The instance's id, SWE-bench style (`owner__name-number`). */
  id: string;
  /** SWE-bench's `owner/name`; the repository's directory is the name. */
  repo: string;
  /** The problem statement; its first line is the scripted model's `match`, so it is unique in the set. */
  problem: string;
  test: EvalTest;
  setup?: string;
  network?: EvalEnv["network"];
  /** The clean start: every file of the first commit. */
  start: { message: string; files: Record<string, string> };
  /** The commit that brings the bug: its sha is the base_commit. */
  bug: { message: string; edits: Edit[] };
  /** The fix: its source edits (the gold patch) and its test edits (the test patch), one commit. */
  fix: { message: string; edits: Edit[]; tests: Edit[] };
  /** For one instance: the scripted model's wrong edits instead of the gold ones. */
  wrong?: Edit[];
  /** Tests that fail at base with the test patch and pass with the fix too, as the parsers name them. */
  FAIL_TO_PASS: string[];
  /** Tests that pass in both. */
  PASS_TO_PASS: string[];
}

/**
 * Where one repository's commits are. `upstream` has the whole history (main at the fix); `path`,
 * the instance's repo, is a clone of it at the buggy commit only (main at `base`), with no object
 * of the fix, as the agent gets it.
 */
export interface RepoCommits {
  id: string;
  path: string;
  upstream: string;
  start: string;
  base: string;
  fix: string;
}

/** A written set: its JSONL file, its instances (absolute repo paths), the gold predictions. */
export interface TaskSets {
  /** `<dir>/set.jsonl`, with repo paths relative to it. */
  file: string;
  instances: EvalInstance[];
  /** One per instance, the gold patch, model_name_or_path "gold". */
  gold: Prediction[];
  dir: string;
  specs: RepoSpec[];
  commits: RepoCommits[];
  /** How many patches patchOf has made (each in a work tree of its own). */
  patches: number;
}

/** Every repository of the set, Python first. */
export const REPO_SPECS: RepoSpec[] = [...PYTHON_REPOS, ...JS_REPOS];
// Fixed identities and dates, so each repository's shas are the same on every run.
const GIT_ENV = {
  ...process.env,
  GIT_AUTHOR_NAME: "Fixture Author",
  GIT_AUTHOR_EMAIL: "author@fixtures.invalid",
  GIT_COMMITTER_NAME: "Fixture Author",
  GIT_COMMITTER_EMAIL: "author@fixtures.invalid",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
};

/** git in `cwd`, its output (trimmed unless `raw`); commits dated `date`. */
export function fixtureGit(cwd: string, args: string[], date = "2026-01-01T00:00:00Z", raw = false): string {
  const out = execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: { ...GIT_ENV, GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date },
  });
  return raw ? out : out.trim();
}

/** Applies `edits` to the work tree at `root`, each old text exactly once; throws naming the repo and path. */
export function applyEdits(root: string, id: string, edits: Edit[]): void {
  for (const e of edits) {
    const file = join(root, e.path);
    if (e.old === undefined) {
      if (existsSync(file)) throw new Error(`${id}: ${e.path} exists; an edit without old makes a new file`);
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, e.new);
      continue;
    }
    const text = readFileSync(file, "utf8");
    const n = text.split(e.old).length - 1;
    if (n !== 1)
      throw new Error(`${id}: ${e.path}: the old text occurs ${n} times, not once: ${JSON.stringify(e.old)}`);
    writeFileSync(
      file,
      text.replace(e.old, () => e.new),
    );
  }
}

/** Writes one repository's history under `<dir>/upstream/` and its clone at the bug under `dir`. */
function writeRepo(dir: string, spec: RepoSpec): RepoCommits {
  const name = spec.repo.split("/")[1]!;
  const upstream = join(dir, "upstream", name);
  mkdirSync(upstream, { recursive: true });
  fixtureGit(upstream, ["init", "-q", "-b", "main"]);
  for (const [file, text] of Object.entries(spec.start.files)) {
    mkdirSync(dirname(join(upstream, file)), { recursive: true });
    writeFileSync(join(upstream, file), text);
  }
  const commit = (message: string, date: string) => {
    fixtureGit(upstream, ["add", "-A"]);
    fixtureGit(upstream, ["commit", "-q", "-m", message], date);
    return fixtureGit(upstream, ["rev-parse", "HEAD"]);
  };
  const start = commit(spec.start.message, "2026-01-01T10:00:00Z");
  applyEdits(upstream, spec.id, spec.bug.edits);
  const base = commit(spec.bug.message, "2026-01-05T10:00:00Z");
  applyEdits(upstream, spec.id, [...spec.fix.edits, ...spec.fix.tests]);
  const fix = commit(spec.fix.message, "2026-01-09T10:00:00Z");
  // The instance's repo is fetched from the bug's branch alone (not hard-linked), so neither the
  // fix nor its tests are among its objects: whatever patchbay copies of it, the agent cannot find them.
  fixtureGit(upstream, ["branch", "bug", base]);
  const path = join(dir, name);
  fixtureGit(dir, ["clone", "-q", "--no-local", "--single-branch", "--branch", "bug", upstream, path]);
  fixtureGit(path, ["branch", "-q", "-m", "bug", "main"]);
  fixtureGit(path, ["remote", "remove", "origin"]);
  return { id: spec.id, path, upstream, start, base, fix };
}

const pathsOf = (edits: Edit[]) => [...new Set(edits.map((e) => e.path))];

/** The instance of a written repository (its repo path as given). */
function instanceOf(spec: RepoSpec, c: RepoCommits, repo: string): EvalInstance {
  const diff = (paths: string[]) => fixtureGit(c.upstream, ["diff", c.base, c.fix, "--", ...paths], undefined, true);
  return {
    instance_id: spec.id,
    repo: spec.repo,
    base_commit: c.base,
    problem_statement: spec.problem,
    test_patch: diff(pathsOf(spec.fix.tests)),
    FAIL_TO_PASS: spec.FAIL_TO_PASS,
    PASS_TO_PASS: spec.PASS_TO_PASS,
    patch: diff(pathsOf(spec.fix.edits)),
    patchbay: {
      repo,
      ...(spec.test.format === "unittest" ? {} : { image: NODE_IMAGE }),
      ...(spec.setup ? { setup: spec.setup } : {}),
      ...(spec.network ? { network: spec.network } : {}),
      test: spec.test,
    },
  };
}

/** The first line of a problem statement: what the scripted model matches. */
export const firstLine = (problem: string) => problem.split("\n")[0]!;

/** Throws unless each spec's first line is found in its own problem statement only, and its test paths are not its fix's. */
function checkSpecs(specs: RepoSpec[]): void {
  for (const s of specs) {
    const others = specs.filter((o) => o !== s && o.problem.toLowerCase().includes(firstLine(s.problem).toLowerCase()));
    if (others.length) throw new Error(`${s.id}: its first line is also in ${others.map((o) => o.id).join(", ")}`);
    const shared = pathsOf(s.fix.tests).filter((p) => pathsOf(s.fix.edits).includes(p));
    if (shared.length) throw new Error(`${s.id}: ${shared.join(", ")} is in both the fix and its tests`);
  }
}

/**
 * Writes every repository of REPO_SPECS under `dir` and `<dir>/set.jsonl` (repo paths relative to
 * it); returns the set with absolute repo paths and the gold predictions.
 */
export async function makeTaskSets(dir: string): Promise<TaskSets> {
  checkSpecs(REPO_SPECS);
  mkdirSync(dir, { recursive: true });
  const commits = REPO_SPECS.map((s) => writeRepo(dir, s));
  const instances = REPO_SPECS.map((s, i) => instanceOf(s, commits[i]!, commits[i]!.path));
  const relative = REPO_SPECS.map((s, i) => instanceOf(s, commits[i]!, `./${s.repo.split("/")[1]}`));
  const file = join(dir, "set.jsonl");
  writeFileSync(file, relative.map((x) => JSON.stringify(x)).join("\n") + "\n");
  const gold = instances.map((x) => ({
    instance_id: x.instance_id,
    model_patch: x.patch!,
    model_name_or_path: "gold",
  }));
  return { file, instances, gold, dir, specs: REPO_SPECS, commits, patches: 0 };
}

/** The instance whose script makes a wrong edit: an `eval run` with scriptFor's file leaves it unresolved. */
export const WRONG_ID = REPO_SPECS.find((s) => s.wrong)!.id;

/**
 * Writes `<sets.dir>/script.yaml` for patchbay's scripted model (docs/operations.md, "Trying
 * patchbay without a key"): per instance a script matching its problem statement's first line,
 * whose first turn makes the gold edits with the editor's str_replace (a new file with create;
 * WRONG_ID's: its wrong edits)
 * and whose second is the final answer. Returns the file's path.
 */
export function scriptFor(sets: TaskSets): string {
  const scripts = sets.specs.map((s) => ({
    name: s.id,
    match: firstLine(s.problem),
    turns: [
      {
        text: `I'll fix this: ${firstLine(s.problem)}.`,
        calls: (s.wrong ?? s.fix.edits).map((e) => ({
          tool: "str_replace_based_edit_tool",
          input:
            e.old === undefined
              ? { command: "create", path: `/workspace/${e.path}`, file_text: e.new }
              : { command: "str_replace", path: `/workspace/${e.path}`, old_str: e.old, new_str: e.new },
        })),
      },
      { text: `Fixed: ${firstLine(s.problem)}.` },
    ],
  }));
  const file = join(sets.dir, "script.yaml");
  writeFileSync(file, stringify({ scripts }, { lineWidth: 0 }));
  return file;
}

/**
 * The patch `edits` make to instance `id`'s repo at its base commit (a diff against base_commit, as
 * a model patch is): for predictions the tests make up, such as one that breaks a PASS_TO_PASS test.
 */
export function patchOf(sets: TaskSets, id: string, edits: Edit[]): string {
  const c = sets.commits.find((x) => x.id === id);
  if (!c) throw new Error(`no instance ${id} in the set: ${sets.commits.map((x) => x.id).join(", ")}`);
  const w = join(sets.dir, "work", `${id}-${sets.patches++}`);
  mkdirSync(dirname(w), { recursive: true });
  fixtureGit(sets.dir, ["clone", "-q", c.path, w]);
  applyEdits(w, id, edits);
  fixtureGit(w, ["add", "-A"]);
  return fixtureGit(w, ["diff", "--cached", c.base], undefined, true);
}
