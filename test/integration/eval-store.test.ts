// Guards the eval store (src/eval/store.ts) against a private redis-server: a run saved is read back
// whole (best-of-K and each judged pick too) and listed newest first with its numbers; a save again
// replaces it; a name outside the batch name rule is refused on save and names no run on read; a record over 4 MiB keeps the instances
// that fit and says how many were cut (its id lists too, past that); the index lists at most 1,000
// runs; a run whose record expired leaves the list.
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EVAL_RECORD_MAX_BYTES, EvalNotFoundError, EvalStore } from "../../src/eval/store.js";
import { keys } from "../../src/queue/keys.js";
import { startRedis } from "../support/cluster.js";
import { account, runSummary } from "../support/eval-summary.js";

describe("eval store", () => {
  let redis: Awaited<ReturnType<typeof startRedis>>;
  let raw: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    raw = new Redis(redis.url, { maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    raw?.disconnect();
    await redis?.stop();
  });
  const store = (queue: string) => new EvalStore(raw, queue, 3600);
  const meta = (startedAt: number) => ({ set: "sets/py.jsonl", startedAt, batchId: `b-${startedAt}` });

  it("saves a run and reads it back whole; lists runs newest first with their numbers; a save again replaces", async () => {
    const s = store("evals-basic");
    const older = runSummary("sonnet-a", [account("a__1", "resolved", 0), account("a__2", "unresolved", 1)]);
    const newer = runSummary("sonnet-b", [account("b__1", "empty_patch", 0)]);
    await s.save(older, meta(1000));
    await s.save(newer, meta(2000));
    const got = await s.get("sonnet-a");
    expect(got.summary).toEqual(older);
    expect(got).toMatchObject({ name: "sonnet-a", set: "sets/py.jsonl", startedAt: 1000, batchId: "b-1000" });
    expect(got.instancesCut).toBeUndefined();
    const rows = await s.list();
    expect(rows.map((r) => r.name)).toEqual(["sonnet-b", "sonnet-a"]);
    expect(rows[1]).toMatchObject({
      model: "claude-test",
      total: 2,
      resolved: 1,
      costUsd: 0.75,
      costPerResolvedUsd: 0.75,
      passAtK: { "1": 0.5 },
      candidates: 1,
    });
    expect(rows[0]!.costPerResolvedUsd).toBeNull();

    const regraded = runSummary("sonnet-a", [account("a__1", "resolved", 0), account("a__2", "resolved", 1)]);
    await s.save(regraded, meta(1000));
    expect((await s.get("sonnet-a")).summary.resolved_instances).toBe(2);
    expect((await s.list()).map((r) => [r.name, r.resolved])).toEqual([
      ["sonnet-b", 0],
      ["sonnet-a", 2],
    ]);
    // another queue's runs are its own
    expect(await store("evals-other").list()).toEqual([]);
  });

  it("keeps best-of-K and each judged instance's pick, and reads a summary from before them", async () => {
    const s = store("evals-best-of");
    const judged = runSummary("judged-k3", [account("j__1", "resolved", 0, 3), account("j__2", "unresolved", 1, 3)]);
    judged.patchbay.instances[0]!.picked = 2;
    judged.patchbay.instances[1]!.picked = null;
    judged.patchbay.bestOfK = 0.5;
    judged.patchbay.judged = 2;
    await s.save(judged, meta(3000));
    const got = await s.get("judged-k3");
    expect(got.summary).toEqual(judged);
    expect((await s.list()).find((r) => r.name === "judged-k3")).toMatchObject({ bestOfK: 0.5, candidates: 3 });
    const older = runSummary("older", [account("o__1", "resolved", 0)]);
    await s.save(older, meta(4000));
    expect((await s.get("older")).summary.patchbay.bestOfK).toBeUndefined();
    expect((await s.list()).find((r) => r.name === "older")!.bestOfK).toBeUndefined();
  });

  it("refuses a name outside the batch name rule, and an unknown or invalid name is no run", async () => {
    const s = store("evals-names");
    await expect(s.save(runSummary("bad name/..", [account("x", "resolved", 0)]), meta(1))).rejects.toThrow(
      /batch name must be 1-96 characters from A-Z a-z 0-9 _ \. -/,
    );
    for (const name of ["nope", "../etc", "<b>x</b>", ""]) {
      const err = await s.get(name).catch((e: unknown) => e);
      expect(err, name).toBeInstanceOf(EvalNotFoundError);
      expect((err as Error).message).toMatch(/no eval run .* in queue evals-names/);
    }
    expect(await raw.keys("patchbay:evals-names:*")).toEqual([]);
  });

  it("keeps a record under 4 MiB: the instances that fit, and how many were cut", async () => {
    const s = store("evals-big");
    const accounts = Array.from({ length: 20_000 }, (_, i) =>
      account(`org__repo-${String(i).padStart(6, "0")}`, i % 3 ? "unresolved" : "resolved", i),
    );
    const big = runSummary("huge", accounts);
    expect(Buffer.byteLength(JSON.stringify(big))).toBeGreaterThan(EVAL_RECORD_MAX_BYTES);
    const saved = await s.save(big, meta(5));
    const stored = (await raw.get(keys("evals-big").eval("huge", "record")))!;
    expect(Buffer.byteLength(stored)).toBeLessThanOrEqual(EVAL_RECORD_MAX_BYTES);
    const got = await s.get("huge");
    const kept = got.summary.patchbay.instances.length;
    expect(kept).toBeGreaterThan(1000);
    expect(got.instancesCut).toBe(20_000 - kept);
    expect(saved.instancesCut).toBe(got.instancesCut);
    // the first ones in the run's order, whole; the counts and id lists untouched
    expect(got.summary.patchbay.instances).toEqual(accounts.slice(0, kept));
    expect(got.summary.resolved_ids).toEqual(big.resolved_ids);
    expect(got.idListsCut).toBeUndefined();
    expect((await s.list())[0]).toMatchObject({ name: "huge", total: 20_000, resolved: big.resolved_instances });
  }, 60_000);

  it("past that, the id lists go too and the counts stay", async () => {
    const s = store("evals-ids");
    const long = (i: number) => `${"x".repeat(900)}-${i}`;
    const accounts = Array.from({ length: 2000 }, (_, i) => account(long(i), "resolved", i));
    const big = runSummary("ids", accounts);
    await s.save(big, meta(6));
    const got = await s.get("ids");
    expect(got.idListsCut).toBe(true);
    expect(got.summary.resolved_ids).toEqual([]);
    expect(got.summary.resolved_instances).toBe(2000);
    expect(got.summary.patchbay.instances.length + got.instancesCut!).toBe(2000);
    expect(Buffer.byteLength((await raw.get(keys("evals-ids").eval("ids", "record")))!)).toBeLessThanOrEqual(
      EVAL_RECORD_MAX_BYTES,
    );
  }, 60_000);

  it("lists at most 1,000 runs, the newest; a run whose record expired leaves the list", async () => {
    const s = store("evals-many");
    const one = [account("i", "resolved", 0)];
    for (let i = 1; i <= 1003; i++) await s.save(runSummary(`run-${i}`, one), meta(i));
    const rows = await s.list({ limit: 1000 });
    expect(rows).toHaveLength(1000);
    expect(rows[0]!.name).toBe("run-1003");
    expect(rows.at(-1)!.name).toBe("run-4");
    expect(await raw.zcard(keys("evals-many").evals)).toBe(1000);
    await expect(s.list({ limit: 1001 })).rejects.toThrow(/limit is 1 to 1000/);

    await raw.del(keys("evals-many").eval("run-1003", "row"), keys("evals-many").eval("run-1003", "record"));
    expect((await s.list({ limit: 2 })).map((r) => r.name)).toEqual(["run-1002"]);
    await expect(s.get("run-1003")).rejects.toBeInstanceOf(EvalNotFoundError);
    expect(await raw.zscore(keys("evals-many").evals, "run-1003")).toBeNull();
    // kept as long as the queue keeps things
    const ttl = await raw.ttl(keys("evals-many").eval("run-1002", "record"));
    expect(ttl).toBeGreaterThan(3500);
  }, 120_000);
});
