// What to do to one changeset, decided by pure functions, as Sourcegraph's reconciler decides with
// DeterminePlan beside its executor. Each command has a planner: it takes the campaign's intent for
// the line (its definition and its job's result), the changeset as recorded, and what the forge and
// git report now, and returns a Plan: a short list of operations, each with the reason for it. The
// executor (execute.ts) carries the plan out. A planner that must know more before it can decide
// (whether the job is the line's own, its result, the commit the change makes, the open pull
// request, the branch's tip) returns a Need instead; the command reads that (publish.ts, track.ts)
// and asks again. No I/O here and no clock: `now` is given.
import type { JobResult, JobStatus } from "../core/spec/spec.js";
import type { BatchJob } from "../batch/batch-types.js";
import { redact } from "../git/credentials.js";
import { isOpen, type Changeset } from "./changeset.js";
import type { CampaignDef } from "./store.js";
import { render } from "./template.js";
import { branchName, outcomeValues } from "./change-text.js";
import { inertTitle } from "./inert-text.js";
import type { PullRequestInput, PullRequestRef, PullRequestStatus } from "./forge/forge.js";
import { forgeGit } from "./forge/hosts.js";
import type { PreparedChange } from "./publish-git.js";

/** What a dry run would do for one repository. */
export interface PlannedChange {
  /** The repository's line in the campaign (its batch line). */
  line: number;
  /** The repository's git URL, as in the campaign file but without userinfo. */
  repo: string;
  /** The branch the change would be pushed to. */
  branch: string;
  /** The pull request's title, rendered from the campaign's template. */
  title: string;
  /** The job's patch as `git diff --stat` shows it. */
  diffstat: string;
  /** Whether the job's verify passed: false for a patch published with includeUnverified. */
  verified: boolean;
}

/** One step the executor takes, with the reason the planner chose it. */
export type Operation =
  /** Nothing is done; `shown` is the changeset as it stands, listed in the command's report. */
  | { op: "nothing"; why: string; shown?: Changeset }
  /** A dry run's line: what would be pushed, listed in the report. */
  | { op: "dry-run"; why: string; planned: PlannedChange }
  /** The branch set to `sha`, leased against `expect` (null: it must not exist yet). */
  | {
      op: "push";
      why: string;
      branch: string;
      sha: string;
      expect: string | null;
      force: boolean;
      pushOptions?: string[];
    }
  /** A pull request (merge request) opened on the forge. */
  | { op: "open"; why: string; pr: PullRequestInput }
  /** The open pull request's title and body brought up to date. */
  | { op: "update"; why: string; number: number; title: string; body: string }
  | { op: "close"; why: string; number: number }
  /** The branch deleted if it is still at `expect`. */
  | { op: "delete-branch"; why: string; branch: string; expect: string }
  /** The changeset saved, with what the operations before it learned (see execute.ts). */
  | { op: "record"; why: string; changeset: Changeset };

/** The changeset that stays when an operation fails (its reason then `failure: <the error>`), or when a push finds a commit patchbay did not push. */
export interface Keep {
  changeset: Changeset;
  failure: "publish failed" | "track failed" | "close failed";
}

export interface Plan {
  ops: Operation[];
  /** The line counts among the command's errors (its changeset says why). */
  error?: true;
  /** Without it, a failure is the whole command's. */
  keep?: Keep;
}

/** What the job's change is made from, on the host: prepareChange's inputs. */
export interface ChangeInput {
  /** The branch the change is for; undefined: the remote's HEAD branch. */
  target?: string;
  baseCommit: string;
  patch: string;
  author: { name: string; email: string };
  message: string;
  /** The job's finish time (ms): the commit's dates. */
  date: number;
}

/** What a planner must be told before it decides; `keep` says what stays if reading it fails. */
export type Need =
  | { need: "provenance"; why: string }
  | { need: "result"; why: string }
  | { need: "change"; why: string; change: ChangeInput; keep: Keep }
  | { need: "pull-request"; why: string; head: string; base: string; keep: Keep }
  | { need: "status"; why: string; number: number; keep: Keep }
  | { need: "branch"; why: string; branch: string; keep: Keep };

