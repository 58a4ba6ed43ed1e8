// A forge is where a changeset becomes a pull request (GitHub) or a merge request (GitLab): the one
// interface the executor (execute.ts) uses, with one file per host (github.ts, gitlab.ts) that
// implements it and says what the host does for git itself (ForgeGit); hosts.ts picks the file for
// a git URL. Branches are not the forge's business: they are pushed and deleted with git itself
// (publish-git.ts), so a plain remote gets the same branch a forge does.
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

/** What a host does for git itself, with or without an API client. Each host's file has one. */
export interface ForgeGit {
  /** The user name git sends with the host's token over http(s) (the token is the password). */
  tokenUser: string;
  /**
   * `git push -o` options that make the push itself open the pull request, where the host can
   * (GitLab); used when no API token is given for the host. Undefined: the push makes a branch only.
   */
  pushOptions?(pr: { base: string; title: string; draft: boolean }): string[];
}

/** A wait the client is about to make because the forge said so: for a CLI to show. */
export interface ForgeWait {
  host: string;
  reason: "rate limit" | "secondary rate limit";
  seconds: number;
  /** 1 for the first retry of this request. */
  attempt: number;
}

/** How a host's API client is made: the same for every host. */
export interface ForgeClientOptions {
  /** Called before each wait on a rate limit. */
  onWait?: (wait: ForgeWait) => void;
  /** Retries of one request on a rate limit (default 5). */
  maxRetries?: number;
  /** A rate limit asking for a longer wait than this fails instead (default 3600 s: GitHub's primary limit resets hourly). */
  maxWaitSeconds?: number;
  /** Bytes of one answer read at most (default FORGE_ANSWER_MAX_BYTES, 16 MiB). */
  maxAnswerBytes?: number;
}
