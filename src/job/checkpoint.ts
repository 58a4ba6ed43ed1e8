// Checkpoints. After every turn the worker stores the job's conversation, its usage, and the
// workspace's change against the baseline (a binary patch), so that a new attempt (after its worker
// was killed or its engine failed) goes on from there instead of paying for every model call again.
// The worker's store keeps them in Redis (src/queue/checkpoints.ts). A checkpoint read back is
// validated and bounded, and the agent's uid applies it with no git config but patchbay's: at worst
// it does what the agent itself could have done in /workspace.
import { count } from "../core/count.js";
import { z } from "zod";
import { defaults } from "../core/config/config.js";
import type { LoopOutcome, TurnState } from "../agent/loop.js";
import { costUsd } from "../agent/prices.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { JobStatus, Usage, type EventInput, type JobSpec } from "../core/spec/spec.js";
import { nonNegInt, positiveInt } from "../core/spec/fields.js";
import { checkpointDiff, PatchTooLargeError } from "./patch.js";
import { withTimeout } from "../core/timeout.js";
import { specHash as canonicalSpecHash } from "../core/spec/hash.js";
import { readOnly } from "../tools/editor-text.js";
import { asset } from "../core/assets.js";
import { AGENT_USER } from "../backend/agent-user.js";
import { GIT_VARS } from "./git-store.js";

const TreeId = z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/);
const MessageSchema = z.object({
  role: z.enum(["user", "assistant"]),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]),
});

export const Checkpoint = z.object({
  v: z.literal(1),
  jobId: z.string().min(1),
  /** The spec it belongs to: a job id reused for another spec never resumes this one. */
  specHash: z.string(),
  attempt: positiveInt(),
  turns: nonNegInt(),
  usage: Usage,
  stopReason: z.string().nullable(),
  summary: z.string(),
  messages: z.array(MessageSchema).min(1),
  /** Set when the agent had ended (the loop's status then): a resume goes straight to the patch and verify. */
  ended: JobStatus.optional(),
  /** The verify round the conversation is in (1 before any verify failed). */
  round: positiveInt(),
  baseline: TreeId,
  /** `git diff --binary` from `baseline` to the workspace after the turn; "" when nothing changed. */
  patch: z.string(),
  savedAt: z.number(),
});
export type Checkpoint = z.infer<typeof Checkpoint>;

/** What a job's checkpoints are read from and written to (the worker's: Redis; none outside a queue). */
export interface CheckpointStore {
  /** The last checkpoint of this job, or why it cannot be used; undefined when there is none. */
  load(): Promise<{ ok: true; checkpoint: Checkpoint } | { ok: false; reason: string } | undefined>;
  save(c: Checkpoint): Promise<void>;
}

/** The spec's identity, as the queue computes it (keys in any order hash the same). */
export const specHash = (spec: JobSpec) => canonicalSpecHash(spec);

/** Parses what a store returned: JSON, the schema, and that it is this job's and this spec's. */
export function parseCheckpoint(
  raw: string,
  jobId: string,
  hash: string,
): { ok: true; checkpoint: Checkpoint } | { ok: false; reason: string } {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return { ok: false, reason: "the checkpoint is not JSON" };
  }
  const p = Checkpoint.safeParse(json);
  if (!p.success)
    return {
      ok: false,
      reason: `the checkpoint is invalid: ${p.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join(".")}: ${i.message}`)
        .join("; ")}`,
    };
  if (p.data.jobId !== jobId) return { ok: false, reason: `the checkpoint belongs to job ${p.data.jobId}` };
  if (p.data.specHash !== hash)
    return { ok: false, reason: "the checkpoint belongs to another spec under this job id" };
  return { ok: true, checkpoint: p.data };
}

/** What the model is told when its conversation goes on in a new sandbox. */
export const RESUME_NOTE =
  "Note: this job was interrupted (its worker or sandbox stopped) and now continues in a new sandbox. /workspace was restored to what it was after your last completed turn, but running processes, your shell's state (working directory, environment variables, functions) and any files outside /workspace were lost. Redo whatever of that you still need, then continue the task.";
/** The same, when the interruption came while the model's last tool calls ran: they ran again. */
export const RESUME_NOTE_PENDING =
  "Note: this job was interrupted (its worker or sandbox stopped) while your last tool calls ran. It now continues in a new sandbox: /workspace was restored to what it was before those calls, and they were run again there (the results above are from that run). Running processes, your shell's earlier state (working directory, environment variables, functions) and any files outside /workspace were lost. Redo whatever of that you still need, then continue the task.";

// git apply as the agent's uid, in a git dir of its own, under no config of the repo's and with
// every content-rewriting attribute off (src/job/sh/apply-checkpoint.sh, after the shared values).
const APPLY = GIT_VARS + asset("job/sh/apply-checkpoint.sh");

/** Applies a checkpoint's patch to a fresh workspace at the same baseline; the reason when it cannot. */
export async function applyCheckpoint(sb: Sandbox, baseline: string, c: Checkpoint): Promise<string | undefined> {
  if (c.baseline !== baseline) return "the workspace after setup differs from the checkpoint's (the baseline changed)";
  if (!c.patch) return undefined;
  // As the agent from the start (no root process: nothing of the image's environment runs as root), with a clean environment.
  const r = await sb.exec(
    [
      "env",
      "-i",
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "LANG=C.UTF-8",
      "bash",
      "--noprofile",
      "--norc",
      "-c",
      APPLY,
    ],
    { stdin: c.patch, timeoutSec: 600, user: AGENT_USER, cwd: "/" },
  );
  return r.exitCode === 0
    ? undefined
    : `git apply refused the checkpoint's patch (exit ${r.exitCode}): ${r.stderr.trim().slice(-400)}`;
}

