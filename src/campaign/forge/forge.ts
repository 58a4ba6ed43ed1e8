// A forge is where a changeset becomes a pull request (GitHub) or a merge request (GitLab): the one
// interface the executor (execute.ts) uses, with one file per host (github.ts, gitlab.ts) that
// implements it and says what the host does for git itself (ForgeGit); hosts.ts picks the file for
// a git URL. Branches are not the forge's business: they are pushed and deleted with git itself
// (publish-git.ts), so a plain remote gets the same branch a forge does.
import type { ChecksState, ReviewState } from "../changeset.js";

/** The forges patchbay has a file for: GitHub (and GitHub Enterprise) and GitLab. */
export type ForgeKind = "github" | "gitlab";

/** A repository on a forge: its host as in its git URL and its path (owner/name, or group/sub/name on GitLab). */
export interface ForgeRepo {
  /** The host as the repository's git URL names it (e.g. github.com), which picks the forge and its token. */
  host: string;
  /** The repository's path on the forge: owner/name, or group/sub/name on GitLab. */
  path: string;
}

/** A pull request (merge request) to open on a forge, as a changeset's publish asks for it. */
export interface PullRequestInput {
  /** The branch with the change (in the same repository). */
  head: string;
  /** The branch it is to be merged into. */
  base: string;
  /** Its title, rendered from the campaign's template. */
  title: string;
  /** Its description, rendered from the campaign's template. */
  body: string;
  /** Open it as a draft (GitLab: a draft merge request), so that no one reviews it before its author says so. */
  draft: boolean;
}

/** A pull request's title and body to set on the forge, as a publish run again renders them. */
export interface PullRequestUpdate {
  /** The title it is to have. */
  title: string;
  /** The description it is to have. */
  body: string;
}

/** A pull request's (or merge request's) state as the forge says: `draft` and `open` are both open. */
export type PullRequestState = "draft" | "open" | "merged" | "closed";

/** A pull request (merge request) as a forge names it: its number, its page and its state. */
export interface PullRequestRef {
  /** GitHub's number, GitLab's iid. */
  number: number;
  /** The page a person opens. */
  url: string;
  /** Its state as the forge says, which a changeset takes over. */
  state: PullRequestState;
  /** The commit its head branch is at, as the forge last saw it. */
  headSha?: string;
}

/** A pull request's state with its CI checks and review, as tracking reads them from the forge. */
export interface PullRequestStatus extends PullRequestRef {
  /** The CI checks of its head commit, summed up: none, pending, passing or failing. */
  checks: ChecksState;
  /** Its review: none, review required, approved or changes requested. */
  review: ReviewState;
}

/**
 * What patchbay asks of a forge, the same for every host: find, open, update, read and close a
 * changeset's pull request (merge request). Branches are pushed and deleted with git, not here.
 */
export interface Forge {
  /** Which forge it is (github or gitlab). */
  readonly kind: ForgeKind;
  /** The open (or draft) pull request from `head` into `base`, if there is one. */
  findOpen(repo: ForgeRepo, head: string, base: string): Promise<PullRequestRef | undefined>;
  /** Opens a pull request from the changeset's branch, a draft if the campaign says so, and returns how the forge names it. */
  create(repo: ForgeRepo, pr: PullRequestInput): Promise<PullRequestRef>;
  /** Sets title and body (only what differs is sent; nothing when nothing differs). */
  update(repo: ForgeRepo, number: number, change: PullRequestUpdate): Promise<void>;
  /** State, CI checks of its head commit (GitHub check runs and commit statuses; GitLab pipelines) and review. */
  status(repo: ForgeRepo, number: number): Promise<PullRequestStatus>;
  /** Closes the pull request without merging it, as `campaign close` does; its branch is deleted with git. */
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
