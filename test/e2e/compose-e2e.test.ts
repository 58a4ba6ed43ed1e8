// docker-compose.yml for real: `docker-compose` v1 (Debian's package) on the real engine, with the
// images scripts/compose-images.sh builds (offline here; cached by recipe, so seconds after the
// first build, which scripts/pretest.sh does). An override file (written below) publishes Redis on
// 127.0.0.1 only, so the host enqueues, and adds the scripted model as a compose service
// (test/support/compose-model.ts in the worker image), which workers reach as http://model:8080.
// `{ path }` repos come from a host directory ($PATCHBAY_REPOS) mounted at the same path in the
// workers, the way the compose file documents, and are enqueued by their host path.
// The steps share one stack and run in order: batch over 3 workers with one killed, drain, Redis
// restart, down.
//
// Backend: Docker (images, compose, the package's default sandbox).
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchClient } from "../../src/batch/batches.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { ensureBuilt, ROOT } from "../support/cli-helpers.js";
import { freePort, removeDir } from "../support/cluster.js";

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const tag = randomBytes(3).toString("hex");
const PROJECT = `pbcompose${tag}`; // v1 project names: lowercase letters and digits
const QUEUE = `compose-e2e-${tag}`;
const DECOY = `pb-compose-decoy-${tag}`;
const PASSWORD = randomBytes(24).toString("hex"); // Redis's, as compose:up would generate it
const GRACE_MS = 45_000; // docker-compose.yml's stop_grace_period for workers

/** The host's env without patchbay's and compose's knobs, plus the ones this test sets. */
function composeEnv(repos: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!/^(PATCHBAY_|ANTHROPIC_|REDIS_URL$|COMPOSE_|DOCKER_HOST$)/.test(k)) env[k] = v;
  return {
    ...env,
    ANTHROPIC_API_KEY: "test-key",
    PATCHBAY_REPOS: repos,
    PATCHBAY_EGRESS_DIR: join(repos, "../egress"),
    PATCHBAY_CONCURRENCY: "1",
    PATCHBAY_REDIS_PASSWORD: PASSWORD,
  };
}

function override(redisPort: number): string {
  const modules = realpathSync(join(ROOT, "node_modules")); // a worktree's may be a symlink
  return `services:
  redis:
    ports: ["127.0.0.1:${redisPort}:6379"]
  model:
    image: patchbay-worker:latest
    entrypoint: ["/usr/bin/tini", "--", "node", "--import", "tsx", "/src/test/support/compose-model.ts"]
    working_dir: /src
    environment: { PORT: "8080" }
    volumes:
      - ${join(ROOT, "test/support")}:/src/test/support:ro
      - ${join(ROOT, "package.json")}:/src/package.json:ro
      - ${modules}:/src/node_modules:ro
  worker:
    environment:
      ANTHROPIC_BASE_URL: http://model:8080
      PATCHBAY_QUEUE: ${QUEUE}
      PATCHBAY_LOCK_MS: "5000"
      PATCHBAY_STALLED_MS: "2000"
      PATCHBAY_HEARTBEAT_MS: "3000"
      PATCHBAY_REAP_MS: "2000"
`;
}

