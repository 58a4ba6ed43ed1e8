// A GitHub REST stand-in on 127.0.0.1 for the forge client's tests: every request is checked
// against GitHub's published OpenAPI description (@octokit/openapi, read at test time; see
// openapi-check.ts): its method and path must match one of the description's templates, and its
// path, query and JSON body parameters their schemas, required ones too. A request that fails is
// answered 422 and recorded in `violations` (tests assert it stays empty); each answer is checked
// against the description's schema for its status, mismatches recorded in `responseViolations`.
//
// The model, in memory:
// - repos: owner/name, a default branch, branches (name → sha, or read from a bare repository that
//   tests push to: `branchesFrom`); all private.
// - tokens: each may read and/or write some repos. No token or an unknown one: 401 ("Requires
//   authentication" / "Bad credentials"); a repo the token cannot read: 404, as GitHub hides
//   private repos; a write to a repo it can only read: 403 "Resource not accessible by personal
//   access token".
// - pulls: number, state, draft, merged_at, head ref and sha, base ref, title, body, requested
//   reviewers. Creating one needs both branches and no open pull for the same head and base (422).
// - check runs and commit statuses per sha; reviews per pull.
// Operations served: pulls list/create/get/update/list-reviews, checks list-for-ref, repos
// get-combined-status-for-ref. A path the description has but this does not serve: 404, recorded
// in `unserved`; a path the description lacks: a violation.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { gitHubDescription, OpenApiCheck, type Route } from "./openapi-check.js";
import * as shape from "./github-fake-shapes.js";
import { bareBranch } from "./bare-branch.js";

type Served = Extract<Route, { kind: "served" }>;
const SERVED = [
  "GET /repos/{owner}/{repo}/pulls",
  "POST /repos/{owner}/{repo}/pulls",
  "GET /repos/{owner}/{repo}/pulls/{pull_number}",
  "PATCH /repos/{owner}/{repo}/pulls/{pull_number}",
  "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews",
  "GET /repos/{owner}/{repo}/commits/{ref}/check-runs",
  "GET /repos/{owner}/{repo}/commits/{ref}/status",
];
const WRITES = new Set(["POST", "PATCH", "PUT", "DELETE"]);
const DOCS = "https://docs.github.com/rest";
let checker: OpenApiCheck | undefined;

export interface RecordedGitHubRequest {
  method: string;
  path: string;
  body?: unknown;
  status: number;
}
type Reply = { status: number; json?: unknown; headers?: Record<string, string> };

export class GitHubFake {
  url = "";
  readonly requests: RecordedGitHubRequest[] = [];
  readonly violations: string[] = [];
  readonly responseViolations: string[] = [];
  readonly unserved: string[] = [];
  private readonly repos = new Map<string, shape.FakeRepo>();
  private readonly pulls = new Map<string, shape.FakePull[]>();
  private readonly tokens = new Map<string, { read: Set<string>; write: Set<string> }>();
  private readonly runs = new Map<string, shape.FakeCheckRun[]>();
  private readonly statuses = new Map<string, shape.FakeStatus[]>();
  private readonly reviews = new Map<string, shape.FakeReview[]>();
  private limited: { n: number; kind: "secondary" | "429" } = { n: 0, kind: "secondary" };
  private ids = 1000;
  private readonly server = createServer((req, res) => void this.handle(req, res));

