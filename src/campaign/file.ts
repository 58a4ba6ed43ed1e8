// A campaign file (YAML, or JSON, which YAML reads too): one change over many repositories. Read as a
// whole and checked before anything is enqueued; every problem is named `file:line: path: what`,
// the line found in the YAML's own nodes. Pure but for reading the file and its repos file.
import { count } from "../core/count.js";
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { isMap, LineCounter, parseDocument, type Document } from "yaml";
import { z } from "zod";
import { checkBatchName } from "../batch/batch-types.js";
import type { BatchLine } from "../batch/batch-file.js";
import { prepareSpecs } from "../queue/enqueue-spec.js";
import { redact } from "../git/credentials.js";
import { PatchbayError } from "../core/errors.js";
import {
  PUBLISH_NAMES,
  REPO_NAMES,
  branchProblem,
  publishSettings,
  publishTemplates,
  type PublishSettings,
} from "./publish-settings.js";
import { render, unknownName } from "./template.js";

export const MAX_CAMPAIGN_BYTES = 4 * 1024 * 1024;
export const MAX_CAMPAIGN_REPOS = 10_000;

/** A campaign file with problems: one `file:line: …` per problem; nothing was enqueued. */
export class CampaignFileError extends PatchbayError {
  constructor(readonly errors: string[]) {
    super("spec", `nothing enqueued:\n${errors.join("\n")}`);
  }
}

const VarValue = z.union([z.string(), z.number(), z.boolean()]).transform(String);
const Vars = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "a variable name is letters, digits and _" }),
  VarValue,
);

const RepoEntry = z.strictObject({
  git: z.string({ error: "a git URL" }).min(1, { error: "a git URL" }),
  ref: z.string().min(1).optional(),
  vars: Vars.optional(),
  /** JobSpec fields for this repository alone (verify, setup, timeoutSec, ...). */
  overrides: z.record(z.string(), z.unknown()).optional(),
});

/** The campaign's own keys; every other top-level key is a JobSpec field shared by all its jobs. */
const Head = z.object({
  name: z.string({ error: "the campaign's name (its id): 1-96 characters from A-Z a-z 0-9 _ . -" }),
  task: z.string({ error: "the task, a template ({{repo}}, {{ref}}, {{name}}, your vars)" }).min(1),
  vars: Vars.optional(),
  repos: z
    .array(z.unknown())
    .max(MAX_CAMPAIGN_REPOS, { error: `at most ${count(MAX_CAMPAIGN_REPOS, "repository", "repositories")}` })
    .optional(),
  reposFile: z.string().min(1).optional(),
  budgetUsd: z.number().positive().optional(),
  publish: z.unknown().optional(),
});
const HEAD_KEYS = Object.keys(Head.shape);

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

/** A campaign file as read and checked: one change over many repositories, ready to submit as a batch. */
export interface Campaign {
  /** The campaign's id, which is also its batch's id. */
  name: string;
  /** The budget in USD of the whole campaign, every attempt of every job; without one, the batch has none. */
  budgetUsd?: number;
  /** How each repository's changeset is published: the branch, the pull request's templates, the commit's author. */
  publish: PublishSettings;
  /** The campaign's repositories, in order: one changeset each. */
  repos: CampaignRepo[];
  /** One JobSpec per repository, in order, checked as `batch submit` checks its lines. */
  lines: BatchLine[];
}

interface Located {
  file: string;
  doc: Document;
  lc: LineCounter;
}

/** The line of the node at `path`, or of the nearest node above it that exists. */
function lineOf(at: Located, path: (string | number)[]): number {
  for (let p = path; ; p = p.slice(0, -1)) {
    const node = p.length
      ? (at.doc.getIn(p, true) as { range?: [number, number, number] } | undefined)
      : (at.doc.contents as { range?: [number, number, number] } | null);
    if (node?.range) return at.lc.linePos(node.range[0]).line;
    if (!p.length) return 1;
  }
}

const pathText = (path: readonly PropertyKey[]) =>
  path.reduce<string>((s, k) => (typeof k === "number" ? `${s}[${k}]` : s ? `${s}.${String(k)}` : String(k)), "");

function zodProblems(at: Located, base: (string | number)[], issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.map((i) => {
    const path = [...base, ...(i.path as (string | number)[])];
    return `${at.file}:${lineOf(at, path)}: ${pathText(path) || "(top)"}: ${i.message}`;
  });
}

