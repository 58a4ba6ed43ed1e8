// A token for a `{ git }` repo appears nowhere in the sandbox, the transcript or Redis (issue 23,
// point 7). A real smart-HTTP git server on 127.0.0.1 requiring basic auth; real jobs whose scripted
// model searches the sandbox for the token (and shows `git config -l`), while the test searches it
// as root (every file but /proc, /sys and /dev, and every git object unpacked, the private store's
// too). Through the queue: the client refuses a URL with credentials before anything reaches Redis,
// and a worker with PATCHBAY_GIT_CREDENTIALS clones with its own; afterwards every key of the test's
// Redis is read whole, and the worker's log too. With runJob (no queue) the URL may carry the token:
// events, result and sandbox show none of it.
//
// Backend: Docker (the setup network, the policy's limits, the engine's refusals, a browser over
// real jobs).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { runJob } from "../../src/job/run.js";
import { PatchbayClient } from "../../src/queue/client.js";
import { BatchClient } from "../../src/batch/batches.js";
import { docker } from "../../src/backend/docker.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
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
import { startGitHttp, type GitHttpServer } from "../support/git-http.js";
import { removeQueueSandboxes, startRedis, startWorkerProc, type WorkerProc } from "../support/cluster.js";
import { jobContainer } from "../support/sandbox.js";

const USER = "ci-bot";
const TOKEN = `ghp_${process.pid}x7KfQ2mZr9TtLw4`;
const BASIC = Buffer.from(`${USER}:${TOKEN}`).toString("base64");
const SECRETS = [TOKEN, BASIC];
const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const QUEUE = "git-cred";
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "pb-gitcred-e2e-"));

// The model's search never names the token itself (its command is in the transcript): it decodes it.
const B64 = Buffer.from(TOKEN).toString("base64");
const MODEL_SCAN = [
  `T=$(printf %s ${B64} | base64 -d)`,
  'echo "SCAN-BEGIN"; grep -rlF -e "$T" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null; echo "SCAN-END"',
  "git -C /workspace config -l; git -C /workspace log -g --format=%gs; env | grep -ci git; echo DONE",
].join("\n");
// The test's own search, as root, with the token in the exec's environment only.
const ROOT_SCAN = [
  'grep -rlF -e "$T" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null',
  'for d in /workspace/.git /patchbay/git; do git -c safe.directory="*" --git-dir="$d" cat-file --batch-all-objects --batch 2>/dev/null; done | grep -cF -e "$T" -e "$B"',
  "git -c safe.directory='*' -C /workspace rev-parse HEAD",
].join("; ");

const GIT_ID = [
  "-c",
  "user.name=t",
  "-c",
  "user.email=t@t",
  "-c",
  "init.defaultBranch=main",
  "-c",
  "commit.gpgSign=false",
];
const git = (cwd: string, ...args: string[]) => execFileSync("git", [...GIT_ID, ...args], { cwd, encoding: "utf8" });

let server: GitHttpServer;
beforeAll(async () => {
  const src = path.join(tmp, "src");
  fs.cpSync(CLAMP, src, { recursive: true });
  git(src, "init", "-q");
  git(src, "add", "-A");
  git(src, "commit", "-qm", "clamp");
  git(tmp, "clone", "-q", "--bare", src, path.join(tmp, "repos", "clamp.git"));
  server = await startGitHttp(path.join(tmp, "repos"), { auth: { username: USER, password: TOKEN } });
});
afterAll(async () => {
  await server?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** Runs the script as root in the container; stdout and stderr together. */
async function rootExec(container: string, script: string): Promise<string> {
  const exec = await docker()
    .getContainer(container)
    .exec({
      Cmd: ["sh", "-c", script],
      User: "0",
      Env: [`T=${TOKEN}`, `B=${BASIC}`],
      AttachStdout: true,
      AttachStderr: true,
    });
  const stream = (await exec.start({})) as NodeJS.ReadableStream;
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", resolve);
    stream.on("error", reject);
  });
  // The exec's stream is multiplexed: 8-byte frame headers before each chunk.
  const raw = Buffer.concat(chunks);
  const out: Buffer[] = [];
  for (let i = 0; i + 8 <= raw.length;) {
    const n = raw.readUInt32BE(i + 4);
    out.push(raw.subarray(i + 8, i + 8 + n));
    i += 8 + n;
  }
  return Buffer.concat(out).toString("utf8");
}

