// A campaign in Redis, beside its batch (same id): its definition (what publishing needs: the
// settings and the repositories, never a credential) and one changeset record per repository.
// Kept as long as the queue keeps things (PATCHBAY_RETENTION_SEC), renewed by every write, so a
// campaign tracked to merge over weeks stays while it is tracked.
import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { luaCommand } from "../core/lua.js";
import { z } from "zod";
import { keys } from "../queue/keys.js";
import { PatchbayError } from "../core/errors.js";
import { Changeset } from "./changeset.js";
import type { CampaignRepo } from "./file.js";
import type { PublishSettings } from "./publish-settings.js";

export interface CampaignDef {
  name: string;
  createdAt: number;
  budgetUsd?: number;
  publish: PublishSettings;
  repos: CampaignRepo[];
}

const Def = z.object({
  name: z.string(),
  createdAt: z.number(),
  budgetUsd: z.number().optional(),
  publish: z.object({
    branch: z.string(),
    base: z.string().optional(),
    draft: z.boolean(),
    title: z.string(),
    body: z.string(),
    author: z.object({ name: z.string(), email: z.string() }),
    message: z.string(),
    transcriptUrl: z.string().optional(),
  }),
  repos: z.array(
    z.object({ line: z.number(), git: z.string(), ref: z.string().optional(), vars: z.record(z.string(), z.string()) }),
  ),
});

/** No campaign of that id is in the queue (it was never submitted, or its records expired). */
export class CampaignNotFoundError extends PatchbayError {
  constructor(
    readonly campaignId: string,
    readonly queueName: string,
  ) {
    super(
      "not-found",
      `no campaign ${campaignId} in queue ${queueName} (patchbay campaign list shows those there are)`,
    );
  }
}

/** Another process publishes, tracks or closes the campaign now. */
export class CampaignBusyError extends PatchbayError {
  constructor(
    readonly campaignId: string,
    readonly holder: string,
  ) {
    super(
      "conflict",
      `campaign ${campaignId} is busy: ${holder.slice(0, 200)} holds it; try again when that ends (the lock expires by itself if its process died)`,
    );
  }
}

const RELEASE = luaCommand<number>("campaign/lua/release-lock-1.lua");
const RENEW = luaCommand<number>("campaign/lua/renew-lock-1.lua");
const LOCK_MS = 60_000;

export class CampaignStore {
  constructor(
    private readonly redis: Redis,
    readonly queueName: string,
    private readonly ttlSec: number,
  ) {}

  /**
   * Runs fn holding the campaign's lock: one publish, track or close at a time (two at once would
   * both open a pull request, and each overwrite the other's records). Renewed while fn runs; a
   * process that dies leaves it to expire within a minute.
   */
  async withLock<T>(id: string, what: string, fn: () => Promise<T>): Promise<T> {
    const key = this.k(id, "lock");
    const token = `${what} (pid ${process.pid}) ${randomUUID()}`;
    if ((await this.redis.set(key, token, "PX", LOCK_MS, "NX")) !== "OK")
      throw new CampaignBusyError(
        id,
        ((await this.redis.get(key)) ?? "another process").replace(/ [0-9a-f-]{36}$/, ""),
      );
    const renew = setInterval(() => void RENEW(this.redis, key, token, LOCK_MS).catch(() => {}), LOCK_MS / 3);
    try {
      return await fn();
    } finally {
      clearInterval(renew);
      await RELEASE(this.redis, key, token).catch(() => {});
    }
  }

  private k(id: string, part: "def" | "changesets" | "lock") {
    return keys(this.queueName).campaign(id, part);
  }

  /** Stores the definition (replacing an older one of the same campaign: settings may change between publishes). */
  async saveDef(def: CampaignDef): Promise<void> {
    await this.redis
      .multi()
      .set(this.k(def.name, "def"), JSON.stringify(def), "EX", this.ttlSec)
      .zadd(keys(this.queueName).campaigns, "NX", def.createdAt, def.name)
      .expire(this.k(def.name, "changesets"), this.ttlSec)
      .exec();
  }

  async def(id: string): Promise<CampaignDef> {
    const raw = await this.redis.get(this.k(id, "def"));
    if (!raw) throw new CampaignNotFoundError(id, this.queueName);
    return Def.parse(JSON.parse(raw));
  }

  /** Every changeset recorded, by line (lines never published have none). */
  async changesets(id: string): Promise<Map<number, Changeset>> {
    const all = await this.redis.hgetall(this.k(id, "changesets"));
    const out = new Map<number, Changeset>();
    for (const [line, json] of Object.entries(all)) {
      const c = Changeset.safeParse(JSON.parse(json));
      if (c.success) out.set(Number(line), c.data);
    }
    return out;
  }

  async saveChangeset(id: string, c: Changeset): Promise<void> {
    const k = this.k(id, "changesets");
    await this.redis
      .multi()
      .hset(k, String(c.line), JSON.stringify(Changeset.parse(c)))
      .expire(k, this.ttlSec)
      .expire(this.k(id, "def"), this.ttlSec)
      .exec();
  }

  /** Campaign ids, newest first. */
  async list(limit = 50): Promise<string[]> {
    return this.redis.zrevrange(keys(this.queueName).campaigns, 0, limit - 1);
  }
}
