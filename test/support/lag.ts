// Event-loop lag around a piece of work: how long the loop was kept from running timers. Two
// measures, the larger wins: perf_hooks' histogram (10 ms resolution) and a 5 ms interval's
// largest gap between ticks.
import { monitorEventLoopDelay, performance } from "node:perf_hooks";

export interface LagMonitor {
  /** Stops sampling; the largest lag seen, in ms. */
  stop(): number;
}

export function lagMonitor(): LagMonitor {
  const hist = monitorEventLoopDelay({ resolution: 10 });
  hist.enable();
  const every = 5;
  let [last, worst] = [performance.now(), 0];
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last - every);
    last = now;
  }, every);
  return {
    stop() {
      clearInterval(timer);
      hist.disable();
      worst = Math.max(worst, performance.now() - last - every);
      return Math.round(Math.max(worst, hist.max / 1e6));
    },
  };
}

/** Runs fn under a lag monitor; its outcome (value or error) and the worst lag. */
export async function withLag<T>(fn: () => Promise<T>): Promise<{ value?: T; error?: unknown; lagMs: number }> {
  const mon = lagMonitor();
  await new Promise((r) => setImmediate(r)); // the first sample starts from an idle loop
  try {
    const value = await fn();
    return { value, lagMs: mon.stop() };
  } catch (error) {
    return { error, lagMs: mon.stop() };
  }
}