export type Decision = Plan | Need;

export const isNeed = (d: Decision): d is Need => "need" in d;

const record = (changeset: Changeset, why: string, keep?: Keep): Plan => ({
  ops: [{ op: "record", why, changeset }],
  ...(keep ? { keep } : {}),
});
const nothing = (why: string, shown?: Changeset): Plan => ({
  ops: [{ op: "nothing", why, ...(shown ? { shown } : {}) }],
});

/** The reason a changeset keeps when its branch holds a commit patchbay did not push. */
export const foreignBranch = (branch: string, sha: string) =>
  `branch ${branch} is at ${sha.slice(0, 12)}, a commit patchbay did not push: publish --force replaces it`;
/** The reason a closed changeset keeps when its branch was not deleted. */
export const keptBranch = (branch: string, sha: string) =>
  `branch ${branch} kept: it has commits patchbay did not push (at ${sha.slice(0, 12)})`;

// ---- publish ----

export interface PublishState {
  def: CampaignDef;
  repo: CampaignDef["repos"][number];
  /** The line's latest job as its batch reports it; undefined: never enqueued. */
  job: BatchJob | undefined;
  /** The changeset as recorded; undefined: never recorded. */
  prev: Changeset | undefined;
  /** The repository's host: a forge with an API client (a token was given for it), a forge without, or a plain remote. */
  forge: { kind: "github" | "gitlab" | "git"; api: boolean };
  options: { includeUnverified: boolean; includeScripted?: boolean; dryRun: boolean; force: boolean };
  now: number;
  /** Hides the Config's tokens and URL userinfo in a text a changeset keeps. */
  scrub(text: string): string;
  /** Why the job under the line's id is not the line's own; null: it is. Read on `provenance`. */
  refused?: string | null;
  /** The job's result (undefined: the queue has none) and its task and verify. Read on `result`. */
  outcome?: { result: JobResult | undefined; spec: { task: string; verify?: string } };
  /** The commit the change makes on the target's tip, or why it makes none. Read on `change`. */
  change?: PreparedChange;
  /** The open pull request of the branch; null: there is none. Read on `pull-request`. */
  open?: PullRequestRef | null;
}

/** Why a line's job is not published, or undefined when it is to be. */
export function notPublishable(
  job: BatchJob | undefined,
  includeUnverified: boolean,
  includeScripted = false,
): string | undefined {
  const r = job?.result;
  if (!job || !r) return `its job has not finished (${job?.state ?? "not enqueued"})`;
  if (r.status !== "completed")
    return `its job ended ${r.status}${r.error ? `: ${r.error.split("\n")[0]!.slice(0, 200)}` : ""}`;
  if (r.verified !== true && !includeUnverified)
    return `${r.verified === false ? "its verify failed" : "it had no verify"}; publish --include-unverified publishes it marked as such`;
  if (r.scripted && !includeScripted)
    return "a scripted model answered its job (a replayed script, not a model's work); publish --include-scripted publishes it";
  if (!r.filesChanged) return "its job changed nothing";
  return undefined;
}

/** `campaign publish` for one line: its job's result made a branch and, on a forge, a pull request. */
export function planPublish(s: PublishState): Decision {
  const d = decidePublish(s);
  if (!s.options.dryRun || isNeed(d)) return d;
  // A dry run records nothing and shows nothing as it stands: it lists what would be pushed.
  return {
    ...d,
    ops: d.ops.map((o): Operation =>
      o.op === "record"
        ? { op: "nothing", why: `dry run, not recorded: ${o.why}` }
        : o.op === "nothing"
          ? { op: "nothing", why: o.why }
          : o,
    ),
  };
}

