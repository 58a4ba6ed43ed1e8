// What publishing, tracking and closing a campaign share: the queue's client and batches, the
// campaign's store, the Config (forge hosts and tokens), the cache of bare clones, and for each
// repository its forge (an API client where the host is a forge with a token, else git alone).
import { Job } from "bullmq";
import type { Config } from "../core/config/config.js";
import type { JobResult } from "../core/spec/spec.js";
import type { GitCredential } from "../git/credentials.js";
import { scrub, splitUrl } from "../git/credentials.js";
import type { ForgeHost } from "../core/config/forges.js";
import { BatchClient } from "../batch/batches.js";
import type { JobData, PatchbayClient } from "../queue/client.js";
import { CampaignStore } from "./store.js";
import type { Forge, ForgeRepo, ForgeWait } from "./forge/forge.js";
import { forgeGit, forgeRepoOf, makeForge } from "./forge/hosts.js";

export interface RepoForge {
  kind: "github" | "gitlab" | "git";
  /** The forge's API, where the host is a forge and a token was given for it. */
  api?: { forge: Forge; repo: ForgeRepo };
  /** What git pushes with over http(s) to a forge with a token; else git's own helpers and agent. */
  credential?: GitCredential;
}

export interface PublishContext {
  client: PatchbayClient;
  batches: BatchClient;
  store: CampaignStore;
  config: Config;
  cacheDir: string;
  /** A job's task and verify, from the queue (undefined once the queue has dropped it). */
  specOf(jobId: string): Promise<{ task: string; verify?: string } | undefined>;
  /** A message with every token of the Config's forges (and URL userinfo) hidden. */
  scrub(text: string): string;
  forges: Map<string, Forge>;
  onWait?: (w: ForgeWait) => void;
}

export function publishContext(
  client: PatchbayClient,
  config: Config,
  o: { cacheDir: string; onWait?: (w: ForgeWait) => void },
): PublishContext {
  const secrets = config.forges.hosts.map((h) => config.forges.token(h.host)).filter((t): t is string => Boolean(t));
  return {
    client,
    batches: new BatchClient(client),
    store: new CampaignStore(client.redis, client.queueName, client.retentionSec),
    config,
    cacheDir: o.cacheDir,
    async specOf(jobId) {
      const job = await Job.fromId<JobData, JobResult>(client.queue, jobId);
      return job?.data?.spec
        ? { task: job.data.spec.task, ...(job.data.spec.verify ? { verify: job.data.spec.verify } : {}) }
        : undefined;
    },
    scrub: (text) => scrub(text, secrets),
    forges: new Map(),
    ...(o.onWait ? { onWait: o.onWait } : {}),
  };
}

/** The repository's forge: its API client (one per host, shared), its push credential. */
export function forgeOf(ctx: PublishContext, gitUrl: string): RepoForge {
  const found = forgeRepoOf(gitUrl, ctx.config.forges.hosts);
  if (!found) return { kind: "git" };
  const token = ctx.config.forges.token(found.host.host);
  if (!token) return { kind: found.host.kind };
  const forge =
    ctx.forges.get(found.host.host) ?? makeForge(found.host, token, ctx.onWait ? { onWait: ctx.onWait } : {});
  ctx.forges.set(found.host.host, forge);
  const credential = pushesToForge(gitUrl, found.host)
    ? { username: forgeGit(found.host.kind).tokenUser, password: token }
    : undefined;
  return { kind: found.host.kind, api: { forge, repo: found.repo }, ...(credential ? { credential } : {}) };
}

/**
 * Whether git may be given the forge's token for this URL: git must read the same host from it as
 * forgeRepoOf did (its credential helper answers for the host as git reads it: a URL the two parsers
 * read differently, `https://gitlab.com\\.evil.example/...`, `https://github%2Ecom/...`, gets none),
 * over https, or over http only where the forge's own API is http (else `http://github.com/...` would
 * send the token in the clear).
 */
function pushesToForge(gitUrl: string, host: ForgeHost): boolean {
  const s = splitUrl(gitUrl.trim());
  if (s.protocol !== "https" && !(s.protocol === "http" && host.apiUrl.startsWith("http:"))) return false;
  const written = (s.host ?? "").toLowerCase().replace(s.protocol === "https" ? /:443$/ : /:80$/, "");
  return written === host.host.toLowerCase();
}
