// What a campaign's outcome cost: its spend (every attempt of every job, its batch's) per merged
// changeset, the number a campaign is judged by. One rule and one wording for `campaign status`,
// the summary files and the dashboard's campaign page.
import { usd } from "../core/money.js";

/** The spend per merged changeset, USD; null while none merged (no cost per nothing). */
export function costPerMerged(spentUsd: number, merged: number): number | null {
  return merged > 0 ? spentUsd / merged : null;
}

/** The spend and the cost per merged change as a line says them: "$5.00 spent, $2.50 per merged change (2 merged)". */
export function spendText(spentUsd: number, merged: number): string {
  const per = costPerMerged(spentUsd, merged);
  return `${usd(spentUsd)} spent, ${per === null ? "n/a per merged change (none merged)" : `${usd(per)} per merged change (${merged} merged)`}`;
}