function decidePublish(s: PublishState): Decision {
  const { prev } = s;
  // Merged and closed are final here: a closed pull request is not opened again behind its closer's back.
  if (prev && (prev.state === "merged" || prev.state === "closed"))
    return nothing(`the changeset is ${prev.state}, which is final: it is not published again`, prev);
  const base: Changeset = {
    line: s.repo.line,
    repo: redact(s.repo.git),
    jobId: s.job?.jobId ?? "",
    state: "unpublished",
    updatedAt: s.now,
  };
  const why = notPublishable(s.job, s.options.includeUnverified, s.options.includeScripted);
  // A changeset already on a forge keeps its state when its job is retried and not finished yet.
  if (why)
    return record(
      prev && isOpen(prev) ? { ...prev, reason: why, updatedAt: s.now } : { ...base, reason: why },
      "the line's job is not one to publish",
    );
  if (s.refused === undefined) return { need: "provenance", why: "only the line's own job is published" };
  if (s.refused !== null)
    return {
      ...record(
        { ...(prev ?? base), reason: `publish refused: ${s.scrub(s.refused).slice(0, 500)}`, updatedAt: s.now },
        "the job under the line's id is not the line's own",
      ),
      error: true,
    };
  if (!s.outcome) return { need: "result", why: "the change is made from the job's result" };
  const r = s.outcome.result;
  if (!r?.baseCommit)
    return record(
      {
        ...base,
        reason: "its result names no base commit (a job of a version before campaigns?): campaign retry runs it again",
      },
      "the result has no base commit to make the change on",
    );
  let branch: string;
  try {
    branch = branchName(s.def, s.repo); // checked when the file was read; a definition from before is this repository's error alone
  } catch (err) {
    return failed(s, prev ?? base, (err as Error).message, "the branch name is not one git takes");
  }
  const values = outcomeValues(s.def, s.repo, s.job!.jobId, r, s.outcome.spec);
  const texts = {
    branch,
    title: render(s.def.publish.title, outcomeValues(s.def, s.repo, s.job!.jobId, r, s.outcome.spec, inertTitle)),
    body: render(s.def.publish.body, values),
    message: render(s.def.publish.message, values),
  };
  if (s.options.dryRun)
    return {
      ops: [
        {
          op: "dry-run",
          why: "a dry run lists what would be pushed",
          planned: {
            line: s.repo.line,
            repo: base.repo,
            branch,
            title: texts.title,
            diffstat: r.diffstat,
            verified: r.verified === true,
          },
        },
      ],
    };
  return planChange(s, base, r, texts);
}

/** A failure of this line alone, known before anything was done: counted, and its changeset says why. */
function failed(s: PublishState, keep: Changeset, message: string, why: string): Plan {
  return {
    ...record({ ...keep, reason: `publish failed: ${s.scrub(message).slice(0, 500)}`, updatedAt: s.now }, why),
    error: true,
  };
}

/** A change that makes a commit on the target's tip: the one kind that is pushed. */
type CommitChange = Extract<PreparedChange, { kind: "commit" }>;

interface Texts {
  branch: string;
  title: string;
  body: string;
  message: string;
}

function planChange(s: PublishState, base: Changeset, r: JobResult, t: Texts): Decision {
  const keep: Keep = { changeset: s.prev ?? base, failure: "publish failed" };
  const change = s.change;
  if (!change) {
    const target = s.def.publish.base ?? s.repo.ref;
    const input: ChangeInput = {
      ...(target ? { target } : {}),
      baseCommit: r.baseCommit!,
      patch: r.patch,
      author: s.def.publish.author,
      message: t.message,
      date: s.job!.result!.finishedAt,
    };
    return { need: "change", why: "git makes the change on the target branch's tip", change: input, keep };
  }
  // The target known only now (the remote's HEAD branch): a push to it would skip the pull request.
  if (change.kind !== "empty" && change.target === t.branch)
    return failed(
      s,
      keep.changeset,
      `publish.branch ${JSON.stringify(t.branch)} is the branch the change is for (the repository's HEAD branch): publish to a branch of the campaign's own`,
      "the branch is the target branch",
    );
  const common: Changeset = {
    ...base,
    verified: r.verified === true,
    branch: t.branch,
    forge: s.forge.kind,
    updatedAt: s.now,
  };
  if (change.kind === "empty")
    return record(
      { ...common, reason: "the change is already on the target branch (nothing to push)" },
      "the target branch has the change already",
    );
  if (change.kind === "conflict") {
    const reason = `the target ${change.target} moved since the job ran and the patch conflicts in ${change.files.slice(0, 10).join(", ") || "some files"}: campaign retry --status conflict runs it again on the new base`;
    return record(
      { ...(s.prev ?? {}), ...common, state: "conflict", base: change.target, onto: change.onto, reason },
      "the change conflicts with the target branch's tip",
    );
  }
  return planPush(s, common, change, t, keep);
}

