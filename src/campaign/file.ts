// A campaign file (YAML, or JSON, which YAML reads too): one change over many repositories. Read as a
// whole and checked before anything is enqueued; every problem is named `file:line: path: what`,
// the line found in the YAML's own nodes. Pure but for reading the file and its repos file.
import { count } from "../core/count.js";
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { isMap, LineCounter, parseDocument } from "yaml";
import { z } from "zod";
import { genericMessage } from "../core/spec/fields.js";
import { suggest } from "../core/suggest.js";
import { checkBatchName } from "../batch/batch-types.js";
import type { BatchLine } from "../batch/batch-file.js";
import { prepareSpecs } from "../queue/enqueue-spec.js";
import {
  MAX_CAMPAIGN_REPOS,
  SHARED_KEYS,
  Vars,
  label,
  lineOf,
  pathText,
  readRepos,
  shown,
  want,
  zodProblems,
  type CampaignRepo,
  type Located,
  type RepoRead,
} from "./file-repos.js";
import { PatchbayError } from "../core/errors.js";
import {
  PUBLISH_NAMES,
  REPO_NAMES,
  branchProblem,
  publishProblems,
  publishSettings,
  publishTemplates,
  type PublishSettings,
} from "./publish-settings.js";
import { render, unknownName } from "./template.js";

export const MAX_CAMPAIGN_BYTES = 4 * 1024 * 1024;
export { MAX_CAMPAIGN_REPOS, type CampaignRepo } from "./file-repos.js";

/** A campaign file with problems: one `file:line: …` per problem; nothing was enqueued. */
export class CampaignFileError extends PatchbayError {
  constructor(readonly errors: string[]) {
    super("spec", `nothing enqueued:\n${errors.join("\n")}`);
  }
}

/** The campaign's own keys; every other top-level key is a JobSpec field shared by all its jobs. */
const Head = z.object({
  name: z.string({ error: want("the campaign's name (its id): 1-96 characters from A-Z a-z 0-9 _ . -") }),
  task: z
    .string({ error: want("the task, a template ({{repo}}, {{ref}}, {{name}}, your vars)") })
    .min(1, { error: want("the task, a template ({{repo}}, {{ref}}, {{name}}, your vars)") }),
  vars: Vars.optional(),
  repos: z
    .array(z.unknown(), { error: want("a list of repositories ({ git, ref?, vars?, overrides? } or a URL)") })
    .max(MAX_CAMPAIGN_REPOS, { error: `at most ${count(MAX_CAMPAIGN_REPOS, "repository", "repositories")}` })
    .optional(),
  reposFile: z
    .string({ error: want("a file of URLs, one a line") })
    .min(1)
    .optional(),
  budgetUsd: z
    .number({ error: want("a positive number of USD") })
    .positive({ error: want("a positive number of USD") })
    .optional(),
  publish: z.unknown().optional(),
});
const HEAD_KEYS = Object.keys(Head.shape);
type HeadValues = Partial<z.infer<typeof Head>>;

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
  // Every part is checked whatever the others' problems, so that one pass names them all.
  const errors: string[] = [];
  const h = readHead(at, raw, errors);
  const name = h.name ?? "campaign";
  const shared = readShared(at, raw, errors);
  const publish = publishSettings(h.publish, name);
  for (const p of publishProblems(h.publish))
    errors.push(`${file}:${lineOf(at, ["publish", ...p.path])}: ${pathText(["publish", ...p.path])}: ${p.message}`);
  const repos = readRepos(at, h.repos ?? [], reposText, errors);
  if (!("repos" in raw) && !("reposFile" in raw))
    errors.push(`${file}:1: repos: required: a list of { git, ref?, vars?, overrides? }, or reposFile: a file of URLs`);
  const lines = readLines(at, h, shared, repos, errors);
  if (typeof publish !== "string") {
    for (const [k, t, names] of publishTemplates(publish)) {
      const bad = unknownName(t, [...(names === "repo" ? REPO_NAMES : PUBLISH_NAMES), ...Object.keys(h.vars ?? {})]);
      if (bad) errors.push(`${file}:${lineOf(at, ["publish", ...k.split(".")])}: publish.${k}: ${bad}`);
    }
    if (!unknownName(publish.branch, [...REPO_NAMES, ...Object.keys(h.vars ?? {})]))
      errors.push(...branchProblems(at, publish, repos, name));
  }
  if (errors.length) throw new CampaignFileError(inLineOrder(errors).slice(0, 50));
  return {
    name,
    ...(h.budgetUsd !== undefined ? { budgetUsd: h.budgetUsd } : {}),
    publish: publish as PublishSettings,
    repos: repos.map(({ overrides: _o, from: _f, index: _i, ...r }) => r),
    lines,
  };
}

/** The problems once each, in the order of their lines (those of no line first). */
function inLineOrder(errors: string[]): string[] {
  const lineOf = (e: string) => Number(/^[^\n]*?:(\d+): /.exec(e)?.[1] ?? 0);
  return [...new Set(errors)].sort((a, b) => lineOf(a) - lineOf(b));
}

