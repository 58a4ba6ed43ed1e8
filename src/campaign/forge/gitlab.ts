// The Forge on GitLab's REST API (gitlab.com or self-hosted) through gitbeaker: merge requests,
// their head pipeline and their approvals. A draft is GitLab's own way, a `Draft: ` title prefix.
// gitbeaker paces requests with its per-endpoint rate limits (set below under GitLab.com's
// 2,000 a minute); patchbay's own request handler (gitlab-request.ts) asks a 429 or 502
// again as gitbeaker's does, a bounded number of times, without reading Retry-After or saying when
// it waits, reads every answer up to a bound and follows no next page. Answers are read through
// zod: only the fields used, bounded.
import { MergeRequestApprovals, MergeRequests } from "@gitbeaker/rest";
import { z } from "zod";
import type { ForgeHost } from "../../core/config/forges.js";
import type { ChecksState, ReviewState } from "../changeset.js";
import type {
  Forge,
  ForgeClientOptions,
  ForgeRepo,
  PullRequestInput,
  PullRequestRef,
  PullRequestState,
  PullRequestStatus,
  PullRequestUpdate,
} from "./forge.js";
import { AnswerTooLargeError } from "./fetch.js";
import { boundedRequester } from "./gitlab-request.js";
import { DRAFT } from "./push.js";
import {
  badAnswer,
  boundTitle,
  cutWithNote,
  type ForgeCall,
  ForgeError,
  forgeError,
  parseAnswer,
} from "./forge-error.js";

/** GitLab's limit on a merge request's description, in characters. */
export const GITLAB_DESCRIPTION_MAX = 1_048_576;
/** GitLab's limit on a title, prefix included. */
const TITLE_MAX = 255;
/** The prefixes GitLab reads as a draft. */
const DRAFT_PREFIX = /^\s*(?:\[draft\]|\(draft\)|draft:|draft\s-\s)\s*/i;

