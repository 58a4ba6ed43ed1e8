// A job attempt's span (src/observability/trace.ts): a child of the enqueuer's span, whose context the job carries
// in its data (so the client's process and the worker's join in one trace), and linked to the job's
// previous attempt (a retry, a resume from a checkpoint, a stalled job taken up again), whose
// context the previous attempt left in the job's data. Nothing is written when nothing is traced.
import type { JobResult } from "../core/spec/spec.js";
import { carrierOf, inSpan, resultAttrs, SpanKind } from "../observability/trace.js";
import type { QueueJob } from "./attempt-admit.js";

export function tracedAttempt(
  job: QueueJob,
  attempt: number,
  workerId: string,
  run: () => Promise<JobResult>,
): Promise<JobResult> {
  const carrier = typeof job.data.trace === "object" && job.data.trace !== null ? job.data.trace : undefined; // Redis's, as any job data
  const previous = carrier?.attempt;
  const attrs = {
    "messaging.system": "bullmq",
    "messaging.operation.type": "process",
    "messaging.destination.name": job.queueName,
    "patchbay.job.id": job.id!,
    "patchbay.attempt": attempt,
    "patchbay.worker.id": workerId,
  };
  const links = previous ? [{ traceparent: previous, attributes: { "patchbay.link": "previous_attempt" } }] : [];
  // parent {} when the job carries none: a trace of its own, not a child of whatever is active here.
  return inSpan(
    "patchbay.attempt",
    attrs,
    async (span) => {
      const mine = carrierOf(span)?.traceparent;
      if (mine) await job.updateData({ ...job.data, trace: { ...carrier, attempt: mine } }).catch(() => {});
      const result = await run();
      span.setAttributes(resultAttrs(result));
      return result;
    },
    { kind: SpanKind.CONSUMER, parent: carrier ?? {}, links },
  );
}
