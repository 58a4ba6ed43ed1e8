// `campaign publish`: on the publishing host (where the credentials are), each repository's job
// result becomes a branch (pushed with git) and, on a forge, a draft pull request; its changeset
// record says what happened. One repository's failure is its own changeset's reason, never the
// others'. Credentials come from the Config (forge tokens) or git's own helpers and SSH agent; they
// are never written to disk, Redis, a changeset or a message.
import os from "node:os";
import { join } from "node:path";
import type { JobResult } from "../core/spec/spec.js";
import type { BatchJob } from "../batch/batch-types.js";
import { LineProvenanceError } from "../queue/batch-provenance.js";
import { redact } from "../git/auth.js";
import { PatchbayError, kindOf } from "../core/errors.js";
import type { Changeset } from "./changeset.js";
import type { CampaignDef } from "./store.js";
import { render } from "./template.js";
import { prepareChange, PublishError, pushBranch } from "./publish-git.js";
import { forgeOf, type PublishContext, type RepoForge } from "./context.js";
import { branchName, outcomeValues } from "./change-text.js";
import { notPublishable, type PlannedChange } from "./plan.js";

export type { PlannedChange } from "./plan.js";
import type { PullRequestRef } from "./forge/forge.js";
import { forgeGit } from "./forge/hosts.js";

export interface PublishOptions {
  includeUnverified?: boolean;
  dryRun?: boolean;
  /** Push over a branch holding commits patchbay did not push. */
  force?: boolean;
  /** Repositories published at once (default 4). */
  concurrency?: number;
  onProgress?: (p: { done: number; total: number; changeset: Changeset }) => void;
}

export interface PublishReport {
  changesets: Changeset[];
  /** With dryRun: what would be pushed (nothing is). */
  planned: PlannedChange[];
  /** Repositories whose publish failed (their changesets say why). */
  errors: number;
}

export async function publishCampaign(ctx: PublishContext, id: string, opts: PublishOptions = {}): Promise<PublishReport> {
  const def = await ctx.store.def(id);
  const st = await ctx.batches.status(id, { jobs: true });
  const prev = await ctx.store.changesets(id);
  const report: PublishReport = { changesets: [], planned: [], errors: 0 };
  const queue = [...def.repos];
  let done = 0;
  const one = async (repo: CampaignDef["repos"][number]) => {
    const job = st.jobs!.find((j) => j.line === repo.line);
    const c = await publishOne(ctx, def, repo, job, prev.get(repo.line), opts, report);
    if (!c) return;
    report.changesets.push(c);
    opts.onProgress?.({ done: ++done, total: def.repos.length, changeset: c });
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency ?? 4, queue.length) }, async () => {
    for (let r = queue.shift(); r; r = queue.shift()) await one(r);
  }));
  report.changesets.sort((a, b) => a.line - b.line);
  report.planned.sort((a, b) => a.line - b.line);
  return report;
}

async function publishOne(ctx: PublishContext, def: CampaignDef, repo: CampaignDef["repos"][number], job: BatchJob | undefined, prev: Changeset | undefined, opts: PublishOptions, report: PublishReport): Promise<Changeset | undefined> {
  // Merged and closed are final here: a closed pull request is not opened again behind its closer's back.
  if (prev && (prev.state === "merged" || prev.state === "closed")) return opts.dryRun ? undefined : prev;
  const base: Changeset = { line: repo.line, repo: redact(repo.git), jobId: job?.jobId ?? "", state: "unpublished", updatedAt: Date.now() };
  const why = notPublishable(job, Boolean(opts.includeUnverified));
  // A changeset already on a forge keeps its state when its job is retried and not finished yet.
  if (why) return opts.dryRun ? undefined : save(ctx, id(def), prev && prev.state !== "unpublished" && prev.state !== "conflict" ? { ...prev, reason: why, updatedAt: Date.now() } : { ...base, reason: why });
  // Only the line's own job is published: one put under its id by other means is this repository's error.
  const foreign = await ctx.batches.checkLine(def.name, job!).then(() => undefined, (err: unknown) => (err instanceof LineProvenanceError ? err : Promise.reject(err)));
  if (foreign) {
    report.errors++;
    return opts.dryRun ? undefined : save(ctx, id(def), { ...(prev ?? base), reason: `publish refused: ${ctx.scrub(foreign.message).slice(0, 500)}`, updatedAt: Date.now() });
  }
  const r = (await ctx.client.result(job!.jobId)) ?? undefined;
  const spec = (await ctx.specOf(job!.jobId)) ?? { task: "" };
  if (!r?.baseCommit) return opts.dryRun ? undefined : save(ctx, id(def), { ...base, reason: "its result names no base commit (a job of a version before campaigns?): campaign retry runs it again" });
  const values = outcomeValues(def, repo, job!.jobId, r, spec);
  let branch: string;
  try {
    branch = branchName(def, repo); // checked when the file was read; a definition from before is this repository's error alone
  } catch (err) {
    report.errors++;
    return opts.dryRun ? undefined : save(ctx, id(def), { ...(prev ?? base), reason: `publish failed: ${(err as Error).message.slice(0, 500)}`, updatedAt: Date.now() });
  }
  const title = render(def.publish.title, values);
  if (opts.dryRun) {
    report.planned.push({ line: repo.line, repo: base.repo, branch, title, diffstat: r.diffstat, verified: r.verified === true });
    return undefined;
  }
  const forge = forgeOf(ctx, repo.git);
  try {
    return await save(ctx, id(def), await pushAndOpen(ctx, { def, repo, r, values, branch, title, forge, prev, base, force: Boolean(opts.force), finishedAt: job!.result!.finishedAt }));
  } catch (err) {
    report.errors++;
    const message = err instanceof PatchbayError ? err.message : `${kindOf(err)}: ${(err as Error).message}`;
    return save(ctx, id(def), { ...(prev ?? base), reason: `publish failed: ${ctx.scrub(message).slice(0, 500)}`, updatedAt: Date.now() });
  }
}

