// Guards issue 46's promise end to end: a private npm dependency installs in setup while the token
// is never in the sandbox. A real worker (startWorker, in this process, on a Redis of its own)
// whose operator configured credential "npm-private" (the bearer token of a real verdaccio,
// test/support/verdaccio.ts) runs a job on a repo whose .npmrc has only a placeholder: `npm ci`
// goes through the egress proxy, which adds the token; the agent then runs the package. The token
// is searched for, and must be missing, in the sandbox at the end of setup (every file, every
// process's environment, argv and memory, as root: test/support/canary.ts), in the verify sandbox
// (by the job's own verify command, test/support/secret-scan.ts), and in the transcript, the
// result, every key of the Redis and every log line of the worker. The same job without the
// credential fails in setup on the registry's refusal, and leaks nothing either.
//
// Backend: Docker (the setup network, the job's sandboxes, a search of a container as root).
import { execFileSync, spawn } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { docker } from "../../src/backend/docker.js";
import { LABEL } from "../../src/backend/owner.js";
import { loadConfig } from "../../src/core/config/config.js";
import type { EventOf, JobResult, TranscriptEvent } from "../../src/core/spec/spec.js";
import { EgressProxy } from "../../src/net/proxy.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { startWorker, type WorkerHandle } from "../../src/queue/worker.js";
import { canaryNeedles, searchCanary, type CanaryReport } from "../support/canary.js";
import { startRedis } from "../support/cluster.js";
import {
  reply,
  startFakeAnthropic,
  text,
  toolResults,
  toolResultText,
  toolUse,
  type FakeAnthropic,
  type Policy,
} from "../support/fake-anthropic.js";
import { buildNodeImage } from "../support/node-image.js";
import { taskOf } from "../support/scripts.js";
import { redisText, SECRET_SCAN, secretScanArgs } from "../support/secret-scan.js";
import {
  makePrivateDepRepo,
  PRIVATE_PACKAGE,
  startPrivateRegistry,
  type PrivateRegistry,
} from "../support/verdaccio.js";

const QUEUE = "egress-credentials-npm";
const WITH = "install the private package with the credential";
const WITHOUT = "install the private package without the credential";

let reg: PrivateRegistry;
let redis: Awaited<ReturnType<typeof startRedis>>;
let fake: FakeAnthropic;
let worker: WorkerHandle;
let client: PatchbayClient;
let image = "";
let repo = "";
const dirs: string[] = [];
const logs: string[] = [];
// The job with the credential: its id once enqueued, and the search of its sandbox made when the
// model gets its first request (setup has ended, the agent's shell runs).
let withId: Promise<string>;
let setId!: (id: string) => void;
let atFirstTurn: Promise<{ container: string; ms: number; token: CanaryReport; placeholder: CanaryReport }>;

/** The forms of the token that must be nowhere: canaryNeedles' (raw, base64 at every alignment) and the header. */
const forms = () => [...canaryNeedles(reg.token).map((n) => n.bytes.toString()), `Bearer ${reg.token}`];
const leaks = (s: string) => forms().filter((f) => s.includes(f)).length;

