// One rule for every local source, at the API and again at the worker (issue 41, part 4), through
// the real parts: dashboards with the HTTP API and a write token, a private Redis, worker processes,
// host git, a smart-HTTP git server on loopback. The reproduction: `{ "git": "/srv/another/repo" }`
// (or file://, a relative path, a symlink out of a root, `/root/.git`) was cloned by the worker as a
// local repo, so an API client read a host repository's files and history through the transcript.
// Now the API refuses it, and a job planted in raw BullMQ (no API) is refused by the worker before it
// touches the host, with one message whether the path exists or not. A git URL of a job from the API
// names only the hosts of PATCHBAY_API_GIT_HOSTS (default: the forges'); an internal one is refused
// without a connection, at the API and at the worker, and a redirect off an allowed host is not followed.
// A job naming the worker's egress credentials that is not the operator's own is failed by the
// worker before anything runs (red team of issue 46).
//
// Backend: Docker (the setup network, the policy's limits, the engine's refusals, a browser over
// real jobs).
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/core/config/config.js";
import { JobFailedError, PatchbayClient } from "../../src/queue/client.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { http, jsonBody } from "../support/api.js";
import { removeQueueSandboxes, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { reply, startFakeAnthropic, text, toolUse, type FakeAnthropic } from "../support/fake-anthropic.js";
import { startGitHttp, type GitHttpServer } from "../support/git-http.js";
import { byTurn } from "../support/scripts.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const WRITE = "source-attacks-write-token-0123";
const TOKEN = "source-attacks-dashboard-token-1";
const SECRET = `host-secret-${process.pid}`;
const tmp = mkdtempSync(join(tmpdir(), "pb-sources-"));
const ROOT = join(tmp, "roots");
const HOST_REPO = join(tmp, "srv", "another", "repo"); // a host repository no job may read
const QUEUES = ["src-api", "src-roots", "src-default", "src-credentials"];

let redis: Awaited<ReturnType<typeof startRedis>>;
let fake: FakeAnthropic;
let gitServer: GitHttpServer;
let redirector: GitHttpServer; // an allowed host that answers with a redirect to an internal one
let internal: { server: Server; port: number; connections: number };
const workers: WorkerProc[] = [];
const dashboards: Dashboard[] = [];
const clients: PatchbayClient[] = [];

function gitRepo(dir: string, file: string, content: string, message: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, file), content);
  const g = (...args: string[]) =>
    execFileSync("git", ["-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", ...args], { stdio: "ignore" });
  g("init", "-q", "-b", "main");
  g("add", "-A");
  g("commit", "-q", "-m", message);
}

beforeAll(async () => {
  gitRepo(HOST_REPO, "SECRET.txt", `${SECRET}\n`, `history of ${SECRET}`);
  cpSync(CLAMP, join(ROOT, "clamp"), { recursive: true });
  gitRepo(join(ROOT, "clampgit"), "clamp.py", "def clamp(x, lo, hi):\n    return x\n", "clamp");
  symlinkSync(HOST_REPO, join(ROOT, "escape"));
  // served over smart HTTP on loopback: a bare clone
  execFileSync("git", ["clone", "-q", "--bare", join(ROOT, "clampgit"), join(tmp, "served", "clamp.git")]);
  gitServer = await startGitHttp(join(tmp, "served"));
  // An "internal service": it counts connections, and none may come.
  internal = { server: createServer((s) => (internal.connections++, s.destroy())), port: 0, connections: 0 };
  await new Promise<void>((r) => internal.server.listen(0, "127.0.0.1", r));
  internal.port = (internal.server.address() as { port: number }).port;
  redirector = await startGitHttp(join(tmp, "served"), { redirectTo: `http://127.0.0.1:${internal.port}` });
  redis = await startRedis();
  // A job that reaches the model shows the repo's files and history, then ends.
  fake = await startFakeAnthropic(
    byTurn([
      reply(
        toolUse("bash", {
          command:
            "cat /workspace/*.txt /workspace/*.py 2>&1 | head -5; git -C /workspace log --format=%s 2>&1 | head -3",
        }),
      ),
      reply(text("Done.")),
    ]),
  );
}, 120_000);

afterAll(async () => {
  for (const c of clients) await c.close();
  for (const d of dashboards) await d.close();
  for (const w of workers) await w.stop("SIGTERM");
  await fake?.close();
  await gitServer?.close();
  await redirector?.close();
  internal?.server.close();
  await redis?.stop();
  for (const q of QUEUES) await removeQueueSandboxes(q);
  rmSync(tmp, { recursive: true, force: true });
});

