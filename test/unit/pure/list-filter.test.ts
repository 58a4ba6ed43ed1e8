// Guards what `patchbay list` filters on (src/cli/list-filter.ts): --status takes a job's statuses
// (and the queue state of one not finished), --state queue states only, pointing a status to --status.
import { describe, expect, it } from "vitest";
import { badStates, badStatuses, statesFor } from "../../../src/cli/list-filter.js";

describe("list filters", () => {
  it("reads a final status from the queue states that hold finished jobs, an unfinished one from its own", () => {
    expect(statesFor(["cancelled"])).toEqual(["completed", "failed"]);
    expect(statesFor(["waiting"])).toEqual(["waiting", "prioritized", "delayed"]);
    expect(statesFor(["running", "verify_failed"])).toEqual(["active", "completed", "failed"]);
    expect(badStatuses(["active"])).toMatch(/--status takes .*waiting, running, not 'active'/);
  });
  it("refuses a status given to --state, naming --status", () => {
    expect(badStates(["completed", "failed"])).toBeUndefined();
    expect(badStates(["cancelled"])).toMatch(/'cancelled' is a job's status: use --status cancelled/);
    expect(badStates(["nope"])).toMatch(/not 'nope'/);
    expect(badStatuses(["cancelled", "waiting"])).toBeUndefined();
    expect(badStatuses(["done"])).toMatch(/--status takes completed, .*not 'done'/);
  });
});
