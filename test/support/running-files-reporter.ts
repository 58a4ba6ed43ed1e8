// A vitest reporter that names the test files still running long after they started, so that a
// run that never ends (a test blocked where vitest's timeouts cannot reach it: a synchronous child
// process, say) says which file holds it instead of running until CI's own limit with no word.
// Every 5 minutes it prints each file that has run for over 10 minutes, with its project and the
// test that started last in it; once one has run for 40 (no test's own timeout is past 15), it
// prints them all and the processes under this run (a blocked worker's children name what it
// waits on), then ends the run with exit status 1. It prints nothing in a run where every file
// ends in time.
import { readdirSync, readFileSync } from "node:fs";
import { relative } from "node:path";
import type { Reporter, TestCase, TestModule } from "vitest/node";

const EVERY_MS = 5 * 60_000;
const LONG_MS = 10 * 60_000;
const STUCK_MS = 40 * 60_000;

/** What the reporter knows of a file that is running: when it started, and its latest test. */
interface Running {
  file: string;
  project: string;
  since: number;
  test?: { name: string; since: number };
}

/** Where a module runs: the same file runs once per project (integration and podman). */
const keyOf = (m: Pick<TestModule, "moduleId" | "project">) => `${m.project?.name ?? ""}\0${m.moduleId}`;

/** Files running now, by project and module id. */
export default class RunningFilesReporter implements Reporter {
  private readonly running = new Map<string, Running>();
  private timer: NodeJS.Timeout | undefined;

  onInit(): void {
    this.timer = setInterval(() => this.check(Date.now()), EVERY_MS);
    this.timer.unref();
  }

  onTestModuleStart(m: TestModule): void {
    const file = relative(process.cwd(), m.moduleId);
    this.running.set(keyOf(m), { file, project: m.project?.name ?? "", since: Date.now() });
  }

  onTestCaseReady(t: TestCase): void {
    const r = this.running.get(keyOf(t.module));
    if (r) r.test = { name: t.fullName, since: Date.now() };
  }

  onTestModuleEnd(m: TestModule): void {
    this.running.delete(keyOf(m));
  }

  onTestRunEnd(): void {
    clearInterval(this.timer);
  }

  /** Prints the files running for over LONG_MS; ends the run once one has run for STUCK_MS. */
  check(now: number): void {
    const long = [...this.running.values()].filter((r) => now - r.since > LONG_MS);
    if (!long.length) return;
    const secs = (t: number) => `${Math.round((now - t) / 1000)} s`;
    const list = long
      .map((r) => {
        const where = r.project ? ` [${r.project}]` : "";
        const at = r.test ? `; its latest test, for ${secs(r.test.since)}: ${r.test.name}` : "";
        return `${r.file}${where} (${secs(r.since)}${at})`;
      })
      .join(", ");
    const stuck = long.some((r) => now - r.since > STUCK_MS);
    process.stderr.write(`[running-files] ${stuck ? "stuck, ending the run" : "still running"}: ${list}\n`);
    if (!stuck) return;
    process.stderr.write(`[running-files] the processes under this run:\n${descendants(process.pid)}`);
    process.exit(1);
  }
}

/** The processes under `root`, one line each (pid, state and command line), read from /proc. */
export function descendants(root: number): string {
  const procs = new Map<number, { ppid: number; line: string }>();
  for (const name of safe(() => readdirSync("/proc"), [] as string[])) {
    if (!/^\d+$/.test(name)) continue;
    const stat = safe(() => readFileSync(`/proc/${name}/stat`, "utf8"), "");
    const m = /^\d+ \((.*)\) (\S) (\d+)/s.exec(stat);
    if (!m) continue;
    const cmd = safe(() => readFileSync(`/proc/${name}/cmdline`, "utf8"), "")
      .replace(/[\x00-\x1f\x7f]/g, " ")
      .trim();
    procs.set(Number(name), { ppid: Number(m[3]), line: `${name} ${m[2]} ${(cmd || m[1]!).slice(0, 300)}` });
  }
  const out: string[] = [];
  const walk = (pid: number, depth: number) => {
    for (const [child, p] of procs) {
      if (p.ppid !== pid || depth > 20) continue;
      out.push(`${"  ".repeat(depth)}${p.line}\n`);
      walk(child, depth + 1);
    }
  };
  walk(root, 0);
  return out.join("") || "(none)\n";
}

function safe<T>(f: () => T, fallback: T): T {
  try {
    return f();
  } catch {
    return fallback;
  }
}
