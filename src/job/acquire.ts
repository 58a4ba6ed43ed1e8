// Phase 1 of a job (run.ts): acquire. The worker opens the setup network's session on its egress
// proxy when the spec asks for one, starts reading (or cloning) the repo on the host, and meanwhile
// takes a sandbox of the job's kind: a warm one from the pool when the pool has one, else a new one
// from the backend. The attempt holds each of these in `Held` until release() lets them go.
import type { EgressSession } from "../net/proxy.js";
import { Sandbox } from "../sandbox/sandbox.js";
import type { JobContext } from "./job-context.js";
import { repoArchive, type RepoArchive } from "./repo/load.js";
import { mountsFor, prepareEgress } from "./setup.js";
import type { Snapshot } from "./verify.js";

/** What an attempt holds until it ends: each part released once, in release(). */
export interface Held {
  egress?: EgressSession;
  /** The repo's archive until it is loaded (a clone to remove). */
  prepared?: Promise<RepoArchive>;
  sandbox?: Sandbox;
  snapshot?: Promise<Snapshot>;
  /** Verify sandboxes being removed. */
  removals: Promise<void>[];
  /** Tells the pool this job's setup is over (it refills again). */
  setupDone?: () => void;
}

/** The sandbox a job's spec and its worker ask for: every box of the job (its own, verify's) is of this kind. */
export const kindOf = (ctx: JobContext) => ({
  image: ctx.spec.image ?? ctx.config.image,
  limits: ctx.spec.limits,
  runtime: ctx.spec.runtime,
  allowPtrace: ctx.config.policy.allowPtrace,
});

/**
 * A fresh sandbox of the job's kind (for verify too): a warm one from the pool when it has one, else
 * one finished from the pool's bare box (made anew where that one fails), else made.
 */
export function freshSandbox(ctx: JobContext, mounts?: ReturnType<typeof mountsFor>): Promise<Sandbox> {
  const o = ctx.opts;
  const deadlineSec = ctx.timeoutSec + 600;
  // A pool's box has no extra mounts.
  const warm = mounts ? undefined : o.pool?.take(kindOf(ctx), deadlineSec);
  if (warm) return Promise.resolve(warm);
  const opts = {
    ...kindOf(ctx),
    jobId: ctx.jobId,
    owner: o.owner,
    labels: o.labels,
    deadlineSec,
    mounts,
    backend: ctx.backend,
  };
  const bare = mounts ? undefined : o.pool?.takeBare?.(kindOf(ctx), deadlineSec, ctx.jobId);
  return bare ? Sandbox.create(opts, bare).catch(() => Sandbox.create(opts)) : Sandbox.create(opts);
}

export async function acquire(ctx: JobContext, held: Held): Promise<Sandbox> {
  // The pool makes no warm sandbox while this one is set up: it would compete for the CPU.
  held.setupDone = ctx.opts.pool?.setupStarted?.();
  if (!ctx.opts.seed) {
    // A candidate starts from its job's seed (candidates/seed.ts): no repo to read, no setup network.
    held.egress = await prepareEgress(ctx.spec, ctx.opts.egress, ctx.emit, ctx.config);
    held.prepared = repoArchive(ctx.spec.repo, {
      git: { env: ctx.config.hostEnv, credentials: ctx.config.gitCredentials },
      sources: ctx.opts.sources,
    });
    held.prepared.catch(() => {}); // awaited by the load; a failure there is the job's
  }
  held.sandbox = await freshSandbox(ctx, mountsFor(held.egress));
  ctx.opts.onSandbox?.(held.sandbox);
  return held.sandbox;
}

/**
 * Releases what the attempt held: the pool's turn, the clone, the network, the sandboxes, the
 * snapshot. The job's sandbox is removed here, or handed to `retire` (a worker's background removals).
 */
export async function release(held: Held, retire?: (sb: Sandbox) => Promise<void>): Promise<void> {
  held.setupDone?.();
  await held.prepared?.then(
    (a) => a.cleanup(),
    () => {},
  );
  await held.egress?.close();
  const sb = held.sandbox;
  if (sb) await (retire ? retire(sb) : sb.destroy());
  await held.snapshot?.then(
    (s) => s.remove(),
    () => {},
  );
  await Promise.all(held.removals);
}