/** Parses and checks a campaign file's text; `reposText` is its reposFile's text, if it names one. */
export function parseCampaign(text: string, file: string, reposText?: string): Campaign {
  if (Buffer.byteLength(text) > MAX_CAMPAIGN_BYTES)
    throw new CampaignFileError([`${file}: over ${count(MAX_CAMPAIGN_BYTES, "byte")}`]);
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, uniqueKeys: true, prettyErrors: false });
  const at: Located = { file, doc, lc };
  if (doc.errors.length)
    throw new CampaignFileError(
      doc.errors.slice(0, 20).map((e) => `${file}:${lc.linePos(e.pos[0]).line}: ${e.message.split("\n")[0]}`),
    );
  if (!isMap(doc.contents))
    throw new CampaignFileError([`${file}:1: a campaign is a mapping (name:, task:, repos: ...)`]);
  let raw: Record<string, unknown>;
  try {
    raw = doc.toJS({ maxAliasCount: 100 }) as Record<string, unknown>;
  } catch (err) {
    throw new CampaignFileError([`${file}: ${(err as Error).message}`]);
  }
  const head = Head.safeParse(raw);
  if (!head.success) throw new CampaignFileError(zodProblems(at, [], head.error.issues));
  const h = head.data;
  const errors: string[] = [];
  try {
    checkBatchName(h.name);
  } catch (err) {
    errors.push(`${file}:${lineOf(at, ["name"])}: name: ${(err as Error).message.replace(/^batch name /, "")}`);
  }
  const shared = Object.fromEntries(Object.entries(raw).filter(([k]) => !HEAD_KEYS.includes(k)));
  for (const k of ["repo", "jobId"])
    if (k in shared)
      errors.push(
        `${file}:${lineOf(at, [k])}: ${k}: not in a campaign (repos: gives each job's repo; ids are <name>-L<n>)`,
      );
  const publish = publishSettings(h.publish, h.name);
  if (typeof publish === "string")
    for (const p of publish.split("; "))
      errors.push(
        `${file}:${lineOf(at, ["publish", ...(/^([\w.]+): /.exec(p)?.[1]?.split(".") ?? [])])}: publish.${p}`,
      );
  const repos = readRepos(at, h.repos ?? [], reposText, errors);
  if (!h.repos && h.reposFile === undefined)
    errors.push(`${file}:1: repos: a list of { git, ref?, vars?, overrides? }, or reposFile: a file of URLs`);
  const known = [...REPO_NAMES, ...Object.keys(h.vars ?? {})];
  const lines: BatchLine[] = [];
  for (const r of repos) {
    const vars = { ...h.vars, ...r.vars };
    const bad = unknownName(h.task, [...known, ...Object.keys(r.vars)]);
    if (bad) {
      errors.push(`${file}:${lineOf(at, ["task"])}: task: ${bad}${r.line > 1 ? ` (repos[${r.line - 1}])` : ""}`);
      continue;
    }
    r.vars = vars;
    const task = render(h.task, { ...vars, ...repoValues(r, h.name) });
    const spec = { ...shared, ...(r.overrides ?? {}), task, repo: { git: r.git, ...(r.ref ? { ref: r.ref } : {}) } };
    try {
      lines.push({ line: r.line, spec: prepareSpecs([spec])[0]! });
    } catch (err) {
      errors.push(...specProblems(at, r, (err as Error).message));
    }
  }
  if (typeof publish !== "string")
    for (const [k, t, names] of publishTemplates(publish)) {
      const bad = unknownName(t, [...(names === "repo" ? REPO_NAMES : PUBLISH_NAMES), ...Object.keys(h.vars ?? {})]);
      if (bad) errors.push(`${file}:${lineOf(at, ["publish", ...k.split(".")])}: publish.${k}: ${bad}`);
    }
  if (typeof publish !== "string" && !unknownName(publish.branch, [...REPO_NAMES, ...Object.keys(h.vars ?? {})]))
    errors.push(...branchProblems(at, publish, repos, h.name));
  if (errors.length) throw new CampaignFileError(errors.slice(0, 50));
  return {
    name: h.name,
    ...(h.budgetUsd !== undefined ? { budgetUsd: h.budgetUsd } : {}),
    publish: publish as PublishSettings,
    repos: repos.map(({ overrides: _, ...r }) => r),
    lines,
  };
}

