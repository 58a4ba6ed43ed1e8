// Guards the one vocabulary of a job's status (src/queue/outcome.ts): a finished job's status is its
// result's whatever BullMQ's state says (a cancelled job is never "completed"), a job without a
// result is waiting, running or failed, and nothing else passes for a status.
import { describe, expect, it } from "vitest";
import { JOB_STATUSES } from "../../../src/core/spec/spec.js";
import { isJobStatus, jobOutcome } from "../../../src/queue/outcome.js";

describe("jobOutcome", () => {
  it("is the result's status once there is one, whatever the queue state", () => {
    for (const s of JOB_STATUSES) {
      expect(jobOutcome("completed", s)).toBe(s);
      expect(jobOutcome("active", s)).toBe(s); // the result is being stored
    }
    expect(jobOutcome("completed", "cancelled")).toBe("cancelled");
    expect(jobOutcome("completed", "verify_failed")).toBe("verify_failed");
  });

  it("without a result: waiting, running, failed, or unknown", () => {
    for (const s of ["waiting", "prioritized", "delayed", "waiting-children"]) expect(jobOutcome(s)).toBe("waiting");
    expect(jobOutcome("active")).toBe("running");
    expect(jobOutcome("failed")).toBe("failed");
    expect(jobOutcome("failed", "bogus")).toBe("failed");
    expect(jobOutcome("completed")).toBe("unknown");
    expect(jobOutcome("unknown")).toBe("unknown");
    expect(jobOutcome("completed", "<script>")).toBe("unknown");
  });

  it("isJobStatus takes the statuses and nothing else", () => {
    expect(JOB_STATUSES.every(isJobStatus)).toBe(true);
    for (const x of ["running", "waiting", "active", "", undefined, 1, "Completed"]) expect(isJobStatus(x)).toBe(false);
  });
});
