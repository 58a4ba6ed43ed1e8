// The executor: one repository's plan (plan.ts) carried out, in order, through its forge's API (the
// Forge interface) and host git (publish-git.ts), and its changeset recorded in the campaign's
// store. It decides nothing the plan did not. What an operation learns goes into the `record` after
// it: the pull request an `open` made (its state, number and page, as the forge answers), the note
// of a branch `delete-branch` kept. A push that finds the branch at a commit patchbay did not push
// ends the plan with the changeset the plan keeps; an operation that fails ends it so too, its
// error (scrubbed of every token) the reason, and the line counted among the command's errors.
import { PatchbayError, kindOf } from "../core/errors.js";
import type { Changeset } from "./changeset.js";
import { deleteBranch, pushBranch } from "./publish-git.js";
import type { PublishContext, RepoForge } from "./context.js";
import {
  foreignBranch,
  isNeed,
  keptBranch,
  type Decision,
  type Keep,
  type Need,
  type Operation,
  type Plan,
  type PlannedChange,
} from "./plan.js";

/** The repository a plan is for. */
export interface Target {
  campaignId: string;
  /** Its git URL as in the campaign's definition ("" for a line the definition no longer lists: its plans do nothing). */
  git: string;
  forge: RepoForge;
}

/** What carrying out a plan came to. */
export interface Executed {
  /** The changeset as recorded, or as it stands (a `nothing` that shows it). */
  changeset?: Changeset;
  /** The changeset was saved. */
  saved: boolean;
  /** The line counts among the command's errors. */
  failed: boolean;
  /** A dry run's line. */
  planned?: PlannedChange;
}

/** Where host git reaches the repository, and with what: the forge's token over http(s), else git's own helpers and agent. */
export function gitNet(ctx: PublishContext, t: Target) {
  return { url: t.git, env: ctx.config.hostEnv, ...(t.forge.credential ? { credential: t.forge.credential } : {}) };
}

/** The forge's API client of the repository: a plan opens, updates or closes pull requests only where there is one. */
function apiOf(t: Target): NonNullable<RepoForge["api"]> {
  if (!t.forge.api) throw new PatchbayError("internal", "a plan for a host without a forge API acts on a pull request");
  return t.forge.api;
}

async function save(ctx: PublishContext, t: Target, c: Changeset): Promise<Changeset> {
  await ctx.store.saveChangeset(t.campaignId, c);
  return c;
}

/** The plan's operations, one after another, until one ends it. */
export async function execute(ctx: PublishContext, t: Target, plan: Plan): Promise<Executed> {
  const learned: Partial<Changeset> = {};
  try {
    for (const op of plan.ops) {
      const end = await step(ctx, t, plan, op, learned);
      if (end) return end;
    }
    return { saved: false, failed: Boolean(plan.error) };
  } catch (err) {
    if (!plan.keep) throw err;
    return failure(ctx, t, plan.keep, err);
  }
}

/** One operation; what ends the plan, or undefined to go on. */
async function step(
  ctx: PublishContext,
  t: Target,
  plan: Plan,
  op: Operation,
  learned: Partial<Changeset>,
): Promise<Executed | undefined> {
  const failed = Boolean(plan.error);
  switch (op.op) {
    case "nothing":
      return { ...(op.shown ? { changeset: op.shown } : {}), saved: false, failed };
    case "dry-run":
      return { planned: op.planned, saved: false, failed };
    case "record":
      return { changeset: await save(ctx, t, { ...op.changeset, ...learned }), saved: true, failed };
    case "push": {
      const pushed = await pushBranch({
        ...gitNet(ctx, t),
        cacheDir: ctx.cacheDir,
        sha: op.sha,
        branch: op.branch,
        expect: op.expect,
        force: op.force,
        ...(op.pushOptions ? { pushOptions: op.pushOptions } : {}),
      });
      if (pushed.kind !== "foreign") return undefined;
      if (!plan.keep) throw new PatchbayError("internal", "a plan that pushes names no changeset to keep");
      return {
        changeset: await save(ctx, t, {
          ...plan.keep.changeset,
          reason: foreignBranch(op.branch, pushed.remoteSha),
          updatedAt: Date.now(),
        }),
        saved: true,
        failed,
      };
    }
    case "open": {
      const api = apiOf(t);
      const pr = await api.forge.create(api.repo, op.pr);
      Object.assign(learned, { state: pr.state, number: pr.number, url: pr.url });
      return undefined;
    }
    case "update": {
      const api = apiOf(t);
      await api.forge.update(api.repo, op.number, { title: op.title, body: op.body });
      return undefined;
    }
    case "close": {
      const api = apiOf(t);
      await api.forge.close(api.repo, op.number);
      return undefined;
    }
    case "delete-branch": {
      const d = await deleteBranch({ ...gitNet(ctx, t), branch: op.branch, expect: op.expect });
      if (d.kind === "foreign") learned.reason = keptBranch(op.branch, d.remoteSha);
      return undefined;
    }
  }
}

/** The kept changeset, its reason the failure (a PatchbayError's message, else its kind and message), scrubbed and bounded. */
async function failure(ctx: PublishContext, t: Target, keep: Keep, err: unknown): Promise<Executed> {
  const message = err instanceof PatchbayError ? err.message : `${kindOf(err)}: ${(err as Error).message}`;
  const c = await save(ctx, t, {
    ...keep.changeset,
    reason: `${keep.failure}: ${ctx.scrub(message).slice(0, 500)}`,
    updatedAt: Date.now(),
  });
  return { changeset: c, saved: true, failed: true };
}

/** Reads what a Need asks, as the part of the planner's state it fills. */
export type Reader<S> = (need: Need) => Promise<Partial<S>>;

/**
 * Gather, plan, execute: asks `plan` (with the time now) until it decides, reading each Need it
 * returns with `read`, then carries the plan out. A read that fails where the Need keeps a
 * changeset is the line's failure; elsewhere the command's.
 */
export async function reconcile<S extends { now: number }>(
  ctx: PublishContext,
  t: Target,
  state: S,
  plan: (s: S) => Decision,
  read: Reader<S>,
): Promise<Executed> {
  let s = state;
  // Each read fills what was asked, so a planner asks a few times at most; more is a planner's bug.
  for (let asked = 0; asked < 10; asked++) {
    s = { ...s, now: Date.now() };
    const d = plan(s);
    if (!isNeed(d)) return execute(ctx, t, d);
    try {
      s = { ...s, ...(await read(d)) };
    } catch (err) {
      if (!("keep" in d)) throw err;
      return failure(ctx, t, d.keep, err);
    }
  }
  throw new PatchbayError("internal", "a campaign planner kept asking for what it was told");
}