async function dashboard(queue: string, env: Record<string, string> = {}): Promise<Dashboard> {
  const config = loadConfig({
    ...process.env,
    REDIS_URL: redis.url,
    PATCHBAY_QUEUE: queue,
    PATCHBAY_API_TOKENS: `ci:write:${WRITE}`,
    PATCHBAY_API_REPO_ROOTS: ROOT,
    ...env,
  });
  const d = await startDashboard({ port: 0, redisUrl: redis.url, queueName: queue, token: TOKEN, config });
  dashboards.push(d);
  return d;
}

async function worker(queue: string, env: Record<string, string> = {}): Promise<PatchbayClient> {
  const w = startWorkerProc({
    REDIS_URL: redis.url,
    PATCHBAY_QUEUE: queue,
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: "test-key",
    PATCHBAY_CONCURRENCY: "2",
    PATCHBAY_POOL: "0",
    ...env,
  });
  workers.push(w);
  await w.waitFor(new RegExp(`ready: queue ${queue}`), 120_000); // a loaded machine starts a worker slowly
  const c = new PatchbayClient({ redisUrl: redis.url, queueName: queue });
  clients.push(c);
  return c;
}

/** A job put straight into BullMQ, as anyone who reaches Redis can (no client, no API). */
async function plant(queue: string, repo: unknown, origin?: string): Promise<string> {
  const q = new Queue(queue, { connection: { host: "127.0.0.1", port: redis.port } });
  try {
    const job = await q.add(
      "fix",
      { spec: { task: "show the repo", repo }, enqueuedAt: Date.now(), ...(origin ? { origin } : {}) },
      { attempts: 3 },
    );
    return job.id!;
  } finally {
    await q.close();
  }
}

async function events(c: PatchbayClient, id: string): Promise<TranscriptEvent[]> {
  const out: TranscriptEvent[] = [];
  for await (const e of c.watch(id, { follow: false })) out.push(e);
  return out;
}

/** A job the worker refuses before it reads anything: failed once, no model request, only job_finished, no secret anywhere. */
async function refusedByWorker(c: PatchbayClient, id: string): Promise<string> {
  const requests = fake.requests.length;
  const err = await c.waitForResult(id, { timeoutMs: 120_000 }).catch((e: Error) => e);
  expect(err, id).toBeInstanceOf(JobFailedError);
  expect(await c.status(id)).toMatchObject({ state: "failed", attemptsMade: 1 });
  const evs = await events(c, id);
  expect(evs.map((e) => e.type)).toEqual(["job_finished"]);
  expect(JSON.stringify(evs)).not.toContain(SECRET);
  expect(fake.requests.length).toBe(requests);
  return (err as JobFailedError).reason;
}

const LOCAL_FORMS = [
  { git: HOST_REPO },
  { git: `file://${HOST_REPO}` },
  { git: join(HOST_REPO, ".git") },
  { git: "../srv/another/repo" },
  { git: join(ROOT, "escape") },
  { path: join(ROOT, "escape") },
  { git: "/root/.git" },
  { path: HOST_REPO },
  { archive: "/etc/hostname" },
  { git: "/no/such/repo" }, // missing: the same words as for one that is there
  { path: "/no/such/dir" },
];

