// The egress proxy's added cost when it adds a credential (issue 46): `npm ci` of a ~200-package
// project in a real job (runJob, the per-repo Node image of test/support/node-image.ts), through
// the worker's egress proxy, in two arms on the same registry in the same run. TUNNEL: the registry
// is allowed and no credential is named, so the proxy tunnels TLS end to end (npm trusts the
// registry's test CA itself). TERMINATE: the job names a bearer credential for it, so the proxy
// terminates TLS with the job's CA, adds the header and scrubs what comes back.
//
// The registry is verdaccio (test/support/verdaccio.ts) on a loopback address of its own, reading
// anonymously allowed (the tunnelled arm has no token), its tokens JWTs: with its default tokens it
// spends ~80 ms of CPU on bcrypt per request that carries one, which made the terminating arm 4x
// the tunnelled one for the registry's sake alone (verdaccio_core_ms shows what it spends per arm).
// It is first started with this host's real registry as its uplink; the bench makes the project's
// lockfile against it and installs the project once on this host, which caches every packument and
// tarball in its storage; then it is restarted on that storage without the uplink, so no measured
// run waits on the internet. The lockfile is made here each time (its resolved URLs are the
// registry's name), not committed.
//
// Each run is one job: setup `npm ci` in a fresh sandbox (npm's cache, /tmp/npm-cache in the
// image, is empty: each run checks and says so), the agent phase one scripted reply. The arms
// alternate (their order swapped each round), one warm-up each, then EGRESS_RUNS (5) each; the
// figures are medians: the setup event's ms, npm ci's own ms (timed inside the command), the job's
// wall time, bytes down through the proxy, core-ms by process (bench/cpu.ts) and verdaccio's. The
// ratio terminate/tunnel of setup's ms is bench/ratios.ts's `egress_terminate_of_tunnel`.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { AnthropicModel } from "../src/agent/model.js";
import { loadConfig, type Config } from "../src/core/config/config.js";
import type { EventOf, JobResult, JobSpec, TranscriptEvent } from "../src/core/spec/spec.js";
import { runJob } from "../src/job/run.js";
import { EgressProxy } from "../src/net/proxy.js";
import { reply, startFakeAnthropic, text } from "../test/support/fake-anthropic.js";
import { buildNodeImage } from "../test/support/node-image.js";
import { startPrivateRegistry, type PrivateRegistry } from "../test/support/verdaccio.js";
import { cpuMeter, procMs, type CpuReport } from "./cpu.js";
import { log, median, round } from "./lib.js";

const RUNS = Number(process.env["EGRESS_RUNS"] ?? 5);
/** The project's direct dependencies: with what they pull in, 198 packages on 2026-12-07, none with an install script. */
export const EGRESS_DEPENDENCIES = {
  express: "4.21.2",
  eslint: "8.57.1",
  yargs: "17.7.2",
  commander: "12.1.0",
  lodash: "4.17.21",
  axios: "1.7.9",
  uuid: "11.0.3",
} as const;
const CREDENTIAL = "bench-registry";
const TOKEN_VAR = "PATCHBAY_BENCH_REGISTRY_TOKEN";
const ARMS = ["tunnel", "terminate"] as const;
type Arm = (typeof ARMS)[number];

// In the sandbox: npm's cache checked before (it must be absent), npm ci timed by itself, both said
// after npm's own lines so that they are in the setup event's output tail. The tunnelled arm trusts
// the registry's CA through --cafile; the terminating arm trusts the job's CA through setup's own
// variables (npm_config_cafile).
const setupCommand = (arm: Arm) =>
  [
    "c=$(test -e /tmp/npm-cache && echo present || echo absent)",
    "s=$(date +%s%N)",
    `npm ci${arm === "tunnel" ? " --cafile=/workspace/registry-ca.pem" : ""}`,
    "r=$?",
    'echo "npm_cache_before=$c npm_ci_ms=$(( ($(date +%s%N) - s) / 1000000 ))"',
    "exit $r",
  ].join("; ");

interface Run {
  arm: Arm;
  setupMs: number;
  npmCiMs?: number;
  wallMs: number;
  bytesDown: number;
  connections: number;
  requests: number;
  withCredential: number;
  cacheBefore?: string;
  added?: number;
  cpu: CpuReport;
  verdaccioMs: number;
  problem?: string;
}

