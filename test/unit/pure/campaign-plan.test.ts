// The campaign planners (src/campaign/plan.ts): what publish, track, close and retry do to each
// changeset, decided by pure functions from the line's intent, its recorded changeset and what the
// forge and git report. One row per branch of each planner, each asserting the exact plan (or the
// exact Need it asks to be told first). No Redis, git or forge: the executor and the reads are held
// by campaign-e2e.test.ts.
import { describe, expect, it } from "vitest";
import { emptyUsage, type JobResult } from "../../../src/core/spec/spec.js";
import type { BatchJob } from "../../../src/batch/batch-types.js";
import type { Changeset } from "../../../src/campaign/changeset.js";
import type { CampaignDef } from "../../../src/campaign/store.js";
import { publishSettings, type PublishSettings } from "../../../src/campaign/publish-settings.js";
import { forgeGit } from "../../../src/campaign/forge/hosts.js";
import type { PreparedChange } from "../../../src/campaign/publish-git.js";
import {
  foreignBranch,
  keptBranch,
  planClose,
  notPublishable,
  planPublish,
  planRetry,
  planTrack,
  type CloseState,
  type Decision,
  type Keep,
  type PublishState,
  type TrackState,
} from "../../../src/campaign/plan.js";

const NOW = 5_000;
const [BASE, TIP, SHA, OLD] = ["a", "b", "c", "d"].map((x) => x.repeat(40)) as [string, string, string, string];
const publish = publishSettings(
  { title: "Fix {{name}}", body: "{{summary}}", commit: { message: "m: {{summaryLine}}" } },
  "camp",
) as PublishSettings;
const repo = { line: 1, git: "https://github.com/acme/api.git", ref: "main", vars: {} };
const def: CampaignDef = { name: "camp", createdAt: 0, publish, repos: [repo] };
const job = (o: Partial<NonNullable<BatchJob["result"]>> = {}, state: BatchJob["state"] = "finished"): BatchJob => ({
  line: 1,
  jobId: "camp-L1",
  state,
  result: {
    line: 1,
    status: "completed",
    verified: true,
    costUsd: 0.1,
    usage: emptyUsage(),
    turns: 2,
    totalMs: 10,
    filesChanged: 1,
    finishedAt: 1_000,
    ...o,
  },
});
const RESULT = {
  status: "completed",
  patch: "the patch",
  diffstat: " app.txt | 2 +-",
  baseCommit: BASE,
  verified: true,
  costUsd: 0.1,
  summary: "Fixed it.",
  verify: { exitCode: 0 },
} as unknown as JobResult;
const spec = { task: "Fix it.", verify: "npm test" };
const ps = (o: Partial<PublishState> = {}): PublishState => ({
  def,
  repo,
  job: job(),
  prev: undefined,
  forge: { kind: "github", api: true },
  options: { includeUnverified: false, dryRun: false, force: false },
  now: NOW,
  scrub: (t) => t.replaceAll("SECRET", "***"),
  ...o,
});
/** A line whose job is its own and whose result is read. */
const known = (o: Partial<PublishState> = {}) => ps({ refused: null, outcome: { result: RESULT, spec }, ...o });
const commit = (o: Partial<Extract<PreparedChange, { kind: "commit" }>> = {}): PreparedChange => ({
  kind: "commit",
  sha: SHA,
  target: "main",
  onto: BASE,
  rebased: false,
  diffstat: " app.txt | 2 +-",
  ...o,
});

const base: Changeset = { line: 1, repo: repo.git, jobId: "camp-L1", state: "unpublished", updatedAt: NOW };
const prevOpen: Changeset = {
  ...base,
  state: "draft",
  branch: "patchbay/camp",
  headSha: OLD,
  forge: "github",
  number: 7,
  url: "https://github.com/acme/api/pull/7",
  checks: "passing",
  updatedAt: 1,
};
const keep = (changeset: Changeset = base): Keep => ({ changeset, failure: "publish failed" });
const common: Changeset = { ...base, verified: true, branch: "patchbay/camp", forge: "github" };
const done: Changeset = { ...common, base: "main", onto: BASE, headSha: SHA, diffstat: " app.txt | 2 +-" };
const push = (o: object = {}) => ({
  op: "push" as const,
  why: "the branch is made, leased against any branch already there",
  branch: "patchbay/camp",
  sha: SHA,
  expect: null,
  force: false,
  ...o,
});
const record = (changeset: Changeset, why: string) => ({ op: "record" as const, why, changeset });
const NOT_PUBLISHED = "the line's job is not one to publish";
const unverified = "; publish --include-unverified publishes it marked as such";

