// A GitLab REST stand-in on 127.0.0.1 for the merge-request endpoints the forge client calls
// through gitbeaker. GitLab's published OpenAPI description is not on this machine (no npm package
// carries it), so requests are checked against zod schemas written from GitLab's REST docs
// (docs.gitlab.com/api/merge_requests, /api/merge_request_approvals), and a request that fails is
// answered 400 and recorded in `violations`. What is checked: the path's shape (/api/v4/projects/
// :id/... with :id a number or a URL-encoded path, group%2Fname, never a raw slash), :iid a
// positive integer, the query and JSON body parameters' names and types, required ones (source
// and target branch and title to create; at least one field to edit), enums (state, state_event)
// and the description's length; unknown parameters are refused too (GitLab ignores them; here they
// would hide a misspelt one). What is not: anything the docs do not say, and the answers' shape
// beyond the fields the docs list (checked against this file's own schema, in `responseViolations`).
//
// The model, in memory: projects (path, branches, or those of a bare repository: branchesFrom); tokens that may read and/or write some projects
// (no token or an unknown one: 401; a project it cannot read: 404 "Project Not Found"; a write to
// one it only reads: 403); merge requests (iid, state, draft from the title's prefix as GitLab
// does, source and target branch and sha, title, description, head pipeline status, reviewers,
// approvals required and given). A switch answers the next N requests with a 429 (Retry-After: 1).
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { bareBranch } from "./bare-branch.js";

const Id = z.string().regex(/^(\d+|[A-Za-z0-9_.-]+(%2F[A-Za-z0-9_.-]+)+)$/, "an id or a URL-encoded path");
const Int = z.string().regex(/^\d+$/, "an integer");
const Bool = z.union([z.boolean(), z.enum(["true", "false"])]);
const ListQuery = z.strictObject({
  state: z.enum(["opened", "closed", "locked", "merged", "all"]).optional(),
  source_branch: z.string().min(1).optional(),
  target_branch: z.string().min(1).optional(),
  per_page: Int.optional(),
  page: Int.optional(),
  pagination: z.enum(["offset", "keyset"]).optional(),
  order_by: z.enum(["created_at", "updated_at", "title", "merged_at"]).optional(),
  sort: z.enum(["asc", "desc"]).optional(),
});
const ShowQuery = z.strictObject({
  render_html: Bool.optional(),
  include_diverged_commits_count: Bool.optional(),
  include_rebase_in_progress: Bool.optional(),
});
const Description = z.string().max(1_048_576);
const CreateBody = z.strictObject({
  source_branch: z.string().min(1),
  target_branch: z.string().min(1),
  title: z.string().min(1).max(255),
  description: Description.optional(),
  assignee_id: z.int().optional(),
  reviewer_ids: z.array(z.int()).optional(),
  labels: z.string().optional(),
  remove_source_branch: z.boolean().optional(),
  squash: z.boolean().optional(),
  allow_collaboration: z.boolean().optional(),
});
const EditBody = z
  .strictObject({
    title: z.string().min(1).max(255).optional(),
    description: Description.optional(),
    state_event: z.enum(["close", "reopen"]).optional(),
    target_branch: z.string().min(1).optional(),
    labels: z.string().optional(),
    reviewer_ids: z.array(z.int()).optional(),
    remove_source_branch: z.boolean().optional(),
  })
  .refine((b) => Object.keys(b).length > 0, "at least one parameter is required");
/** What an answered merge request must hold (the fields GitLab's docs list, those the client reads at least). */
const MrAnswer = z.object({
  id: z.int(),
  iid: z.int().positive(),
  project_id: z.int(),
  title: z.string(),
  description: z.string().nullable(),
  state: z.enum(["opened", "closed", "merged", "locked"]),
  draft: z.boolean(),
  work_in_progress: z.boolean(),
  source_branch: z.string(),
  target_branch: z.string(),
  sha: z.string(),
  web_url: z.url(),
  created_at: z.string(),
  updated_at: z.string(),
  merged_at: z.string().nullable(),
  closed_at: z.string().nullable(),
  reviewers: z.array(z.object({ id: z.int(), username: z.string() })),
  head_pipeline: z.object({ id: z.int(), status: z.string(), sha: z.string() }).nullable().optional(),
});

