// The Forge on GitHub's REST API (github.com or Enterprise): Octokit with its throttling plugin,
// which spaces writes a second apart (GitHub's advice against secondary rate limits) and waits out
// a rate limit for as long as GitHub says, and its retry plugin for 5xx answers. Answers are read
// through zod: only the fields used, bounded.
import { Octokit } from "@octokit/rest";
import { retry } from "@octokit/plugin-retry";
import { throttling } from "@octokit/plugin-throttling";
import { z } from "zod";
import type { ForgeHost } from "../../core/config/forges.js";
import type { ChecksState, ReviewState } from "../changeset.js";
import type {
  Forge,
  ForgeClientOptions,
  ForgeRepo,
  ForgeWait,
  PullRequestInput,
  PullRequestRef,
  PullRequestState,
  PullRequestStatus,
  PullRequestUpdate,
} from "./forge.js";
import { AnswerTooLargeError, boundedFetch } from "./fetch.js";
import {
  badAnswer,
  boundTitle,
  cutWithNote,
  type ForgeCall,
  ForgeError,
  forgeError,
  parseAnswer,
} from "./forge-error.js";

/** GitHub's limit on a pull request's body, in characters. */
export const GITHUB_BODY_MAX = 65_536;
const TITLE_MAX = 256;
/** Pages of reviews or check runs read at most (100 a page). */
const MAX_PAGES = 10;

