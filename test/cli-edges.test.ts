// The rough edges a new user hits (issue 25 §3), each through the real part: the `patchbay` CLI as a
// process (bin/patchbay.js, built dist/), a Redis of this test's own, worker processes and runJob on
// the local backend (test/support/backend.ts), the real SDK against the scripted server.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PatchbayClient } from "../src/queue/client.js";
import { settleWithin, withTimeout } from "../src/timeout.js";
import { formatEvent } from "../src/cli/format.js";
import { BIN, ensureBuilt, patchbay, REFUSED_REDIS, ROOT, spawnPatchbay } from "./cli-helpers.js";
import { LOCAL_WORKER_ENV } from "./support/backend.js";
import { removeDir, startRedis, startWorkerProc } from "./support/cluster.js";
import { startFakeAnthropic, type FakeAnthropic } from "./support/fake-anthropic.js";
import { byTurn, clampScript } from "./support/scripts.js";

const CLAMP = join(ROOT, "examples/clamp");
const tmp = () => mkdtempSync(join(tmpdir(), "pb-edges-"));

describe("the rough edges, through the CLI and the library", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let fake: FakeAnthropic;
  const clients: PatchbayClient[] = [];
  const dirs: string[] = [];
  const dir = () => {
    const d = tmp();
    dirs.push(d);
    return d;
  };
  const client = (queueName: string) => {
    const c = new PatchbayClient({ redisUrl: redis.url, queueName });
    clients.push(c);
    return c;
  };
  /** patchbay against this test's Redis, on a queue given by flag. */
  const pb = (queue: string, args: string[], env: Record<string, string> = {}) => patchbay([...args, "--queue", queue, "--redis-url", redis.url], env);

  beforeAll(async () => {
    await ensureBuilt();
    redis = await startRedis();
    fake = await startFakeAnthropic(byTurn(clampScript()));
  });

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await fake?.close();
    await redis?.stop();
    for (const d of dirs) removeDir(d);
  });

  describe("durations are bounded (Node's timers overflow past ~24.8 days and fire at once)", () => {
    it("--timeout past 7 days is refused, naming the flag and the bound, before Redis is reached", async () => {
      const r = await patchbay(["run", "--repo", CLAMP, "--task", "x", "--timeout", "99999999", "--redis-url", REFUSED_REDIS]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/--timeout: must be at most 604800 \(seconds, 7 days\) \(got 99999999\)/);
    });

    it("a duration knob past 7 days is refused, naming the variable and the bound", async () => {
      const r = await patchbay(["status", "x", "--redis-url", REFUSED_REDIS], { PATCHBAY_LOCK_MS: "99999999999" });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/PATCHBAY_LOCK_MS: must be at most 604800000 ms \(7 days; got 99999999999\)/);
      const t = await patchbay(["status", "x", "--redis-url", REFUSED_REDIS], { PATCHBAY_MAX_TIMEOUT_SEC: "99999999" });
      expect(t.stderr).toMatch(/PATCHBAY_MAX_TIMEOUT_SEC: must be at most 604800 \(7 days; got 99999999\)/);
    });

    it("a wait past Node's timer range does not end at once (the timers chain)", async () => {
      const never = new Promise<never>(() => {});
      const order: string[] = [];
      const long = withTimeout(never, 2 ** 31 + 5, "overflowed").catch(() => order.push("long"));
      const settle = settleWithin(never, 2 ** 32).then(() => order.push("settle"));
      // A 20 ms timer: an overflowed one (1 ms) would fire first; ordered by Node's timer lists, not by a clock.
      await new Promise((r) => setTimeout(r, 20));
      order.push("20ms");
      expect(order).toEqual(["20ms"]);
      void long;
      void settle;
    });
  });

});
