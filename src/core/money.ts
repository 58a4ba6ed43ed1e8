// Money as patchbay shows it (the CLI's lines, batch and campaign summaries, the worker's log, the
// batch's budget note): one formatter, so no message says "$0.00" of an amount that is not zero.

/**
 * A dollar amount with enough digits to be true: two decimals from $1 up ($12.34), else two
 * significant digits with at most four decimals ($0.12, $0.05, $0.0016), "<$0.0001" for a smaller
 * amount that is not zero, and "$0.00" for zero only. A negative amount keeps its sign; a value
 * that is not a finite number shows as "$?".
 */
export function usd(amount: number): string {
  if (!Number.isFinite(amount)) return "$?";
  if (amount < 0) return `-${usd(-amount)}`;
  if (amount === 0) return "$0.00";
  if (amount >= 1) return `$${amount.toFixed(2)}`;
  const decimals = Math.min(4, Math.max(2, 1 - Math.floor(Math.log10(amount))));
  const shown = amount.toFixed(decimals);
  if (Number(shown) === 0) return "<$0.0001";
  if (Number(shown) >= 1) return `$${amount.toFixed(2)}`;
  // Trailing zeros past the cents say nothing: $0.050 is $0.05.
  return `$${shown.replace(/(\.\d\d\d*?)0+$/, "$1")}`;
}