const publishCases: [string, PublishState, Decision][] = [
  [
    "merged is final: nothing, the changeset shown as it stands",
    ps({ prev: { ...prevOpen, state: "merged" } }),
    {
      ops: [
        {
          op: "nothing",
          why: "the changeset is merged, which is final: it is not published again",
          shown: { ...prevOpen, state: "merged" },
        },
      ],
    },
  ],
  [
    "closed is final too",
    ps({ prev: { ...prevOpen, state: "closed" } }),
    {
      ops: [
        {
          op: "nothing",
          why: "the changeset is closed, which is final: it is not published again",
          shown: { ...prevOpen, state: "closed" },
        },
      ],
    },
  ],
  [
    "a dry run shows nothing of a final changeset",
    ps({ prev: { ...prevOpen, state: "merged" }, options: { includeUnverified: false, dryRun: true, force: false } }),
    { ops: [{ op: "nothing", why: "the changeset is merged, which is final: it is not published again" }] },
  ],
  [
    "a line never enqueued: unpublished",
    ps({ job: undefined }),
    { ops: [record({ ...base, jobId: "", reason: "its job has not finished (not enqueued)" }, NOT_PUBLISHED)] },
  ],
  [
    "a job still running: unpublished",
    ps({ job: { line: 1, jobId: "camp-L1", state: "running" } }),
    { ops: [record({ ...base, reason: "its job has not finished (running)" }, NOT_PUBLISHED)] },
  ],
  [
    "a failed job: unpublished, its error's first line",
    ps({ job: job({ status: "failed", error: "boom\nmore" }) }),
    { ops: [record({ ...base, reason: "its job ended failed: boom" }, NOT_PUBLISHED)] },
  ],
  [
    "a failed verify: unpublished",
    ps({ job: job({ verified: false }) }),
    { ops: [record({ ...base, reason: `its verify failed${unverified}` }, NOT_PUBLISHED)] },
  ],
  [
    "no verify: unpublished",
    ps({ job: job({ verified: undefined }) }),
    { ops: [record({ ...base, reason: `it had no verify${unverified}` }, NOT_PUBLISHED)] },
  ],
  [
    "a job that changed nothing: unpublished",
    ps({ job: job({ filesChanged: 0 }) }),
    { ops: [record({ ...base, reason: "its job changed nothing" }, NOT_PUBLISHED)] },
  ],
  [
    "a changeset on the forge keeps its state while its retried job runs",
    ps({ prev: prevOpen, job: { line: 1, jobId: "camp-L1-r1", state: "running" } }),
    { ops: [record({ ...prevOpen, reason: "its job has not finished (running)", updatedAt: NOW }, NOT_PUBLISHED)] },
  ],
  [
    "a conflict is not kept while its retried job runs",
    ps({ prev: { ...prevOpen, state: "conflict" }, job: { line: 1, jobId: "camp-L1-r1", state: "waiting" } }),
    { ops: [record({ ...base, jobId: "camp-L1-r1", reason: "its job has not finished (waiting)" }, NOT_PUBLISHED)] },
  ],
  [
    "a dry run records nothing",
    ps({ job: undefined, options: { includeUnverified: false, dryRun: true, force: false } }),
    { ops: [{ op: "nothing", why: `dry run, not recorded: ${NOT_PUBLISHED}` }] },
  ],
  [
    "publishable: is the job the line's own?",
    ps(),
    { need: "provenance", why: "only the line's own job is published" },
  ],
  [
    "--include-unverified publishes a failed verify",
    ps({ job: job({ verified: false }), options: { includeUnverified: true, dryRun: false, force: false } }),
    { need: "provenance", why: "only the line's own job is published" },
  ],
  [
    "a job a scripted model answered: not published, saying how to",
    ps({ job: job({ scripted: true }) }),
    {
      ops: [
        record(
          {
            ...base,
            reason:
              "a scripted model answered its job (a replayed script, not a model's work); publish --include-scripted publishes it",
          },
          NOT_PUBLISHED,
        ),
      ],
    },
  ],
  [
    "--include-scripted publishes it",
    ps({
      job: job({ scripted: true }),
      options: { includeUnverified: false, includeScripted: true, dryRun: false, force: false },
    }),
    { need: "provenance", why: "only the line's own job is published" },
  ],
  [
    "a job not the line's own: refused, counted, scrubbed",
    ps({ refused: "job camp-L1 is not line 1's own (SECRET)", prev: prevOpen }),
    {
      ops: [
        record(
          { ...prevOpen, reason: "publish refused: job camp-L1 is not line 1's own (***)", updatedAt: NOW },
          "the job under the line's id is not the line's own",
        ),
      ],
      error: true,
    },
  ],
  [
    "refused in a dry run: counted, not recorded",
    ps({ refused: "not its own", options: { includeUnverified: false, dryRun: true, force: false } }),
    {
      ops: [{ op: "nothing", why: "dry run, not recorded: the job under the line's id is not the line's own" }],
      error: true,
    },
  ],
  [
    "its own: the result is read",
    ps({ refused: null }),
    { need: "result", why: "the change is made from the job's result" },
  ],
  [
    "no result left: unpublished",
    known({ outcome: { result: undefined, spec } }),
    {
      ops: [
        record(
          {
            ...base,
            reason:
              "its result names no base commit (a job of a version before campaigns?): campaign retry runs it again",
          },
          "the result has no base commit to make the change on",
        ),
      ],
    },
  ],
  [
    "a result with no base commit: unpublished",
    known({ outcome: { result: { ...RESULT, baseCommit: undefined }, spec } }),
    {
      ops: [
        record(
          {
            ...base,
            reason:
              "its result names no base commit (a job of a version before campaigns?): campaign retry runs it again",
          },
          "the result has no base commit to make the change on",
        ),
      ],
    },
  ],
  [
    "a branch git refuses (a definition from before the check): failed, counted, scrubbed",
    known({
      def: { ...def, publish: { ...publish, branch: "bad..name" } },
      repo: { ...repo, git: "https://SECRET@github.com/acme/api.git" },
    }),
    {
      ops: [
        record(
          {
            ...base,
            repo: "https://***@github.com/acme/api.git",
            reason:
              'publish failed: publish.branch: "bad..name" is not a valid git branch name (for https://***@github.com/acme/api.git)',
          },
          "the branch name is not one git takes",
        ),
      ],
      error: true,
    },
  ],
  [
    "a dry run lists what would be pushed",
    known({ options: { includeUnverified: false, dryRun: true, force: false } }),
    {
      ops: [
        {
          op: "dry-run",
          why: "a dry run lists what would be pushed",
          planned: {
            line: 1,
            repo: repo.git,
            branch: "patchbay/camp",
            title: "Fix api",
            diffstat: RESULT.diffstat,
            verified: true,
          },
        },
      ],
    },
  ],
  [
    "the change is made on the repo's ref",
    known(),
    {
      need: "change",
      why: "git makes the change on the target branch's tip",
      change: {
        target: "main",
        baseCommit: BASE,
        patch: "the patch",
        author: publish.author,
        message: "m: Fixed it.",
        date: 1_000,
      },
      keep: keep(),
    },
  ],
  [
    "publish.base over the ref",
    known({ def: { ...def, publish: { ...publish, base: "develop" } } }),
    {
      need: "change",
      why: "git makes the change on the target branch's tip",
      change: {
        target: "develop",
        baseCommit: BASE,
        patch: "the patch",
        author: publish.author,
        message: "m: Fixed it.",
        date: 1_000,
      },
      keep: keep(),
    },
  ],
  [
    "neither base nor ref: the remote's HEAD branch (no target)",
    known({ repo: { ...repo, ref: undefined } }),
    {
      need: "change",
      why: "git makes the change on the target branch's tip",
      change: { baseCommit: BASE, patch: "the patch", author: publish.author, message: "m: Fixed it.", date: 1_000 },
      keep: keep(),
    },
  ],
  [
    "the target has the change: unpublished",
    known({ change: { kind: "empty" } }),
    {
      ops: [
        record(
          { ...common, reason: "the change is already on the target branch (nothing to push)" },
          "the target branch has the change already",
        ),
      ],
    },
  ],
  [
    "a conflict keeps what the forge had, says where",
    known({ prev: prevOpen, change: { kind: "conflict", target: "main", onto: TIP, files: ["app.txt"], detail: "" } }),
    {
      ops: [
        record(
          {
            ...prevOpen,
            ...common,
            state: "conflict",
            base: "main",
            onto: TIP,
            reason:
              "the target main moved since the job ran and the patch conflicts in app.txt: campaign retry --status conflict runs it again on the new base",
          },
          "the change conflicts with the target branch's tip",
        ),
      ],
    },
  ],
  [
    "a conflict git named no file of",
    known({ change: { kind: "conflict", target: "main", onto: TIP, files: [], detail: "" } }),
    {
      ops: [
        record(
          {
            ...common,
            state: "conflict",
            base: "main",
            onto: TIP,
            reason:
              "the target main moved since the job ran and the patch conflicts in some files: campaign retry --status conflict runs it again on the new base",
          },
          "the change conflicts with the target branch's tip",
        ),
      ],
    },
  ],
  [
    "the target is the branch (the remote's HEAD): failed, counted",
    known({
      def: { ...def, publish: { ...publish, branch: "trunk" } },
      repo: { ...repo, ref: undefined },
      change: commit({ target: "trunk" }),
    }),
    {
      ops: [
        record(
          {
            ...base,
            reason:
              "publish failed: publish.branch \"trunk\" is the branch the change is for (the repository's HEAD branch): publish to a branch of the campaign's own",
          },
          "the branch is the target branch",
        ),
      ],
      error: true,
    },
  ],
  [
    "a forge with an API: is a pull request open already?",
    known({ change: commit() }),
    {
      need: "pull-request",
      why: "an open pull request of the branch is updated, not opened again",
      head: "patchbay/camp",
      base: "main",
      keep: keep(),
    },
  ],
  [
    "none open: push, open a draft, record",
    known({ change: commit(), open: null }),
    {
      ops: [
        push(),
        {
          op: "open",
          why: "the branch has no open pull request",
          pr: { head: "patchbay/camp", base: "main", title: "Fix api", body: "Fixed it.", draft: true },
        },
        record(
          { ...done, state: "draft" },
          "the pull request opened (its state, number and page as the forge answers)",
        ),
      ],
      keep: keep(),
    },
  ],
  [
    "draft: false opens it ready for review",
    known({ def: { ...def, publish: { ...publish, draft: false } }, change: commit(), open: null }),
    {
      ops: [
        push(),
        {
          op: "open",
          why: "the branch has no open pull request",
          pr: { head: "patchbay/camp", base: "main", title: "Fix api", body: "Fixed it.", draft: false },
        },
        record({ ...done, state: "open" }, "the pull request opened (its state, number and page as the forge answers)"),
      ],
      keep: keep(),
    },
  ],
  [
    "one open: push (leased on the last push, forced), update its title and body, record",
    known({
      prev: prevOpen,
      change: commit(),
      open: { number: 7, url: prevOpen.url!, state: "open" },
      options: { includeUnverified: false, dryRun: false, force: true },
    }),
    {
      ops: [
        push({
          why: "the branch is set to the change, leased against the commit patchbay pushed last",
          expect: OLD,
          force: true,
        }),
        {
          op: "update",
          why: "the branch has an open pull request already",
          number: 7,
          title: "Fix api",
          body: "Fixed it.",
        },
        record({ ...done, state: "open", number: 7, url: prevOpen.url! }, "the pull request found open"),
      ],
      keep: keep(prevOpen),
    },
  ],
  [
    "a plain remote: push, record open (the page it had kept)",
    known({
      forge: { kind: "git", api: false },
      prev: { ...base, state: "open", url: "https://example.com/x", headSha: OLD },
      change: commit(),
    }),
    {
      ops: [
        push({ why: "the branch is set to the change, leased against the commit patchbay pushed last", expect: OLD }),
        record(
          { ...done, forge: "git", state: "open", url: "https://example.com/x" },
          "a branch alone: the host has no forge API patchbay can use",
        ),
      ],
      keep: keep({ ...base, state: "open", url: "https://example.com/x", headSha: OLD }),
    },
  ],
  [
    "GitHub without a token: a branch alone",
    known({ forge: { kind: "github", api: false }, change: commit() }),
    {
      ops: [push(), record({ ...done, state: "open" }, "a branch alone: the host has no forge API patchbay can use")],
      keep: keep(),
    },
  ],
  [
    "GitLab without a token: the push opens the merge request",
    known({ forge: { kind: "gitlab", api: false }, change: commit() }),
    {
      ops: [
        push({
          pushOptions: ["merge_request.create", "merge_request.target=main", "merge_request.title=Draft: Fix api"],
        }),
        record(
          { ...done, forge: "gitlab", state: "open" },
          "the push opens the merge request itself (no API token for the host)",
        ),
      ],
      keep: keep(),
    },
  ],
];

