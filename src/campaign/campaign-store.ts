// A campaign in Redis, beside its batch (same id): its definition (what publishing needs: the
// settings and the repositories, never a credential) and one changeset record per repository.
// Kept as long as the queue keeps things (PATCHBAY_RETENTION_SEC), renewed by every write, so a
// campaign tracked to merge over weeks stays while it is tracked.
import type { Redis } from "ioredis";
import { z } from "zod";
import { keys } from "../queue/keys.js";
import { PatchbayError } from "../errors.js";
import { Changeset } from "./changeset.js";
import type { CampaignRepo } from "./campaign-file.js";
import type { PublishSettings } from "./campaign-publish-settings.js";

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
    branch: z.string(), base: z.string().optional(), draft: z.boolean(), title: z.string(), body: z.string(),
    author: z.object({ name: z.string(), email: z.string() }), message: z.string(), transcriptUrl: z.string().optional(),
  }),
  repos: z.array(z.object({ line: z.number(), git: z.string(), ref: z.string().optional(), vars: z.record(z.string(), z.string()) })),
});

export class CampaignNotFoundError extends PatchbayError {
  constructor(readonly campaignId: string, readonly queueName: string) {
    super("not-found", `no campaign ${campaignId} in queue ${queueName} (patchbay campaign list shows those there are)`);
  }
}

export class CampaignStore {
  constructor(
    private readonly redis: Redis,
    readonly queueName: string,
    private readonly ttlSec: number,
  ) {}

  private k(id: string, part: "def" | "changesets") {
    return keys(this.queueName).campaign(id, part);
  }

  /** Stores the definition (replacing an older one of the same campaign: settings may change between publishes). */
  async saveDef(def: CampaignDef): Promise<void> {
    await this.redis.multi()
      .set(this.k(def.name, "def"), JSON.stringify(def), "EX", this.ttlSec)
      .zadd(keys(this.queueName).campaigns, "NX", def.createdAt, def.name)
      .expire(this.k(def.name, "changesets"), this.ttlSec)
      .exec();
  }

  async def(id: string): Promise<CampaignDef> {
    const raw = await this.redis.get(this.k(id, "def"));
    if (!raw) throw new CampaignNotFoundError(id, this.queueName);
    return Def.parse(JSON.parse(raw)) as CampaignDef;
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
    await this.redis.multi().hset(k, String(c.line), JSON.stringify(Changeset.parse(c))).expire(k, this.ttlSec).expire(this.k(id, "def"), this.ttlSec).exec();
  }

  /** Campaign ids, newest first. */
  async list(limit = 50): Promise<string[]> {
    return this.redis.zrevrange(keys(this.queueName).campaigns, 0, limit - 1);
  }
}
