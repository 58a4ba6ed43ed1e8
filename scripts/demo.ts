// The demo's job: a worker and `patchbay run` on examples/clamp, as separate processes.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { startFakeAnthropic } from "../test/support/fake-anthropic.js";
import { byTurn, clampScript } from "../test/support/scripts.js";

const env: Record<string, string> = {
  ...(process.env as Record<string, string>),
  PATCHBAY_QUEUE: process.env.PATCHBAY_QUEUE ?? "patchbay-demo",
};
let fake: Awaited<ReturnType<typeof startFakeAnthropic>> | undefined;
if (process.env.ANTHROPIC_API_KEY) {
  console.error(`\n=== demo: running with Claude (${process.env.PATCHBAY_MODEL ?? "claude-sonnet-5-5"}) ===\n`);
} else {
  fake = await startFakeAnthropic(byTurn(clampScript()));
  Object.assign(env, { ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "scripted" });
  console.error(
    "\n=== demo: ANTHROPIC_API_KEY is not set, so the model is a SCRIPTED stand-in ===\n" +
      `=== (an Anthropic-compatible server on ${fake.url} replaying a recorded Clamp fix). ===\n` +
      "=== Everything else is real: Redis, the worker, Docker sandbox, git, the SDK.      ===\n" +
      "=== Set ANTHROPIC_API_KEY to run the same job with Claude.                          ===\n",
  );
}

const bin = new URL("../bin/patchbay.js", import.meta.url).pathname;
const worker = spawn(process.execPath, [bin, "worker", "--concurrency", "1"], {
  env,
  stdio: ["ignore", "inherit", "inherit"],
});
const out = "demo-out";
const run = spawn(
  process.execPath,
  [
    bin,
    "run",
    "--repo",
    new URL("../examples/clamp", import.meta.url).pathname,
    "--task",
    "The tests in this repository fail. Find the bug and fix it so that `python3 -m unittest -q` passes.",
    "--verify",
    "python3 -m unittest -q",
    "--out",
    out,
  ],
  { env, stdio: ["ignore", "inherit", "inherit"] },
);
const code: number = await new Promise((r) => run.on("exit", (c) => r(c ?? 1)));
worker.kill("SIGTERM");
await new Promise((r) => worker.on("exit", r));
await fake?.close();
console.log(`\n--- ${out}/patch.diff ---`);
console.log(readFileSync(`${out}/patch.diff`, "utf8"));
console.log(
  code === 0
    ? "demo: the job completed; the patch above fixes examples/clamp."
    : `demo: the job did not complete (exit ${code}); see ${out}/transcript.jsonl`,
);
process.exit(code);
