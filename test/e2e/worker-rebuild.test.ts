// A worker started from dist/ keeps working when dist/ is rewritten under it (`npm run build` in
// the same checkout while it runs): it loads at start everything it would otherwise read from dist/
// on a job (src/cli/admin.ts loadAllNow: the assets, the repo reader threads' modules). Here the
// worker runs from a copy of dist/, which is then replaced by a broken build before it gets a job.
import { spawn } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../../src/queue/client.js";
import { ensureBuilt, ROOT } from "../support/cli-helpers.js";
import { LOCAL_WORKER_ENV } from "../support/backend.js";
import { removeDir, startRedis } from "../support/cluster.js";
import { startFakeAnthropic, type FakeAnthropic } from "../support/fake-anthropic.js";
import { byTurn, clampScript } from "../support/scripts.js";

/** Every module of `dir` made to fail on load, every asset gone: a build caught half-way, at its worst. */
function breakBuild(dir: string): void {
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const p = join(e.parentPath, e.name);
    if (e.name.endsWith(".js"))
      writeFileSync(p, 'throw new SyntaxError("does not provide an export named (rebuilt)");\n');
    else if (/\.(lua|py|sh|css)$/.test(e.name)) rmSync(p);
  }
}

describe("a rebuild under a running worker", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  let pkg: string;

  beforeAll(async () => {
    await ensureBuilt();
    redis = await startRedis();
    fake = await startFakeAnthropic(byTurn(clampScript()));
    // A checkout of its own: dist/ copied, the rest linked, so breaking its dist/ touches no other test.
    pkg = mkdtempSync(join(tmpdir(), "pb-rebuild-"));
    cpSync(join(ROOT, "dist"), join(pkg, "dist"), { recursive: true });
    cpSync(join(ROOT, "package.json"), join(pkg, "package.json"));
    for (const d of ["node_modules", "images"]) symlinkSync(join(ROOT, d), join(pkg, d));
  });

  afterAll(async () => {
    await fake?.close();
    await redis?.stop();
    if (pkg) removeDir(pkg);
  });

  it("a job given after dist/ was rewritten completes", async () => {
    const q = "q-rebuild";
    const env = {
      ...process.env,
      ...LOCAL_WORKER_ENV,
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "test-key",
      REDIS_URL: redis.url,
      PATCHBAY_QUEUE: q,
    };
    const proc = spawn(process.execPath, [join(pkg, "dist/cli.js"), "worker"], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let log = "";
    proc.stdout.on("data", (d) => (log += d));
    proc.stderr.on("data", (d) => (log += d));
    const c = new PatchbayClient({ redisUrl: redis.url, queueName: q });
    try {
      for (let t0 = Date.now(); !/ready: queue/.test(log); await sleep(50))
        if (Date.now() - t0 > 60_000 || proc.exitCode !== null) throw new Error(`no ready line:\n${log}`);
      await sleep(1000); // the reader threads' modules loaded
      breakBuild(join(pkg, "dist"));
      const id = await c.enqueue({
        task: "Make the failing tests pass.",
        repo: { path: join(ROOT, "examples/clamp") },
        verify: "python3 -m unittest -q",
      });
      const r = await c.waitForResult(id, { timeoutMs: 120_000 });
      expect(r.status, `${r.error ?? ""}\n${log}`).toBe("completed");
      expect(r.verified).toBe(true);
      expect(log).not.toMatch(/does not provide an export named|ENOENT/);
    } finally {
      await c.close();
      if (proc.exitCode === null) proc.kill("SIGTERM");
      await new Promise((r) => (proc.exitCode !== null ? r(null) : proc.once("exit", r)));
    }
  }, 240_000);
});