describe("planPublish", () => {
  it.each(publishCases)("%s", (_name, state, plan) => {
    expect(planPublish(state)).toStrictEqual(plan);
  });

  it("a job a scripted model answered: not published, saying how to, unless --include-scripted", () => {
    expect(notPublishable(job({ scripted: true }), false)).toMatch(/scripted model answered.*--include-scripted/);
    expect(notPublishable(job({ scripted: true }), false, true)).toBeUndefined();
    expect(notPublishable(job(), false)).toBeUndefined();
  });

  // A changeset's reason and repo are shown by `campaign status` and the dashboard, and kept in
  // Redis: whatever branch a plan takes, a credential in the line's git URL must be scrubbed first.
  it("a changeset's reason and repo hold no URL userinfo, whichever branch the plan takes", () => {
    const git = "https://x-access-token:SECRET@github.com/acme/api.git";
    for (const [name, state] of publishCases) {
      const plan = JSON.stringify(planPublish({ ...state, repo: { ...state.repo, git } }));
      expect(plan, name).not.toContain("SECRET");
    }
  });
});

const ts = (changeset: Changeset, o: Partial<TrackState> = {}): TrackState => ({
  changeset,
  listed: true,
  forge: { api: true },
  now: NOW,
  ...o,
});
const status = (state: "draft" | "open" | "merged" | "closed") =>
  ({ number: 7, url: "https://github.com/acme/api/pull/7#x", state, checks: "failing", review: "approved" }) as const;
