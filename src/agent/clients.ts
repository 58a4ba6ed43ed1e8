// The one place that makes the Messages API client: Anthropic's own SDK for the first-party API,
// its Bedrock SDK (SigV4 or a Bedrock API key) or its Vertex SDK (Google OAuth). All three speak
// the same `messages.stream`, so the loop and AnthropicModel do not know which they hold. The
// Bedrock and Vertex SDKs are optional packages, loaded here the first time a client needs one.
import Anthropic, { type ClientOptions } from "@anthropic-ai/sdk";
import type { ProviderConfig } from "../core/config/provider.js";
import { loadOptional, OPTIONAL } from "../core/optional.js";

/** What AnthropicModel uses of a client. */
export interface MessagesClient {
  messages: { stream: Anthropic["messages"]["stream"] };
}

/** The options every client takes (retries, timeout, the fetch that watches retries). */
export type CommonOptions = Pick<ClientOptions, "maxRetries" | "timeout" | "fetch">;

const CLOUD_SCOPE = "https://www.googleapis.com/auth/cloud-platform";

/** Bedrock's SDK, loaded on first use (an optional package). */
const bedrockSdk = () => loadOptional(OPTIONAL.bedrock, () => import("@anthropic-ai/bedrock-sdk"));
/** Vertex's SDK and Google's auth library, loaded on first use (optional packages). */
const vertexSdk = () =>
  loadOptional(OPTIONAL.vertex, () => Promise.all([import("@anthropic-ai/vertex-sdk"), import("google-auth-library")]));

/**
 * Loads the provider's optional SDK, so that a worker's health check can say at start, with the
 * `npm i` command, that it is missing (rather than failing each job it would take); rejects with a
 * MissingPackageError then. The first-party API's SDK is always installed.
 */
export async function loadProviderSdk(provider: ProviderConfig): Promise<void> {
  if (provider.name === "bedrock") await bedrockSdk();
  else if (provider.name === "vertex") await vertexSdk();
}

/** The provider's client; rejects with a MissingPackageError when its SDK is not installed. */
export async function makeClient(
  provider: ProviderConfig | undefined,
  common: CommonOptions,
  first: { apiKey?: string; baseURL?: string },
): Promise<MessagesClient> {
  if (provider?.name === "bedrock") {
    const { AnthropicBedrock } = await bedrockSdk();
    const b = provider.bedrock;
    // Keys from the worker's Config when it has both; else the AWS SDK's default chain (profile, SSO, IMDS).
    const base = {
      ...common,
      awsRegion: b.region,
      apiKey: b.apiKey ?? null,
      ...(b.baseUrl ? { baseURL: b.baseUrl } : {}),
    };
    return b.accessKeyId && b.secretAccessKey
      ? new AnthropicBedrock({
          ...base,
          awsAccessKey: b.accessKeyId,
          awsSecretKey: b.secretAccessKey,
          awsSessionToken: b.sessionToken ?? null,
        })
      : new AnthropicBedrock(base);
  }
  if (provider?.name === "vertex") {
    const v = provider.vertex;
    const [{ AnthropicVertex }, { GoogleAuth }] = await vertexSdk();
    // The SDK would read GOOGLE_APPLICATION_CREDENTIALS itself; the Config's value is passed so one worker's settings decide.
    const googleAuth = new GoogleAuth({
      scopes: CLOUD_SCOPE,
      ...(v.credentialsFile ? { keyFilename: v.credentialsFile } : {}),
      ...(v.projectId ? { projectId: v.projectId } : {}),
    });
    return new AnthropicVertex({
      ...common,
      region: v.region ?? null,
      projectId: v.projectId ?? null,
      googleAuth,
      ...(v.baseUrl ? { baseURL: v.baseUrl } : {}),
    });
  }
  // ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL are read by the SDK itself when not given.
  return new Anthropic({
    ...common,
    ...(first.apiKey ? { apiKey: first.apiKey } : {}),
    ...(first.baseURL ? { baseURL: first.baseURL } : {}),
  });
}