export interface CheckpointerOptions {
  store: CheckpointStore;
  sandbox: Sandbox;
  baseline: string;
  jobId: string;
  attempt: number;
  specHash: string;
  emit: (e: EventInput) => void;
  maxBytes: number;
  /** The patch a resumed attempt starts from (its workspace already holds it). */
  restored?: string;
}

/**
 * Takes a checkpoint after each turn. The patch costs execs in the sandbox, so it is taken again
 * only after a turn that ran a tool able to change files (`touched()`); otherwise the last one is
 * reused. A checkpoint over the bound is not stored: the last one that fit stays, and an event says so.
 */
export class Checkpointer {
  private patch: string | undefined;
  /** The tree `patch` leads to, once one was taken here. */
  private tree: string | undefined;
  /** The workspace's fingerprint (Files.digest) taken right before `patch`. */
  private seen: string | undefined;
  private noFingerprint = false;
  private dirty: boolean;
  private tooBig = false;
  /** Time spent taking and storing checkpoints (for the bench and the logs). */
  ms = 0;
  count = 0;

  constructor(private readonly o: CheckpointerOptions) {
    // A fresh attempt starts at the baseline: its change is empty until a tool may have changed files.
    this.patch = o.restored ?? "";
    this.dirty = false;
  }

  /** Before any tool runs: the fingerprint of the workspace as it is now, at `patch` (the baseline's, or the restored one). */
  async start(): Promise<void> {
    this.seen = await this.fingerprint();
  }

  /**
   * The workspace's fingerprint, or undefined when it cannot be had (no agent, too many files, a
   * directory the agent cannot read, the engine away): then no more are asked for in this job, and
   * every checkpoint takes its patch.
   */
  private async fingerprint(): Promise<string | undefined> {
    if (this.noFingerprint) return undefined;
    const d = await Promise.resolve()
      .then(() => this.o.sandbox.files.digest("/workspace"))
      .catch(() => undefined);
    if (d === undefined) this.noFingerprint = true;
    return d;
  }

  /** A tool that may change files ran (any but a view). */
  touched(): void {
    this.dirty = true;
  }

