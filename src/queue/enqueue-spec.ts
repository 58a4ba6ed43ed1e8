// What enqueue does to a spec before anything reaches Redis (validate it, make local paths absolute
// and check they exist, refuse credentials in a git URL), and the BullMQ options a spec asks for.
// Shared by the client, batches and batch files.
import { statSync } from "node:fs";
import { resolve } from "node:path";
import { defaults } from "../core/config/config.js";
import { hasCredentials, redact } from "../git/credentials.js";
import { classifyGit } from "../job/repo/source.js";
import { JobSpecError, parseJobSpec, type JobSpec } from "../core/spec/spec.js";

/** BullMQ's options for a spec's job: its id and priority, attempts, backoff. */
export function jobOptions(spec: JobSpec) {
  return {
    ...(spec.jobId ? { jobId: spec.jobId } : {}),
    ...(spec.priority ? { priority: spec.priority } : {}),
    attempts: spec.attempts ?? defaults.worker.attempts,
    backoff: { type: "exponential", delay: defaults.worker.backoffMs },
    // No removeOnComplete/removeOnFail: the workers apply the deployment's retention (PATCHBAY_RETENTION_SEC).
  };
}

/**
 * What enqueue does before it touches Redis: validates each spec, makes local paths absolute and
 * checks they exist. Throws JobSpecError (naming the spec's index when there are several).
 */
export function prepareSpecs(inputs: unknown[]): JobSpec[] {
  return inputs.map((input, i) => {
    const r = parseJobSpec(input);
    const where = inputs.length > 1 ? `spec #${i + 1}: ` : "";
    if (!r.ok) throw new JobSpecError(`${where}${r.error}`);
    const spec = normalize(r.spec);
    const missing = missingLocalPath(spec) ?? credentialsProblem(spec);
    if (missing) throw new JobSpecError(`${where}${missing}`);
    return spec;
  });
}

/**
 * A `{ git }` URL with credentials is refused before anything reaches Redis: the job's data (and
 * every copy of the spec: events, the dashboard) would keep the token for days. The worker has its
 * own store for them (src/git/credentials.ts); runJob, with no queue, takes them in the URL.
 */
export function credentialsProblem(spec: JobSpec): string | undefined {
  const git: unknown = (spec.repo as { git?: unknown } | undefined)?.git; // BatchLines reach batch.submit unchecked
  if (typeof git !== "string" || !hasCredentials(git)) return undefined;
  return `invalid JobSpec: repo.git: ${redact(git).slice(0, 200)} carries credentials, which would be kept in Redis with the job; remove them from the URL and give them to the workers instead: PATCHBAY_GIT_CREDENTIALS=/path/to/git-credentials on each worker, a file of mode 0600 with lines like https://user:token@host`;
}

/** Local paths become absolute at enqueue time: the worker runs elsewhere. */
function normalize(spec: JobSpec): JobSpec {
  const repo = spec.repo;
  if ("path" in repo) return { ...spec, repo: { path: resolve(repo.path) } };
  if ("archive" in repo) return { ...spec, repo: { archive: resolve(repo.archive) } };
  // A { git } value git reads as a path (src/job/repo/source.ts), made absolute too; a file: URL is one already.
  if ("git" in repo && classifyGit(repo.git).kind === "local" && !/^file:/i.test(repo.git))
    return { ...spec, repo: { ...repo, git: resolve(repo.git) } };
  return spec;
}

/**
 * A local repository that is not there, or not of its kind (a file given as `{ path }`, a directory
 * as `{ archive }`), is refused here, before anything reaches Redis: the worker would only fail it.
 */
function missingLocalPath(spec: JobSpec): string | undefined {
  const repo = spec.repo;
  const kind = (p: string) => {
    let st;
    try {
      st = statSync(p, { throwIfNoEntry: false });
    } catch {
      return "other"; // unreadable (EACCES, ELOOP): the worker could not read it either
    }
    return st === undefined ? "missing" : st.isDirectory() ? "dir" : st.isFile() ? "file" : "other";
  };
  if ("path" in repo) {
    const k = kind(repo.path);
    if (k === "missing") return `invalid JobSpec: repo.path: ${repo.path} does not exist`;
    if (k !== "dir")
      return `invalid JobSpec: repo.path: ${repo.path} is ${k === "file" ? "a file" : "not a directory"}; it must be the repository's directory${k === "file" ? " (a tar or tar.gz goes in { archive }: --archive FILE)" : ""}`;
  }
  if ("archive" in repo) {
    const k = kind(repo.archive);
    if (k === "missing") return `invalid JobSpec: repo.archive: ${repo.archive} does not exist`;
    if (k !== "file")
      return `invalid JobSpec: repo.archive: ${repo.archive} is ${k === "dir" ? "a directory" : "not a regular file"}; it must be a tar or tar.gz file${k === "dir" ? " (a directory goes in { path }: --repo DIR)" : ""}`;
  }
  return undefined;
}