/**
 * planPush asks the forge for the branch's open pull request first (with an API client), then plans
 * the leased push and what follows it on this host, so that a pull request is updated, not opened twice.
 */
function planPush(s: PublishState, common: Changeset, change: CommitChange, t: Texts, keep: Keep): Decision {
  const { api, kind } = s.forge;
  if (api && s.open === undefined)
    return {
      need: "pull-request",
      why: "an open pull request of the branch is updated, not opened again",
      head: t.branch,
      base: change.target,
      keep,
    };
  const pushOptions =
    !api && kind !== "git"
      ? forgeGit(kind).pushOptions?.({ base: change.target, title: t.title, draft: s.def.publish.draft })
      : undefined;
  const done: Changeset = {
    ...common,
    base: change.target,
    onto: change.onto,
    headSha: change.sha,
    diffstat: change.diffstat.slice(0, 4000),
  };
  const after = !api
    ? [recordWithoutApi(s, done, pushOptions)]
    : s.open
      ? updateOpen(s.open, done, t)
      : openPullRequest(s, done, change, t);
  return { ops: [pushOperation(s, change, t, pushOptions), ...after], keep };
}

/** pushOperation sets the branch to the change's commit, leased against the commit patchbay pushed last, so that a commit it did not push is never lost. */
function pushOperation(s: PublishState, change: CommitChange, t: Texts, pushOptions: string[] | undefined): Operation {
  return {
    op: "push",
    why: s.prev?.headSha
      ? "the branch is set to the change, leased against the commit patchbay pushed last"
      : "the branch is made, leased against any branch already there",
    branch: t.branch,
    sha: change.sha,
    expect: s.prev?.headSha ?? null,
    force: s.options.force,
    ...(pushOptions ? { pushOptions } : {}),
  };
}

/** recordWithoutApi records the pushed branch as open on a host patchbay has no forge API for, since the push is all it can do there. */
function recordWithoutApi(s: PublishState, done: Changeset, pushOptions: string[] | undefined): Operation {
  const why = pushOptions
    ? "the push opens the merge request itself (no API token for the host)"
    : "a branch alone: the host has no forge API patchbay can use";
  return { op: "record", why, changeset: { ...done, state: "open", ...(s.prev?.url ? { url: s.prev.url } : {}) } };
}

/** updateOpen brings the branch's open pull request's title and body up to date, so that a publish run again opens no second one. */
function updateOpen(open: PullRequestRef, done: Changeset, t: Texts): Operation[] {
  const { number, state, url } = open;
  return [
    { op: "update", why: "the branch has an open pull request already", number, title: t.title, body: t.body },
    { op: "record", why: "the pull request found open", changeset: { ...done, state, number, url } },
  ];
}

/** openPullRequest opens the branch's pull request on the forge (a draft if the campaign says so), since it has none open. */
function openPullRequest(s: PublishState, done: Changeset, change: CommitChange, t: Texts): Operation[] {
  const pr: PullRequestInput = {
    head: t.branch,
    base: change.target,
    title: t.title,
    body: t.body,
    draft: s.def.publish.draft,
  };
  const opened: Changeset = { ...done, state: pr.draft ? "draft" : "open" };
  return [
    { op: "open", why: "the branch has no open pull request", pr },
    {
      op: "record",
      why: "the pull request opened (its state, number and page as the forge answers)",
      changeset: opened,
    },
  ];
}

// ---- track ----

