// Small timing helpers for the bench: medians of repeated runs, measured in one process.
import { execFile } from "node:child_process";
import { promisify } from "node:util";

export const execFileP = promisify(execFile);

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

/** Runs fn `n` times (after `warmup` unmeasured runs) and returns the median in ms. */
export async function timeMedian(n: number, fn: (i: number) => Promise<unknown>, warmup = 2): Promise<number> {
  for (let i = 0; i < warmup; i++) await fn(-1 - i);
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn(i);
    xs.push(performance.now() - t0);
  }
  return round(median(xs), 3);
}

export function log(msg: string): void {
  process.stderr.write(`[bench] ${msg}\n`);
}