  async take(s: TurnState, round: number): Promise<void> {
    const t0 = performance.now();
    const maxBytes = this.o.maxBytes;
    try {
      // Tools ran that may have changed files: unless the workspace's fingerprint is the one the
      // last patch was taken at (a command that only read), the patch is taken again.
      const seen = this.dirty && this.patch !== undefined ? await this.fingerprint() : undefined;
      if (seen && seen === this.seen) this.dirty = false;
      if (this.dirty || this.patch === undefined) {
        try {
          // Taken before the patch: a change while git runs makes the next fingerprint differ.
          const before = seen ?? (await this.fingerprint());
          const last = this.patch !== undefined && this.tree ? { tree: this.tree, patch: this.patch } : undefined;
          const d = await checkpointDiff(this.o.sandbox, this.o.baseline, { maxBytes, last });
          this.patch = d.patch;
          this.tree = d.tree;
          this.seen = before;
          this.tooBig = false;
          // Clean only once a patch was taken: after a failure (the engine away) the next turn's
          // checkpoint must not pair a newer conversation with this older workspace.
          this.dirty = false;
        } catch (err) {
          if (!(err instanceof PatchTooLargeError)) throw err;
          this.patch = undefined;
          this.dirty = false;
          if (!this.tooBig)
            this.o.emit({
              type: "checkpoint",
              turn: s.turns,
              saved: false,
              reason: `the workspace's change is over ${count(maxBytes, "byte")}; the last checkpoint that fit is kept`,
            });
          this.tooBig = true;
          return;
        }
      }
      const c: Checkpoint = {
        v: 1,
        jobId: this.o.jobId,
        specHash: this.o.specHash,
        attempt: this.o.attempt,
        turns: s.turns,
        usage: s.usage,
        stopReason: s.stopReason,
        summary: s.summary,
        messages: s.messages,
        ...(s.ended ? { ended: s.ended } : {}),
        round,
        baseline: this.o.baseline,
        patch: this.patch,
        savedAt: Date.now(),
      };
      const json = JSON.stringify(c);
      if (Buffer.byteLength(json) > maxBytes) {
        this.o.emit({
          type: "checkpoint",
          turn: s.turns,
          saved: false,
          reason: `the checkpoint is over ${count(maxBytes, "byte")}; the last one that fit is kept`,
        });
        return;
      }
      // A store that does not answer (Redis away) must not hold up the job: the write stays queued.
      await within(this.o.store.save(c), defaults.checkpoint.saveWaitMs);
      this.count++;
    } catch (err) {
      // A checkpoint is an optimisation: a failure to take one never fails the job.
      this.o.emit({ type: "checkpoint", turn: s.turns, saved: false, reason: (err as Error).message });
    } finally {
      this.ms += performance.now() - t0;
    }
  }
}

const within = <T>(p: Promise<T>, ms: number) =>
  withTimeout(p, ms, `the checkpoint store did not answer within ${ms} ms`);

/** The loop state a checkpoint holds, as the loop takes it back. */
export function turnStateOf(c: Checkpoint): TurnState {
  return {
    turns: c.turns,
    usage: c.usage,
    stopReason: c.stopReason,
    summary: c.summary,
    messages: c.messages,
    ...(c.ended ? { ended: c.ended } : {}),
  };
}

/**
 * Looks for an earlier attempt's checkpoint and puts its workspace back. Anything wrong with it
 * (invalid, another baseline, a patch that does not apply) means a fresh start, with an event
 * saying why; it never fails the job. The `resume` event also carries the cost already spent.
 */
export async function restoreCheckpoint(
  store: CheckpointStore,
  sb: Sandbox,
  baseline: () => string,
  modelName: string,
  emit: (e: EventInput) => void,
  settled?: Promise<void>,
): Promise<Checkpoint | undefined> {
  const fresh = (reason: string) => (
    emit({
      type: "resume",
      restored: false,
      turns: 0,
      patchBytes: 0,
      costUsd: 0,
      reason: `starting afresh: ${reason}`,
    }),
    undefined
  );
  let loaded;
  try {
    loaded = await within(store.load(), defaults.checkpoint.saveWaitMs);
  } catch (err) {
    return fresh(`the checkpoint could not be read (${(err as Error).message})`);
  }
  if (!loaded) return undefined;
  if (!loaded.ok) return fresh(loaded.reason);
  const c = loaded.checkpoint;
  await settled; // what the load still does in the sandbox (the agent's repo, the baseline's check) comes first
  const why = await applyCheckpoint(sb, baseline(), c).catch((err: Error) => `applying it failed: ${err.message}`);
  if (why) return fresh(why);
  emit({
    type: "resume",
    restored: true,
    fromAttempt: c.attempt,
    turns: c.turns,
    patchBytes: Buffer.byteLength(c.patch),
    costUsd: costUsd(modelName, c.usage),
  });
  return c;
}

/** A checkpoint of an agent that had ended, as the loop's outcome: the job goes on to its patch and verify. */
export const outcomeOf = (c: Checkpoint & { ended: JobStatus }, modelName: string): LoopOutcome => ({
  ...turnStateOf(c),
  status: c.ended,
  costUsd: costUsd(modelName, c.usage),
});

/** Every tool call but a read-only one (the tools say which) may change files. */
export const mayChangeFiles = (block: { name: string; input?: unknown }) => !readOnly(block);