const { reason: _, ...prevNoReason } = { ...prevOpen, reason: "track failed: earlier" };
const trackKeep = (c: Changeset): Keep => ({ changeset: c, failure: "track failed" });
const plainOpen: Changeset = { ...base, state: "open", forge: "git", branch: "patchbay/camp", headSha: SHA };

const trackCases: [string, TrackState, Decision][] = [
  ["merged: nothing", ts({ ...prevOpen, state: "merged" }), { ops: [{ op: "nothing", why: "merged is final" }] }],
  [
    "closed with no pull request: nothing",
    ts({ ...plainOpen, state: "closed" }),
    { ops: [{ op: "nothing", why: "closed, with no pull request that could be reopened" }] },
  ],
  ["unpublished: nothing", ts(base), { ops: [{ op: "nothing", why: "an unpublished changeset is on no forge" }] }],
  [
    "a conflict: nothing",
    ts({ ...base, state: "conflict" }),
    { ops: [{ op: "nothing", why: "a changeset in conflict is on no forge" }] },
  ],
  [
    "a line the definition no longer lists: nothing",
    ts(prevOpen, { listed: false }),
    { ops: [{ op: "nothing", why: "the campaign's definition no longer lists its repository" }] },
  ],
  [
    "open with a pull request: the forge is asked",
    ts(prevOpen),
    { need: "status", why: "the forge says where its pull request is", number: 7, keep: trackKeep(prevOpen) },
  ],
  [
    "a closed pull request is asked too (it may be reopened)",
    ts({ ...prevOpen, state: "closed" }),
    {
      need: "status",
      why: "the forge says where its pull request is",
      number: 7,
      keep: trackKeep({ ...prevOpen, state: "closed" }),
    },
  ],
  [
    "merged on the forge: mark merged, the old reason gone",
    ts({ ...prevOpen, reason: "track failed: earlier" }, { status: status("merged") }),
    {
      ops: [
        record(
          {
            ...prevNoReason,
            state: "merged",
            checks: "failing",
            review: "approved",
            url: "https://github.com/acme/api/pull/7#x",
            updatedAt: NOW,
          },
          "mark merged: the forge says so",
        ),
      ],
      keep: trackKeep({ ...prevOpen, reason: "track failed: earlier" }),
    },
  ],
  [
    "closed on the forge: mark closed",
    ts(prevOpen, { status: status("closed") }),
    {
      ops: [
        record(
          {
            ...prevOpen,
            state: "closed",
            checks: "failing",
            review: "approved",
            url: "https://github.com/acme/api/pull/7#x",
            updatedAt: NOW,
          },
          "mark closed: the forge says so",
        ),
      ],
      keep: trackKeep(prevOpen),
    },
  ],
  [
    "still open: its checks and review",
    ts(prevOpen, { status: status("open") }),
    {
      ops: [
        record(
          {
            ...prevOpen,
            state: "open",
            checks: "failing",
            review: "approved",
            url: "https://github.com/acme/api/pull/7#x",
            updatedAt: NOW,
          },
          "the forge's state, checks and review",
        ),
      ],
      keep: trackKeep(prevOpen),
    },
  ],
  [
    "a plain remote: the branch is asked",
    ts(plainOpen, { forge: { api: false } }),
    {
      need: "branch",
      why: "with no pull request to read, the branch says whether it is still open",
      branch: "patchbay/camp",
      keep: trackKeep(plainOpen),
    },
  ],
  [
    "a forge with a token but no number (GitLab's push-made MR): the branch too",
    ts(plainOpen),
    {
      need: "branch",
      why: "with no pull request to read, the branch says whether it is still open",
      branch: "patchbay/camp",
      keep: trackKeep(plainOpen),
    },
  ],
  [
    "the branch gone: mark closed",
    ts(plainOpen, { forge: { api: false }, tip: null }),
    {
      ops: [
        record(
          { ...plainOpen, state: "closed", reason: "the branch is gone from the remote", updatedAt: NOW },
          "mark closed: the branch is gone",
        ),
      ],
      keep: trackKeep(plainOpen),
    },
  ],
  [
    "the branch there: nothing changes but the time",
    ts(plainOpen, { forge: { api: false }, tip: OLD }),
    {
      ops: [record({ ...plainOpen, updatedAt: NOW }, "the branch is still there: nothing changed")],
      keep: trackKeep(plainOpen),
    },
  ],
  [
    "no branch recorded: closed",
    ts({ ...base, state: "open" }, { forge: { api: false } }),
    {
      ops: [
        record(
          { ...base, state: "closed", reason: "the branch is gone from the remote", updatedAt: NOW },
          "mark closed: the branch is gone",
        ),
      ],
      keep: trackKeep({ ...base, state: "open" }),
    },
  ],
];