describe("docker-compose deployment, end to end", () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let files: string[];
  let client: PatchbayClient;
  let batches: BatchClient;
  let victim = "";
  let drained: string[] = [];
  const tiny = () => join(dir, "repos/tiny");

  const dc = async (...args: string[]) =>
    (
      await run("docker-compose", ["-p", PROJECT, ...files, ...args], {
        cwd: ROOT,
        env,
        maxBuffer: 64 << 20,
        timeout: 240_000,
      })
    ).stdout;
  const docker = async (...args: string[]) => {
    const r = await run("docker", args, { maxBuffer: 64 << 20, timeout: 120_000 });
    return r.stdout + r.stderr;
  };
  const lines = (s: string) =>
    s
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean);
  /** This project's containers of a service (stopped ones too), oldest first. */
  const containers = async (service: string) =>
    lines(
      await docker(
        "ps",
        "-a",
        "-q",
        "--no-trunc",
        "--filter",
        `label=com.docker.compose.project=${PROJECT}`,
        "--filter",
        `label=com.docker.compose.service=${service}`,
      ),
    ).reverse();
  const logs = (id: string) => docker("logs", id);
  const completed = (log: string) => new Set([...log.matchAll(/job (\S+) attempt \d+: completed/g)].map((m) => m[1]!));
  /** Jobs a worker started and has not ended (as far as its log says). */
  const inFlight = (log: string) =>
    [...log.matchAll(/job (\S+) attempt (\d+): started/g)]
      .filter(([, id, a]) => !new RegExp(`job ${id} attempt ${a}: (?!started)`).test(log))
      .map((m) => m[1]!);
  /** The running container of a job's newest sandbox (by its sandbox_ready event: pool sandboxes are labelled before they have a job). */
  const sandboxOf = async (jobId: string) => {
    let name: string | undefined;
    for await (const e of client.watch(jobId, { follow: false })) if (e.type === "sandbox_ready") name = e.container;
    return name ? lines(await docker("ps", "-q", "--filter", `name=^${name}$`))[0] : undefined;
  };
  const label = async (id: string, key: string) =>
    (await docker("inspect", "-f", `{{index .Config.Labels "${key}"}}`, id)).trim();
  const until = async <T>(what: string, fn: () => Promise<T | undefined | false>, ms = 120_000): Promise<T> => {
    const end = Date.now() + ms;
    for (;;) {
      const v = await fn();
      if (v) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await sleep(300);
    }
  };
  const waitAll = (ids: string[]) =>
    Promise.all(ids.map((id) => client.waitForResult(id, { timeoutMs: 180_000, warnIfNoWorker: false })));

  beforeAll(async () => {
    await ensureBuilt();
    // Cached by recipe: seconds when scripts/pretest.sh built them already.
    await run("bash", ["scripts/compose-images.sh"], { cwd: ROOT, timeout: 900_000 });
    await run("node", ["bin/patchbay.js", "image", "build"], { cwd: ROOT, timeout: 900_000 });
    dir = mkdtempSync(join(tmpdir(), "pb-compose-e2e-"));
    mkdirSync(join(dir, "repos/tiny"), { recursive: true });
    writeFileSync(join(dir, "repos/tiny/README"), "a tiny repo\n");
    const redisPort = await freePort();
    writeFileSync(join(dir, "override.yml"), override(redisPort));
    files = ["-f", join(ROOT, "docker-compose.yml"), "-f", join(dir, "override.yml")];
    env = composeEnv(join(dir, "repos"));
    // A sandbox of another deployment on this engine (same queue name, another Redis, an owner
    // that beats nowhere here): these workers must leave it to its own deadline.
    await docker(
      "run",
      "-d",
      "--name",
      DECOY,
      "--network",
      "none",
      ...[
        "patchbay=1",
        `patchbay.queue=${QUEUE}`,
        "patchbay.job=decoy",
        "patchbay.worker=elsewhere:4242:decoy",
        "patchbay.redis=another-deployment",
        `patchbay.deadline=${Math.floor(Date.now() / 1000) + 3600}`,
      ].flatMap((l) => ["--label", l]),
      "patchbay-sandbox:latest",
      "sleep",
      "infinity",
    );
    await dc("up", "-d", "--scale", "worker=3");
    client = new PatchbayClient({ redisUrl: `redis://:${PASSWORD}@127.0.0.1:${redisPort}`, queueName: QUEUE });
    batches = new BatchClient(client);
    const ws = await until("3 workers", async () => (await containers("worker")).length === 3 && containers("worker"));
    await until("3 ready workers", async () => (await Promise.all(ws.map(logs))).every((l) => /ready: queue /.test(l)));
    await until("the scripted model", async () => /listening/.test(await logs((await containers("model"))[0]!)));
  }, 900_000); // the first, uncached image build when pretest did not run

  afterAll(async () => {
    await client?.close();
    if (files) await dc("down", "-v", "--remove-orphans").catch(() => {});
    // Sandboxes of this test's queue only (its workers made them), should any be left.
    const left = lines(await docker("ps", "-a", "-q", "--filter", `label=patchbay.queue=${QUEUE}`).catch(() => ""));
    if (left.length) await docker("rm", "-f", "-v", ...left).catch(() => {});
    if (dir) removeDir(dir);
  }, 300_000);

  it("a 12-job batch from the host spreads over 3 workers; a worker killed mid-job: its job completes on another, its sandbox is reaped (no other)", async () => {
    const specs = Array.from({ length: 12 }, (_, i) => ({ task: `j${i} sleep 3`, repo: { path: tiny() } }));
    const { batchId, ids } = await batches.submit(specs, { name: "twelve" });
    const workers = await containers("worker");
    // Once each worker has completed a job, kill one that is running another (its sandbox up).
    const [job, sandbox] = await until(
      "a worker mid-job after each completed one",
      async () => {
        const all = await Promise.all(workers.map(logs));
        if (!all.every((l) => completed(l).size > 0)) return undefined;
        for (const [i, l] of all.entries()) {
          for (const id of inFlight(l)) {
            const sb = await sandboxOf(id);
            if (sb) return ((victim = workers[i]!), [id, sb] as const);
          }
        }
        return undefined;
      },
      180_000,
    );
    await docker("kill", victim);
    // Everything the dead worker owned: the job's sandbox and its warm pool's.
    const owned = lines(
      await docker("ps", "-a", "-q", "--filter", `label=patchbay.worker=${await label(sandbox, "patchbay.worker")}`),
    );
    expect(owned.length).toBeGreaterThanOrEqual(1);

    const st = await batches.wait(batchId);
    expect(st.counts.completed).toBe(12);
    const results = await waitAll(ids);
    results.forEach((r, i) => expect(r.patch).toContain(`j${i}.txt`));
    const byWorker = await Promise.all(workers.map(async (w) => completed(await logs(w))));
    for (const done of byWorker) expect(done.size).toBeGreaterThan(0); // each of the three ran jobs
    const finisher = workers.filter((_, i) => byWorker[i]!.has(job));
    expect(finisher).toHaveLength(1);
    expect(finisher[0]).not.toBe(victim);
    expect(byWorker.reduce((n, s) => n + s.size, 0)).toBe(12); // each job completed once
    // The dead worker's sandbox: removed by a live worker's reaper (its owner stopped beating).
    const gone = async (id: string) => !lines(await docker("ps", "-a", "-q", "--filter", `id=${id}`)).length;
    await until(
      "the killed worker's sandboxes reaped",
      async () => (await Promise.all(owned.map(gone))).every(Boolean),
      60_000,
    );
    expect(owned).toContain(sandbox);
    const all = await Promise.all(workers.map(logs));
    const reaped = all.flatMap((l) => [...l.matchAll(/reaped (\d+) containers?\b/g)].map((m) => Number(m[1])));
    // (At least: a pool sandbox whose creation was under way at the kill appears after the count.)
    expect(reaped.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(owned.length);
    // ...and no live worker's: a job whose sandbox is removed under it ends its attempt in an error.
    for (const l of all) expect(l).not.toMatch(/attempt \d+: (error|failed)/);
    expect(lines(await docker("ps", "-q", "--filter", `name=${DECOY}`)), "another deployment's sandbox").toHaveLength(
      1,
    );
    await docker("rm", "-f", DECOY);
    expect((await docker("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", victim)).trim()).toBe("exited 137");
  }, 420_000);

  it("`docker-compose stop` drains: running jobs complete, queued ones wait, workers exit 0 within the grace period", async () => {
    const live = (await containers("worker")).filter((w) => w !== victim);
    const ids = await client.enqueueBatch(
      ["d0", "d1", "d2"].map((n) => ({ task: `${n} sleep 4`, repo: { path: tiny() } })),
    );
    const running = await until("both live workers mid-job", async () => {
      const busy = (await Promise.all(live.map(logs))).map((l) => ids.filter((id) => inFlight(l).includes(id)));
      return busy.every((b) => b.length === 1) && busy.flat();
    });
    await dc("stop", "worker");
    for (const w of live) {
      // 0: the drain ended by itself; a worker still running after the grace period is SIGKILLed (137).
      expect((await docker("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", w)).trim()).toBe("exited 0");
      expect(await logs(w)).toMatch(/SIGTERM: shutting down[\s\S]*draining \(1 active[\s\S]*stopped/);
    }
    // The jobs running at the stop finished, unless the drain deadline passed first (a very loaded
    // machine): then the worker says it abandoned them, and they run again once workers are back
    // (the next test waits for every one of these jobs). The rest wait (or finished, had a worker
    // taken one between the look at the logs and the SIGTERM).
    const abandoned = (await Promise.all(live.map(logs))).some((l) => /deadline passed: abandoning/.test(l));
    const states = new Map(await Promise.all(ids.map(async (id) => [id, (await client.status(id)).state] as const)));
    for (const id of running) expect(abandoned ? ["completed", "active"] : ["completed"], id).toContain(states.get(id));
    for (const id of ids)
      expect(["completed", "waiting", ...(abandoned ? ["active"] : [])], id).toContain(states.get(id));
    drained = ids;
    expect(GRACE_MS).toBeGreaterThan(30_000); // the drain deadline (PATCHBAY_DRAIN_MS default) fits in it
  }, 300_000);

  it("`docker-compose restart redis` keeps queued jobs (AOF); started again, workers complete them", async () => {
    const queued = (await client.queue.getJobs(["wait"])).map((j) => j.id!); // the drain's waiting job, if any
    const more = await client.enqueueBatch(
      ["r0", "r1", "r2"].map((n) => ({ task: `${n} sleep 1`, repo: { path: tiny() } })),
    );
    expect(await client.redis.config("GET", "appendonly")).toEqual(["appendonly", "yes"]);
    // the password from .env is required (redis-cli: ioredis's HELLO without it only closes the connection)
    const anonymous = await run("redis-cli", ["-h", "127.0.0.1", "-p", String(client.redis.options.port), "PING"]);
    expect(anonymous.stdout).toMatch(/NOAUTH/);
    await dc("restart", "redis");
    const waiting = await until("Redis back", () =>
      client.queue.getJobs(["wait"]).then(
        (js) => js.map((j) => j.id!),
        () => undefined,
      ),
    );
    expect(waiting.sort()).toEqual([...queued, ...more].sort());
    await dc("start", "worker");
    const all = [...new Set([...drained, ...queued, ...more])]; // no job of the drain is lost either
    const results = await waitAll(all);
    expect(results.map((r) => r.status)).toEqual(all.map(() => "completed"));
  }, 300_000);

  it("setup network: the sandbox reaches the proxy in its worker's container through the per-job socket (mounted by its host path)", async () => {
    // Off the list, so the proxy refuses it without going out (this engine's networks have no route out).
    const setup = `python3 -c "import urllib.request as u; u.urlopen('http://off-list.example/', timeout=30)" || true`;
    const id = await client.enqueue({
      task: "egress",
      repo: { path: tiny() },
      setup,
      network: { setup: { allow: ["allowed.example"] } },
    });
    const [r] = await waitAll([id]);
    expect(r!.status, r!.error ?? "").toBe("completed");
    expect(r!.egress).toMatchObject({ allowed: 0, refused: 1 });
  }, 300_000);

  it("`docker-compose down -v` leaves no container, volume or network of the project, and no sandbox", async () => {
    await client.close();
    await docker("rm", "-f", DECOY).catch(() => {}); // not the project's (gone already unless the first test failed)
    await dc("down", "-v");
    const project = `label=com.docker.compose.project=${PROJECT}`;
    expect(lines(await docker("ps", "-a", "-q", "--filter", project))).toEqual([]);
    expect(lines(await docker("volume", "ls", "-q", "--filter", project))).toEqual([]);
    expect(lines(await docker("network", "ls", "-q", "--filter", project))).toEqual([]);
    expect(lines(await docker("ps", "-a", "-q", "--filter", `label=patchbay.queue=${QUEUE}`))).toEqual([]);
    expect(lines(await docker("volume", "ls", "-q", "--filter", `label=patchbay.queue=${QUEUE}`))).toEqual([]);
  }, 300_000);
});
