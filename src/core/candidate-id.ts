// The job ids of a job's candidates (best-of-N, docs/jobspec.md#candidates): `<job>-C<n>` for its
// n-th candidate, which only the job's worker adds, as a child of the job in BullMQ's flow. A free
// job's id (a JobSpec's `jobId`) may not end that way, so no job enqueued through the CLI, the
// library or the HTTP API can sit under a candidate's id before the job adds its own; a worker runs
// a job as a candidate only where BullMQ names the job its parent (src/queue/candidates.ts). Pure.

/** What an id of this namespace ends with; a free job id that matches is refused. */
export const CANDIDATE_ID_SUFFIX = /-C\d+$/;

/** The job id of a job's n-th candidate (from 1). */
export const candidateJobId = (jobId: string, n: number): string => `${jobId}-C${n}`;

/** Whether an id is in the candidates' namespace (whatever job it names). */
export const isCandidateJobId = (id: string): boolean => CANDIDATE_ID_SUFFIX.test(id);

/** The job and number a candidate's id names; undefined for any other id. */
export function parseCandidateJobId(id: string): { jobId: string; n: number } | undefined {
  const m = /^(.+)-C([1-9]\d*)$/.exec(id);
  return m ? { jobId: m[1]!, n: Number(m[2]) } : undefined;
}