describe("planTrack", () => {
  it.each(trackCases)("%s", (_name, state, plan) => {
    expect(planTrack(state)).toStrictEqual(plan);
  });
});

const cs = (changeset: Changeset, o: Partial<CloseState> = {}): CloseState => ({
  changeset,
  listed: true,
  forge: { api: true },
  now: NOW,
  ...o,
});
const closedRecord = (c: Changeset) =>
  record({ ...c, state: "closed", reason: "closed by campaign close", updatedAt: NOW }, "mark closed");
const closeKeep = (c: Changeset): Keep => ({ changeset: c, failure: "close failed" });
const closePr = { op: "close" as const, why: "its pull request is open on the forge", number: 7 };
const deleteIt = {
  op: "delete-branch" as const,
  why: "the branch patchbay pushed goes with it, unless it has commits patchbay did not push",
  branch: "patchbay/camp",
  expect: OLD,
};

const closeCases: [string, CloseState, Decision][] = [
  [
    "merged: nothing",
    cs({ ...prevOpen, state: "merged" }),
    { ops: [{ op: "nothing", why: "only open changesets are closed; this one is merged" }] },
  ],
  [
    "unpublished: nothing",
    cs(base),
    { ops: [{ op: "nothing", why: "only open changesets are closed; this one is unpublished" }] },
  ],
  [
    "a line the definition no longer lists: nothing",
    cs(prevOpen, { listed: false }),
    { ops: [{ op: "nothing", why: "the campaign's definition no longer lists its repository" }] },
  ],
  [
    "a pull request and its branch: close, delete, record",
    cs(prevOpen),
    { ops: [closePr, deleteIt, closedRecord(prevOpen)], keep: closeKeep(prevOpen) },
  ],
  [
    "no API for the host: the branch alone",
    cs(prevOpen, { forge: { api: false } }),
    { ops: [deleteIt, closedRecord(prevOpen)], keep: closeKeep(prevOpen) },
  ],
  [
    "no commit recorded: the pull request alone (the branch is never deleted unleased)",
    cs({ ...prevOpen, headSha: undefined }),
    {
      ops: [closePr, closedRecord({ ...prevOpen, headSha: undefined })],
      keep: closeKeep({ ...prevOpen, headSha: undefined }),
    },
  ],
  [
    "neither: recorded closed",
    cs({ ...base, state: "open" }),
    { ops: [closedRecord({ ...base, state: "open" })], keep: closeKeep({ ...base, state: "open" }) },
  ],
];

