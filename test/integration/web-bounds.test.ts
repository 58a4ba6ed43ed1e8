// The dashboard bounded (issue 23, points 6 and 9): /api/jobs pages lean rows (never a whole
// result, spec or patch); every live transcript shares one Redis connection (counted with CLIENT
// LIST on a private Redis, by the dashboard's connection names), and their number is capped; the
// token's cookie is Secure over TLS (the dashboard's own HTTPS, or a proxy's X-Forwarded-Proto).
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import { keys } from "../../src/queue/keys.js";
import { boundResult } from "../../src/queue/result-bounds.js";
import { emptyResult, type JobResult } from "../../src/core/spec/spec.js";
import { startDashboard, type Dashboard } from "../../src/web/server.js";
import { launchBrowser, recordPage, signedIn } from "../support/browser.js";
import { removeDir, startRedis } from "../support/cluster.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const TOKEN = "bounds-test-token-0123456789";
/** Every request to the dashboard needs its token, reads too. */
const AUTH = { headers: { authorization: `Bearer ${TOKEN}` } };

interface Row {
  id: string;
  state: string;
  status?: string;
  task?: string;
}

async function getJson(url: string): Promise<{ status: number; body: any; bytes: number }> {
  const r = await fetch(url, AUTH);
  const text = await r.text();
  return { status: r.status, body: JSON.parse(text), bytes: Buffer.byteLength(text) };
}