/** The campaign's own keys, each checked on its own: a bad one is named and left out, the others kept. */
function readHead(at: Located, raw: Record<string, unknown>, errors: string[]): HeadValues {
  const out: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(Head.shape)) {
    const r = (schema as z.ZodType).safeParse(raw[key], { error: genericMessage });
    if (r.success) out[key] = r.data;
    else errors.push(...zodProblems(at, [key], r.error.issues));
  }
  const h = out as HeadValues;
  if (h.name !== undefined)
    try {
      checkBatchName(h.name);
    } catch (err) {
      errors.push(`${at.file}:${lineOf(at, ["name"])}: name: ${(err as Error).message.replace(/^batch name /, "")}`);
      delete h.name;
    }
  return h;
}

/** The top-level JobSpec fields all jobs share; a key that is neither a campaign's nor a JobSpec's is named, with the one it was probably meant to be. */
function readShared(at: Located, raw: Record<string, unknown>, errors: string[]): Record<string, unknown> {
  const shared: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw)) {
    if (HEAD_KEYS.includes(k)) continue;
    const where = `${at.file}:${lineOf(at, [k])}: ${k}`;
    if (k === "repo" || k === "jobId")
      errors.push(`${where}: not in a campaign (repos: gives each job its repo; ids are <name>-L<n>)`);
    else if (SHARED_KEYS.includes(k)) shared[k] = v;
    else {
      const hint = suggest(k, [...HEAD_KEYS, ...SHARED_KEYS]);
      errors.push(
        `${where}: unknown key${hint ? ` (did you mean "${hint}"?)` : ""}: not a campaign's key (${HEAD_KEYS.join(", ")}) nor a JobSpec field (docs/jobspec.md)`,
      );
    }
  }
  return shared;
}

/** One JobSpec per repository, checked; the shared fields' problems are named once, at their own line. */
function readLines(
  at: Located,
  h: HeadValues,
  shared: Record<string, unknown>,
  repos: RepoRead[],
  errors: string[],
): BatchLine[] {
  const known = [...REPO_NAMES, ...Object.keys(h.vars ?? {})];
  const lines: BatchLine[] = [];
  // With no repository to check them with, the shared fields are checked with a stand-in.
  const checked = repos.length
    ? repos
    : [{ line: 1, index: -1, git: "https://example.invalid/x.git", vars: {}, from: "list" as const }];
  for (const r of checked) {
    const vars = { ...h.vars, ...r.vars };
    let task = "(the task)";
    if (h.task !== undefined) {
      const bad = unknownName(h.task, [...known, ...Object.keys(r.vars)]);
      // The same for every repository but one with vars of its own, which is named.
      if (bad)
        errors.push(
          `${at.file}:${lineOf(at, ["task"])}: task: ${bad}${Object.keys(r.vars).length ? ` (${label(r)})` : ""}`,
        );
      else task = render(h.task, { ...vars, ...repoValues(r, h.name ?? "campaign") });
    }
    r.vars = vars;
    const spec = { ...shared, ...(r.overrides ?? {}), task, repo: { git: r.git, ...(r.ref ? { ref: r.ref } : {}) } };
    try {
      lines.push({ line: r.line, spec: prepareSpecs([spec])[0]! });
    } catch (err) {
      errors.push(...specProblems(at, r, (err as Error).message));
    }
  }
  return repos.length ? lines : [];
}

/** Each repository's branch checked (a bad one would stop the publish of every other). */
function branchProblems(at: Located, publish: PublishSettings, repos: RepoRead[], campaign: string): string[] {
  const out: string[] = [];
  for (const r of repos) {
    const bad = branchProblem(render(publish.branch, { ...r.vars, ...repoValues(r, campaign) }), publish.base ?? r.ref);
    if (bad)
      out.push(
        `${at.file}:${lineOf(at, ["publish", "branch"])}: publish.branch: ${bad} (${label(r)}, ${shown(r.git)})`,
      );
  }
  return out;
}

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

/**
 * A repository's JobSpec problems, each on the line of the field (its override, else the shared
 * key). A shared field's problem is the same for every repository: it is named once, without one.
 */
function specProblems(at: Located, r: RepoRead, message: string): string[] {
  const body = message.replace(/^invalid JobSpec: /, "");
  return body.split("; ").map((part) => {
    const field = /^([A-Za-z_][\w.[\]]*): /.exec(part)?.[1] ?? "";
    const top = field.split(/[.[]/)[0]!;
    const own = r.from === "list" ? ["repos", r.index] : [];
    if (top && top !== "repo" && top !== "task" && !(r.overrides && top in r.overrides))
      return `${at.file}:${lineOf(at, [top])}: ${part}`;
    const path: (string | number)[] =
      top === "repo"
        ? r.from === "list"
          ? [...own, field.endsWith("ref") ? "ref" : "git"]
          : []
        : top === "task"
          ? ["task"]
          : top
            ? [...own, "overrides", top]
            : own;
    const where =
      r.from === "file" && top === "repo" ? `${at.file} reposFile line ${r.index}` : `${at.file}:${lineOf(at, path)}`;
    return `${where}: ${label(r)} (${shown(r.git)}): ${part}`;
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
