// `npm run bench`: one JSON object with medians and the baselines measured in the same run.
// Usage: tsx bench/run.ts [--only shell,create,editor,job,queue,cli,batch,web]
import { hostname, cpus } from "node:os";
import { benchCreate, benchEditor, benchShell } from "./sandbox.js";
import { benchJob, benchQueue } from "./job.js";
import { benchCli } from "./cli.js";
import { benchBatch } from "./batch.js";
import { benchWeb } from "./web.js";
import { log } from "./lib.js";

const sections: Record<string, () => Promise<object>> = {
  shell: benchShell,
  create: benchCreate,
  editor: benchEditor,
  job: benchJob,
  queue: benchQueue,
  cli: benchCli,
  batch: benchBatch,
  web: benchWeb,
};

const onlyArg = process.argv.indexOf("--only");
const only = onlyArg >= 0 ? process.argv[onlyArg + 1]!.split(",") : Object.keys(sections);
const result: Record<string, unknown> = { host: hostname(), cpus: cpus().length, node: process.version, at: new Date().toISOString() };
for (const name of only) {
  const fn = sections[name];
  if (!fn) throw new Error(`unknown bench section ${name}; known: ${Object.keys(sections).join(", ")}`);
  const t0 = Date.now();
  result[name] = await fn();
  log(`${name} done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
console.log(JSON.stringify(result, null, 2));
