// CLI start-up: `patchbay --help` (the compiled CLI, dist/cli.js, which the installed bin runs) against
// `node -e 0`, both measured here, in the same run. Goal: --help at most 4× a bare node.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { execFileP, log, round, timeMedian } from "./lib.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const BIN = join(ROOT, "bin/patchbay.js");
const DIST_CLI = join(ROOT, "dist/cli.js");

/** bin/ runs src/ through tsx when dist/ is older: build first, so the compiled CLI is measured. */
function buildIfStale(): void {
  const newest = Math.max(
    ...readdirSync(join(ROOT, "src"), { withFileTypes: true, recursive: true })
      .filter((e) => e.isFile())
      .map((e) => statSync(join(e.parentPath, e.name)).mtimeMs),
  );
  if (existsSync(DIST_CLI) && statSync(DIST_CLI).mtimeMs >= newest) return;
  log("cli: npm run build (dist/ is older than src/)");
  try {
    execFileSync("npm", ["run", "build"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  } catch {
    if (!existsSync(DIST_CLI)) throw new Error("npm run build produced no dist/cli.js");
  }
}

export async function benchCli() {
  buildIfStale();
  log("cli: patchbay --help vs node -e 0 (medians of 15, interleaved)");
  const node = (args: string[]) => execFileP(process.execPath, args);
  const runs: Record<"bare" | "dist" | "bin", number[]> = { bare: [], dist: [], bin: [] };
  // Interleaved, so a busy moment on the machine hits all the same. `dist` is what the installed
  // command runs (bin/ → dist/cli.js); `bin` here, in a checkout, runs src/ through tsx whenever
  // src/ was edited after the build (another engineer's edit mid-run is enough).
  for (let i = 0; i < 3; i++) {
    runs.bare.push(await timeMedian(5, () => node(["-e", "0"]), i === 0 ? 2 : 0));
    runs.dist.push(await timeMedian(5, () => node([DIST_CLI, "--help"]), i === 0 ? 2 : 0));
    runs.bin.push(await timeMedian(5, () => node([BIN, "--help"]), i === 0 ? 2 : 0));
  }
  const mid = (xs: number[]) => round(xs.sort((a, b) => a - b)[1]!, 1);
  const helpMs = mid(runs.dist);
  const nodeMs = mid(runs.bare);
  return {
    help_ms: helpMs,
    node_e0_ms: nodeMs,
    ratio: round(helpMs / nodeMs, 2),
    goal_ratio_max: 4,
    help_via_checkout_bin_ms: mid(runs.bin),
  };
}