export interface TrackState {
  changeset: Changeset;
  /** Whether the campaign's definition still lists the line's repository. */
  listed: boolean;
  forge: { api: boolean };
  now: number;
  /** The pull request as the forge reports it. Read on `status`. */
  status?: PullRequestStatus;
  /** The commit the branch is at on the remote; null: it is gone. Read on `branch`. */
  tip?: string | null;
}

/** `campaign track` for one changeset: its state, checks and review brought up to date from its forge (a plain remote: whether the branch is still there). */
export function planTrack(s: TrackState): Decision {
  const c = s.changeset;
  // A closed pull request may be reopened; merged is final.
  if (!isOpen(c) && !(c.state === "closed" && c.number))
    return nothing(
      c.state === "merged"
        ? "merged is final"
        : c.state === "closed"
          ? "closed, with no pull request that could be reopened"
          : `${c.state === "conflict" ? "a changeset in conflict" : "an unpublished changeset"} is on no forge`,
    );
  if (!s.listed) return nothing("the campaign's definition no longer lists its repository");
  const keep: Keep = { changeset: c, failure: "track failed" };
  if (s.forge.api && c.number) {
    if (!s.status) return { need: "status", why: "the forge says where its pull request is", number: c.number, keep };
    const { reason: _, ...rest } = c;
    const { state, checks, review, url } = s.status;
    const why =
      state === "merged" || state === "closed"
        ? `mark ${state}: the forge says so`
        : "the forge's state, checks and review";
    return record({ ...rest, state, checks, review, url, updatedAt: s.now }, why, keep);
  }
  if (c.branch && s.tip === undefined)
    return {
      need: "branch",
      why: "with no pull request to read, the branch says whether it is still open",
      branch: c.branch,
      keep,
    };
  if (!c.branch || s.tip === null)
    return record(
      { ...c, state: "closed", reason: "the branch is gone from the remote", updatedAt: s.now },
      "mark closed: the branch is gone",
      keep,
    );
  return record({ ...c, updatedAt: s.now }, "the branch is still there: nothing changed", keep);
}

// ---- close ----

export interface CloseState {
  changeset: Changeset;
  listed: boolean;
  forge: { api: boolean };
  now: number;
}

/** `campaign close` for one changeset: its pull request closed, its branch deleted (only if still where patchbay left it). */
export function planClose(s: CloseState): Plan {
  const c = s.changeset;
  if (!isOpen(c)) return nothing(`only open changesets are closed; this one is ${c.state}`);
  if (!s.listed) return nothing("the campaign's definition no longer lists its repository");
  const ops: Operation[] = [];
  if (s.forge.api && c.number)
    ops.push({ op: "close", why: "its pull request is open on the forge", number: c.number });
  if (c.branch && c.headSha)
    ops.push({
      op: "delete-branch",
      why: "the branch patchbay pushed goes with it, unless it has commits patchbay did not push",
      branch: c.branch,
      expect: c.headSha,
    });
  ops.push({
    op: "record",
    why: "mark closed",
    changeset: { ...c, state: "closed", reason: "closed by campaign close", updatedAt: s.now },
  });
  return { ops, keep: { changeset: c, failure: "close failed" } };
}

// ---- retry ----

export interface Rerun {
  op: "rerun";
  line: number;
  why: string;
}

/** `campaign retry`: the lines run again, those whose changeset is in one of `states` or whose latest job ended with one of `statuses`. */
export function planRetry(
  changesets: readonly Changeset[],
  jobs: readonly BatchJob[],
  o: { states?: readonly Changeset["state"][]; statuses?: readonly JobStatus[] },
): Rerun[] {
  const out = new Map<number, Rerun>();
  for (const c of changesets)
    if (o.states?.includes(c.state) && !out.has(c.line))
      out.set(c.line, { op: "rerun", line: c.line, why: `its changeset is ${c.state}` });
  for (const j of jobs)
    if (j.result && o.statuses?.includes(j.result.status) && !out.has(j.line))
      out.set(j.line, { op: "rerun", line: j.line, why: `its job ended ${j.result.status}` });
  return [...out.values()];
}
