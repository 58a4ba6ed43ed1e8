// Event-loop lag around a piece of work: how long the loop was kept from running timers.
//
// A 5 ms interval notes each gap between its ticks beyond the 5 ms, and the CPU time the loop's
// thread spent within that gap. On a busy shared machine (load 15 on 2 cores) a process can go
// unscheduled for 100+ ms with its loop idle, which no code can help; a loop blocked by our own
// work burns CPU for the whole gap. So `lagMs` takes each gap at most as long as that CPU time,
// while `wallMs` is the plain wall-clock worst (the larger of the gaps and perf_hooks' histogram).
// The thread's CPU time comes from /proc (10 ms ticks; the compiler's and GC's helper threads are
// not counted); elsewhere, or in a worker thread, the whole process's.
import { readFileSync } from "node:fs";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { isMainThread } from "node:worker_threads";

const STAT = `/proc/self/task/${process.pid}/stat`;

/** CPU time of the main thread in ms (user + system), or of the process where /proc cannot say. */
function cpuMs(): number {
  if (isMainThread)
    try {
      const stat = readFileSync(STAT, "latin1");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // f[0] is field 3 (state)
      const ticks = Number(f[11]) + Number(f[12]); // utime, stime: fields 14 and 15, in 1/100 s
      if (Number.isFinite(ticks)) return ticks * 10;
    } catch {
      // not Linux
    }
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

export interface Lag {
  /** Worst gap, each counted at most as the CPU time the process spent in it (ms). */
  lagMs: number;
  /** Worst gap by the wall clock alone (ms). */
  wallMs: number;
}

export interface LagMonitor {
  stop(): Lag;
}

export function lagMonitor(): LagMonitor {
  const hist = monitorEventLoopDelay({ resolution: 10 });
  hist.enable();
  const every = 5;
  let [last, lastCpu, worstCpu, worstWall] = [performance.now(), cpuMs(), 0, 0];
  const sample = () => {
    const [now, cpu] = [performance.now(), cpuMs()];
    const gap = now - last - every;
    worstWall = Math.max(worstWall, gap);
    worstCpu = Math.max(worstCpu, Math.min(gap, cpu - lastCpu));
    [last, lastCpu] = [now, cpu];
  };
  const timer = setInterval(sample, every);
  return {
    stop() {
      sample();
      clearInterval(timer);
      hist.disable();
      return { lagMs: Math.round(worstCpu), wallMs: Math.round(Math.max(worstWall, hist.max / 1e6)) };
    },
  };
}

/** Runs fn under a lag monitor; its outcome (value or error) and the worst lag. */
export async function withLag<T>(fn: () => Promise<T>): Promise<{ value?: T; error?: unknown } & Lag> {
  const mon = lagMonitor();
  await new Promise((r) => setImmediate(r)); // the first sample starts from an idle loop
  try {
    const value = await fn();
    return { value, ...mon.stop() };
  } catch (error) {
    return { error, ...mon.stop() };
  }
}