const id = (def: CampaignDef) => def.name;

async function save(ctx: PublishContext, campaignId: string, c: Changeset): Promise<Changeset> {
  await ctx.store.saveChangeset(campaignId, c);
  return c;
}

interface OneChange {
  def: CampaignDef;
  repo: CampaignDef["repos"][number];
  r: JobResult;
  values: Record<string, string>;
  branch: string;
  title: string;
  forge: RepoForge;
  prev: Changeset | undefined;
  base: Changeset;
  force: boolean;
  finishedAt: number;
}

async function pushAndOpen(ctx: PublishContext, o: OneChange): Promise<Changeset> {
  const { def, repo, forge } = o;
  const net = { url: repo.git, env: ctx.config.hostEnv, ...(forge.credential ? { credential: forge.credential } : {}) };
  const change = await prepareChange({ ...net, ...(def.publish.base ?? repo.ref ? { target: def.publish.base ?? repo.ref } : {}), baseCommit: o.r.baseCommit!, patch: o.r.patch, author: def.publish.author, message: render(def.publish.message, o.values), date: new Date(o.finishedAt), cacheDir: ctx.cacheDir });
  // The target known only now (the remote's HEAD branch): a push to it would skip the pull request.
  if (change.kind !== "empty" && change.target === o.branch) throw new PublishError("usage", `publish.branch ${JSON.stringify(o.branch)} is the branch the change is for (the repository's HEAD branch): publish to a branch of the campaign's own`);
  const common = { ...o.base, verified: o.r.verified === true, branch: o.branch, forge: forge.kind, updatedAt: Date.now() };
  if (change.kind === "empty") return { ...common, reason: "the change is already on the target branch (nothing to push)" };
  if (change.kind === "conflict") return { ...(o.prev ?? {}), ...common, state: "conflict", base: change.target, onto: change.onto, reason: `the target ${change.target} moved since the job ran and the patch conflicts in ${change.files.slice(0, 10).join(", ") || "some files"}: campaign retry --status conflict runs it again on the new base` };
  const pushOptions = forge.kind !== "git" && !forge.api ? forgeGit(forge.kind).pushOptions?.({ base: change.target, title: o.title, draft: def.publish.draft }) : undefined;
  const pushed = await pushBranch({ ...net, cacheDir: ctx.cacheDir, sha: change.sha, branch: o.branch, expect: o.prev?.headSha ?? null, force: o.force, ...(pushOptions ? { pushOptions } : {}) });
  if (pushed.kind === "foreign") return { ...(o.prev ?? o.base), reason: `branch ${o.branch} is at ${pushed.remoteSha.slice(0, 12)}, a commit patchbay did not push: publish --force replaces it`, updatedAt: Date.now() };
  const done = { ...common, base: change.target, onto: change.onto, headSha: change.sha, diffstat: change.diffstat.slice(0, 4000), reason: undefined };
  if (!forge.api) return { ...done, state: "open" as const, ...(o.prev?.url ? { url: o.prev.url } : {}) };
  const pr = await openPullRequest(forge, o, change.target);
  return { ...done, state: pr.state === "draft" || pr.state === "open" ? pr.state : pr.state, number: pr.number, url: pr.url };
}

/** The open pull request of the branch, its title and body brought up to date; or a new one. */
async function openPullRequest(forge: RepoForge, o: OneChange, target: string): Promise<PullRequestRef> {
  const api = forge.api!;
  const body = render(o.def.publish.body, o.values);
  const existing = await api.forge.findOpen(api.repo, o.branch, target);
  if (existing) {
    await api.forge.update(api.repo, existing.number, { title: o.title, body });
    return existing;
  }
  return api.forge.create(api.repo, { head: o.branch, base: target, title: o.title, body, draft: o.def.publish.draft });
}

/** Where a publishing host keeps its bare clones between publishes. */
export function defaultCacheDir(env: Readonly<Record<string, string | undefined>>): string {
  return join(env.XDG_CACHE_HOME || join(env.HOME || os.homedir(), ".cache"), "patchbay", "publish");
}
