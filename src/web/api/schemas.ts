// The HTTP API's schemas: the contract's own (JobSpec, JobResult, TranscriptEvent from src/core/spec/spec.ts,
// registered here under their names, never copied) and what the routes wrap them in. The OpenAPI
// document (openapi.ts) is generated from these; a registry of the API's own, so the components
// are exactly these, whatever else in the process uses zod's global one.
import { z } from "zod";
import { LIST_STATES } from "../../queue/client.js";
import { JOB_STATUSES, JobResult, JobSpec, JobStatus, TranscriptEvent, Usage } from "../../core/spec/spec.js";
import { Problem } from "./problem.js";
import { apiRegistry } from "./registry.js";

export { apiRegistry } from "./registry.js";

apiRegistry.add(JobSpec, { id: "JobSpec", description: "What a job is asked to do: docs/jobspec.md" });
apiRegistry.add(JobResult, { id: "JobResult", description: "What a job hands back: docs/jobspec.md#jobresult" });
apiRegistry.add(TranscriptEvent, {
  id: "TranscriptEvent",
  description: "One event of a job's transcript: docs/jobspec.md#transcript",
});
apiRegistry.add(Problem, { id: "Problem", description: "An error, as RFC 9457 says (application/problem+json)" });

const epochMs = () => z.number().register(apiRegistry, { description: "epoch milliseconds" });

export const JobId = z.object({ id: z.string().register(apiRegistry, { description: "a job id" }) });
export const BatchId = z.object({ id: z.string().register(apiRegistry, { description: "a batch id" }) });

export const JobCreated = z.object({ id: z.string(), queue: z.string() });

export const QueueState = z.enum([
  "waiting",
  "active",
  "delayed",
  "completed",
  "failed",
  "prioritized",
  "waiting-children",
  "unknown",
]);

export const JobStatusBody = z.object({
  id: z.string(),
  state: QueueState.register(apiRegistry, { description: "the job's state in the queue" }),
  status: JobStatus.optional().register(apiRegistry, { description: "the result's status once the job finished" }),
  attemptsMade: z.int(),
  failedReason: z.string().optional(),
  createdAt: epochMs().optional(),
  startedAt: epochMs().optional(),
  finishedAt: epochMs().optional(),
  result: JobResult.optional().register(apiRegistry, {
    description: "once completed; a long patch is not inline (patchStored): GET …/patch has it",
  }),
});

/** A row of the list: the dashboard's (src/web/data.ts JobRow). */
export const JobRow = z.object({
  id: z.string(),
  state: z.string().register(apiRegistry, {
    description:
      "the queue's (BullMQ's) state: where the job is, not how it ended (completed means a result was handed back, whatever its status)",
  }),
  status: z.string().optional().register(apiRegistry, { description: "the result's status, once the job finished" }),
  outcome: z.enum([...JOB_STATUSES, "waiting", "running", "unknown"]).register(apiRegistry, {
    description:
      "what to show first: the job's status once it finished (docs/jobspec.md#statuses), else waiting or running",
  }),
  model: z.string(),
  turns: z.number().optional(),
  costUsd: z.number().optional(),
  durationMs: z.number().optional(),
  createdAt: epochMs().optional(),
  startedAt: epochMs().optional(),
  finishedAt: epochMs().optional(),
  task: z.string().optional(),
  batchId: z.string().optional(),
  attemptsMade: z.number(),
  failedReason: z.string().optional(),
});

export const JobsQuery = z.object({
  status: JobStatus.optional().register(apiRegistry, {
    description:
      "finished jobs with this status (docs/jobspec.md#statuses): status=completed leaves out cancelled and verify_failed jobs",
  }),
  state: z.enum(LIST_STATES).optional().register(apiRegistry, {
    description:
      "jobs in this queue state (BullMQ's): state=completed is every job that handed back a result, cancelled ones included; filter by status for how they ended",
  }),
  batch: z.string().optional().register(apiRegistry, { description: "the jobs of this batch (each line's latest)" }),
  limit: z.string().regex(/^\d+$/).optional().register(apiRegistry, { description: "1 to 200; default 50" }),
  cursor: z.string().optional().register(apiRegistry, { description: "the `next` of the previous page" }),
});

export const JobsPage = z.object({
  jobs: z.array(JobRow),
  next: z
    .string()
    .optional()
    .register(apiRegistry, { description: "pass as cursor for the next page; absent at the end" }),
});

export const CancelBody = z.object({
  id: z.string(),
  result: z.enum(["cancelled", "signalled", "finished"]).register(apiRegistry, {
    description:
      "cancelled: it will not run; signalled: it was running and stops within seconds; finished: it had already ended",
  }),
});

export const TranscriptQuery = z.object({
  format: z
    .enum(["json", "ndjson"])
    .optional()
    .register(apiRegistry, { description: "default json, or by the Accept header" }),
});

export const EventsQuery = z.object({
  after: z
    .string()
    .optional()
    .register(apiRegistry, { description: "a stream id: events after it (as Last-Event-ID)" }),
});

// Batches (src/batch/batch-types.ts, batch-index.ts, batch-summary.ts)

