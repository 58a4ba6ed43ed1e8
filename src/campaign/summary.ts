// A campaign's summary files: the batch's summary.json/summary.md with the changesets' table added
// (state, checks, review, link per repository; the counts users burn down) and what a merged change
// cost (src/campaign/cost.ts). Every cell escaped.
import { join } from "node:path";
import { mdCell, summaryMarkdown, type BatchSummary } from "../batch/batch-summary.js";
import { writeOwn } from "../core/out-files.js";
import { CHANGESET_STATES, changeNoun } from "./changeset.js";
import { spendText } from "./cost.js";
import type { CampaignStatus } from "./track.js";

/**
 * The batch's summary (jobs) with the changesets: `changesetCounts` by state, `checks` of the open
 * ones, and `costPerMergedUsd`: the spend (`costUsd.all`) per merged changeset, null while none merged.
 */
export type CampaignSummary = BatchSummary &
  Pick<CampaignStatus, "changesets" | "checks" | "costPerMergedUsd"> & {
    campaignId: string;
    changesetCounts: CampaignStatus["counts"];
  };

export function campaignSummary(batch: BatchSummary, st: CampaignStatus): CampaignSummary {
  return {
    ...batch,
    campaignId: st.campaignId,
    changesets: st.changesets,
    changesetCounts: st.counts,
    checks: st.checks,
    costPerMergedUsd: st.costPerMergedUsd,
  };
}

export function changesetMarkdown(
  st: Pick<CampaignStatus, "changesets" | "counts" | "checks"> & { batch: Pick<CampaignStatus["batch"], "spentUsd"> },
): string {
  const total = st.changesets.length;
  const counts = CHANGESET_STATES.filter((s) => st.counts[s])
    .map((s) => `${s} ${st.counts[s]}`)
    .join(", ");
  const rows = st.changesets.map(
    (c) =>
      `| ${c.line} | ${mdCell(c.repo, 80)} | ${c.state} | ${c.checks ?? ""} | ${c.review ?? ""} | ${c.url ? `[#${c.number ?? ""}](${encodeURI(c.url).replace(/[()]/g, encodeURIComponent)})` : c.branch ? mdCell(c.branch, 60) : ""} | ${mdCell(c.reason ?? "", 160)} |`,
  );
  return [
    "## Changesets",
    "",
    `${st.counts.merged} merged of ${total}${counts ? ` (${counts})` : ""}; checks on open ones: ${st.checks.passing} passing, ${st.checks.failing} failing, ${st.checks.pending} pending.`,
    "",
    `Cost: ${spendText(st.batch.spentUsd, st.counts.merged)}.`,
    "",
    `| line | repository | state | checks | review | ${changeNoun(st.changesets.map((c) => c.forge))} | note |`,
    "|---|---|---|---|---|---|---|",
    ...rows,
    "",
  ].join("\n");
}

export function writeCampaignSummary(dir: string, batch: BatchSummary, st: CampaignStatus): CampaignSummary {
  const s = campaignSummary(batch, st);
  writeOwn(join(dir, "summary.json"), JSON.stringify(s, null, 2) + "\n");
  writeOwn(join(dir, "summary.md"), `${summaryMarkdown(batch)}\n${changesetMarkdown(st)}`);
  return s;
}
