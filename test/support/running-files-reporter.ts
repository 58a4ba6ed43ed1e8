// A vitest reporter that names the test files still running long after they started, so that a
// run that never ends (a test blocked where vitest's timeouts cannot reach it: a synchronous child
// process, say) says which file holds it instead of running until CI's own limit with no word.
// Every 5 minutes it prints each file that has run for over 10 minutes; once one has run for 40
// (no test's own timeout is past 15), it prints them all and ends the run with exit status 1.
// It prints nothing in a run where every file ends in time.
import { relative } from "node:path";
import type { Reporter, TestModule } from "vitest/node";

const EVERY_MS = 5 * 60_000;
const LONG_MS = 10 * 60_000;
const STUCK_MS = 40 * 60_000;

/** Files running now, by module id, with when they started. */
export default class RunningFilesReporter implements Reporter {
  private readonly running = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  onInit(): void {
    this.timer = setInterval(() => this.check(Date.now()), EVERY_MS);
    this.timer.unref();
  }

  onTestModuleStart(m: TestModule): void {
    this.running.set(m.moduleId, Date.now());
  }

  onTestModuleEnd(m: TestModule): void {
    this.running.delete(m.moduleId);
  }

  onTestRunEnd(): void {
    clearInterval(this.timer);
  }

  /** Prints the files running for over LONG_MS; ends the run once one has run for STUCK_MS. */
  check(now: number): void {
    const long = [...this.running].filter(([, t]) => now - t > LONG_MS);
    if (!long.length) return;
    const list = long.map(([id, t]) => `${relative(process.cwd(), id)} (${Math.round((now - t) / 1000)} s)`).join(", ");
    const stuck = long.some(([, t]) => now - t > STUCK_MS);
    process.stderr.write(`[running-files] ${stuck ? "stuck, ending the run" : "still running"}: ${list}\n`);
    if (stuck) process.exit(1);
  }
}
