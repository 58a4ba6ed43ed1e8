// A campaign's `publish:` section: the branch, the pull request's title, body and draft flag, the
// commit's author and message, where the transcript is linked from. Pure.
import { z } from "zod";
import { genericMessage } from "../core/spec/fields.js";
import { suggest } from "../core/suggest.js";

/** What a task template (and a branch name) may use: the repository's own values and the vars. */
export const REPO_NAMES = ["repo", "ref", "name", "campaign"] as const;
/** What the title, body and commit message may use besides: the job's outcome. */
export const PUBLISH_NAMES = [
  ...REPO_NAMES,
  "task",
  "summary",
  "summaryLine",
  "verify",
  "verifyResult",
  "diffstat",
  "costUsd",
  "jobId",
  "transcript",
  "verified",
  "egressRefused",
] as const;

export const DEFAULT_TITLE = "{{campaign}}: {{summaryLine}}";
export const DEFAULT_BODY = [
  "{{summary}}",
  "",
  "| | |",
  "|---|---|",
  "| Task | {{task}} |",
  "| Verify | `{{verify}}`: {{verifyResult}} |",
  "| Cost | ${{costUsd}} |",
  "| Refused in setup | {{egressRefused}} |",
  "| Transcript | {{transcript}} |",
  "",
  "```",
  "{{diffstat}}",
  "```",
  "",
  "Made by [patchbay](https://github.com/patchbay/patchbay) for campaign `{{campaign}}` (job `{{jobId}}`).",
].join("\n");
export const DEFAULT_MESSAGE = "{{campaign}}: {{summaryLine}}\n\n{{summary}}";

const Author = z
  .string()
  .regex(/^[^<>\n]{1,200} <[^<>\s@]{1,200}@[^<>\s]{1,200}>$/, { error: 'commit.author must be "Name <email@host>"' });

const Publish = z.strictObject({
  branch: z.string().min(1).max(200).optional(),
  /** The branch the change is for and the pull request targets (default: the repo's ref, else its HEAD branch). */
  base: z.string().min(1).max(200).optional(),
  draft: z.boolean().optional(),
  title: z.string().min(1).max(1000).optional(),
  body: z.string().max(60_000).optional(),
  commit: z.strictObject({ author: Author.optional(), message: z.string().min(1).max(60_000).optional() }).optional(),
  /** A URL template for `{{transcript}}`, e.g. https://patchbay.example.com/jobs/{{jobId}} (default: the `patchbay result <job> --out DIR` command, which writes DIR/transcript.html). */
  transcriptUrl: z.string().min(1).max(1000).optional(),
});

export interface PublishSettings {
  branch: string;
  base?: string;
  draft: boolean;
  title: string;
  body: string;
  author: { name: string; email: string };
  message: string;
  transcriptUrl?: string;
}

/** A problem of the publish section: its path below `publish:` and what is wrong, in words. */
export interface PublishProblem {
  /** The keys below `publish:` (empty: the section itself). */
  path: string[];
  /** What is wrong and, for an unknown key, the key it was probably meant to be. */
  message: string;
}

const KNOWN: Record<string, string[]> = { "": Object.keys(Publish.shape), commit: ["author", "message"] };

/** Every problem of a publish section, each at its path; none for a good one (or none at all). */
export function publishProblems(input: unknown): PublishProblem[] {
  const r = Publish.safeParse(input ?? {}, { error: genericMessage });
  if (r.success) return [];
  return r.error.issues.flatMap((i) => {
    const path = i.path.map(String);
    if (i.code !== "unrecognized_keys") return [{ path, message: i.message }];
    const known = KNOWN[path.join(".")] ?? [];
    return i.keys.map((k) => {
      const hint = suggest(k, known);
      return {
        path: [...path, k],
        message: `unknown key${hint ? ` (did you mean "${hint}"?)` : ""}: ${path.length ? path.join(".") : "publish"} takes ${known.join(", ")}`,
      };
    });
  });
}

/** The settings with their defaults, or what is wrong with them (`path: what; ...`). */
export function publishSettings(input: unknown, campaign: string): PublishSettings | string {
  const r = Publish.safeParse(input ?? {});
  if (!r.success)
    return publishProblems(input)
      .map((p) => `${p.path.join(".") || "publish"}: ${p.message}`)
      .join("; ");
  const p = r.data;
  const author = /^(.*) <(.*)>$/.exec(p.commit?.author ?? "patchbay <patchbay@localhost>")!;
  const branch = p.branch ?? `patchbay/${campaign}`;
  return {
    branch,
    ...(p.base ? { base: p.base } : {}),
    draft: p.draft ?? true,
    title: p.title ?? DEFAULT_TITLE,
    body: p.body ?? DEFAULT_BODY,
    author: { name: author[1]!, email: author[2]! },
    message: p.commit?.message ?? DEFAULT_MESSAGE,
    ...(p.transcriptUrl ? { transcriptUrl: p.transcriptUrl } : {}),
  };
}

/** Each template of the settings with its key, to check the names it uses (the branch may use only the repository's). */
export function publishTemplates(p: PublishSettings): [key: string, template: string, names: "repo" | "publish"][] {
  return [
    ["branch", p.branch, "repo"],
    ["title", p.title, "publish"],
    ["body", p.body, "publish"],
    ["commit.message", p.message, "publish"],
    ...(p.transcriptUrl ? ([["transcriptUrl", p.transcriptUrl, "publish"]] as const) : []),
  ].map(([k, t, n]) => [k, t, n] as [string, string, "repo" | "publish"]);
}

// git check-ref-format's rules for a branch name, without running git for each repository.
const BAD_REF = /(^[./]|\/\.|\.\.|[\x00-\x20\x7f~^:?*[\\]|@\{|\/\/|[./]$|\.lock$|\.lock\/)/;

/**
 * What is wrong with a branch name for a campaign's pushes, or undefined: git's rules, and no
 * option (`-f`), no `HEAD`, no `refs/...` (a push would make refs/heads/refs/heads/main), and not
 * the branch the change is for (the push would land on it, no pull request between).
 */
export function branchProblem(name: string, target?: string): string | undefined {
  const shown = JSON.stringify(name.slice(0, 200));
  if (!name || name === "@" || name.length > 200 || BAD_REF.test(name) || name.startsWith("-"))
    return `${shown} is not a valid git branch name`;
  if (name === "HEAD" || name.startsWith("refs/"))
    return `${shown} is not a branch name of its own (no HEAD, no refs/...)`;
  if (target !== undefined && name === target)
    return `${shown} is the branch the change is for: publish to a branch of the campaign's own`;
  return undefined;
}
