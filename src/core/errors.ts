// One root for the errors patchbay throws on purpose, and their kinds. A kind says whose failure it
// is, and so what comes next: the worker's table (src/queue/attempt-outcome.ts) maps kinds to retry,
// fail once, hand back or throttle; runJob (src/job/run.ts) ends a job as its own failed result for
// the kinds in JOB_KINDS. Subclasses live beside the code that throws them (each a line: `class
// RepoError extends kinded("repo") {}`); this is the only module with `extends Error`. Messages say
// what is wrong and, where there is something to do, what to do.

/** Every kind, with what it means. */
export const ERROR_KINDS = {
  repo: "the repo cannot be loaded or is too large: its bounds, a bad archive or path, a ref that is not there, a clone that fails",
  setup: "a setup command failed, or the network it was allowed could not be given",
  patch: "the final patch cannot be made from what the agent left",
  verify: "the tree a verify round runs on cannot be made",
  "sandbox-step":
    "a step in the sandbox failed on what the repo or the agent left (git, a kill, the supervisor): the job's own while its sandbox still runs, else the sandbox was lost",
  spec: "a JobSpec or a batch line is not valid, or asks for more than the worker's policy allows",
  model: "the model's API failed once the SDK's retries were spent",
  throttle: "the model's API is rate limited or overloaded (429, 529): the account's state, not the job's",
  "sandbox-lost": "the sandbox stopped under the job (the engine or its runtime lost it)",
  infra: "the host, the engine or Redis failed",
  config: "the worker's or the dashboard's settings are wrong",
  usage: "a command, a request or a function was called wrongly",
  "not-found": "no such job, batch or stored patch",
  conflict: "a job or batch id is taken by other specs",
  timeout: "a wait went past its time limit",
  cancelled: "the work was cancelled (an aborted signal)",
  tool: "a tool call failed: the model's tool result, not the job's failure",
  image: "an image cannot be built or is missing",
  failed: "a job failed for good, as its result says",
  internal: "anything else: a bug, or a library's error patchbay does not classify",
} as const;

/** What kind of failure an error is (ERROR_KINDS says each): what a worker does about it follows from it. */
export type ErrorKind = keyof typeof ERROR_KINDS;

/** The root: every error of patchbay's has a kind. Its name is its class's. */
export class PatchbayError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A base class for errors of one kind: `class RepoError extends kinded("repo") {}`. */
export function kinded(kind: ErrorKind) {
  return class extends PatchbayError {
    constructor(message: string, options?: ErrorOptions) {
      super(kind, message, options);
    }
  };
}

/** The kind of anything thrown: a PatchbayError's own, "cancelled" for an AbortError, else "internal". */
export function kindOf(err: unknown): ErrorKind {
  if (err instanceof PatchbayError) return err.kind;
  if (err instanceof Error && err.name === "AbortError") return "cancelled";
  return "internal";
}

/** Kinds that end a job as its own failed result (not retried) when runJob meets them. */
export const JOB_KINDS: ReadonlySet<ErrorKind> = new Set<ErrorKind>(["repo", "setup", "patch", "verify"]);

/** The sandbox stopped under the job (the engine or the runtime lost it): not the command's doing; the job runs again, from its last checkpoint. */
export class SandboxLostError extends kinded("sandbox-lost") {}
