// A campaign file's repositories (its repos: list and its repos file) and the helpers that name a
// problem at its line: part of reading a campaign file (file.ts). Pure.
import { count } from "../core/count.js";
import type { Document, LineCounter } from "yaml";
import { z } from "zod";
import { genericMessage, show } from "../core/spec/fields.js";
import { JobSpec } from "../core/spec/spec.js";
import { suggest } from "../core/suggest.js";
import { redact } from "../git/credentials.js";

/** At most this many repositories in one campaign. */
export const MAX_CAMPAIGN_REPOS = 10_000;

/** A message for a missing or bad value: "required: <what>" or "must be <what> (got <value>)". */
export const want = (what: string) => (iss: { input?: unknown }) =>
  iss.input === undefined ? `required: ${what}` : `must be ${what} (got ${show(iss.input)})`;

const VarValue = z
  .union([z.string(), z.number(), z.boolean()], { error: want("a string, a number or a boolean") })
  .transform(String);
/** A campaign's or a repository's template variables. */
export const Vars = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "a variable name is letters, digits and _" }),
  VarValue,
  { error: want("a mapping of names to values") },
);

/** A repository entry's keys; anything else is named, with the key it was probably meant to be. */
const RepoEntry = z.object({
  git: z.string({ error: want("a git URL") }).min(1, { error: want("a git URL") }),
  ref: z
    .string({ error: want("a branch, tag or commit") })
    .min(1, { error: want("a branch, tag or commit") })
    .optional(),
  vars: Vars.optional(),
  /** JobSpec fields for this repository alone (verify, setup, timeoutSec, ...). */
  overrides: z.record(z.string(), z.unknown(), { error: want("a mapping of JobSpec fields") }).optional(),
});
const REPO_KEYS = Object.keys(RepoEntry.shape);

/** The JobSpec fields a campaign may share (not repo or jobId: it gives each job its own). */
export const SHARED_KEYS = Object.keys(JobSpec.shape).filter((k) => k !== "repo" && k !== "jobId");
/** One repository of a campaign: where its job runs, and the values its templates are rendered with. */
export interface CampaignRepo {
  /** 1-based position in the campaign: its batch line, so job `<campaign>-L<line>`. */
  line: number;
  /** The repository's git URL, as the campaign file or its repos file names it. */
  git: string;
  /** The ref its job starts from; without one, the repository's HEAD. */
  ref?: string;
  /** The template values of this repository: the campaign's vars with the repository's own over them. */
  vars: Record<string, string>;
}

/** A campaign file's parsed document, to find the line of a path in it. */
export interface Located {
  file: string;
  doc: Document;
  lc: LineCounter;
}

/** The line of the node at `path`, or of the nearest node above it that exists. */
export function lineOf(at: Located, path: (string | number)[]): number {
  for (let p = path; ; p = p.slice(0, -1)) {
    const node = p.length
      ? (at.doc.getIn(p, true) as { range?: [number, number, number] } | undefined)
      : (at.doc.contents as { range?: [number, number, number] } | null);
    if (node?.range) return at.lc.linePos(node.range[0]).line;
    if (!p.length) return 1;
  }
}

/** A path as the file's reader writes it: `repos[2].ref`. */
export const pathText = (path: readonly PropertyKey[]) =>
  path.reduce<string>((s, k) => (typeof k === "number" ? `${s}[${k}]` : s ? `${s}.${String(k)}` : String(k)), "");

/** Zod's issues as `file:line: path: what`, each on the line of its path. */
export function zodProblems(at: Located, base: (string | number)[], issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.map((i) => {
    const path = [...base, ...(i.path as (string | number)[])];
    return `${at.file}:${lineOf(at, path)}: ${pathText(path) || "(top)"}: ${i.message}`;
  });
}