/** The name of a job's running container, by its label (the worker runs no warm pool here). */
async function containerOf(jobId: string): Promise<string> {
  const found = await docker().listContainers({ filters: { label: [`${LABEL.job}=${jobId}`] } });
  if (found.length !== 1) throw new Error(`job ${jobId} has ${found.length} running containers, not 1`);
  return found[0]!.Names[0]!.replace(/^\//, "");
}

/** The search of the job's sandbox for the token, and for the placeholder its .npmrc holds (which it must find). */
async function searchSandbox(jobId: string) {
  const container = await containerOf(jobId);
  const t = Date.now();
  const token = await searchCanary(container, reg.token);
  const placeholder = await searchCanary(container, "PATCHBAY_PLACEHOLDER");
  return { container, ms: Date.now() - t, token, placeholder };
}

// The model: for the job with the credential, at its first request the test searches its sandbox
// as root, then the agent runs the package; the job without the credential never reaches it.
const policy: Policy = async ({ body }) => {
  const turn = (body.messages as { role: string }[]).filter((m) => m.role === "assistant").length;
  if (!taskOf(body).includes(WITH)) return reply(text("unexpected job"));
  if (turn === 0) {
    const search = withId.then(searchSandbox);
    atFirstTurn = search;
    await search.catch(() => undefined); // the test reports its error
    const pkg = JSON.stringify(PRIVATE_PACKAGE.name);
    return reply(toolUse("bash", { command: `npm test; node -e 'console.log(require(${pkg})("x"))'` }));
  }
  return reply(text("The private package answers."));
};

beforeAll(async () => {
  image = await buildNodeImage();
  reg = await startPrivateRegistry();
  console.log(`private registry ready in ${reg.startupMs} ms`);
  repo = makePrivateDepRepo(reg).dir;
  // The registry's CA (public) is in the repo, for npm's `cafile` when no credential is added: the
  // job without one then reaches the registry and hears its refusal. With one, setup's
  // npm_config_cafile (the job CA's bundle) wins over the project's .npmrc.
  writeFileSync(join(repo, "registry-ca.pem"), reg.caPem);
  appendFileSync(join(repo, ".npmrc"), "cafile=/workspace/registry-ca.pem\n");
  writeFileSync(join(repo, "scan_secret.py"), SECRET_SCAN);
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd: repo });
  git("add", "-A");
  git("commit", "-qm", "the registry's CA and the verify scan");
  const dir = mkdtempSync(join(tmpdir(), "pb-cred-npm-"));
  dirs.push(repo, dir);
  writeFileSync(
    join(dir, "credentials.yaml"),
    `credentials:\n  npm-private:\n    host: ${reg.host}\n    bearer: { env: PB_TEST_NPM_TOKEN }\n    ca: ${reg.caFile}\n`,
  );
  redis = await startRedis();
  fake = await startFakeAnthropic(policy);
  worker = await startWorker({
    redisUrl: redis.url,
    queueName: QUEUE,
    concurrency: 1,
    pool: 0,
    model: () => new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 }),
    log: (line) => logs.push(line),
    egress: new EgressProxy({
      allowPrivate: [`${reg.ip}/32`],
      resolve: async (h) => (h === reg.host ? [reg.ip] : []),
    }),
    config: loadConfig({
      ...process.env,
      PATCHBAY_EGRESS_CREDENTIALS: join(dir, "credentials.yaml"),
      PB_TEST_NPM_TOKEN: reg.token,
    }),
  });
  client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
}, 900_000);
afterAll(async () => {
  await client?.close();
  await worker?.shutdown(5000);
  await fake?.close();
  await redis?.stop();
  await reg?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const spec = (task: string, credentials: string[] | undefined) => ({
  task,
  repo: { path: repo },
  image,
  setup: "npm ci",
  network: { setup: { allow: [reg.host], ...(credentials ? { credentials } : {}) } },
  // The scan looks for the placeholder first (which it must find in .npmrc), then for the token.
  // Verdaccio picks its tokens (base64 of `IV:ciphertext`, in hex): the markers the scan gets are
  // their first characters, which encode part of the IV, public by design; the rest only as a hash.
  verify: [
    "npm test",
    `{ python3 scan_secret.py ${secretScanArgs("PATCHBAY_PLACEHOLDER").join(" ")}; echo "placeholder scan: exit $?"; }`,
    `python3 scan_secret.py ${secretScanArgs(reg.token).join(" ")}`,
  ].join(" && "),
  timeoutSec: 300,
});

async function transcript(id: string): Promise<TranscriptEvent[]> {
  const events: TranscriptEvent[] = [];
  for await (const e of client.watch(id, { follow: false })) events.push(e);
  return events;
}
const egressOf = (events: TranscriptEvent[]) => events.filter((e): e is EventOf<"egress"> => e.type === "egress");

describe("a private npm dependency through a real worker, its token added by the egress proxy", () => {
  let result: JobResult;
  let events: TranscriptEvent[];

  it("the job completes: npm ci installs the package with the token the proxy adds, and the agent runs it", async () => {
    const started = Date.now();
    withId = new Promise((r) => (setId = r));
    const id = await client.enqueue(spec(WITH, ["npm-private"]));
    setId(id);
    result = await client.waitForResult(id, { timeoutMs: 600_000 });
    events = await transcript(id);
    console.log(`job with the credential: ${result.status} in ${Date.now() - started} ms`);
    expect(result, result.error).toMatchObject({ status: "completed", verified: true });
    const said = toolResultText(toolResults(fake.requests.find((r) => r.body.messages.length === 3))[0]);
    expect(said.split("\n").filter((l) => l === PRIVATE_PACKAGE.answer)).toHaveLength(2);
    expect(events.some((e) => e.type === "tool_result" && e.output.includes(PRIVATE_PACKAGE.answer))).toBe(true);

    const added = egressOf(events).filter((e) => e.host === reg.host && e.credential === "npm-private");
    expect(added.length).toBeGreaterThan(0);
    for (const e of added) {
      expect(e).toMatchObject({ allowed: true, status: 200, port: 443 });
      expect(e.path).toMatch(/^\/[^?]*$/);
    }
    expect(added.map((e) => e.path)).toContain(
      `/${PRIVATE_PACKAGE.name}/-/private-util-${PRIVATE_PACKAGE.version}.tgz`,
    );
  }, 700_000);

  it("at the end of setup the sandbox holds no trace of the token: files, environments, argvs, memory", async () => {
    const { container, ms, token: report, placeholder } = await atFirstTurn;
    console.log(
      `sandbox search: ${report.files} files (${report.fileBytes} bytes), ${report.processes} processes (${report.memoryBytes} bytes of memory); twice in ${ms} ms`,
    );
    expect(events.find((e) => e.type === "sandbox_ready")).toMatchObject({ container });
    expect(report.findings).toEqual([]);
    // It covered the sandbox: the installed package's files, the agent's shell among the processes.
    expect(report.files).toBeGreaterThan(100);
    expect(report.processes).toBeGreaterThan(1);
    expect(report.memoryBytes).toBeGreaterThan(1_000_000);
    // The same search finds what is there: the placeholder in the repo's .npmrc.
    expect(placeholder.findings).toContainEqual({ where: "file", path: "/workspace/.npmrc", form: "raw" });
  });

  it("the verify sandbox holds none of it either, by the job's own scan", () => {
    expect(result.verify?.exitCode).toBe(0);
    expect(result.verify?.outputTail).toContain("FOUND file /workspace/.npmrc");
    expect(result.verify?.outputTail).toContain("placeholder scan: exit 1");
    expect(result.verify?.outputTail).toMatch(/secret scan: [1-9]\d* files, \d+ bytes read, \d+ unreadable, 0 found/);
    expect(result.verify?.outputTail).toContain(PRIVATE_PACKAGE.answer);
  });

  it("the transcript, the result, every Redis key and every log line hold none of it", async () => {
    expect(events.length).toBeGreaterThan(5);
    for (const e of events) expect(leaks(JSON.stringify(e))).toBe(0);
    expect(leaks(JSON.stringify(result))).toBe(0);
    const keys = await redisText(redis.url);
    expect(keys).toContain(PRIVATE_PACKAGE.answer); // the transcript is in it
    expect(leaks(keys)).toBe(0);
    expect(logs.length).toBeGreaterThan(0);
    for (const l of logs) expect(leaks(l)).toBe(0);
  });

  it("the same job without the credential fails in setup on the registry's refusal, and leaks nothing", async () => {
    const id = await client.enqueue(spec(WITHOUT, undefined));
    const failed = await client.waitForResult(id, { timeoutMs: 600_000 });
    const evs = await transcript(id);
    expect(failed.status).toBe("failed");
    expect(failed.error).toMatch(/setup command failed \(exit \d+\): npm ci/);
    expect(failed.error).toMatch(/E40[13]|40[13]/);
    const reached = egressOf(evs).filter((e) => e.host === reg.host);
    expect(reached.length).toBeGreaterThan(0);
    expect(reached.every((e) => e.credential === undefined)).toBe(true);
    for (const e of evs) expect(leaks(JSON.stringify(e))).toBe(0);
    expect(leaks(JSON.stringify(failed))).toBe(0);
    expect(leaks(await redisText(redis.url))).toBe(0);
    for (const l of logs) expect(leaks(l)).toBe(0);
  }, 700_000);
});

describe("the verify scan", () => {
  it("finds the token planted in a file, as base64, or in a process's environment; nothing when none is", () => {
    const canary = reg.token;
    const dir = mkdtempSync(join(tmpdir(), "pb-scan-"));
    dirs.push(dir);
    writeFileSync(join(dir, "scan.py"), SECRET_SCAN);
    const scan = (root: string) => {
      try {
        const args = [join(dir, "scan.py"), "--root", root, ...secretScanArgs(canary)];
        return { code: 0, out: execFileSync("python3", args, { encoding: "utf8" }) };
      } catch (e) {
        return { code: (e as { status: number }).status, out: String((e as { stdout: string }).stdout) };
      }
    };
    for (const sub of ["clean", "raw", "b64"]) mkdirSync(join(dir, sub));
    writeFileSync(join(dir, "clean", "a.txt"), `token=${canary.slice(0, 20)}x${canary.slice(21)}\n`);
    writeFileSync(join(dir, "raw", "npmrc"), `${"x".repeat(1 << 20)}//registry.test/:_authToken=${canary}\n`);
    writeFileSync(join(dir, "b64", "blob"), `data ${Buffer.from(canary).toString("base64")} end`);
    expect(scan(join(dir, "clean"))).toMatchObject({ code: 0, out: expect.stringMatching(/1 files, .* 0 found/) });
    expect(scan(join(dir, "raw"))).toMatchObject({
      code: 1,
      out: expect.stringContaining(`FOUND file ${join(dir, "raw", "npmrc")}`),
    });
    expect(scan(join(dir, "b64"))).toMatchObject({ code: 1, out: expect.stringContaining("FOUND file") });
    // A process whose environment holds it (this host's processes: a sleep of the test's own).
    const sleeper = spawn("sleep", ["60"], { env: { PATH: process.env.PATH, PLANTED: canary }, stdio: "ignore" });
    try {
      expect(scan(join(dir, "clean"))).toMatchObject({
        code: 1,
        out: expect.stringContaining(`FOUND environ of process ${sleeper.pid}`),
      });
    } finally {
      sleeper.kill("SIGKILL");
    }
  });
});
