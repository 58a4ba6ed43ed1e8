// The JSON the GitHub stand-in answers with, built out to the fields GitHub's description marks
// required (github-fake.ts checks each answer against it), from the stand-in's small model.
export interface FakeRepo {
  owner: string;
  name: string;
  id: number;
  defaultBranch: string;
  /** Branch name → the commit it is at. */
  branches: Map<string, string>;
  /** A bare repository whose branches these are instead. */
  gitDir?: string;
}

export interface FakePull {
  number: number;
  id: number;
  state: "open" | "closed";
  draft: boolean;
  mergedAt: string | null;
  closedAt: string | null;
  head: { ref: string; sha: string };
  base: { ref: string; sha: string };
  title: string;
  body: string | null;
  requestedReviewers: string[];
  createdAt: string;
  updatedAt: string;
}

export interface FakeCheckRun {
  id: number;
  name: string;
  status: "queued" | "in_progress" | "completed";
  conclusion: "success" | "failure" | "neutral" | "cancelled" | "skipped" | "timed_out" | "action_required" | null;
}

export interface FakeStatus {
  id: number;
  context: string;
  state: "pending" | "success" | "failure" | "error";
}

export interface FakeReview {
  id: number;
  user: string;
  state: "APPROVED" | "CHANGES_REQUESTED" | "COMMENTED" | "DISMISSED";
  commitId: string;
  submittedAt: string;
}

const T0 = "2024-01-01T00:00:00Z";

export function user(base: string, login: string) {
  const u = `${base}/users/${encodeURIComponent(login)}`;
  return {
    login,
    id: [...login].reduce((h, c) => (h * 31 + c.charCodeAt(0)) % 1_000_000, 7),
    node_id: `U_${login}`,
    avatar_url: `${base}/avatars/${encodeURIComponent(login)}`,
    gravatar_id: "",
    url: u,
    html_url: `${base}/${encodeURIComponent(login)}`,
    followers_url: `${u}/followers`,
    following_url: `${u}/following{/other_user}`,
    gists_url: `${u}/gists{/gist_id}`,
    starred_url: `${u}/starred{/owner}{/repo}`,
    subscriptions_url: `${u}/subscriptions`,
    organizations_url: `${u}/orgs`,
    repos_url: `${u}/repos`,
    events_url: `${u}/events{/privacy}`,
    received_events_url: `${u}/received_events`,
    type: "User",
    site_admin: false,
  };
}

/** GitHub's `minimal-repository`; `full` adds what `repository` requires besides. */
export function repository(base: string, r: FakeRepo, full = true) {
  const api = `${base}/repos/${r.owner}/${r.name}`;
  const urls = Object.fromEntries(
    [
      "archive",
      "assignees",
      "blobs",
      "branches",
      "collaborators",
      "comments",
      "commits",
      "compare",
      "contents",
      "contributors",
      "deployments",
      "downloads",
      "events",
      "forks",
      "git_commits",
      "git_refs",
      "git_tags",
      "hooks",
      "issue_comment",
      "issue_events",
      "issues",
      "keys",
      "labels",
      "languages",
      "merges",
      "milestones",
      "notifications",
      "pulls",
      "releases",
      "stargazers",
      "statuses",
      "subscribers",
      "subscription",
      "tags",
      "teams",
      "trees",
    ].map((k) => [`${k}_url`, `${api}/${k.replace(/_/g, "-")}`]),
  );
  const minimal = {
    id: r.id,
    node_id: `R_${r.id}`,
    name: r.name,
    full_name: `${r.owner}/${r.name}`,
    owner: user(base, r.owner),
    private: true,
    html_url: `${base}/${r.owner}/${r.name}`,
    description: null,
    fork: false,
    url: api,
    ...urls,
  };
  if (!full) return minimal;
  return {
    ...minimal,
    clone_url: `${base}/${r.owner}/${r.name}.git`,
    git_url: `git://fake/${r.owner}/${r.name}.git`,
    ssh_url: `git@fake:${r.owner}/${r.name}.git`,
    svn_url: `${base}/${r.owner}/${r.name}`,
    mirror_url: null,
    homepage: null,
    language: null,
    default_branch: r.defaultBranch,
    forks: 0,
    forks_count: 0,
    stargazers_count: 0,
    watchers: 0,
    watchers_count: 0,
    size: 1,
    open_issues: 0,
    open_issues_count: 0,
    has_issues: true,
    has_projects: false,
    has_wiki: false,
    has_pages: false,
    has_downloads: false,
    archived: false,
    disabled: false,
    license: null,
    pushed_at: T0,
    created_at: T0,
    updated_at: T0,
  };
}