/**
 * The script of a job: turn 1 runs the model's search; when turn 2 is asked for, the test searches
 * the sandbox as root (the job's container from `container()`), then the model ends.
 */
function scanningModel(container: () => Promise<string>): { policy: Policy; rootScan: Promise<string> } {
  let done!: (s: string) => void;
  const rootScan = new Promise<string>((r) => (done = r));
  const policy: Policy = async ({ body }) => {
    const turn = (body.messages as { role: string }[]).filter((m) => m.role === "assistant").length;
    if (turn === 0) return reply(toolUse("bash", { command: MODEL_SCAN }));
    if (turn === 1) done(await rootExec(await container(), ROOT_SCAN));
    return reply(text("Done."));
  };
  return { policy, rootScan };
}

/** What the model's search printed: the files it found, and the rest. */
function modelSaw(fake: FakeAnthropic): { found: string[]; output: string } {
  const output = toolResultText(toolResults(fake.requests[1])[0]);
  const found = output
    .slice(output.indexOf("SCAN-BEGIN\n") + 11, output.indexOf("SCAN-END"))
    .split("\n")
    .filter(Boolean);
  return { found, output };
}

function expectSandboxClean(fake: FakeAnthropic, rootScan: string): void {
  const { found, output } = modelSaw(fake);
  expect(output).toMatch(/DONE/);
  expect(found).toEqual([]);
  // The agent's repo remembers where it came from, without the credentials.
  expect(output).toContain(`remote.origin.url=http://${server.host}/clamp.git`);
  expect(output).toContain(`clone: from http://${server.host}/clamp.git`);
  expect(rootScan).toMatch(/^0\n[0-9a-f]{40}\n$/); // no file, no object; the repo is there
}

const leaks = (text: string) => SECRETS.filter((s) => text.includes(s));

/** Every key of the Redis, each read whole by its type. */
async function redisDump(url: string): Promise<string> {
  const r = new Redis(url);
  const out: string[] = [];
  try {
    let cursor = "0";
    do {
      const [next, keys] = await r.scan(cursor, "COUNT", 1000);
      cursor = next;
      for (const key of keys) {
        const type = await r.type(key);
        const v =
          type === "string"
            ? await r.get(key)
            : type === "hash"
              ? await r.hgetall(key)
              : type === "list"
                ? await r.lrange(key, 0, -1)
                : type === "set"
                  ? await r.smembers(key)
                  : type === "zset"
                    ? await r.zrange(key, "0", "-1")
                    : type === "stream"
                      ? await r.xrange(key, "-", "+")
                      : `(${type})`;
        out.push(`${key} ${JSON.stringify(v)}`);
      }
    } while (cursor !== "0");
  } finally {
    r.disconnect();
  }
  return out.join("\n");
}

