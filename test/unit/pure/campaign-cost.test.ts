// Guards what a campaign's merged change cost (src/campaign/cost.ts): the spend divided by the merged
// changesets, "n/a" (null) while none merged rather than a division by zero, in the one wording
// `campaign status` and summary.md (src/campaign/summary.ts) print.
import { describe, expect, it } from "vitest";
import { costPerMerged, spendText } from "../../../src/campaign/cost.js";
import { changesetMarkdown } from "../../../src/campaign/summary.js";

describe("cost per merged change", () => {
  it("is the spend over the merged changesets, null while none merged", () => {
    expect(costPerMerged(5, 2)).toBe(2.5);
    expect(costPerMerged(0.3, 3)).toBeCloseTo(0.1, 12);
    expect(costPerMerged(5, 0)).toBeNull();
    expect(costPerMerged(0, 0)).toBeNull();
  });

  it("reads as the spend and the cost per merged change, n/a when none merged", () => {
    expect(spendText(5, 2)).toBe("$5.00 spent, $2.50 per merged change (2 merged)");
    expect(spendText(0.0123, 1)).toBe("$0.012 spent, $0.012 per merged change (1 merged)");
    expect(spendText(1.5, 0)).toBe("$1.50 spent, n/a per merged change (none merged)");
  });

  it("summary.md's changesets section says it", () => {
    const md = (spentUsd: number, merged: number) =>
      changesetMarkdown({
        changesets: [],
        counts: { unpublished: 0, draft: 0, open: 0, merged, closed: 0, conflict: 0 },
        checks: { passing: 0, failing: 0, pending: 0 },
        batch: { spentUsd },
      });
    expect(md(6, 3)).toContain("\nCost: $6.00 spent, $2.00 per merged change (3 merged).\n");
    expect(md(6, 0)).toContain("\nCost: $6.00 spent, n/a per merged change (none merged).\n");
  });
});