const MergeRequest = z.object({
  iid: z.int().positive(),
  web_url: z
    .string()
    .max(2048)
    .regex(/^https?:\/\//),
  state: z.enum(["opened", "closed", "merged", "locked"]),
  draft: z.boolean().optional(),
  work_in_progress: z.boolean().optional(),
  title: z.string(),
  description: z.string().nullable().optional(),
  sha: z
    .string()
    .regex(/^[0-9a-f]{40,64}$/)
    .nullable()
    .optional(),
  head_pipeline: z
    .object({ status: z.string().max(40) })
    .nullable()
    .optional(),
  reviewers: z
    .array(z.object({ username: z.string().max(255) }))
    .max(1000)
    .optional(),
});
type MergeRequest = z.infer<typeof MergeRequest>;
const Approvals = z.object({
  approvals_left: z.int().nonnegative().nullable().optional(),
  approved_by: z
    .array(z.object({ user: z.object({ username: z.string().max(255) }) }))
    .max(1000)
    .optional(),
});

const PENDING_PIPELINE = new Set([
  "created",
  "waiting_for_resource",
  "preparing",
  "waiting_for_callback",
  "pending",
  "running",
  "scheduled",
  "manual",
]);

export function mergeRequestState(mr: Pick<MergeRequest, "state" | "draft" | "work_in_progress">): PullRequestState {
  if (mr.state === "merged") return "merged";
  if (mr.state === "closed") return "closed";
  return mr.draft || mr.work_in_progress ? "draft" : "open"; // locked: being merged, still open
}

/** The head pipeline's status: none reported, running, passed, or failed/canceled. */
export function pipelineChecks(status: string | undefined): ChecksState {
  if (status === undefined || status === "skipped") return "none";
  if (status === "success") return "passing";
  return PENDING_PIPELINE.has(status) ? "pending" : "failing";
}

/** Approved when someone approved and no approval is left to give; required while one is, or while reviewers are assigned. */
export function approvalReview(a: z.infer<typeof Approvals>, reviewers: number): ReviewState {
  const left = a.approvals_left ?? 0;
  if ((a.approved_by?.length ?? 0) > 0 && left === 0) return "approved";
  return left > 0 || reviewers > 0 ? "review_required" : "none";
}

export class GitLabForge implements Forge {
  readonly kind = "gitlab" as const;
  private readonly mrs: InstanceType<typeof MergeRequests<false>>;
  private readonly approvals: InstanceType<typeof MergeRequestApprovals<false>>;

  constructor(
    private readonly host: ForgeHost,
    private readonly token: string | undefined,
    opts: ForgeClientOptions = {},
  ) {
    const common = {
      host: host.apiUrl,
      // In place of @gitbeaker/rest's own (a preset the constructor's options override).
      requesterFn: boundedRequester(opts.maxAnswerBytes),
      // As a bearer token (GitLab takes an access token so too): fetch drops Authorization on a
      // redirect to another origin, where gitbeaker's PRIVATE-TOKEN header would follow it there.
      ...(token ? { oauthToken: token } : { token: "" }),
      queryTimeout: 60_000,
      rateLimitDuration: 60,
      rateLimits: { "**": 600 },
    };
    this.mrs = new MergeRequests(common);
    this.approvals = new MergeRequestApprovals(common);
  }

  async findOpen(repo: ForgeRepo, head: string, base: string): Promise<PullRequestRef | undefined> {
    const call = this.call(repo, "finding the open merge request", false);
    const list = await this.run(call, z.array(MergeRequest).max(100), () =>
      this.mrs.all({
        projectId: repo.path,
        state: "opened",
        sourceBranch: head,
        targetBranch: base,
        perPage: 100,
        maxPages: 1,
      }),
    );
    return list[0] && refOf(list[0]);
  }

  async create(repo: ForgeRepo, pr: PullRequestInput): Promise<PullRequestRef> {
    const call = this.call(repo, "creating a merge request", true);
    const title = pr.draft ? DRAFT + boundTitle(pr.title, TITLE_MAX - DRAFT.length) : boundTitle(pr.title, TITLE_MAX);
    const mr = await this.run(call, MergeRequest, () =>
      this.mrs.create(repo.path, pr.head, pr.base, title, {
        description: cutWithNote(pr.body, GITLAB_DESCRIPTION_MAX, "description"),
      }),
    );
    return refOf(mr);
  }

  async update(repo: ForgeRepo, number: number, change: PullRequestUpdate): Promise<void> {
    const call = this.call(repo, `updating merge request !${number}`, true);
    const now = await this.run(call, MergeRequest, () => this.mrs.show(repo.path, number));
    const prefix = DRAFT_PREFIX.exec(now.title)?.[0] ?? "";
    const title = prefix + boundTitle(change.title, TITLE_MAX - prefix.length);
    const description = cutWithNote(change.body, GITLAB_DESCRIPTION_MAX, "description");
    const diff = {
      ...(title !== now.title ? { title } : {}),
      ...(description !== (now.description ?? "") ? { description } : {}),
    };
    if (Object.keys(diff).length === 0) return;
    await this.run(call, MergeRequest, () => this.mrs.edit(repo.path, number, diff));
  }

  async status(repo: ForgeRepo, number: number): Promise<PullRequestStatus> {
    const call = this.call(repo, `reading merge request !${number}`, false);
    const [mr, approvals] = await Promise.all([
      this.run(call, MergeRequest, () => this.mrs.show(repo.path, number)),
      this.run(call, Approvals, () => this.approvals.showConfiguration(repo.path, { mergerequestIId: number })),
    ]);
    return {
      ...refOf(mr),
      checks: pipelineChecks(mr.head_pipeline?.status),
      review: approvalReview(approvals, mr.reviewers?.length ?? 0),
    };
  }

  async close(repo: ForgeRepo, number: number): Promise<void> {
    const call = this.call(repo, `closing merge request !${number}`, true);
    await this.run(call, MergeRequest, () => this.mrs.edit(repo.path, number, { stateEvent: "close" }));
  }

  private call(repo: ForgeRepo, what: string, write: boolean): ForgeCall {
    if (!/^[^/]+(\/[^/]+)+$/.test(repo.path))
      throw new ForgeError(
        `GitLab ${this.host.host}: ${what} failed: ${JSON.stringify(repo.path.slice(0, 200))} is not group/name`,
      );
    return { kind: "gitlab", host: this.host.host, repo: repo.path, what, write };
  }

  /** One call through gitbeaker, its answer read through `schema`, its failure a ForgeError (gitbeaker's error, which holds the request and its token, is dropped). */
  private async run<S extends z.ZodType>(call: ForgeCall, schema: S, fn: () => Promise<unknown>): Promise<z.infer<S>> {
    let data: unknown;
    try {
      data = await fn();
    } catch (err) {
      throw this.failure(call, err);
    }
    return parseAnswer(call, schema, data, this.token);
  }

  private failure(call: ForgeCall, err: unknown): ForgeError {
    if (err instanceof AnswerTooLargeError) return badAnswer(call, err.message, this.token);
    const e = err as { name?: unknown; message?: unknown; cause?: { response?: { status?: unknown } } };
    let message = typeof e.message === "string" ? e.message : "";
    // GitLab's validation messages come as a list, which gitbeaker hands on as JSON.
    if (message.startsWith("[")) message = listed(message);
    let status = typeof e.cause?.response?.status === "number" ? e.cause.response.status : undefined;
    if (e.name === "GitbeakerRetryError") status = Number(/last status code: (\d{3})/.exec(message)?.[1]) || undefined;
    if (e.name === "GitbeakerTimeoutError") return forgeError(call, undefined, "no answer within 60 s", this.token);
    return forgeError(call, status, message, this.token);
  }
}

function listed(text: string): string {
  try {
    const v: unknown = JSON.parse(text);
    return Array.isArray(v) ? v.map(String).join("; ") : text;
  } catch {
    return text;
  }
}

function refOf(mr: MergeRequest): PullRequestRef {
  return { number: mr.iid, url: mr.web_url, state: mergeRequestState(mr), ...(mr.sha ? { headSha: mr.sha } : {}) };
}