/** Every status with its count (0 included): an object with each property declared, for the document's readers. */
const Counts = z
  .object(Object.fromEntries(JOB_STATUSES.map((s) => [s, z.int()])) as Record<(typeof JOB_STATUSES)[number], z.ZodInt>)
  .register(apiRegistry, { description: "how many of the jobs (each line's latest) finished with each status" });

const JobSummary = z.object({
  line: z.int(),
  status: JobStatus,
  verified: z.boolean().optional(),
  costUsd: z.number(),
  usage: Usage,
  turns: z.int(),
  totalMs: z.number(),
  attempt: z.int().optional(),
  error: z.string().optional(),
  filesChanged: z.int(),
  finishedAt: epochMs(),
});

const BatchJob = z.object({
  line: z.int(),
  jobId: z.string(),
  state: z.enum(["waiting", "running", "finished"]),
  startedAt: epochMs().optional(),
  result: JobSummary.optional(),
});

export const BatchStatusBody = z.object({
  batchId: z.string(),
  name: z.string().optional(),
  createdAt: epochMs(),
  finishedAt: epochMs().optional(),
  total: z.int(),
  done: z.int(),
  running: z.int(),
  waiting: z.int(),
  counts: Counts,
  verified: z.int(),
  unverified: z.int(),
  spentUsd: z.number(),
  budgetUsd: z.number().optional(),
  cancelled: z.boolean(),
  jobs: z.array(BatchJob).optional().register(apiRegistry, { description: "with ?jobs=1: each line's latest job" }),
});

export const BatchList = z.object({
  batches: z.array(
    BatchStatusBody.pick({
      batchId: true,
      name: true,
      createdAt: true,
      finishedAt: true,
      total: true,
      done: true,
      spentUsd: true,
      budgetUsd: true,
      cancelled: true,
    }),
  ),
});

export const BatchSubmitQuery = z.object({
  name: z.string().optional().register(apiRegistry, {
    description:
      "the batch id (1-96 of A-Z a-z 0-9 _ . -); default b- and a hash of its jobs; the same body again under it enqueues nothing new",
  }),
  budgetUsd: z.string().optional().register(apiRegistry, { description: "a budget in USD for the whole batch" }),
});

export const BatchCreated = z.object({
  batchId: z.string(),
  ids: z.array(z.string()),
  added: z.int().register(apiRegistry, { description: "jobs this request put in the queue (0: all were there)" }),
});

export const BatchCancelBody = z.object({
  batchId: z.string(),
  signalled: z.int(),
  waiting: z.int(),
  finished: z
    .string()
    .optional()
    .register(apiRegistry, { description: "set when every line had ended: nothing was cancelled; how they ended" }),
});

export const BatchRetryRequest = z
  .object({
    statuses: z
      .array(JobStatus)
      .optional()
      .register(apiRegistry, { description: "default: every status but completed" }),
  })
  .optional();

export const BatchRetryBody = z.object({
  batchId: z.string(),
  ids: z.array(z.string()),
  missing: z.array(z.int()).register(apiRegistry, { description: "lines no longer in the queue" }),
});

export const BatchSummaryBody = z.object({
  batchId: z.string(),
  name: z.string().optional(),
  createdAt: z.string(),
  finishedAt: z.string().optional(),
  total: z.int(),
  counts: Counts,
  verify: z.object({ verified: z.int(), unverified: z.int(), none: z.int() }),
  costUsd: z.object({ latest: z.number(), all: z.number(), budget: z.number().optional() }),
  tokens: Usage,
  jobMs: z.object({ p50: z.number(), p95: z.number(), max: z.number() }),
  errors: z.array(z.object({ error: z.string(), count: z.int() })),
  jobs: z.array(BatchJob.extend({ task: z.string().optional() })),
});

/** A problem+json response of the given statuses, for a route's `response`. */
export function problems(
  ...statuses: number[]
): Record<number, { description: string; content: Record<string, { schema: typeof Problem }> }> {
  return Object.fromEntries(
    statuses.map((s) => [
      s,
      { description: "a problem (RFC 9457)", content: { "application/problem+json": { schema: Problem } } },
    ]),
  );
}

/** A JSON response, for a route's `response`. */
export const json = <S extends z.ZodType>(schema: S, description: string) => ({
  description,
  content: { "application/json": { schema } },
});

/** A JSON response that names where the new thing is (a Location header, relative to the server), for a POST's 200 and 201. */
export const located = <S extends z.ZodType>(schema: S, description: string, what: string) => ({
  ...json(schema, description),
  headers: { Location: { type: "string", description: `the ${what}'s path (e.g. ${LOCATION_EXAMPLES[what]})` } },
});

const LOCATION_EXAMPLES: Record<string, string> = {
  job: "/api/v1/jobs/fix-1",
  batch: "/api/v1/batches/nightly",
};

/** The live transcript's request header: where to go on from (what a browser's EventSource sends on reconnecting). */
export const EventsHeaders = z.object({
  "last-event-id": z.string().optional().register(apiRegistry, {
    description: "the `id` of the last message received: the stream goes on after it (as ?after=)",
  }),
});