describe("planClose", () => {
  it.each(closeCases)("%s", (_name, state, plan) => {
    expect(planClose(state)).toStrictEqual(plan);
  });
});

describe("planRetry", () => {
  const lineJob = (line: number, status: "failed" | "completed"): BatchJob => ({
    ...job({ line, status }),
    line,
    jobId: `camp-L${line}`,
  });
  const jobs = [lineJob(2, "failed"), lineJob(3, "completed"), lineJob(4, "failed")];
  const changesets: Changeset[] = [
    { ...base, line: 1, state: "conflict" },
    { ...base, line: 4, state: "conflict" },
    { ...prevOpen, line: 5 },
  ];
  it("conflicts and job statuses, each line once, in that order, with why", () => {
    expect(planRetry(changesets, jobs, { states: ["conflict"], statuses: ["failed"] })).toStrictEqual([
      { op: "rerun", line: 1, why: "its changeset is conflict" },
      { op: "rerun", line: 4, why: "its changeset is conflict" },
      { op: "rerun", line: 2, why: "its job ended failed" },
    ]);
  });
  it("nothing asked, or nothing matching: no rerun", () => {
    expect(planRetry(changesets, jobs, {})).toStrictEqual([]);
    expect(planRetry(changesets, jobs, { statuses: ["timeout"] })).toStrictEqual([]);
  });
});

describe("what the executor says of what it meets", () => {
  it("a foreign branch at push and at delete", () => {
    expect(foreignBranch("patchbay/camp", TIP)).toBe(
      `branch patchbay/camp is at ${"b".repeat(12)}, a commit patchbay did not push: publish --force replaces it`,
    );
    expect(keptBranch("patchbay/camp", TIP)).toBe(
      `branch patchbay/camp kept: it has commits patchbay did not push (at ${"b".repeat(12)})`,
    );
  });
  it("each host's git: the token's user; GitLab's push options one line each", () => {
    expect([forgeGit("github").tokenUser, forgeGit("gitlab").tokenUser]).toEqual(["x-access-token", "oauth2"]);
    expect(typeof forgeGit("github").pushOptions).toBe("undefined"); // typeof, so no unbound method is passed around
    expect(forgeGit("gitlab").pushOptions!({ base: "ma\nin", title: "a\r\nb", draft: false })).toEqual([
      "merge_request.create",
      "merge_request.target=ma in",
      "merge_request.title=a b",
    ]);
  });
});
