// A thin Model interface and the Anthropic implementation on @anthropic-ai/sdk. The agent loop
// sees only `Model`, so a scripted or other provider's model drops in.
import Anthropic, { type APIError } from "@anthropic-ai/sdk";
import type { Usage } from "../core/spec/spec.js";
import { PatchbayError } from "../core/errors.js";
import type { Config } from "../core/config/config.js";
import type { ProviderConfig } from "../core/config/provider.js";
import { makeClient, type MessagesClient } from "./clients.js";
import { providerModelId } from "./provider-models.js";

/** A message of the Messages API. */
export type Message = { role: "user" | "assistant"; content: string | ContentBlock[] };
/** A content block of the Messages API (text, tool_use, tool_result, image, ...). */
export type ContentBlock = { type: string; [k: string]: unknown };

/** One request to the model. */
export interface ModelRequest {
  /** The model's id, as patchbay names it (a provider's own id is derived from it). */
  model: string;
  /** The system prompt's blocks. */
  system: ContentBlock[];
  /** The conversation. */
  messages: Message[];
  /** The tool definitions. */
  tools: unknown[];
  /** The most output tokens of the response. */
  maxTokens: number;
  /** Aborts the request. */
  signal?: AbortSignal;
}

/** The model's answer to one request. */
export interface ModelResponse {
  /** Its content blocks (text and tool_use). */
  content: ContentBlock[];
  /** Why it stopped: end_turn, tool_use, max_tokens, ... */
  stopReason: string | null;
  /** The tokens the request used. */
  usage: Usage;
  /** The model that answered, as the API named it. */
  model: string;
}

/** A request the client is about to retry. */
export interface RetryInfo {
  /** Which retry this is (1 for the first). */
  retry: number;
  /** The failed answer's HTTP status, where there was one. */
  status?: number;
  /** What the failed answer said. */
  error: string;
}

/** What Model.complete reports while it works. */
export interface CompleteHooks {
  /** Called before each retry of the request (the transcript shows them). */
  onRetry?: (r: RetryInfo) => void;
}

/** A model client: the agent loop knows no other (a scripted model or another provider's drops in). */
export interface Model {
  /** Sends one request and resolves to the answer; rejects with a ModelError once retries are spent. */
  complete(req: ModelRequest, hooks?: CompleteHooks): Promise<ModelResponse>;
}

/**
 * An API error once the SDK's own retries are spent. Not retryable (4xx other than 408/409/429):
 * the job fails with it. Retryable: the worker retries the job, and a 429 or 529 (rate limited,
 * overloaded) throttles the worker instead (see isThrottle), for retryAfterMs when the API said.
 */
export class ModelError extends PatchbayError {
  constructor(
    message: string,
    readonly status?: number,
    readonly retryable = false,
    /** The last answer's retry-after-ms / retry-after, in ms. */
    readonly retryAfterMs?: number,
  ) {
    // Rate limited (429) or overloaded (529): the account's or the service's state, not the job's.
    super(status === 429 || status === 529 ? "throttle" : "model", message);
  }
}

/** The API is rate limited (429) or overloaded (529): a ModelError of kind "throttle". */
export const isThrottle = (err: unknown): err is ModelError => err instanceof ModelError && err.kind === "throttle";