const Url = z
  .string()
  .max(2048)
  .regex(/^https?:\/\//);
const Sha = z.string().regex(/^[0-9a-f]{40,64}$/);
const Login = z.object({ login: z.string().max(100) });
const Pull = z.object({
  number: z.int().positive(),
  html_url: Url,
  state: z.enum(["open", "closed"]),
  draft: z.boolean().optional(),
  merged_at: z.string().nullable().optional(),
  title: z.string(),
  body: z.string().nullable(),
  head: z.object({ sha: Sha, ref: z.string() }),
  requested_reviewers: z.array(Login).max(1000).nullable().optional(),
  requested_teams: z
    .array(z.object({ slug: z.string().optional() }))
    .max(1000)
    .nullable()
    .optional(),
});
type Pull = z.infer<typeof Pull>;
const Review = z.object({ user: Login.nullable(), state: z.string().max(40) });
const CheckRun = z.object({ status: z.string().max(40), conclusion: z.string().max(40).nullable() });
const Combined = z.object({ state: z.string().max(40), total_count: z.int().nonnegative() });

const Client = Octokit.plugin(throttling, retry);
const FAILED_RUN = new Set(["failure", "timed_out", "cancelled", "action_required", "startup_failure"]);

export function pullState(p: { state: string; draft?: boolean; merged_at?: string | null }): PullRequestState {
  if (p.merged_at) return "merged";
  if (p.state === "closed") return "closed";
  return p.draft ? "draft" : "open";
}

/** Check runs and the combined commit status, each reduced, then together: any failing, else any pending, else any passing, else none. */
export function checksOf(runs: readonly z.infer<typeof CheckRun>[], combined: z.infer<typeof Combined>): ChecksState {
  const states: ChecksState[] = runs.map((r) =>
    r.status !== "completed" ? "pending" : FAILED_RUN.has(r.conclusion ?? "") ? "failing" : "passing",
  );
  if (combined.total_count > 0)
    states.push(combined.state === "success" ? "passing" : combined.state === "pending" ? "pending" : "failing");
  for (const s of ["failing", "pending", "passing"] as const) if (states.includes(s)) return s;
  return "none";
}

/** Each reviewer's latest approving, rejecting or dismissed review counts (a comment changes nothing). */
export function reviewOf(reviews: readonly z.infer<typeof Review>[], reviewersRequested: boolean): ReviewState {
  const latest = new Map<string, string>();
  for (const r of reviews)
    if (r.user && ["APPROVED", "CHANGES_REQUESTED", "DISMISSED"].includes(r.state)) latest.set(r.user.login, r.state);
  const states = [...latest.values()];
  if (states.includes("CHANGES_REQUESTED")) return "changes_requested";
  if (states.includes("APPROVED")) return "approved";
  return reviewersRequested ? "review_required" : "none";
}

export class GitHubForge implements Forge {
  readonly kind = "github" as const;
  private readonly octokit: InstanceType<typeof Client>;

  constructor(
    private readonly host: ForgeHost,
    private readonly token: string | undefined,
    opts: ForgeClientOptions = {},
  ) {
    const maxRetries = opts.maxRetries ?? 5,
      maxWait = opts.maxWaitSeconds ?? 3600;
    const onLimit =
      (reason: ForgeWait["reason"]) => (retryAfter: number, _o: unknown, _k: unknown, retryCount: number) => {
        if (retryCount >= maxRetries || retryAfter > maxWait) return false;
        opts.onWait?.({ host: host.host, reason, seconds: retryAfter, attempt: retryCount + 1 });
        return true;
      };
    const quiet = () => {};
    this.octokit = new Client({
      baseUrl: host.apiUrl,
      ...(token ? { auth: token } : {}),
      userAgent: "patchbay",
      log: { debug: quiet, info: quiet, warn: quiet, error: quiet },
      throttle: { onRateLimit: onLimit("rate limit"), onSecondaryRateLimit: onLimit("secondary rate limit") },
      retry: { retries: 3 },
      // Every answer read with a bound (fetch.ts).
      request: { fetch: boundedFetch(opts.maxAnswerBytes) },
    });
  }

  async findOpen(repo: ForgeRepo, head: string, base: string): Promise<PullRequestRef | undefined> {
    const { owner, name, call } = this.at(repo, "finding the open pull request", false);
    const data = await this.run(call, () =>
      this.octokit.rest.pulls.list({ owner, repo: name, state: "open", head: `${owner}:${head}`, base, per_page: 100 }),
    );
    const first = this.parse(call, z.array(Pull).max(100), data)[0];
    return first && refOf(first);
  }

  async create(repo: ForgeRepo, pr: PullRequestInput): Promise<PullRequestRef> {
    const { owner, name, call } = this.at(repo, "creating a pull request", true);
    const data = await this.run(call, () =>
      this.octokit.rest.pulls.create({
        owner,
        repo: name,
        head: pr.head,
        base: pr.base,
        title: boundTitle(pr.title, TITLE_MAX),
        body: cutWithNote(pr.body, GITHUB_BODY_MAX, "body"),
        draft: pr.draft,
      }),
    );
    return refOf(this.parse(call, Pull, data));
  }

  async update(repo: ForgeRepo, number: number, change: PullRequestUpdate): Promise<void> {
    const { owner, name, call } = this.at(repo, `updating pull request #${number}`, true);
    const now = this.parse(
      call,
      Pull,
      await this.run(call, () => this.octokit.rest.pulls.get({ owner, repo: name, pull_number: number })),
    );
    const title = boundTitle(change.title, TITLE_MAX),
      body = cutWithNote(change.body, GITHUB_BODY_MAX, "body");
    const diff = { ...(title !== now.title ? { title } : {}), ...(body !== (now.body ?? "") ? { body } : {}) };
    if (Object.keys(diff).length === 0) return;
    await this.run(call, () => this.octokit.rest.pulls.update({ owner, repo: name, pull_number: number, ...diff }));
  }

  async status(repo: ForgeRepo, number: number): Promise<PullRequestStatus> {
    const { owner, name, call } = this.at(repo, `reading pull request #${number}`, false);
    const pull = this.parse(
      call,
      Pull,
      await this.run(call, () => this.octokit.rest.pulls.get({ owner, repo: name, pull_number: number })),
    );
    const ref = pull.head.sha;
    const [runs, combined, reviews] = await Promise.all([
      this.pages(call, CheckRun, (page) =>
        this.octokit.rest.checks
          .listForRef({ owner, repo: name, ref, per_page: 100, page })
          .then((r) => r.data.check_runs as unknown[]),
      ),
      this.run(call, () =>
        this.octokit.rest.repos.getCombinedStatusForRef({ owner, repo: name, ref, per_page: 100 }),
      ).then((d) => this.parse(call, Combined, d)),
      this.pages(call, Review, (page) =>
        this.octokit.rest.pulls
          .listReviews({ owner, repo: name, pull_number: number, per_page: 100, page })
          .then((r) => r.data as unknown[]),
      ),
    ]);
    const requested = (pull.requested_reviewers?.length ?? 0) + (pull.requested_teams?.length ?? 0) > 0;
    return { ...refOf(pull), checks: checksOf(runs, combined), review: reviewOf(reviews, requested) };
  }

  async close(repo: ForgeRepo, number: number): Promise<void> {
    const { owner, name, call } = this.at(repo, `closing pull request #${number}`, true);
    await this.run(call, () =>
      this.octokit.rest.pulls.update({ owner, repo: name, pull_number: number, state: "closed" }),
    );
  }

  private at(repo: ForgeRepo, what: string, write: boolean) {
    const call: ForgeCall = { kind: "github", host: this.host.host, repo: repo.path, what, write };
    const parts = repo.path.split("/");
    if (parts.length !== 2 || parts.some((p) => !p))
      throw new ForgeError(
        `GitHub ${this.host.host}: ${what} failed: ${JSON.stringify(repo.path.slice(0, 200))} is not owner/name`,
      );
    return { owner: parts[0]!, name: parts[1]!, call };
  }

  /** One call, its failure as a ForgeError; the answer's data. */
  private async run<T>(call: ForgeCall, fn: () => Promise<{ data: T }>): Promise<T> {
    try {
      return (await fn()).data;
    } catch (err) {
      throw this.failure(call, err);
    }
  }

  /** Pages of a list, each element read through `schema`, at most MAX_PAGES of them. */
  private async pages<S extends z.ZodType>(
    call: ForgeCall,
    schema: S,
    page: (n: number) => Promise<unknown[]>,
  ): Promise<z.infer<S>[]> {
    const out: z.infer<S>[] = [];
    for (let n = 1; n <= MAX_PAGES; n++) {
      let items: unknown[];
      try {
        items = await page(n);
      } catch (err) {
        throw this.failure(call, err);
      }
      out.push(...this.parse(call, z.array(schema).max(100), items));
      if (items.length < 100) break;
    }
    return out;
  }

  private parse<S extends z.ZodType>(call: ForgeCall, schema: S, data: unknown): z.infer<S> {
    return parseAnswer(call, schema, data, this.token);
  }

  private failure(call: ForgeCall, err: unknown): ForgeError {
    if (err instanceof ForgeError) return err;
    if (err instanceof AnswerTooLargeError) return badAnswer(call, err.message, this.token);
    const e = err as { status?: unknown; message?: unknown; response?: { data?: { message?: unknown } } };
    const status = typeof e.status === "number" && e.status >= 400 && e.status < 600 ? e.status : undefined;
    const said =
      typeof e.response?.data?.message === "string"
        ? e.response.data.message
        : typeof e.message === "string"
          ? e.message
          : "";
    return forgeError(call, status, said, this.token);
  }
}

function refOf(p: Pull): PullRequestRef {
  return { number: p.number, url: p.html_url, state: pullState(p), headSha: p.head.sha };
}
