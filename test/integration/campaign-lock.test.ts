// One publish, track or close of a campaign at a time (src/campaign/store.ts withLock, its
// Lua in src/campaign/lua/): two publishes at once would both open a pull request and overwrite each
// other's records. Real Redis (a private one).
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CampaignBusyError, CampaignStore } from "../../src/campaign/store.js";
import { startRedis } from "../support/cluster.js";

describe("a campaign's lock", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let conn: Redis;
  let store: CampaignStore;
  beforeAll(async () => {
    redis = await startRedis();
    conn = new Redis(redis.url);
    store = new CampaignStore(conn, "lock-test", 3600);
  });
  afterAll(async () => {
    await conn?.quit();
    await redis?.stop();
  });

  it("a second holder is refused naming the first; released after, also when fn throws", async () => {
    let release!: () => void;
    const first = store.withLock(
      "c1",
      "campaign publish",
      () => new Promise<string>((r) => (release = () => r("done"))),
    );
    await expect.poll(() => conn.exists("patchbay:lock-test:campaign:c1:lock")).toBe(1);
    const second = store.withLock("c1", "campaign track", async () => "ran");
    await expect(second).rejects.toBeInstanceOf(CampaignBusyError);
    await expect(second).rejects.toThrow(
      new RegExp(`^campaign c1 is busy: campaign publish \\(pid ${process.pid}\\) holds it; try again when that ends`),
    );
    // Another campaign is not held by it.
    await expect(store.withLock("c2", "campaign publish", async () => "other")).resolves.toBe("other");
    release();
    await expect(first).resolves.toBe("done");
    expect(await conn.exists("patchbay:lock-test:campaign:c1:lock")).toBe(0);
    await expect(
      store.withLock("c1", "campaign close", async () => {
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    await expect(store.withLock("c1", "campaign track", async () => "again")).resolves.toBe("again");
  });

  it("a lock that is no longer the holder's (expired, taken by another) is not released by it", async () => {
    const key = "patchbay:lock-test:campaign:c3:lock";
    await store.withLock("c3", "campaign publish", async () => {
      await conn.set(key, "campaign track (pid 1) 00000000-0000-0000-0000-000000000000", "PX", 60_000);
    });
    expect(await conn.get(key)).toMatch(/^campaign track \(pid 1\)/);
    await expect(store.withLock("c3", "campaign publish", async () => "x")).rejects.toThrow(
      /busy: campaign track \(pid 1\) holds it/,
    );
  });
});