/** retry-after-ms, else retry-after (seconds or an HTTP date), as the SDK reads them; undefined when absent or unusable. */
export function retryAfterMs(
  headers: { get(name: string): string | null } | undefined,
  now = Date.now(),
): number | undefined {
  const ms = Number.parseFloat(headers?.get("retry-after-ms") ?? "");
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const after = headers?.get("retry-after");
  if (!after) return undefined;
  const sec = Number.parseFloat(after);
  if (Number.isFinite(sec)) return sec >= 0 ? sec * 1000 : undefined;
  const at = Date.parse(after);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

const RETRYABLE = (s: number) => s === 408 || s === 409 || s === 429 || s >= 500;

/** How an AnthropicModel reaches the model. */
export interface AnthropicModelOptions {
  /**
   * The first-party API's key.
   * @default the SDK's: ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN, a profile)
   */
  apiKey?: string;
  /**
   * The first-party API's address.
   * @default the SDK's: ANTHROPIC_BASE_URL, else https://api.anthropic.com
   */
  baseURL?: string;
  /**
   * The SDK's own retries for 429/5xx/overloaded (and connection errors).
   * @default 4
   */
  maxRetries?: number;
  /**
   * One request's time limit, in ms.
   * @default 600000 (10 minutes)
   */
  timeoutMs?: number;
  /**
   * Bedrock or Vertex (src/agent/clients.ts).
   * @default the first-party API, with apiKey and baseURL
   */
  provider?: ProviderConfig;
}

/** The worker's model from its Config: the provider's client, its credentials and base URL. */
export const modelFromConfig = (
  config: Pick<Config, "anthropicApiKey" | "anthropicBaseUrl" | "provider">,
  provider?: ProviderConfig["name"],
): AnthropicModel =>
  new AnthropicModel({
    apiKey: config.anthropicApiKey,
    baseURL: config.anthropicBaseUrl,
    provider: provider ? { ...config.provider, name: provider } : config.provider,
  });

/** The Model on Anthropic's SDK: the first-party API, Bedrock or Vertex, streaming, its retries in the transcript. */
export class AnthropicModel implements Model {
  private onRetry?: (r: RetryInfo) => void;
  /** Made on the first request: the Bedrock and Vertex SDKs are optional packages, loaded then. */
  private readonly makeClient: () => Promise<MessagesClient>;
  private client?: Promise<MessagesClient>;
  private readonly maxRetries: number;
  private readonly provider: ProviderConfig["name"];

  constructor(opts: AnthropicModelOptions = {}) {
    this.maxRetries = opts.maxRetries ?? 4;
    this.provider = opts.provider?.name ?? "anthropic";
    this.makeClient = () =>
      makeClient(
        opts.provider,
        {
          maxRetries: this.maxRetries,
          timeout: opts.timeoutMs ?? 10 * 60_000,
          // Sees every attempt the SDK makes, so the transcript can show its retries.
          fetch: async (url, init) => {
            const res = await fetch(url, init);
            const retryCount = Number(new Headers(init?.headers).get("x-stainless-retry-count") ?? 0);
            const should = res.headers.get("x-should-retry");
            const willRetry = should === "true" || (should !== "false" && RETRYABLE(res.status));
            if (!res.ok && willRetry && retryCount < this.maxRetries) {
              this.onRetry?.({ retry: retryCount + 1, status: res.status, error: await errorText(res.clone()) });
            }
            return res;
          },
        },
        { apiKey: opts.apiKey, baseURL: opts.baseURL },
      );
  }

  /** Sends one request (streamed) and resolves to the answer; rejects with a ModelError once retries are spent. */
  async complete(req: ModelRequest, hooks: CompleteHooks = {}): Promise<ModelResponse> {
    this.onRetry = hooks.onRetry;
    try {
      // Streaming, so a long response never hits the non-streaming request time limit.
      const client = await (this.client ??= this.makeClient());
      const stream = client.messages.stream(
        {
          model: providerModelId(this.provider, req.model),
          max_tokens: req.maxTokens,
          system: req.system as never,
          messages: req.messages as never,
          tools: req.tools as never,
        },
        { signal: req.signal },
      );
      const msg = await stream.finalMessage();
      const u = msg.usage;
      return {
        content: msg.content.map((b) => ({ ...b })),
        stopReason: msg.stop_reason,
        model: msg.model,
        usage: {
          inputTokens: u.input_tokens ?? 0,
          outputTokens: u.output_tokens ?? 0,
          cacheReadTokens: u.cache_read_input_tokens ?? 0,
          cacheWriteTokens: u.cache_creation_input_tokens ?? 0,
        },
      };
    } catch (err) {
      if (err instanceof Anthropic.APIUserAbortError) throw err;
      if (isApiError(err)) {
        const apiMessage = (err as { error?: { error?: { message?: string } } }).error?.error?.message ?? err.message;
        throw new ModelError(
          `Anthropic API error${err.status ? ` ${err.status}` : ""}: ${apiMessage}`,
          err.status,
          err.status === undefined || RETRYABLE(err.status),
          retryAfterMs(err.headers),
        );
      }
      throw err;
    } finally {
      this.onRetry = undefined;
    }
  }
}

/**
 * `err instanceof Anthropic.APIError` narrows to `APIError<any, any, any>`, so `status` and `headers`
 * would be `any`; this guard narrows to the SDK's declared defaults (a number, Headers) instead.
 */
function isApiError(err: unknown): err is APIError {
  return err instanceof Anthropic.APIError;
}

async function errorText(res: Response): Promise<string> {
  try {
    const body = (await res.json()) as { error?: { type?: string; message?: string } };
    return `${res.status} ${body.error?.type ?? ""}: ${body.error?.message ?? ""}`.trim();
  } catch {
    return `HTTP ${res.status}`;
  }
}
