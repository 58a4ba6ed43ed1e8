// A job's seed through real Redis (src/queue/candidates.ts storeSeed and loadSeed): a seed whose
// chunks are not all there when a candidate loads it (the job's attempt ran again and is storing it
// anew, or a chunk expired) must not load as a shorter workspace. tar takes an archive cut at a
// member's end without a word, and verify would then judge a patch against a workspace missing
// files; the load refuses it instead, naming what is wrong.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSeed, storeSeed, type CandidatesContext } from "../../src/queue/candidates.js";
import { keys } from "../../src/queue/keys.js";
import { SeedError } from "../../src/job/candidates/seed.js";
import { startRedis } from "../support/cluster.js";

describe("a seed's chunks in Redis", { timeout: 60_000 }, () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let conn: Redis;
  const dir = mkdtempSync(join(tmpdir(), "pb-seed-"));
  const tar = join(dir, "workspace.tar");
  let c: CandidatesContext;

  beforeAll(async () => {
    redis = await startRedis();
    conn = new Redis(redis.url);
    // A tar whose first member ends exactly at the first 4 MiB chunk's end: cut there, it is still a tar.
    const src = join(dir, "src");
    execFileSync("mkdir", ["-p", src]);
    writeFileSync(join(src, "big"), Buffer.alloc(4 * 1024 * 1024 - 512, 1));
    writeFileSync(join(src, "tests.py"), "assert False\n");
    execFileSync("tar", ["-cf", tar, "-C", src, "big", "tests.py"]);
    c = {
      redis: conn,
      k: keys(`seed-${process.pid}`),
      queue: undefined as never, // storeSeed and loadSeed do not use the queue
      seedMaxBytes: 64 * 1024 * 1024,
      retentionSec: 600,
    };
  });
  afterAll(async () => {
    conn?.disconnect();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const seed = () => ({ file: tar, bytes: statSync(tar).size, remove: async () => {}, meta: { v: 1 as const } });

  it("loads a whole seed as it was stored", async () => {
    await storeSeed(c, "whole", seed(), 600);
    const loaded = await loadSeed(c, "whole");
    try {
      expect(loaded.bytes).toBe(statSync(tar).size);
    } finally {
      await loaded.remove();
    }
  });

  it("refuses a seed that lost its last chunk, though what is left is a tar", async () => {
    await storeSeed(c, "cut", seed(), 600);
    expect(await conn.llen(c.k.seed("cut"))).toBe(2);
    await conn.ltrim(c.k.seed("cut"), 0, 0);
    // What is left is a valid tar without tests.py: tar -x would load it without a word.
    const cut = join(dir, "cut.tar");
    writeFileSync(cut, (await conn.lindexBuffer(c.k.seed("cut"), 0))!);
    expect(execFileSync("tar", ["-tf", cut]).toString().trim()).toBe("big");
    await expect(loadSeed(c, "cut")).rejects.toThrow(SeedError);
    await expect(loadSeed(c, "cut")).rejects.toThrow(/is not whole/);
  });
});