/** Every row of /api/jobs?QUERY, page after page; the pages' sizes too. */
async function allPages(base: string, query: string): Promise<{ rows: Row[]; pages: number[]; bytes: number[] }> {
  const rows: Row[] = [];
  const pages: number[] = [];
  const bytes: number[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 100; i++) {
    const r = await getJson(`${base}/api/jobs?${query}${cursor ? `&cursor=${cursor}` : ""}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    rows.push(...r.body.jobs);
    pages.push(r.body.jobs.length);
    bytes.push(r.bytes);
    cursor = r.body.next;
    if (!cursor) return { rows, pages, bytes };
  }
  throw new Error("more than 100 pages");
}

describe("/api/jobs: paginated and lean", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let dash: Dashboard;
  let client: PatchbayClient;
  const QUEUE = "web-bounds-list";
  const finished = {
    completed: [] as string[],
    verify_failed: [] as string[],
    failed: [] as string[],
    huge: [] as string[],
    stored: [] as string[],
  };
  /** The patches of the "stored" jobs: kept under their own keys, as a patchbay worker keeps a long one. */
  const patches = ["a".repeat(20_000), `diff --git a/x b/x\n${"+y\n".repeat(1_000_000)}`];
  let waiting: string[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    // Finished jobs first, made by a plain BullMQ worker: results as a patchbay worker stores them
    // (two with a patch kept under its own key), failures, and two results of 2 MB each (as stored
    // before results were bounded).
    const plan: (keyof typeof finished)[] = [
      ...Array(10).fill("completed"),
      ...Array(10).fill("verify_failed"),
      ...Array(5).fill("failed"),
      "huge",
      "huge",
      "stored",
      "stored",
    ];
    const ids = await client.enqueueBatch(
      plan.map((kind, i) => ({ task: `finished ${kind} ${i}`, repo: { path: CLAMP }, attempts: 1 })),
    );
    plan.forEach((kind, i) => finished[kind].push(ids[i]!));
    const kindOf = new Map(ids.map((id, i) => [id, plan[i]!]));
    const wconn = new Redis(redis.url, { maxRetriesPerRequest: null });
    const done = new Promise<void>((resolve) => {
      let n = 0;
      const w = new Worker<unknown, JobResult>(
        QUEUE,
        async (job) => {
          const kind = kindOf.get(job.id!)!;
          if (kind === "failed") throw new Error(`failed on purpose ${"x".repeat(10_000)}`);
          const r: JobResult = {
            ...emptyResult(kind === "huge" || kind === "stored" ? "completed" : kind, ""),
            error: undefined,
            turns: 3,
            costUsd: 0.25,
          };
          if (kind === "stored") {
            const b = boundResult({ ...r, patch: patches[finished.stored.indexOf(job.id!)]! });
            await wconn.set(keys(QUEUE).patch(job.id!), b.patch!);
            return b.result;
          }
          return kind === "huge" ? { ...r, patch: "p".repeat(2_000_000) } : r;
        },
        { connection: wconn, concurrency: 1 },
      );
      const end = () => ++n === plan.length && void w.close().then(() => resolve());
      w.on("completed", end);
      w.on("failed", end);
    });
    await done;
    wconn.disconnect();
    // Then 130 jobs that wait (no worker), one with a 100 KB task.
    waiting = await client.enqueueBatch(
      Array.from({ length: 129 }, (_, i) => ({ task: `waiting ${i}`, repo: { path: CLAMP } })),
    );
    const qconn = new Redis(redis.url, { maxRetriesPerRequest: null });
    const q = new Queue(QUEUE, { connection: qconn });
    waiting.push(
      (
        await q.add(
          "fix",
          { spec: { task: `big ${"t".repeat(100_000)}`, repo: { path: CLAMP } }, enqueuedAt: Date.now() },
          { jobId: "big-task" },
        )
      ).id!,
    );
    await q.close();
    qconn.disconnect();
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN });
  }, 120_000);

  afterAll(async () => {
    await dash?.close();
    await client?.close();
    await redis?.stop();
  });

  it("pages through every job once, at most `limit` rows a page: waiting ones, then the finished newest first", async () => {
    const { rows, pages, bytes } = await allPages(dash.url, "limit=40");
    const all = [...waiting, ...Object.values(finished).flat()];
    expect(rows.map((r) => r.id).sort()).toEqual([...all].sort());
    expect(new Set(rows.map((r) => r.id)).size).toBe(rows.length);
    expect(pages.slice(0, -1).every((n) => n === 40)).toBe(true);
    expect(rows.slice(0, waiting.length).every((r) => r.state === "waiting")).toBe(true);
    const fin = rows.slice(waiting.length);
    expect(fin.every((r) => r.state === "completed" || r.state === "failed")).toBe(true);
    // Lean: no page carries a result, a patch or a whole spec (the 2 MB results and the 100 KB task are never read).
    for (const b of bytes) expect(b).toBeLessThan(40 * 1024);
    for (const r of rows) expect(Object.keys(r)).not.toContain("patch");
    const big = rows.find((r) => r.id === "big-task")!;
    expect(big.task).toMatch(/^\(a spec of \d+ bytes: too big for the list; open the job\)$/);
    const huge = rows.filter((r) => finished.huge.includes(r.id));
    expect(huge.map((r) => [r.state, r.status])).toEqual([
      ["completed", undefined],
      ["completed", undefined],
    ]);
    expect(rows.find((r) => r.id === finished.failed[0])!.status).toBe("failed");
    expect(rows.find((r) => r.id === finished.completed[0])).toMatchObject({
      status: "completed",
      turns: 3,
      costUsd: 0.25,
    });
  });

  it("filters by state and by status, page by page", async () => {
    const vf = await allPages(dash.url, "status=verify_failed&limit=3");
    expect(vf.rows.map((r) => r.id).sort()).toEqual([...finished.verify_failed].sort());
    expect(vf.pages.every((n) => n <= 3)).toBe(true);
    const failed = await allPages(dash.url, "state=failed&limit=2");
    expect(failed.rows.map((r) => r.id).sort()).toEqual([...finished.failed].sort());
    const st = await allPages(dash.url, "state=completed&status=completed&limit=200");
    expect(st.rows.map((r) => r.id).sort()).toEqual([...finished.completed, ...finished.stored].sort());
  });

  it("a job's page data has a stored patch up to 1 MiB inline; a longer one only as a download, whole", async () => {
    const [small, long] = finished.stored as [string, string];
    const a = await getJson(`${dash.url}/api/jobs/${small}`);
    expect(a.body.patch).toBe(patches[0]);
    const b = await getJson(`${dash.url}/api/jobs/${long}`);
    expect(b.body.patch).toBeUndefined();
    expect(b.body.patchBytes).toBe(Buffer.byteLength(patches[1]!));
    expect(b.bytes).toBeLessThan(64 * 1024);
    const dl = await fetch(`${dash.url}/api/jobs/${long}/patch`, AUTH);
    expect(dl.status).toBe(200);
    expect(dl.headers.get("content-disposition")).toBe(`attachment; filename="${long}.patch"`);
    expect(dl.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect((await dl.text()) === patches[1]).toBe(true);
  });

  it("in the browser: Next page follows the cursor with the filters kept; a long patch is a download link", async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage(signedIn(dash.url, TOKEN));
      const rec = recordPage(page);
      await page.goto(`${dash.url}/jobs?state=completed&limit=5`);
      await page.locator("#rows tr").nth(4).waitFor();
      const first = await page
        .locator("#rows tr")
        .evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-job-id")));
      await page.locator("#next").click();
      await page.waitForURL(/cursor=/);
      expect(new URL(page.url()).searchParams.get("state")).toBe("completed");
      await page.locator("#rows tr").first().waitFor();
      await page.waitForFunction(
        (ids) => !ids.includes(document.querySelector("#rows tr")?.getAttribute("data-job-id") ?? ""),
        first,
      );
      const second = await page
        .locator("#rows tr")
        .evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-job-id")));
      expect(second.length).toBe(5);
      expect(second.filter((id) => first.includes(id))).toEqual([]);
      await page.goto(`${dash.url}/jobs/${finished.stored[1]}`);
      const link = page.locator("#diff a#patch-link");
      await link.waitFor();
      expect(await link.getAttribute("href")).toBe(`/api/jobs/${finished.stored[1]}/patch`);
      expect(await page.locator("#diff").textContent()).toMatch(/3,000,0\d\d bytes: too long to show here/);
      expect(rec.pageErrors).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 60_000);

  it("refuses a page over the hard maximum and a forged cursor, naming the problem", async () => {
    const over = await getJson(`${dash.url}/api/jobs?limit=2000`);
    expect(over.status).toBe(400);
    expect(over.body.detail).toMatch(/bad limit "2000": 1 to 200/);
    const bad = await getJson(`${dash.url}/api/jobs?cursor=not-a-cursor`);
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toMatch(/bad cursor/);
    expect((await getJson(`${dash.url}/api/jobs?state=nonsense`)).status).toBe(400);
  });
});

describe("live transcripts: one shared Redis connection, a bounded number of clients", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let dash: Dashboard;
  let client: PatchbayClient;
  let r: Redis;
  const QUEUE = "web-bounds-sse";
  const N = 8;

  beforeAll(async () => {
    redis = await startRedis();
    client = new PatchbayClient({ redisUrl: redis.url, queueName: QUEUE });
    dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: QUEUE, token: TOKEN, maxStreams: N });
    r = new Redis(redis.url);
  });

  afterAll(async () => {
    r?.disconnect();
    await dash?.close();
    await client?.close();
    await redis?.stop();
  });

  const event = (jobId: string, n: number) =>
    JSON.stringify({
      ts: new Date().toISOString(),
      jobId,
      attempt: 1,
      type: "model_request",
      turn: n,
      messagesCount: n,
    });
  /** Connections on this (private) Redis by name. */
  async function connections(): Promise<string[]> {
    const list = (await r.client("LIST")) as string;
    return list
      .trim()
      .split("\n")
      .map((l) => /(?:^| )name=(\S*)/.exec(l)?.[1] ?? "");
  }

  /** An SSE client that collects its messages' events; resolves `until(n)` once it has n. */
  function open(url: string) {
    const ctl = new AbortController();
    const events: any[] = [];
    const waiters: { n: number; resolve: () => void }[] = [];
    const started = fetch(url, { ...AUTH, signal: ctl.signal }).then(async (res) => {
      const status = res.status;
      if (status !== 200) return status;
      void (async () => {
        let buf = "";
        try {
          for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
            buf += Buffer.from(chunk).toString("utf8");
            for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
              const msg = buf.slice(0, i);
              buf = buf.slice(i + 2);
              const data = /^data: (.*)$/m.exec(msg)?.[1];
              if (data && !/^event: /m.test(msg)) events.push(...JSON.parse(data));
              for (const w of [...waiters])
                if (events.length >= w.n) {
                  waiters.splice(waiters.indexOf(w), 1);
                  w.resolve();
                }
            }
          }
        } catch {
          // aborted
        }
      })();
      return status;
    });
    return {
      started,
      events,
      until: (n: number) =>
        new Promise<void>((resolve) => (events.length >= n ? resolve() : waiters.push({ n, resolve }))),
      close: () => ctl.abort(),
    };
  }

  it(`${N} pages on live transcripts add no Redis connection; a new event reaches all of them; the ${N + 1}th is refused`, async () => {
    const ids = await client.enqueueBatch(
      Array.from({ length: N / 2 }, (_, i) => ({ task: `sse ${i}`, repo: { path: CLAMP } })),
    );
    const k = keys(QUEUE);
    for (const id of ids) for (let n = 1; n <= 3; n++) await r.xadd(k.events(id), "*", "e", event(id, n));
    const before = await connections();
    const mine = (names: string[]) => names.filter((n) => n.startsWith(dash.connectionName));
    expect(mine(before).sort()).toEqual([dash.connectionName, `${dash.connectionName}-sse`]);

    // two pages per job, each has caught up (3 events) and now waits for more
    const pages = Array.from({ length: N }, (_, i) => open(`${dash.url}/api/jobs/${ids[i % ids.length]}/events`));
    expect(await Promise.all(pages.map((p) => p.started))).toEqual(Array(N).fill(200));
    await Promise.all(pages.map((p) => p.until(3)));
    const during = await connections();
    expect(during.length).toBe(before.length);
    expect(mine(during).sort()).toEqual(mine(before).sort());

    // the one shared reader wakes every page of a job when its stream grows
    for (const id of ids) await r.xadd(k.events(id), "*", "e", event(id, 4));
    await Promise.all(pages.map((p) => p.until(4)));
    for (const [i, p] of pages.entries())
      expect(p.events.map((e) => [e.jobId, e.turn])).toEqual([1, 2, 3, 4].map((n) => [ids[i % ids.length], n]));

    // bounded: one more is refused while N are open
    const extra = await fetch(`${dash.url}/api/jobs/${ids[0]}/events`, AUTH);
    expect(extra.status).toBe(503);
    expect(extra.headers.get("retry-after")).toBe("5");
    expect(await extra.text()).toMatch(/at most 8 live transcripts at once \(PATCHBAY_DASHBOARD_MAX_STREAMS\)/);
    for (const p of pages) p.close();
  }, 60_000);
});

describe("the token's cookie is Secure over TLS", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let dir: string;
  const dashes: Dashboard[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), "pb-dash-tls-"));
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem"),
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
      ],
      { stdio: "ignore" },
    );
  });

  afterAll(async () => {
    for (const d of dashes) await d.close();
    await redis?.stop();
    removeDir(dir);
  });

  const setCookie = async (url: string, headers: Record<string, string> = {}) => {
    const r = await fetch(url, { headers, redirect: "manual" });
    expect(r.status).toBe(303);
    return r.headers.get("set-cookie") ?? "";
  };

  it("over the dashboard's own HTTPS (PATCHBAY_DASHBOARD_TLS_CERT/_KEY), the cookie is Secure", async () => {
    process.env.PATCHBAY_DASHBOARD_TLS_CERT = join(dir, "cert.pem");
    process.env.PATCHBAY_DASHBOARD_TLS_KEY = join(dir, "key.pem");
    let dash: Dashboard;
    try {
      dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: "web-bounds-tls", token: TOKEN });
    } finally {
      delete process.env.PATCHBAY_DASHBOARD_TLS_CERT;
      delete process.env.PATCHBAY_DASHBOARD_TLS_KEY;
    }
    dashes.push(dash);
    expect(dash.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const cookie = await new Promise<string>((resolve, reject) => {
      const req = httpsRequest(
        `${dash.url}/jobs?token=${TOKEN}`,
        { ca: readFileSync(join(dir, "cert.pem")) },
        (res) => {
          res.resume();
          resolve(String(res.headers["set-cookie"]));
        },
      );
      req.on("error", reject);
      req.end();
    });
    expect(cookie).toBe(`patchbay_dashboard=${TOKEN}; HttpOnly; SameSite=Strict; Path=/; Secure`);
  });

  it("behind a proxy that says https, Secure; over plain HTTP, not (the browser would drop it)", async () => {
    const dash = await startDashboard({ port: 0, redisUrl: redis.url, queueName: "web-bounds-tls", token: TOKEN });
    dashes.push(dash);
    expect(await setCookie(`${dash.url}/jobs?token=${TOKEN}`, { "x-forwarded-proto": "https" })).toMatch(/; Secure$/);
    expect(await setCookie(`${dash.url}/jobs?token=${TOKEN}`, { forwarded: "for=10.0.0.1;proto=https" })).toMatch(
      /; Secure$/,
    );
    expect(await setCookie(`${dash.url}/jobs?token=${TOKEN}`)).toBe(
      `patchbay_dashboard=${TOKEN}; HttpOnly; SameSite=Strict; Path=/`,
    );
    expect(await setCookie(`${dash.url}/jobs?token=${TOKEN}`, { "x-forwarded-proto": "http" })).not.toMatch(/Secure/);
  });

  it("one TLS file without the other is refused, naming both", async () => {
    process.env.PATCHBAY_DASHBOARD_TLS_CERT = join(dir, "cert.pem");
    try {
      await expect(
        startDashboard({ port: 0, redisUrl: redis.url, queueName: "web-bounds-tls", token: TOKEN }),
      ).rejects.toThrow(/needs both PATCHBAY_DASHBOARD_TLS_CERT and PATCHBAY_DASHBOARD_TLS_KEY/);
    } finally {
      delete process.env.PATCHBAY_DASHBOARD_TLS_CERT;
    }
  });
});