/** `pull-request` (`simple`: `pull-request-simple`, what the list answers). */
export function pull(base: string, r: FakeRepo, p: FakePull, simple: boolean) {
  const api = `${base}/repos/${r.owner}/${r.name}`;
  const html = `${base}/${r.owner}/${r.name}/pull/${p.number}`;
  const side = (s: { ref: string; sha: string }) => ({
    label: `${r.owner}:${s.ref}`,
    ref: s.ref,
    sha: s.sha,
    user: user(base, r.owner),
    repo: repository(base, r),
  });
  const link = (href: string) => ({ href });
  const common = {
    url: `${api}/pulls/${p.number}`,
    id: p.id,
    node_id: `PR_${p.id}`,
    html_url: html,
    diff_url: `${html}.diff`,
    patch_url: `${html}.patch`,
    issue_url: `${api}/issues/${p.number}`,
    commits_url: `${api}/pulls/${p.number}/commits`,
    review_comments_url: `${api}/pulls/${p.number}/comments`,
    review_comment_url: `${api}/pulls/comments{/number}`,
    comments_url: `${api}/issues/${p.number}/comments`,
    statuses_url: `${api}/statuses/${p.head.sha}`,
    number: p.number,
    state: p.state,
    locked: false,
    title: p.title,
    user: user(base, r.owner),
    body: p.body,
    labels: [],
    milestone: null,
    active_lock_reason: null,
    created_at: p.createdAt,
    updated_at: p.updatedAt,
    closed_at: p.closedAt,
    merged_at: p.mergedAt,
    merge_commit_sha: p.mergedAt ? p.head.sha : null,
    assignee: null,
    assignees: [],
    requested_reviewers: p.requestedReviewers.map((l) => user(base, l)),
    requested_teams: [],
    head: side(p.head),
    base: side(p.base),
    _links: {
      self: link(`${api}/pulls/${p.number}`),
      html: link(html),
      issue: link(`${api}/issues/${p.number}`),
      comments: link(`${api}/issues/${p.number}/comments`),
      review_comments: link(`${api}/pulls/${p.number}/comments`),
      review_comment: link(`${api}/pulls/comments{/number}`),
      commits: link(`${api}/pulls/${p.number}/commits`),
      statuses: link(`${api}/statuses/${p.head.sha}`),
    },
    author_association: "OWNER",
    auto_merge: null,
    draft: p.draft,
  };
  if (simple) return common;
  return {
    ...common,
    merged: p.mergedAt !== null,
    mergeable: p.state === "open" ? true : null,
    rebaseable: p.state === "open" ? true : null,
    mergeable_state: p.state === "open" ? "clean" : "unknown",
    merged_by: p.mergedAt ? user(base, r.owner) : null,
    comments: 0,
    review_comments: 0,
    maintainer_can_modify: false,
    commits: 1,
    additions: 1,
    deletions: 0,
    changed_files: 1,
  };
}

export function checkRun(base: string, r: FakeRepo, sha: string, c: FakeCheckRun) {
  const done = c.status === "completed";
  return {
    id: c.id,
    node_id: `CR_${c.id}`,
    head_sha: sha,
    external_id: null,
    url: `${base}/repos/${r.owner}/${r.name}/check-runs/${c.id}`,
    html_url: `${base}/${r.owner}/${r.name}/runs/${c.id}`,
    details_url: null,
    status: c.status,
    conclusion: done ? c.conclusion : null,
    started_at: T0,
    completed_at: done ? T0 : null,
    output: {
      title: null,
      summary: null,
      text: null,
      annotations_count: 0,
      annotations_url: `${base}/repos/${r.owner}/${r.name}/check-runs/${c.id}/annotations`,
    },
    name: c.name,
    check_suite: { id: 1 },
    app: null,
    pull_requests: [],
  };
}

export function combinedStatus(base: string, r: FakeRepo, sha: string, statuses: FakeStatus[]) {
  const states = statuses.map((s) => s.state);
  const state = states.some((s) => s === "failure" || s === "error")
    ? "failure"
    : states.length === 0 || states.includes("pending")
      ? "pending"
      : "success";
  const api = `${base}/repos/${r.owner}/${r.name}`;
  return {
    state,
    sha,
    total_count: statuses.length,
    statuses: statuses.map((s) => ({
      id: s.id,
      node_id: `ST_${s.id}`,
      state: s.state,
      context: s.context,
      description: null,
      target_url: null,
      avatar_url: null,
      url: `${api}/statuses/${sha}`,
      created_at: T0,
      updated_at: T0,
    })),
    repository: repository(base, r, false),
    commit_url: `${api}/commits/${sha}`,
    url: `${api}/commits/${sha}/status`,
  };
}

export function review(base: string, r: FakeRepo, n: number, v: FakeReview) {
  const html = `${base}/${r.owner}/${r.name}/pull/${n}#pullrequestreview-${v.id}`;
  const pr = `${base}/repos/${r.owner}/${r.name}/pulls/${n}`;
  return {
    id: v.id,
    node_id: `PRR_${v.id}`,
    user: user(base, v.user),
    body: "",
    state: v.state,
    html_url: html,
    pull_request_url: pr,
    _links: { html: { href: html }, pull_request: { href: pr } },
    submitted_at: v.submittedAt,
    commit_id: v.commitId,
    author_association: "COLLABORATOR",
  };
}