describe("through the queue", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let worker: WorkerProc;
  let client: PatchbayClient;
  let scan: ReturnType<typeof scanningModel>;
  let container: (c: string) => void;

  beforeAll(async () => {
    redis = await startRedis();
    const containerName = new Promise<string>((r) => (container = r));
    scan = scanningModel(() => containerName);
    fake = await startFakeAnthropic(scan.policy);
    const store = path.join(tmp, "git-credentials");
    fs.writeFileSync(
      store,
      `https://someone:unrelated@example.org\nhttp://${USER}:${encodeURIComponent(TOKEN)}@${server.host}\n`,
      { mode: 0o600 },
    );
    worker = startWorkerProc({
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: QUEUE,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      PATCHBAY_CONCURRENCY: "1",
      PATCHBAY_POOL: "0",
      PATCHBAY_GIT_CREDENTIALS: store,
    });
    await worker.waitFor(new RegExp(`ready: queue ${QUEUE}`));
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
  });
  afterAll(async () => {
    await client?.close();
    await worker?.stop("SIGTERM");
    await fake?.close();
    await redis?.stop();
    await removeQueueSandboxes(QUEUE);
  });

  it("enqueue and batch submit refuse a URL with credentials, saying to give them to the workers; Redis holds nothing of it", async () => {
    const spec = { task: "t", repo: { git: `http://${USER}:${TOKEN}@${server.host}/clamp.git` } };
    const err = await client.enqueue(spec).catch((e: Error) => e);
    expect((err as Error).message).toBe(
      `invalid JobSpec: repo.git: http://***@${server.host}/clamp.git carries credentials, which would be kept in Redis with the job; remove them from the URL and give them to the workers instead: PATCHBAY_GIT_CREDENTIALS=/path/to/git-credentials on each worker, a file of mode 0600 with lines like https://user:token@host`,
    );
    await expect(
      new BatchClient(client).submit([
        { task: "ok", repo: { path: CLAMP } },
        { ...spec, repo: { git: `http://${TOKEN}@${server.host}/clamp.git` } },
      ]),
    ).rejects.toThrow(/^spec #2: invalid JobSpec: repo\.git: http:\/\/\*\*\*@.* carries credentials/);
    await expect(new BatchClient(client).submit([{ line: 7, spec }] as never)).rejects.toThrow(
      /^line 7: invalid JobSpec: repo\.git: .* carries credentials/,
    );
    expect(leaks(await redisDump(redis.url))).toEqual([]);
    expect(await client.list()).toEqual([]);
  });

  it("a worker clones with its own store's token, which appears nowhere: not in the sandbox, the transcript, Redis or the worker's log", async () => {
    const id = await client.enqueue({ task: "Look around.", repo: { git: `http://${server.host}/clamp.git` } });
    void jobContainer(id, client).then((c) => container(c.id));
    const result = await client.waitForResult(id, { timeoutMs: 120_000 });
    expect(result.status).toBe("completed");
    expect(server.authorized()).toBeGreaterThan(0); // the store's token did the clone
    expectSandboxClean(fake, await scan.rootScan);
    const events: TranscriptEvent[] = [];
    for await (const e of client.watch(id, { follow: false })) events.push(e);
    expect(events.map((e) => e.type)).toContain("job_finished");
    expect(leaks(JSON.stringify(events))).toEqual([]);
    expect(leaks(JSON.stringify(result))).toEqual([]);
    expect(leaks(JSON.stringify(fake.requests.map((r) => r.body)))).toEqual([]);
    expect(leaks(await redisDump(redis.url))).toEqual([]);
    expect(leaks(worker.log())).toEqual([]);
  });
});

describe("runJob with the token in the URL (no queue)", () => {
  it("clones with it; the events, the result and the sandbox show none of it, job_started the redacted URL", async () => {
    let name!: (n: string) => void;
    const containerName = new Promise<string>((r) => (name = r));
    const scan = scanningModel(() => containerName);
    const fake = await startFakeAnthropic(scan.policy);
    const before = server.authorized();
    const events: TranscriptEvent[] = [];
    try {
      const result = await runJob(
        { task: "Look around.", repo: { git: `http://${USER}:${TOKEN}@${server.host}/clamp.git` } },
        {
          model: new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 }),
          onEvent: (e) => events.push(e),
          onSandbox: (sb) => name(sb.name),
        },
      );
      expect(result.status).toBe("completed");
      expect(server.authorized()).toBeGreaterThan(before);
      expectSandboxClean(fake, await scan.rootScan);
      const started = events.find((e) => e.type === "job_started");
      expect(started?.type === "job_started" && started.spec.repo).toEqual({
        git: `http://***@${server.host}/clamp.git`,
      });
      expect(leaks(JSON.stringify(events))).toEqual([]);
      expect(leaks(JSON.stringify(result))).toEqual([]);
      expect(leaks(JSON.stringify(fake.requests.map((r) => r.body)))).toEqual([]);
    } finally {
      await fake.close();
    }
  });

  it("a clone that fails says why without the token, in the result and the events", async () => {
    const events: TranscriptEvent[] = [];
    const wrong = `${TOKEN}-expired`;
    const result = await runJob(
      { task: "t", repo: { git: `http://${USER}:${wrong}@${server.host}/clamp.git` } },
      { onEvent: (e) => events.push(e) },
    );
    expect(result.status).toBe("failed");
    expect(result.error).toMatch(
      /^repo\.git http:\/\/\*\*\*@127\.0\.0\.1:\d+\/clamp\.git: git clone failed: .*Authentication failed/s,
    );
    for (const text of [JSON.stringify(result), JSON.stringify(events)]) {
      expect(text).not.toContain(wrong);
      expect(leaks(text)).toEqual([]);
    }
  });
});