describe("the HTTP API", () => {
  it("refuses every local form outside PATCHBAY_API_REPO_ROOTS with the one message, whether the path exists or not; nothing is enqueued", async () => {
    const d = await dashboard("src-api");
    const refusal = (field: string) =>
      `repo.${field}: the HTTP API takes a local repo only under PATCHBAY_API_REPO_ROOTS (${ROOT}); send { "git": URL } for another`;
    for (const repo of LOCAL_FORMS) {
      const r = await http(d.url, "POST", "/api/v1/jobs", {
        ...jsonBody({ task: "read the host", repo }),
        token: WRITE,
      });
      expect(r.status, JSON.stringify(repo)).toBe(400);
      expect(r.json.errors).toEqual([refusal(Object.keys(repo)[0]!)]);
    }
    const batch = await http(d.url, "POST", "/api/v1/batches", {
      body: `${JSON.stringify({ task: "in", repo: { git: join(ROOT, "clampgit") } })}\n${JSON.stringify({ task: "out", repo: { git: `file://${HOST_REPO}` } })}\n`,
      headers: { "content-type": "application/x-ndjson" },
      token: WRITE,
    });
    expect(batch.status).toBe(400);
    expect(batch.json.errors).toEqual([`body:2: invalid JobSpec: ${refusal("git")}`]);
    const c = new PatchbayClient({ redisUrl: redis.url, queueName: "src-api" });
    clients.push(c);
    expect(Object.values(await c.queue.getJobCounts()).reduce((a, b) => a + b, 0)).toBe(0);
  });

  it("without PATCHBAY_API_REPO_ROOTS a batch takes no local repo either (it took any path)", async () => {
    const d = await dashboard("src-api", { PATCHBAY_API_REPO_ROOTS: "" });
    const batch = await http(d.url, "POST", "/api/v1/batches", {
      body: `${JSON.stringify({ task: "out", repo: { path: CLAMP } })}\n`,
      headers: { "content-type": "application/x-ndjson" },
      token: WRITE,
    });
    expect(batch.status, batch.text).toBe(400);
    expect(batch.json.errors).toEqual([
      `body:1: invalid JobSpec: repo.path: the HTTP API takes a local repo only under PATCHBAY_API_REPO_ROOTS, which this dashboard does not set; send { "git": URL }, or set it to the directories scripts may name`,
    ]);
  });

  it("refuses a git URL off PATCHBAY_API_GIT_HOSTS (default: the forges'): internal addresses, localhost, an ssh alias, a transport helper; nothing connects", async () => {
    const d = await dashboard("src-api");
    const hosts = "(github.com, gitlab.com)";
    const cases: [string, string][] = [
      [
        `http://127.0.0.1:${internal.port}/x.git`,
        `the HTTP API takes a git URL only on the hosts of PATCHBAY_API_GIT_HOSTS ${hosts}; "127.0.0.1:${internal.port}" is not one of them`,
      ],
      [
        `http://localhost:${internal.port}/x.git`,
        `the HTTP API takes a git URL only on the hosts of PATCHBAY_API_GIT_HOSTS ${hosts}; "localhost:${internal.port}" is not one of them`,
      ],
      [
        "ssh://git@10.0.0.1/x.git",
        `the HTTP API takes a git URL only on the hosts of PATCHBAY_API_GIT_HOSTS ${hosts}; "10.0.0.1" is not one of them`,
      ],
      [
        "internal-alias:acme/x.git",
        `the HTTP API takes a git URL only on the hosts of PATCHBAY_API_GIT_HOSTS ${hosts}; "internal-alias" is not one of them`,
      ],
      [
        `ext::sh -c nc% 127.0.0.1% ${internal.port}`,
        `not a git URL the workers clone: it names git's transport helper "ext::", which runs a program on the worker`,
      ],
    ];
    for (const [git, why] of cases) {
      const r = await http(d.url, "POST", "/api/v1/jobs", {
        ...jsonBody({ task: "reach inside", repo: { git } }),
        token: WRITE,
      });
      expect(r.status, git).toBe(400);
      expect(r.json.errors).toEqual([`repo.git: ${why}`]);
    }
    const forge = await http(d.url, "POST", "/api/v1/jobs", {
      ...jsonBody({ task: "ok", repo: { git: "https://github.com/acme/x.git" } }),
      token: WRITE,
    });
    expect(forge.status, forge.text).toBe(201);
    expect(internal.connections).toBe(0);
  });
});

describe("a worker with PATCHBAY_LOCAL_REPO_ROOTS", () => {
  let c: PatchbayClient;
  beforeAll(async () => {
    c = await worker("src-roots", {
      PATCHBAY_LOCAL_REPO_ROOTS: ROOT,
      PATCHBAY_API_GIT_HOSTS: `${gitServer.host},${redirector.host}`,
    });
  }, 150_000);

  it("refuses a job planted in raw BullMQ that names the host outside its roots, in any form, before it reads it; one message, there or not", async () => {
    const refusal = (field: string) =>
      `repo.${field}: this worker reads a local repo only under PATCHBAY_LOCAL_REPO_ROOTS (${ROOT}); send { "git": URL } for another`;
    const planted = await Promise.all(LOCAL_FORMS.map(async (repo) => ({ repo, id: await plant("src-roots", repo) })));
    planted.push({ repo: { git: HOST_REPO }, id: await plant("src-roots", { git: HOST_REPO }, "operator") }); // roots hold the operator's jobs too
    for (const { repo, id } of planted)
      expect(await refusedByWorker(c, id), JSON.stringify(repo)).toBe(refusal(Object.keys(repo)[0]!));
  }, 180_000);

  it("refuses a planted git URL off its hosts without connecting, and a planted transport helper", async () => {
    const id = await plant("src-roots", { git: `http://127.0.0.1:${internal.port}/x.git` });
    expect(await refusedByWorker(c, id)).toBe(
      `repo.git: this worker clones a job from the HTTP API only from the hosts of PATCHBAY_API_GIT_HOSTS (${gitServer.host}, ${redirector.host}); "127.0.0.1:${internal.port}" is not one of them`,
    );
    const ext = await plant("src-roots", { git: `ext::sh -c nc% 127.0.0.1% ${internal.port}` }, "operator");
    expect(await refusedByWorker(c, ext)).toMatch(
      /^repo\.git: not a git URL a worker clones: it names git's transport helper "ext::"/,
    );
    expect(internal.connections).toBe(0);
  }, 120_000);

  it("runs the API's jobs under its roots (a path, a git path, through a symlink inside) and from its hosts; a redirect off the host is not followed", async () => {
    const d = await dashboard("src-roots", { PATCHBAY_API_GIT_HOSTS: `${gitServer.host},${redirector.host}` });
    symlinkSync(join(ROOT, "clamp"), join(ROOT, "inner"));
    const ids: string[] = [];
    for (const repo of [
      { path: join(ROOT, "inner") },
      { git: join(ROOT, "clampgit") },
      { git: `${gitServer.url}/clamp.git` },
    ]) {
      const r = await http(d.url, "POST", "/api/v1/jobs", { ...jsonBody({ task: "fix", repo }), token: WRITE });
      expect(r.status, r.text).toBe(201);
      ids.push(r.json.id);
    }
    for (const id of ids) expect((await c.waitForResult(id, { timeoutMs: 180_000 })).status).toBe("completed");
    // An allowed host that answers with a redirect to an internal one: git does not follow it.
    const r = await http(d.url, "POST", "/api/v1/jobs", {
      ...jsonBody({ task: "fix", repo: { git: `${redirector.url}/clamp.git` } }),
      token: WRITE,
    });
    expect(r.status, r.text).toBe(201);
    const result = await c.waitForResult(r.json.id, { timeoutMs: 120_000 });
    expect(result.status).toBe("failed");
    expect(result.error).toMatch(/git clone failed/);
    expect(redirector.requests.length).toBeGreaterThan(0);
    expect(internal.connections).toBe(0);
  }, 400_000);
});

