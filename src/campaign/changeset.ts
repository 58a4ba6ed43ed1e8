// A changeset: what a campaign made of one repository, from its job's result to a merged pull
// request. Kept in Redis beside the campaign (store.ts); never holds a credential.
import { z } from "zod";

/** Where a changeset is published: GitHub, GitLab, or a plain git remote (a branch only). */
export const CHANGE_FORGES = ["github", "gitlab", "git"] as const;
/** The kind of host a changeset is published on: a forge with pull or merge requests, or plain git. */
export type ChangeForge = (typeof CHANGE_FORGES)[number];

/** What a changeset is on each kind of host, one and many: the one place each noun is spelt. */
export const CHANGE_NOUNS: Readonly<Record<ChangeForge, readonly [one: string, many: string]>> = {
  github: ["pull request", "pull requests"],
  gitlab: ["merge request", "merge requests"],
  git: ["branch", "branches"],
};

/** `n` changesets on one kind of host, counted: "1 pull request", "2 merge requests", "3 branches". */
export const changeCount = (forge: ChangeForge, n: number): string => `${n} ${CHANGE_NOUNS[forge][n === 1 ? 0 : 1]}`;

/** The noun of one changeset on any of `forges` ("pull request or branch"); "changeset" when none is known. */
export function changeNoun(forges: Iterable<ChangeForge | undefined>): string {
  const kinds = CHANGE_FORGES.filter((k) => [...forges].includes(k));
  return kinds.length ? kinds.map((k) => CHANGE_NOUNS[k][0]).join(" or ") : "changeset";
}

/**
 * The question `campaign close` asks before closing `open` changesets: a forge's pull or merge
 * requests are closed and their branches deleted; a plain git remote's changeset is its branch.
 */
export function closeQuestion(id: string, open: readonly Pick<Changeset, "forge">[]): string {
  const n = (k: ChangeForge) => open.filter((c) => (c.forge ?? "git") === k).length;
  const requests = (["github", "gitlab"] as const).filter((k) => n(k)).map((k) => changeCount(k, n(k)));
  const branches = n("git") ? changeCount("git", n("git")) : "";
  if (!requests.length) return `Delete ${branches} of campaign ${id}?`;
  const theirs = open.length - n("git") === 1 ? "its branch" : "their branches";
  return `Close ${requests.join(" and ")} of campaign ${id} and delete ${theirs}${branches ? `, and delete ${branches} of plain git remotes` : ""}?`;
}

/** A changeset's states: not on a forge yet, a draft or open pull request, merged, closed, or in conflict with its target. */
export const CHANGESET_STATES = ["unpublished", "draft", "open", "merged", "closed", "conflict"] as const;
/** Where a changeset stands, from `unpublished` to `merged` (or `closed`, or `conflict` with its target branch). */
export type ChangesetState = (typeof CHANGESET_STATES)[number];

/** CI on the pull request's head commit: none reported, some running, all passed, any failed. */
export const CHECKS_STATES = ["none", "pending", "passing", "failing"] as const;
/** The CI checks of an open changeset's pull request, as its forge reports them. */
export type ChecksState = (typeof CHECKS_STATES)[number];

/** A pull request's review: none reported, a review required, approved, or changes requested. */
export const REVIEW_STATES = ["none", "review_required", "approved", "changes_requested"] as const;
/** The review of an open changeset's pull request, as its forge reports it. */
export type ReviewState = (typeof REVIEW_STATES)[number];

/** The schema of a changeset as it is kept in Redis, which checks each one saved and read. */
export const Changeset = z.object({
  line: z.int().positive(),
  /** The repository's git URL, as in the campaign file (no userinfo). */
  repo: z.string(),
  jobId: z.string(),
  state: z.enum(CHANGESET_STATES),
  /** Why it is unpublished or in conflict, or the last publish error for this repository. */
  reason: z.string().optional(),
  /** The job's verify passed (false: published with --include-unverified). */
  verified: z.boolean().optional(),
  branch: z.string().optional(),
  /** The branch the pull request targets. */
  base: z.string().optional(),
  /** The commit patchbay pushed last: a re-publish leases the branch against it. */
  headSha: z.string().optional(),
  /** The target branch's commit the change was put on (the job's base, or the tip it was rebased onto). */
  onto: z.string().optional(),
  forge: z.enum(CHANGE_FORGES).optional(),
  number: z.int().positive().optional(),
  url: z.string().optional(),
  checks: z.enum(CHECKS_STATES).optional(),
  review: z.enum(REVIEW_STATES).optional(),
  diffstat: z.string().optional(),
  updatedAt: z.number(),
});
/**
 * What a campaign made of one repository: its job, then its branch and pull request, and its state
 * from `unpublished` to `merged`. It never holds a credential.
 */
export type Changeset = z.infer<typeof Changeset>;

/** Changesets still open on their forge: what tracking refreshes. */
export const isOpen = (c: Changeset): boolean => c.state === "draft" || c.state === "open";