/** The registry populated through the uplink, then restarted on its storage without it; the project made against it. */
async function prepare(
  work: string,
): Promise<{ reg: PrivateRegistry; repo: string; packages: number; populateMs: number }> {
  const upstream = execFileSync("npm", ["config", "get", "registry"], { encoding: "utf8" }).trim();
  const storage = join(work, "storage");
  mkdirSync(storage);
  const repo = join(work, "repo");
  mkdirSync(repo);
  const pkg = { name: "egress-bench", version: "1.0.0", private: true, dependencies: EGRESS_DEPENDENCIES };
  writeFileSync(join(repo, "package.json"), `${JSON.stringify(pkg, null, 2)}\n`);
  const t0 = Date.now();
  const first = await startPrivateRegistry({ uplink: upstream, anonymousRead: true, storage, jwt: true });
  try {
    const npm = (args: string[], cwd: string) =>
      execFileSync("npm", [...args, "--ignore-scripts"], {
        cwd,
        env: first.npmEnv(),
        stdio: ["ignore", "ignore", "pipe"],
      });
    npm(["install", "--package-lock-only"], repo);
    // One install on this host fetches every tarball through verdaccio, which keeps them.
    const fill = join(work, "fill");
    mkdirSync(fill);
    for (const f of ["package.json", "package-lock.json"]) copyFileSync(join(repo, f), join(fill, f));
    npm(["ci"], fill);
    rmSync(fill, { recursive: true, force: true });
  } finally {
    await first.close();
  }
  const populateMs = Date.now() - t0;
  const reg = await startPrivateRegistry({ anonymousRead: true, storage, jwt: true });
  const lock = JSON.parse(readFileSync(join(repo, "package-lock.json"), "utf8")) as {
    packages: Record<string, { resolved?: string }>;
  };
  const entries = Object.entries(lock.packages).filter(([k]) => k !== "");
  const stray = entries.filter(([, v]) => !v.resolved?.startsWith(reg.url));
  if (stray.length)
    throw new Error(`egress bench: ${stray.length} lockfile entries do not resolve to ${reg.url}: ${stray[0]![0]}`);
  writeFileSync(join(repo, ".npmrc"), `registry=${reg.url}\n`);
  writeFileSync(join(repo, ".gitignore"), "node_modules/\n");
  copyFileSync(reg.caFile, join(repo, "registry-ca.pem"));
  return { reg, repo, packages: entries.length, populateMs };
}

/** The worker's configuration with one bearer credential for the registry (its CA checks the upstream). */
function credentialConfig(work: string, reg: PrivateRegistry): Config {
  const file = join(work, "credentials.json");
  const credentials = { [CREDENTIAL]: { host: reg.host, bearer: { env: TOKEN_VAR }, ca: reg.caFile } };
  writeFileSync(file, JSON.stringify({ credentials }));
  return loadConfig({ ...process.env, PATCHBAY_EGRESS_CREDENTIALS: file, [TOKEN_VAR]: reg.token });
}

interface Ctx {
  reg: PrivateRegistry;
  repo: string;
  image: string;
  config: Config;
  proxy: EgressProxy;
  model: AnthropicModel;
  label: string;
}

async function runOnce(ctx: Ctx, arm: Arm): Promise<Run> {
  const spec: JobSpec = {
    task: "Say done.",
    repo: { path: ctx.repo },
    image: ctx.image,
    setup: setupCommand(arm),
    network: { setup: { allow: [ctx.reg.host], ...(arm === "terminate" ? { credentials: [CREDENTIAL] } : {}) } },
  };
  const events: TranscriptEvent[] = [];
  const meter = await cpuMeter(`patchbay.test=${ctx.label}`);
  const v0 = procMs(String(ctx.reg.pid)) ?? 0;
  const t0 = Date.now();
  const result = await runJob(spec, {
    model: ctx.model,
    egress: ctx.proxy,
    config: ctx.config,
    onEvent: (e) => events.push(e),
    labels: { "patchbay.test": ctx.label },
  });
  const wallMs = Date.now() - t0;
  const cpu = meter.stop(1);
  const verdaccioMs = (procMs(String(ctx.reg.pid)) ?? v0) - v0;
  return { arm, wallMs, cpu, verdaccioMs, ...fromEvents(arm, result, events) };
}

/** What the job's setup event, egress records and result say about a run, and whether it did what its arm is for. */
function fromEvents(arm: Arm, result: JobResult, events: TranscriptEvent[]) {
  const setup = events.find((e): e is EventOf<"setup"> => e.type === "setup");
  const tail = setup?.outputTail ?? "";
  const egress = events.filter((e): e is EventOf<"egress"> => e.type === "egress");
  const connections = egress.filter((e) => e.method === "CONNECT").length;
  const requests = egress.filter((e) => e.path !== undefined).length;
  const withCredential = egress.filter((e) => e.credential === CREDENTIAL).length;
  const cacheBefore = /npm_cache_before=(\w+)/.exec(tail)?.[1];
  const npmCi = /npm_ci_ms=(\d+)/.exec(tail)?.[1];
  const added = /added (\d+) packages?/.exec(tail)?.[1];
  let problem: string | undefined;
  if (!setup || setup.exitCode !== 0)
    problem = `setup failed (${result.error ?? setup?.exitCode}): ${tail.slice(-300)}`;
  else if (cacheBefore !== "absent") problem = `npm's cache was ${cacheBefore ?? "not reported"} before npm ci`;
  else if (arm === "terminate" && withCredential === 0) problem = "no egress record says the credential was added";
  else if (arm === "tunnel" && (withCredential > 0 || requests > 0)) problem = "the tunnelled arm was terminated";
  else if (result.egress?.refused)
    problem = `the proxy refused ${result.egress.refused}: ${result.egress.refusals?.[0]}`;
  return {
    setupMs: setup?.ms ?? NaN,
    ...(npmCi ? { npmCiMs: Number(npmCi) } : {}),
    bytesDown: result.egress?.bytesDown ?? 0,
    connections,
    requests,
    withCredential,
    ...(cacheBefore ? { cacheBefore } : {}),
    ...(added ? { added: Number(added) } : {}),
    ...(problem ? { problem } : {}),
  };
}