export interface FakeMr {
  iid: number;
  id: number;
  state: "opened" | "closed" | "merged" | "locked";
  title: string;
  description: string | null;
  source: string;
  target: string;
  sha: string;
  pipeline: string | null;
  reviewers: string[];
  approvalsRequired: number;
  approvedBy: string[];
}
interface Project {
  id: number;
  path: string;
  branches: Map<string, string>;
  mrs: FakeMr[];
}
type Reply = { status: number; json?: unknown; text?: string; headers?: Record<string, string> };

export class GitLabFake {
  url = "";
  readonly requests: { method: string; path: string; body?: unknown; status: number }[] = [];
  readonly violations: string[] = [];
  readonly responseViolations: string[] = [];
  private readonly projects = new Map<string, Project>();
  private readonly tokens = new Map<string, { read: Set<string>; write: Set<string> }>();
  private limited = 0;
  private ids = 500;
  private readonly server = createServer((req, res) => void this.handle(req, res));

  async start(): Promise<this> {
    await new Promise<void>((ok) => this.server.listen(0, "127.0.0.1", ok));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }
  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((ok) => this.server.close(() => ok()));
  }

  // ------------------------------------------------------------- the model, for tests
  addProject(path: string, branches: Record<string, string>): void {
    this.projects.set(path.toLowerCase(), {
      id: this.ids++,
      path,
      branches: new Map(Object.entries(branches)),
      mrs: [],
    });
  }
  /** The project's branches read from a bare repository at each request: what a real git server was pushed is what the forge sees. */
  branchesFrom(path: string, gitDir: string): void {
    const read = (ref: string) => bareBranch(gitDir, ref);
    const p = this.projects.get(path.toLowerCase());
    if (!p) throw new Error(`no project ${path}`);
    p.branches = new (class extends Map<string, string> {
      override get(ref: string) {
        return read(ref);
      }
      override has(ref: string) {
        return read(ref) !== undefined;
      }
    })();
  }
  grant(token: string, path: string, access: "read" | "write"): void {
    const t = this.tokens.get(token) ?? { read: new Set<string>(), write: new Set<string>() };
    t.read.add(path.toLowerCase());
    if (access === "write") t.write.add(path.toLowerCase());
    this.tokens.set(token, t);
  }
  mr(path: string, iid: number): FakeMr {
    const mr = this.projects.get(path.toLowerCase())?.mrs.find((m) => m.iid === iid);
    if (!mr) throw new Error(`no merge request ${path}!${iid}`);
    return mr;
  }
  allMrs(path: string): readonly FakeMr[] {
    return this.projects.get(path.toLowerCase())?.mrs ?? [];
  }
  merge(path: string, iid: number): void {
    this.mr(path, iid).state = "merged";
  }
  close(path: string, iid: number): void {
    this.mr(path, iid).state = "closed";
  }
  lock(path: string, iid: number): void {
    this.mr(path, iid).state = "locked";
  }
  markReady(path: string, iid: number): void {
    const mr = this.mr(path, iid);
    mr.title = mr.title.replace(/^Draft:\s*/i, "");
  }
  /** The head pipeline's status (GitLab's words: running, success, failed, ...), or none. */
  setPipeline(path: string, iid: number, status: string | null): void {
    this.mr(path, iid).pipeline = status;
  }
  setReviewers(path: string, iid: number, users: string[]): void {
    this.mr(path, iid).reviewers = users;
  }
  setApprovals(path: string, iid: number, required: number, approvedBy: string[]): void {
    Object.assign(this.mr(path, iid), { approvalsRequired: required, approvedBy });
  }
  /** Answers the next `n` requests with 429 Too Many Requests, as GitLab's rate limiter does. */
  rateLimitNext(n: number): void {
    this.limited = n;
  }

  // ------------------------------------------------------------- HTTP
  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    let body: unknown;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      body = undefined;
    }
    const rawPath = (req.url ?? "/").split("?")[0]!;
    const query = Object.fromEntries(new URL(req.url ?? "/", "http://x").searchParams);
    const rec = { method: req.method ?? "GET", path: req.url ?? "/", body, status: 0 };
    this.requests.push(rec);
    const reply = this.answer(req, rawPath, query, raw, body);
    rec.status = reply.status;
    const headers = { "content-type": reply.text !== undefined ? "text/plain" : "application/json", ...reply.headers };
    res.writeHead(reply.status, headers);
    res.end(reply.text ?? (reply.json === undefined ? "" : JSON.stringify(reply.json)));
  }

  private answer(
    req: IncomingMessage,
    rawPath: string,
    query: Record<string, string>,
    raw: string,
    body: unknown,
  ): Reply {
    const m = /^\/api\/v4\/projects\/([^/]+)\/merge_requests(?:\/([^/]+)(\/approvals)?)?$/.exec(rawPath);
    const method = req.method ?? "GET";
    const route = !m
      ? undefined
      : !m[2]
        ? method === "GET"
          ? "list"
          : method === "POST"
            ? "create"
            : undefined
        : m[3]
          ? method === "GET"
            ? "approvals"
            : undefined
          : method === "GET"
            ? "show"
            : method === "PUT"
              ? "edit"
              : undefined;
    const bad = (problems: string[]): Reply => {
      this.violations.push(...problems.map((p) => `${method} ${rawPath}: ${p}`));
      return { status: 400, json: { error: problems.join("; ") } };
    };
    if (!route) return bad(["no merge-request endpoint of GitLab's docs has this method and path"]);
    const problems: string[] = [];
    const check = (what: string, schema: z.ZodType, v: unknown) => {
      const r = schema.safeParse(v);
      if (!r.success)
        problems.push(
          ...r.error.issues.map((i) => `${what}${i.path.length ? `.${i.path.join(".")}` : ""}: ${i.message}`),
        );
    };
    check("id", Id, m![1]);
    if (m![2] !== undefined)
      check(
        "merge_request_iid",
        Int.refine((s) => Number(s) > 0, "positive"),
        m![2],
      );
    check("query", route === "list" ? ListQuery : route === "show" ? ShowQuery : z.strictObject({}), query);
    if (route === "create" || route === "edit") {
      if (!/^application\/json\b/.test(req.headers["content-type"] ?? "")) problems.push("the body is not JSON");
      else check("body", route === "create" ? CreateBody : EditBody, body);
    } else if (raw) problems.push("this endpoint takes no body");
    if (problems.length) return bad(problems);
    if (this.limited > 0) {
      this.limited--;
      return {
        status: 429,
        text: "Retry later",
        headers: { "retry-after": "1", "ratelimit-limit": "2000", "ratelimit-remaining": "0" },
      };
    }
    const token =
      (req.headers["private-token"] as string | undefined) ||
      /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
    const access = token ? this.tokens.get(token) : undefined;
    if (!access) return { status: 401, json: { message: "401 Unauthorized" } };
    const path = decodeURIComponent(m![1]!).toLowerCase();
    const project = /^\d+$/.test(path)
      ? [...this.projects.values()].find((p) => String(p.id) === path)
      : this.projects.get(path);
    if (!project || !access.read.has(project.path.toLowerCase()))
      return { status: 404, json: { message: "404 Project Not Found" } };
    if ((route === "create" || route === "edit") && !access.write.has(project.path.toLowerCase()))
      return { status: 403, json: { message: "403 Forbidden" } };
    const reply = this.operate(route, project, Number(m![2]), query, body as Record<string, any>);
    for (const one of route === "list" && Array.isArray(reply.json)
      ? reply.json
      : route !== "approvals" && reply.status < 300
        ? [reply.json]
        : []) {
      const r = MrAnswer.safeParse(one);
      if (!r.success)
        this.responseViolations.push(
          `${route}: ${r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
        );
    }
    return reply;
  }

  private operate(route: string, p: Project, iid: number, q: Record<string, string>, body: Record<string, any>): Reply {
    const found = p.mrs.find((x) => x.iid === iid);
    const notFound: Reply = { status: 404, json: { message: "404 Not found" } };
    switch (route) {
      case "list": {
        const list = p.mrs.filter(
          (x) =>
            (!q.state || q.state === "all" || x.state === q.state) &&
            (!q.source_branch || x.source === q.source_branch) &&
            (!q.target_branch || x.target === q.target_branch),
        );
        return {
          status: 200,
          json: list.map((x) => this.shape(p, x)),
          headers: {
            "x-page": "1",
            "x-per-page": q.per_page ?? "20",
            "x-total": String(list.length),
            "x-total-pages": "1",
            "x-next-page": "",
          },
        };
      }
      case "create": {
        const sha = p.branches.get(body.source_branch);
        if (!sha || !p.branches.has(body.target_branch))
          return { status: 422, json: { message: ["Source branch or target branch does not exist"] } };
        const dup = p.mrs.find(
          (x) => x.state === "opened" && x.source === body.source_branch && x.target === body.target_branch,
        );
        if (dup)
          return {
            status: 409,
            json: { message: [`Another open merge request already exists for this source branch: !${dup.iid}`] },
          };
        const mr: FakeMr = {
          iid: p.mrs.length + 1,
          id: this.ids++,
          state: "opened",
          title: body.title,
          description: body.description ?? null,
          source: body.source_branch,
          target: body.target_branch,
          sha,
          pipeline: null,
          reviewers: [],
          approvalsRequired: 0,
          approvedBy: [],
        };
        p.mrs.push(mr);
        return { status: 201, json: this.shape(p, mr) };
      }
      case "show":
        return found ? { status: 200, json: this.shape(p, found) } : notFound;
      case "edit":
        if (!found) return notFound;
        if (body.title !== undefined) found.title = body.title;
        if (body.description !== undefined) found.description = body.description;
        if (body.state_event === "close" && found.state === "opened") found.state = "closed";
        return { status: 200, json: this.shape(p, found) };
      case "approvals":
        if (!found) return notFound;
        return {
          status: 200,
          json: {
            id: found.id,
            iid: found.iid,
            project_id: p.id,
            title: found.title,
            state: found.state,
            approved: found.approvedBy.length >= found.approvalsRequired,
            approvals_required: found.approvalsRequired,
            approvals_left: Math.max(0, found.approvalsRequired - found.approvedBy.length),
            approved_by: found.approvedBy.map((u, i) => ({ user: { id: i + 1, username: u, name: u } })),
          },
        };
    }
    return notFound;
  }

  private shape(p: Project, mr: FakeMr) {
    const draft = /^(\[draft\]|\(draft\)|draft:|draft\s-\s)/i.test(mr.title.trim());
    const sha = p.branches.get(mr.source) ?? mr.sha;
    return {
      id: mr.id,
      iid: mr.iid,
      project_id: p.id,
      title: mr.title,
      description: mr.description,
      state: mr.state,
      draft,
      work_in_progress: draft,
      source_branch: mr.source,
      target_branch: mr.target,
      sha,
      web_url: `${this.url}/${p.path}/-/merge_requests/${mr.iid}`,
      created_at: "2024-01-01T00:00:00.000Z",
      updated_at: "2024-01-01T00:00:00.000Z",
      merged_at: mr.state === "merged" ? "2024-02-01T00:00:00.000Z" : null,
      closed_at: mr.state === "closed" ? "2024-02-01T00:00:00.000Z" : null,
      reviewers: mr.reviewers.map((u, i) => ({ id: i + 1, username: u, name: u, state: "active" })),
      head_pipeline: mr.pipeline ? { id: mr.iid * 100, status: mr.pipeline, sha } : null,
    };
  }
}