  async start(): Promise<this> {
    checker ??= new OpenApiCheck(gitHubDescription(), SERVED);
    await new Promise<void>((ok) => this.server.listen(0, "127.0.0.1", ok));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }
  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((ok) => this.server.close(() => ok()));
  }

  // ------------------------------------------------------------- the model, for tests
  addRepo(full: string, branches: Record<string, string> = { main: "a".repeat(40) }, defaultBranch = "main"): void {
    const [owner, name] = full.split("/") as [string, string];
    this.repos.set(full.toLowerCase(), {
      owner,
      name,
      id: this.ids++,
      defaultBranch,
      branches: new Map(Object.entries(branches)),
    });
    this.pulls.set(full.toLowerCase(), []);
  }
  setBranch(full: string, ref: string, sha: string): void {
    this.repo(full).branches.set(ref, sha);
  }
  /** The repo's branches are those of a bare git repository, read at each request (tests push to it). */
  branchesFrom(full: string, gitDir: string): void {
    this.repo(full).gitDir = gitDir;
  }
  grant(token: string, full: string, access: "read" | "write"): void {
    const t = this.tokens.get(token) ?? { read: new Set<string>(), write: new Set<string>() };
    t.read.add(full.toLowerCase());
    if (access === "write") t.write.add(full.toLowerCase());
    this.tokens.set(token, t);
  }
  pull(full: string, n: number): shape.FakePull {
    const p = this.pulls.get(full.toLowerCase())?.find((x) => x.number === n);
    if (!p) throw new Error(`no pull ${full}#${n}`);
    return p;
  }
  allPulls(full: string): readonly shape.FakePull[] {
    return this.pulls.get(full.toLowerCase()) ?? [];
  }
  merge(full: string, n: number): void {
    Object.assign(this.pull(full, n), {
      state: "closed",
      mergedAt: "2024-02-01T00:00:00Z",
      closedAt: "2024-02-01T00:00:00Z",
      draft: false,
    });
  }
  close(full: string, n: number): void {
    Object.assign(this.pull(full, n), { state: "closed", closedAt: "2024-02-01T00:00:00Z" });
  }
  markReady(full: string, n: number): void {
    this.pull(full, n).draft = false;
  }
  /** Check runs on a commit: one run per call, replacing the runs of the same name. */
  setChecks(full: string, sha: string, state: "pending" | "passing" | "failing", name = "ci"): void {
    const key = `${full.toLowerCase()}@${sha}`;
    const run: shape.FakeCheckRun = {
      id: this.ids++,
      name,
      status: state === "pending" ? "in_progress" : "completed",
      conclusion: state === "passing" ? "success" : state === "failing" ? "failure" : null,
    };
    this.runs.set(key, [...(this.runs.get(key) ?? []).filter((r) => r.name !== name), run]);
  }
  /** A commit status (the older API CI services use), replacing the status of the same context. */
  setStatus(full: string, sha: string, state: shape.FakeStatus["state"], context = "ci/legacy"): void {
    const key = `${full.toLowerCase()}@${sha}`;
    this.statuses.set(key, [
      ...(this.statuses.get(key) ?? []).filter((s) => s.context !== context),
      { id: this.ids++, context, state },
    ]);
  }
  addReview(full: string, n: number, user: string, state: shape.FakeReview["state"]): void {
    const key = `${full.toLowerCase()}#${n}`;
    const submittedAt = new Date(Date.UTC(2024, 2, 1) + this.ids * 1000).toISOString().replace(/\.\d+Z$/, "Z");
    this.reviews.set(key, [
      ...(this.reviews.get(key) ?? []),
      { id: this.ids++, user, state, commitId: this.pull(full, n).head.sha, submittedAt },
    ]);
  }
  requestReviewers(full: string, n: number, users: string[]): void {
    this.pull(full, n).requestedReviewers = users;
  }
  /** Answers the next `n` requests with a secondary rate limit (403, GitHub's message, retry-after: 1) or a primary one as a 429. */
  rateLimitNext(n: number, kind: "secondary" | "429"): void {
    this.limited = { n, kind };
  }

  // ------------------------------------------------------------- HTTP
  private repo(full: string): shape.FakeRepo {
    const r = this.repos.get(full.toLowerCase());
    if (!r) throw new Error(`no repo ${full}`);
    return r;
  }

  private branch(repo: shape.FakeRepo, ref: string): string | undefined {
    if (!repo.gitDir) return repo.branches.get(ref);
    return bareBranch(repo.gitDir, ref);
  }

  /** An open pull's head is where its branch is now (a push moves it). */
  private live(repo: shape.FakeRepo, p: shape.FakePull): shape.FakePull {
    const sha = p.state === "open" ? this.branch(repo, p.head.ref) : undefined;
    return sha ? { ...p, head: { ...p.head, sha } } : p;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    const url = new URL(req.url ?? "/", this.url);
    const method = req.method ?? "GET";
    let json: unknown;
    try {
      json = raw ? JSON.parse(raw) : undefined;
    } catch {
      json = undefined;
    }
    const rec: RecordedGitHubRequest = { method, path: url.pathname + url.search, body: json, status: 0 };
    this.requests.push(rec);
    const route = checker!.route(method, url.pathname);
    const reply = this.answer(req, route, url, raw, json);
    rec.status = reply.status;
    if (route.kind === "served" && reply.json !== undefined)
      this.responseViolations.push(...checker!.checkResponse(route, reply.status, reply.json));
    res.writeHead(reply.status, {
      "content-type": "application/json; charset=utf-8",
      "x-github-media-type": "github.v3",
      ...reply.headers,
    });
    res.end(reply.json === undefined ? "" : JSON.stringify(reply.json));
  }

  private answer(req: IncomingMessage, route: Route, url: URL, raw: string, json: unknown): Reply {
    const err = (status: number, message: string, headers?: Record<string, string>): Reply => ({
      status,
      json: { message, documentation_url: DOCS, status: String(status) },
      headers,
    });
    if (route.kind === "unknown") {
      this.violations.push(`${req.method} ${url.pathname}: no path of GitHub's description matches`);
      return err(404, "Not Found");
    }
    if (route.kind === "unserved") {
      this.unserved.push(`${route.method} ${route.template}`);
      return err(404, "Not Found");
    }
    const problems = checker!.checkRequest(route, url.searchParams, {
      present: raw.length > 0,
      json,
      contentType: req.headers["content-type"],
    });
    if (problems.length) {
      this.violations.push(...problems.map((p) => `${route.method} ${route.template}: ${p}`));
      return err(422, `Invalid request.\n\n${problems.join("\n")}`);
    }
    if (this.limited.n > 0) {
      this.limited.n--;
      if (this.limited.kind === "secondary")
        return err(403, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", {
          "retry-after": "1",
        });
      return err(429, "API rate limit exceeded for user.", {
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-used": "5000",
        "x-ratelimit-reset": String(Math.floor(Date.now() / 1000)),
      });
    }
    const full = `${route.params.owner}/${route.params.repo}`.toLowerCase();
    const auth = /^(?:token|bearer) (.+)$/i.exec(req.headers.authorization ?? "")?.[1];
    const access = auth === undefined ? undefined : this.tokens.get(auth);
    if (auth !== undefined && !access) return err(401, "Bad credentials");
    if (!access) return WRITES.has(route.method) ? err(401, "Requires authentication") : err(404, "Not Found");
    const repo = this.repos.get(full);
    if (!repo || !access.read.has(full)) return err(404, "Not Found");
    if (WRITES.has(route.method) && !access.write.has(full))
      return err(403, "Resource not accessible by personal access token");
    return this.operate(route, repo, url.searchParams, json as Record<string, any>);
  }

  private operate(route: Served, repo: shape.FakeRepo, q: URLSearchParams, body: Record<string, any>): Reply {
    const full = `${repo.owner}/${repo.name}`.toLowerCase();
    const pulls = this.pulls.get(full)!;
    const n = Number(route.params.pull_number);
    const found = pulls.find((p) => p.number === n);
    const notFound: Reply = { status: 404, json: { message: "Not Found", documentation_url: DOCS, status: "404" } };
    const invalid = (message: string): Reply => ({
      status: 422,
      json: {
        message: "Validation Failed",
        errors: [{ resource: "PullRequest", code: "custom", message }],
        documentation_url: DOCS,
      },
    });
    switch (`${route.method} ${route.template}`) {
      case "GET /repos/{owner}/{repo}/pulls": {
        const state = q.get("state") ?? "open";
        const head = q.get("head");
        const list = pulls.filter(
          (p) =>
            (state === "all" || p.state === state) &&
            (!head || `${repo.owner}:${p.head.ref}`.toLowerCase() === head.toLowerCase()) &&
            (!q.get("base") || p.base.ref === q.get("base")),
        );
        return { status: 200, json: list.map((p) => shape.pull(this.url, repo, this.live(repo, p), true)) };
      }
      case "POST /repos/{owner}/{repo}/pulls": {
        const head = String(body.head).replace(new RegExp(`^${repo.owner}:`, "i"), "");
        const headSha = this.branch(repo, head),
          baseSha = this.branch(repo, body.base);
        if (!headSha) return invalid(`head: no branch ${head}`);
        if (!baseSha) return invalid(`base: no branch ${body.base}`);
        if (typeof body.title !== "string" || !body.title) return invalid("title is required");
        if (pulls.some((p) => p.state === "open" && p.head.ref === head && p.base.ref === body.base))
          return invalid(`A pull request already exists for ${repo.owner}:${head}.`);
        const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
        const p: shape.FakePull = {
          number: pulls.length + 1,
          id: this.ids++,
          state: "open",
          draft: !!body.draft,
          mergedAt: null,
          closedAt: null,
          head: { ref: head, sha: headSha },
          base: { ref: body.base, sha: baseSha },
          title: body.title,
          body: body.body ?? null,
          requestedReviewers: [],
          createdAt: now,
          updatedAt: now,
        };
        pulls.push(p);
        return {
          status: 201,
          json: shape.pull(this.url, repo, p, false),
          headers: { location: `${this.url}/repos/${repo.owner}/${repo.name}/pulls/${p.number}` },
        };
      }
      case "GET /repos/{owner}/{repo}/pulls/{pull_number}":
        return found ? { status: 200, json: shape.pull(this.url, repo, this.live(repo, found), false) } : notFound;
      case "PATCH /repos/{owner}/{repo}/pulls/{pull_number}": {
        if (!found) return notFound;
        if (body.state === "open" && found.mergedAt)
          return invalid("state cannot be changed. The pull request has been merged.");
        if (typeof body.title === "string") found.title = body.title;
        if (typeof body.body === "string") found.body = body.body;
        if (body.state === "closed" && found.state === "open")
          Object.assign(found, { state: "closed", closedAt: new Date().toISOString().replace(/\.\d+Z$/, "Z") });
        return { status: 200, json: shape.pull(this.url, repo, found, false) };
      }
      case "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews":
        return found
          ? {
              status: 200,
              json: (this.reviews.get(`${full}#${n}`) ?? []).map((v) => shape.review(this.url, repo, n, v)),
            }
          : notFound;
      case "GET /repos/{owner}/{repo}/commits/{ref}/check-runs": {
        const runs = this.runs.get(`${full}@${route.params.ref}`) ?? [];
        return {
          status: 200,
          json: {
            total_count: runs.length,
            check_runs: runs.map((c) => shape.checkRun(this.url, repo, route.params.ref!, c)),
          },
        };
      }
      case "GET /repos/{owner}/{repo}/commits/{ref}/status":
        return {
          status: 200,
          json: shape.combinedStatus(
            this.url,
            repo,
            route.params.ref!,
            this.statuses.get(`${full}@${route.params.ref}`) ?? [],
          ),
        };
    }
    return notFound;
  }
}

export const startGitHubFake = (): Promise<GitHubFake> => new GitHubFake().start();