describe("a worker without PATCHBAY_LOCAL_REPO_ROOTS (the default)", () => {
  let c: PatchbayClient;
  beforeAll(async () => {
    c = await worker("src-default");
  }, 150_000);

  it("reads no local repo of a job from the API or of one that does not say, and the operator's own enqueue still runs", async () => {
    const refusal =
      'repo.path: this worker reads the local repo of a job from the HTTP API (or of one that does not say who enqueued it) only under PATCHBAY_LOCAL_REPO_ROOTS, which it does not set; send { "git": URL }';
    expect(await refusedByWorker(c, await plant("src-default", { path: HOST_REPO }))).toBe(refusal);
    expect(await refusedByWorker(c, await plant("src-default", { path: "/no/such/dir" }))).toBe(refusal);
    const d = await dashboard("src-default"); // the API takes it (under its roots); this worker does not read it
    const api = await http(d.url, "POST", "/api/v1/jobs", {
      ...jsonBody({ task: "fix", repo: { path: join(ROOT, "clamp") } }),
      token: WRITE,
    });
    expect(api.status, api.text).toBe(201);
    expect(await refusedByWorker(c, api.json.id)).toBe(refusal);
    const own = await c.enqueue({ task: "fix", repo: { path: CLAMP } }); // the operator's CLI and library
    expect((await c.waitForResult(own, { timeoutMs: 180_000 })).status).toBe("completed");
  }, 400_000);
});

describe("a worker with egress credentials (PATCHBAY_EGRESS_CREDENTIALS)", () => {
  let c: PatchbayClient;
  const TOKEN_VALUE = `egress-token-${process.pid}-0123456789`;
  beforeAll(async () => {
    const file = join(tmp, "credentials.yaml");
    writeFileSync(
      file,
      "credentials:\n  npm-private:\n    host: registry.example.org\n    bearer: { env: RT46_TOKEN }\n",
    );
    c = await worker("src-credentials", { PATCHBAY_EGRESS_CREDENTIALS: file, RT46_TOKEN: TOKEN_VALUE });
  }, 150_000);

  it("fails a job naming one that is from the API, or does not say who enqueued it, before anything runs", async () => {
    const q = new Queue("src-credentials", { connection: { host: "127.0.0.1", port: redis.port } });
    const spec = {
      task: "fetch the private package",
      repo: { git: "https://github.com/acme/r.git" },
      setup: ["npm ci"],
      network: { setup: { allow: ["registry.example.org"], credentials: ["npm-private"] } },
    };
    try {
      for (const origin of ["api", undefined]) {
        const job = await q.add(
          "fix",
          { spec, enqueuedAt: Date.now(), ...(origin ? { origin } : {}) },
          { attempts: 3 },
        );
        const reason = await refusedByWorker(c, job.id!);
        expect(reason).toMatch(
          /^network\.setup\.credentials: a job from the HTTP API \(or one that does not say who enqueued it\) cannot name this worker's egress credentials/,
        );
        expect(reason).not.toContain(TOKEN_VALUE);
      }
    } finally {
      await q.close();
    }
  }, 400_000);
});