/** The `egress` section: both arms, medians of EGRESS_RUNS each after a warm-up; the registry and sandboxes removed after. */
export async function benchEgress() {
  const work = mkdtempSync(join(tmpdir(), "pb-bench-egress-"));
  const fake = await startFakeAnthropic(() => reply(text("Done.")));
  let reg: PrivateRegistry | undefined;
  try {
    // The image's build reports on stdout, which is the bench's JSON: it goes to the log instead.
    const say = console.log;
    console.log = (...a: unknown[]) => log(a.map(String).join(" "));
    const image = await buildNodeImage().finally(() => (console.log = say));
    const prep = await prepare(work);
    reg = prep.reg;
    const ip = reg.ip;
    const host = reg.host;
    const ctx: Ctx = {
      reg,
      repo: prep.repo,
      image,
      config: credentialConfig(work, reg),
      proxy: new EgressProxy({ allowPrivate: [`${ip}/32`], resolve: async (h) => (h === host ? [ip] : []) }),
      model: new AnthropicModel({ apiKey: "bench", baseURL: fake.url, maxRetries: 0 }),
      label: `bench-egress-${process.pid}`,
    };
    log(
      `egress: npm ci of ${prep.packages} packages (populated in ${prep.populateMs} ms), tunnel and terminate, ${RUNS} runs each after a warm-up`,
    );
    const load0 = round(loadavg()[0]!, 1);
    const runs: Run[] = [];
    for (let i = -1; i < RUNS; i++) {
      // The arms alternate; the order flips each round, so that neither always runs second.
      for (const arm of i % 2 === 0 ? [...ARMS].reverse() : ARMS) {
        const run = await runOnce(ctx, arm);
        log(`egress ${i < 0 ? "warm-up" : `run ${i + 1}`} ${arm}: ${JSON.stringify(run)}`);
        if (i >= 0) runs.push(run);
      }
    }
    const load = { start: load0, end: round(loadavg()[0]!, 1) };
    return { ...summary(runs, prep.packages), populate_ms: prep.populateMs, loadavg_1min: load };
  } finally {
    await reg?.close();
    await fake.close();
    rmSync(work, { recursive: true, force: true });
  }
}

function summary(runs: Run[], packages: number) {
  const of = (arm: Arm) => runs.filter((r) => r.arm === arm);
  const med = (pick: (r: Run) => number | undefined) =>
    Object.fromEntries(
      ARMS.map((arm) => {
        const xs = of(arm)
          .map(pick)
          .filter((x): x is number => x !== undefined && Number.isFinite(x));
        return [arm, xs.length ? round(median(xs), 0) : undefined];
      }),
    );
  const cpu = (arm: Arm) =>
    Object.fromEntries(
      (["container", "dockerd", "containerd", "worker", "total"] as const).map((k) => [
        k,
        round(median(of(arm).map((r) => r.cpu[k])), 0),
      ]),
    );
  const problems = runs.filter((r) => r.problem).map((r) => `${r.arm}: ${r.problem}`);
  return {
    runs: RUNS,
    packages,
    dependencies: EGRESS_DEPENDENCIES,
    setup_ms: med((r) => r.setupMs),
    npm_ci_ms: med((r) => r.npmCiMs),
    wall_ms: med((r) => r.wallMs),
    bytes_down: med((r) => r.bytesDown),
    // The egress records of a run: a tunnel is one CONNECT record; a terminated tunnel records each
    // request in it instead, with the credential's name.
    connect_records: med((r) => r.connections),
    request_records: med((r) => r.requests),
    requests_with_credential: med((r) => r.withCredential),
    packages_added: med((r) => r.added),
    // Core-ms of a run: the job's containers, the engine, this process (the worker's side: the
    // proxy, runJob, the scripted server) and the machine's busy time; verdaccio's own beside them.
    cpu_core_ms: { tunnel: cpu("tunnel"), terminate: cpu("terminate") },
    verdaccio_core_ms: med((r) => r.verdaccioMs),
    npm_cache_empty_each_run: runs.every((r) => r.cacheBefore === "absent"),
    ...(problems.length ? { problems } : {}),
  };
}
