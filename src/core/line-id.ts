// The job ids of batch lines: `<batch>-L<line>` for a line's first job and `<batch>-L<line>-r<k>` for
// its k-th retry (src/batch/batches.ts). Only a batch makes them: a free job's id (a JobSpec's `jobId`,
// src/core/spec/spec.ts) may not end that way, so no job enqueued through the CLI, the library or the HTTP API
// can sit under a line's id before the batch adds its own. A job there that the batch did not make
// (one written to BullMQ by hand) is told apart by its data (src/queue/batch-provenance.ts). Pure.

/** What an id of this namespace ends with; a free job id that matches is refused. */
export const LINE_ID_SUFFIX = /-L\d+(?:-r\d+)?$/;

/** The job id of a batch's line (retry 0: its first job). */
export const batchJobId = (batchId: string, line: number, retry = 0): string =>
  `${batchId}-L${line}${retry ? `-r${retry}` : ""}`;

/** Whether an id is in the lines' namespace (whatever batch it names). */
export const isLineJobId = (id: string): boolean => LINE_ID_SUFFIX.test(id);

/** The batch, line and retry an id of the namespace names; undefined for any other id. */
export function parseLineJobId(id: string): { batchId: string; line: number; retry: number } | undefined {
  const m = /^(.+)-L(\d+)(?:-r(\d+))?$/.exec(id);
  if (!m) return undefined;
  const line = Number(m[2]),
    retry = Number(m[3] ?? 0);
  // Only the spelling batchJobId makes (no leading zero, no -r0): another is no line's id.
  return batchJobId(m[1]!, line, retry) === id ? { batchId: m[1]!, line, retry } : undefined;
}

/** A line number a batch may have: a whole number from 1 (its line in the file). */
export const isLineNumber = (line: unknown): line is number =>
  typeof line === "number" && Number.isSafeInteger(line) && line >= 1;