/** A repository's URL as one spelling: scheme and host in lower case, no trailing slash or .git (the path's case is the host's business). */
function sameRepo(git: string): string {
  const m = /^(?:([a-z][a-z0-9+.-]*:\/\/)([^/]*)|([^@/:]+@)?([^/:]+):)(.*)$/i.exec(git.trim());
  const path = (m ? m[5]! : git)
    .replace(/\/+$/, "")
    .replace(/\.git$/, "")
    .replace(/\/+$/, "");
  return m
    ? `${(m[1] ?? m[3] ?? "").toLowerCase()}${(m[2] ?? m[4] ?? "").toLowerCase()}${m[1] ? "" : ":"}${path}`
    : path;
}

/** A URL as shown in a message: no credentials, bounded. */
export const shown = (git: string) => redact(git).slice(0, 200);

/** A repository as read: where it came from (its index in the list, or its line in the repos file) and its overrides. */
export type RepoRead = CampaignRepo & { overrides?: Record<string, unknown>; from: "list" | "file"; index: number };

/** Where a repository is in the file, for a message: `repos[2]`, or `reposFile line 3`. */
export const label = (r: Pick<RepoRead, "from" | "index">) =>
  r.from === "list" ? `repos[${r.index}]` : `reposFile line ${r.index}`;

/** The repositories of the list and of the repos file, in order; each problem pushed to `errors`. */
export function readRepos(at: Located, list: unknown[], reposText: string | undefined, errors: string[]): RepoRead[] {
  const out: RepoRead[] = [];
  list.forEach((entry, i) => {
    const obj = typeof entry === "string" ? { git: entry } : entry;
    if (obj && typeof obj === "object" && !Array.isArray(obj))
      for (const k of Object.keys(obj).filter((k) => !REPO_KEYS.includes(k))) {
        const hint = suggest(k, REPO_KEYS);
        errors.push(
          `${at.file}:${lineOf(at, ["repos", i, k])}: repos[${i}].${k}: ${
            SHARED_KEYS.includes(k)
              ? `a JobSpec field, which goes under overrides: for this repository alone (overrides: { ${k}: ... })`
              : `unknown key${hint ? ` (did you mean "${hint}"?)` : ""}: a repository takes ${REPO_KEYS.join(", ")}`
          }`,
        );
      }
    const r = RepoEntry.safeParse(obj, { error: genericMessage });
    if (!r.success) return void errors.push(...zodProblems(at, ["repos", i], r.error.issues));
    out.push({
      line: out.length + 1,
      index: i,
      git: r.data.git,
      ...(r.data.ref ? { ref: r.data.ref } : {}),
      vars: r.data.vars ?? {},
      ...(r.data.overrides ? { overrides: r.data.overrides } : {}),
      from: "list",
    });
  });
  (reposText ?? "").split("\n").forEach((raw, i) => {
    const l = raw.replace(/#.*$/, "").trim();
    if (!l) return;
    const [git, ref, ...rest] = l.split(/\s+/);
    if (rest.length)
      return void errors.push(
        `${at.file} reposFile line ${i + 1}: expected URL [REF], got ${JSON.stringify(l.slice(0, 120))}`,
      );
    out.push({ line: out.length + 1, index: i + 1, git: git!, ...(ref ? { ref } : {}), vars: {}, from: "file" });
  });
  if (out.length > MAX_CAMPAIGN_REPOS)
    errors.push(`${at.file}: ${count(out.length, "repository", "repositories")}; at most ${MAX_CAMPAIGN_REPOS}`);
  const seen = new Map<string, RepoRead>();
  for (const r of out) {
    const key = `${sameRepo(r.git)} ${r.ref ?? ""}`;
    if (seen.has(key))
      errors.push(
        `${at.file}:${r.from === "list" ? lineOf(at, ["repos", r.index]) : 1}: ${label(r)}: ${shown(r.git)} is listed twice (also ${label(seen.get(key)!)})`,
      );
    seen.set(key, r);
  }
  return out;
}
