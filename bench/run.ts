// `npm run bench`: one JSON object with medians and the baselines measured in the same run
// (docs/performance.md says what each section measures, and the goals).
// Usage: tsx bench/run.ts [--only shell,create,editor,turn,output,job,queue,cli,batch,web,phases,overhead,jobs,ready,floor,verify,fleet,engines,candidates,egress,density]
// (also --only=a,b; `npm run bench -- --only=jobs,ready`)
import { hostname, cpus } from "node:os";
import { benchCreate, benchEditor, benchShell, benchTurn } from "./sandbox.js";
import { benchJob, benchQueue } from "./job.js";
import { benchCli } from "./cli.js";
import { benchBatch } from "./batch.js";
import { benchWeb } from "./web.js";
import { log } from "./lib.js";
import { benchOverhead, benchPhases } from "./speed.js";
import { benchEngines, benchJobs, benchReady } from "./speed-queue.js";
import { benchFloor } from "./floor.js";
import { benchVerify } from "./verify.js";
import { benchFleet } from "./fleet.js";
import { benchCandidates } from "./candidates.js";
import { benchEgress } from "./egress.js";
import { benchOutput } from "./output.js";
import { benchDensity } from "./density.js";
import { floorRatios, sameRunRatios } from "./ratios.js";

const sections: Record<string, () => Promise<object>> = {
  shell: benchShell,
  create: benchCreate,
  editor: benchEditor,
  // patchbay's own time per agent turn (tool round trip, transcript events, the loop) with an instant model
  turn: benchTurn,
  // a command printing 150 MB through the shell against the same to /dev/null: the helper's cut in the box
  output: benchOutput,
  job: benchJob,
  queue: benchQueue,
  cli: benchCli,
  batch: benchBatch,
  web: benchWeb,
  // What a job costs outside the model: each without and with the warm pool in the same run (the
  // old code paths they were once measured against are gone: see speed.ts)
  phases: benchPhases,
  overhead: benchOverhead,
  jobs: benchJobs,
  ready: benchReady,
  // what one scripted job costs with nothing of patchbay: the ceiling the jobs row is under
  floor: benchFloor,
  // verify judging exactly baseline + patch, in a sandbox of its own, against the in-place verify it replaced
  verify: benchVerify,
  // one Redis under many workers on the memory backend; the batch index and the dashboard under 100,000 jobs
  fleet: benchFleet,
  // ready and jobs/min under Docker and under rootless Podman, same run
  engines: benchEngines,
  // best-of-N: a job with 4 candidates against the same job with 1, enqueue to result, same run
  candidates: benchCandidates,
  // the egress proxy adding a credential: npm ci of ~200 packages with TLS terminated against tunnelled, same run
  egress: benchEgress,
  // jobs in flight on one host while the model thinks: C jobs of 16 turns at D s each, stepping C up
  density: benchDensity,
};

const onlyArg = process.argv.findIndex((a) => a === "--only" || a.startsWith("--only="));
const onlyVal =
  onlyArg < 0
    ? undefined
    : process.argv[onlyArg]!.startsWith("--only=")
      ? process.argv[onlyArg]!.slice(7)
      : process.argv[onlyArg + 1];
const only = onlyVal ? onlyVal.split(",") : Object.keys(sections);
const result: Record<string, unknown> = {
  host: hostname(),
  cpus: cpus().length,
  node: process.version,
  at: new Date().toISOString(),
};
for (const name of only) {
  const fn = sections[name];
  if (!fn) throw new Error(`unknown bench section ${name}; known: ${Object.keys(sections).join(", ")}`);
  const t0 = Date.now();
  result[name] = await fn();
  log(`${name} done in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${JSON.stringify(result[name])}`);
}
// The goals as same-run ratios to the floor (ratios.ts), when the floor ran beside the rows they divide.
const ratios = floorRatios(result);
if (ratios && Object.keys(ratios).length) result["ratios_to_floor"] = ratios;
// The goals whose baseline ran in their own section (ratios.ts), whether or not the floor ran.
const own = sameRunRatios(result);
if (Object.keys(own).length) result["ratios_same_run"] = own;
console.log(JSON.stringify(result, null, 2));
