// A changeset: what a campaign made of one repository, from its job's result to a merged pull
// request. Kept in Redis beside the campaign (store.ts); never holds a credential.
import { z } from "zod";

export const CHANGESET_STATES = ["unpublished", "draft", "open", "merged", "closed", "conflict"] as const;
export type ChangesetState = (typeof CHANGESET_STATES)[number];

/** CI on the pull request's head commit: none reported, some running, all passed, any failed. */
export const CHECKS_STATES = ["none", "pending", "passing", "failing"] as const;
export type ChecksState = (typeof CHECKS_STATES)[number];

export const REVIEW_STATES = ["none", "review_required", "approved", "changes_requested"] as const;
export type ReviewState = (typeof REVIEW_STATES)[number];

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
  forge: z.enum(["github", "gitlab", "git"]).optional(),
  number: z.int().positive().optional(),
  url: z.string().optional(),
  checks: z.enum(CHECKS_STATES).optional(),
  review: z.enum(REVIEW_STATES).optional(),
  diffstat: z.string().optional(),
  updatedAt: z.number(),
});
export type Changeset = z.infer<typeof Changeset>;

/** Changesets still open on their forge: what tracking refreshes. */
export const isOpen = (c: Changeset): boolean => c.state === "draft" || c.state === "open";
