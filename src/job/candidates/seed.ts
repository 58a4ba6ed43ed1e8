// A job's seed: its workspace as setup left it, which each of its candidates starts from
// (docs/jobspec.md#candidates). The job's worker runs setup once and keeps the workspace (the
// post-setup snapshot, a tar on its host, with the shell's directory and exported variables); the
// queue carries it to the candidates' workers (src/queue/candidates.ts). A candidate's worker loads
// it into a fresh sandbox, takes the baseline from it, and starts the agent's shell from setup's
// state, as prepare.ts does after setup: no setup command runs again, and no network is opened.
import { count } from "../../core/count.js";
import { createReadStream } from "node:fs";
import { z } from "zod";
import { kinded } from "../../core/errors.js";
import type { Sandbox } from "../../sandbox/sandbox.js";
import { carried, STATE_MAX_BYTES, STATE_MAX_VARS, type ShellState } from "../../sandbox/shell-state.js";
import type { Held } from "../acquire.js";
import { writeBaseline } from "../baseline.js";
import type { JobContext } from "../job-context.js";
import type { Prepared } from "../prepare.js";
import type { Snapshot } from "../verify.js";

/** The seed could not be kept or loaded (too large, gone from the queue, not a tar the image can read): setup's doing, so the job or candidate fails once. */
export class SeedError extends kinded("setup") {}

/** What the seed says besides its tar: the shell's state after setup and the repo's commit. */
export const SeedMeta = z.strictObject({
  v: z.literal(1),
  state: z
    .strictObject({
      cwd: z.string().startsWith("/").max(4096),
      // Only a name parseShellState would carry: startScript writes it into the shell's start unquoted.
      env: z
        .array(
          z.tuple([
            z.string().max(STATE_MAX_BYTES).refine(carried, { error: "a variable that is not carried into a shell" }),
            z.string().max(STATE_MAX_BYTES),
          ]),
        )
        .max(STATE_MAX_VARS),
    })
    .refine((s) => s.env.reduce((n, [k, v]) => n + k.length + v.length, s.cwd.length) <= STATE_MAX_BYTES, {
      error: `the shell's state is over ${count(STATE_MAX_BYTES, "byte")}`,
    })
    .optional(),
  baseCommit: z
    .string()
    .regex(/^[0-9a-f]{40,64}$/)
    .optional(),
});
export type SeedMeta = z.infer<typeof SeedMeta>;

/** A seed on this host: the tar of /workspace after setup (a Snapshot: verify judges it plus a patch) and its meta. */
export interface Seed extends Snapshot {
  meta: SeedMeta;
}

/** The meta of a job's seed, from what prepare returned. */
export const seedMeta = (prep: Pick<Prepared, "state" | "baseCommit">): SeedMeta => ({
  v: 1,
  ...(prep.state ? { state: prep.state } : {}),
  ...(prep.baseCommit ? { baseCommit: prep.baseCommit } : {}),
});

/**
 * Phase 2 of a candidate (in place of prepare.ts): the seed into /workspace, the baseline taken
 * while nothing of the agent's uid runs, and the agent's shell started from setup's state. The seed
 * is the candidate's verify snapshot too (held, and removed with the attempt).
 */
export async function prepareFromSeed(
  ctx: JobContext,
  sandbox: Sandbox,
  held: Held,
  seed: Seed,
  since: number,
): Promise<Prepared> {
  held.snapshot = Promise.resolve(seed);
  const loaded = await sandbox.putTarStream("/workspace", createReadStream(seed.file)).catch(async (err: Error) => {
    throw (await sandbox.running())
      ? new SeedError(`the job's workspace after setup could not be loaded: ${err.message.slice(-600)}`)
      : err;
  });
  if (!loaded)
    throw new SeedError("the sandbox's image has no tar: the job's workspace after setup could not be loaded");
  const state: ShellState | undefined = seed.meta.state;
  const baseline = await sandbox.shell.quiesce(() => writeBaseline(sandbox), state);
  const sandboxMs = ctx.elapsed(since);
  held.setupDone?.();
  ctx.emit({ type: "sandbox_ready", container: sandbox.name, ms: sandboxMs });
  return {
    baseline,
    loaded: Promise.resolve(),
    sandboxMs,
    ...(seed.meta.baseCommit ? { baseCommit: seed.meta.baseCommit } : {}),
  };
}