/** Each repository's branch checked (a bad one would stop the publish of every other). */
function branchProblems(at: Located, publish: PublishSettings, repos: RepoRead[], campaign: string): string[] {
  const out: string[] = [];
  for (const r of repos) {
    const bad = branchProblem(render(publish.branch, { ...r.vars, ...repoValues(r, campaign) }), publish.base ?? r.ref);
    if (bad)
      out.push(
        `${at.file}:${lineOf(at, ["publish", "branch"])}: publish.branch: ${bad} (repos[${r.line - 1}], ${shown(r.git)})`,
      );
  }
  return out;
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
const shown = (git: string) => redact(git).slice(0, 200);

type RepoRead = CampaignRepo & { overrides?: Record<string, unknown>; from: "list" | "file" };

/** A repository's own template values: its URL, ref and short name, and the campaign's name. */
export function repoValues(r: { git: string; ref?: string }, campaign: string): Record<string, string> {
  const name =
    r.git
      .replace(/\/+$/, "")
      .replace(/\.git$/, "")
      .split(/[/:]/)
      .pop() ?? r.git;
  return { repo: r.git, ref: r.ref ?? "HEAD", name, campaign };
}

function readRepos(at: Located, list: unknown[], reposText: string | undefined, errors: string[]): RepoRead[] {
  const out: RepoRead[] = [];
  list.forEach((entry, i) => {
    const r = RepoEntry.safeParse(typeof entry === "string" ? { git: entry } : entry);
    if (!r.success) return void errors.push(...zodProblems(at, ["repos", i], r.error.issues));
    out.push({
      line: out.length + 1,
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
    out.push({ line: out.length + 1, git: git!, ...(ref ? { ref } : {}), vars: {}, from: "file" });
  });
  if (out.length > MAX_CAMPAIGN_REPOS)
    errors.push(`${at.file}: ${count(out.length, "repository", "repositories")}; at most ${MAX_CAMPAIGN_REPOS}`);
  const seen = new Map<string, number>();
  for (const r of out) {
    const key = `${sameRepo(r.git)} ${r.ref ?? ""}`;
    if (seen.has(key))
      errors.push(
        `${at.file}:${r.from === "list" ? lineOf(at, ["repos", r.line - 1]) : 1}: repos[${r.line - 1}]: ${shown(r.git)} is listed twice (also repos[${seen.get(key)! - 1}])`,
      );
    seen.set(key, r.line);
  }
  return out;
}

/** A repository's JobSpec problems, each on the line of the field (its override, else the shared key). */
function specProblems(at: Located, r: RepoRead, message: string): string[] {
  const body = message.replace(/^invalid JobSpec: /, "");
  return body.split("; ").map((part) => {
    const field = /^([A-Za-z_][\w.[\]]*): /.exec(part)?.[1] ?? "";
    const top = field.split(/[.[]/)[0]!;
    const path: (string | number)[] =
      top === "repo"
        ? r.from === "list"
          ? ["repos", r.line - 1, field.endsWith("ref") ? "ref" : "git"]
          : []
        : top === "task"
          ? ["task"]
          : r.overrides && top in r.overrides
            ? ["repos", r.line - 1, "overrides", top]
            : top
              ? [top]
              : ["repos", r.line - 1];
    const where = r.from === "file" && top === "repo" ? `${at.file} reposFile` : `${at.file}:${lineOf(at, path)}`;
    return `${where}: repos[${r.line - 1}] (${shown(r.git)}): ${part}`;
  });
}

/** Reads a campaign file and its reposFile (relative to it); a file that cannot be read is a CampaignFileError. */
export async function readCampaign(file: string): Promise<Campaign> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new CampaignFileError([`${file}: ${(err as Error).message}`]);
  }
  const reposFile = reposFileOf(text);
  let reposText: string | undefined;
  if (reposFile !== undefined) {
    const p = resolve(dirname(file), reposFile);
    reposText = await readFile(p, "utf8").catch((err: Error) => {
      throw new CampaignFileError([`${file}: reposFile: ${err.message}`]);
    });
  }
  return parseCampaign(text, file, reposText);
}

function reposFileOf(text: string): string | undefined {
  try {
    const v = (
      parseDocument(text.slice(0, MAX_CAMPAIGN_BYTES)).toJS({ maxAliasCount: 100 }) as { reposFile?: unknown } | null
    )?.reposFile;
    return typeof v === "string" ? v : undefined;
  } catch {
    return undefined; // parseCampaign names the problem
  }
}
