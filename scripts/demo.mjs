// The demo's job: a worker and `patchbay run` on examples/clamp, as separate processes, on the
// default queue (so `patchbay list` and `patchbay result` show it afterwards). Without
// ANTHROPIC_API_KEY the worker plays the scripted model (examples/scripted/clamp.yaml: no API, no
// key, nothing priced). The worker is stopped at the end; the demo leaves nothing running but
// Docker and Redis. Plain JavaScript: it needs nothing but Node and the built dist/.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";

const SCRIPT = "examples/scripted/clamp.yaml";
const root = new URL("..", import.meta.url).pathname;
const env = { ...process.env };
const workerArgs = ["worker", "--concurrency", "1"];
if (process.env.ANTHROPIC_API_KEY) {
  console.error(`\n=== demo: running with Claude (${process.env.PATCHBAY_MODEL ?? "claude-sonnet-5-5"}) ===\n`);
} else {
  workerArgs.push("--scripted", SCRIPT);
  console.error(
    "\n=== demo: ANTHROPIC_API_KEY is not set, so the model is SCRIPTED: the worker replays        ===\n" +
      `=== ${SCRIPT} (patchbay worker --scripted FILE): no API, no key, nothing priced.   ===\n` +
      "=== Everything else is real: Redis, the worker, the Docker sandbox, the tools, git.          ===\n" +
      "=== Set ANTHROPIC_API_KEY to run the same job with Claude.                                   ===\n",
  );
}

const bin = new URL("../bin/patchbay.js", import.meta.url).pathname;
const worker = spawn(process.execPath, [bin, ...workerArgs], {
  cwd: root,
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
    "examples/clamp",
    "--task",
    "The tests in this repository fail. Find the bug and fix it so that `python3 -m unittest -q` passes.",
    "--verify",
    "python3 -m unittest -q",
    "--out",
    out,
    "--force",
  ],
  { cwd: root, env, stdio: ["ignore", "inherit", "inherit"] },
);
const code = await new Promise((r) => run.on("exit", (c) => r(c ?? 1)));
worker.kill("SIGTERM");
await new Promise((r) => worker.on("exit", r));
console.log(`\n--- ${out}/patch.diff ---`);
console.log(readFileSync(`${root}/${out}/patch.diff`, "utf8"));
console.log(
  code === 0
    ? "demo: the job completed; the patch above fixes examples/clamp."
    : `demo: the job did not complete (exit ${code}); see ${out}/transcript.jsonl`,
);
console.log(
  `demo: the worker is stopped. Next (README.md, "A 30-second tour"): patchbay list; patchbay result 1 (the id list shows);\n` +
    `      a worker with no key: node bin/patchbay.js worker --scripted ${SCRIPT} &`,
);
process.exit(code);
