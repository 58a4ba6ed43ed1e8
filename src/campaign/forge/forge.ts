// A forge is where a changeset becomes a pull request (GitHub) or a merge request (GitLab): the one
// interface the publisher and the tracker use, with a backend per forge (forge-github.ts,
// forge-gitlab.ts). Branches are not the forge's business: they are pushed and deleted with git
// itself (publish-git.ts), so a plain remote gets the same branch a forge does.
import type { ChecksState, ReviewState } from "../changeset.js";

export type ForgeKind = "github" | "gitlab";

/** A repository on a forge: its host as in its git URL and its path (owner/name, or group/sub/name on GitLab). */
export interface ForgeRepo {
  host: string;
  path: string;
}

export interface PullRequestInput {
  /** The branch with the change (in the same repository). */
  head: string;
  /** The branch it is to be merged into. */
  base: string;
  title: string;
  body: string;
  draft: boolean;
}

/** A pull request's (or merge request's) state as the forge says: `draft` and `open` are both open. */
export type PullRequestState = "draft" | "open" | "merged" | "closed";

export interface PullRequestRef {
  /** GitHub's number, GitLab's iid. */
  number: number;
  /** The page a person opens. */
  url: string;
  state: PullRequestState;
  /** The commit its head branch is at, as the forge last saw it. */
  headSha?: string;
}

export interface PullRequestStatus extends PullRequestRef {
  checks: ChecksState;
  review: ReviewState;
}

export interface Forge {
  readonly kind: ForgeKind;
  /** The open (or draft) pull request from `head` into `base`, if there is one. */
  findOpen(repo: ForgeRepo, head: string, base: string): Promise<PullRequestRef | undefined>;
  create(repo: ForgeRepo, pr: PullRequestInput): Promise<PullRequestRef>;
  /** Sets title and body (only what differs is sent; nothing when nothing differs). */
  update(repo: ForgeRepo, number: number, change: { title: string; body: string }): Promise<void>;
  /** State, CI checks of its head commit (GitHub check runs and commit statuses; GitLab pipelines) and review. */
  status(repo: ForgeRepo, number: number): Promise<PullRequestStatus>;
  close(repo: ForgeRepo, number: number): Promise<void>;
}
