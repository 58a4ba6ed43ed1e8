// Which Claude endpoint the worker's model talks to (PATCHBAY_PROVIDER), and each platform's
// standard settings as its SDK names them. Read in src/core/config/config.ts (the only reader of the
// environment); credentials stay here, on the worker: a JobSpec, Redis and transcripts never hold them.
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export const PROVIDERS = ["anthropic", "bedrock", "vertex"] as const;
export type Provider = (typeof PROVIDERS)[number];

export interface BedrockSettings {
  region: string;
  baseUrl?: string;
  /** Static keys (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN); absent: the AWS SDK's default chain (profile, SSO, IMDS…). */
  accessKeyId?: string;
  secretAccessKey?: string;
  sessionToken?: string;
  /** Bedrock's own API key (AWS_BEARER_TOKEN_BEDROCK), in place of SigV4. */
  apiKey?: string;
  profile?: string;
  /** The shared credentials and config files the default chain reads. */
  files: string[];
}

export interface VertexSettings {
  region?: string;
  projectId?: string;
  baseUrl?: string;
  /** GOOGLE_APPLICATION_CREDENTIALS, else gcloud's ADC file (the metadata server is the last resort). */
  credentialsFile?: string;
  adcFile: string;
}

export interface ProviderConfig {
  name: Provider;
  bedrock: BedrockSettings;
  vertex: VertexSettings;
}

type ProviderEnv = Partial<
  Record<
    | "AWS_REGION"
    | "AWS_DEFAULT_REGION"
    | "AWS_ACCESS_KEY_ID"
    | "AWS_SECRET_ACCESS_KEY"
    | "AWS_SESSION_TOKEN"
    | "AWS_PROFILE"
    | "AWS_SHARED_CREDENTIALS_FILE"
    | "AWS_CONFIG_FILE"
    | "AWS_BEARER_TOKEN_BEDROCK"
    | "ANTHROPIC_BEDROCK_BASE_URL"
    | "CLOUD_ML_REGION"
    | "ANTHROPIC_VERTEX_PROJECT_ID"
    | "ANTHROPIC_VERTEX_BASE_URL"
    | "GOOGLE_APPLICATION_CREDENTIALS"
    | "CLOUDSDK_CONFIG",
    string
  >
> & { PATCHBAY_PROVIDER: Provider };

const set = (s: string | undefined) => (s ? s : undefined);

export function providerOf(e: ProviderEnv): ProviderConfig {
  const home = homedir();
  return {
    name: e.PATCHBAY_PROVIDER,
    bedrock: {
      region: set(e.AWS_REGION) ?? set(e.AWS_DEFAULT_REGION) ?? "us-east-1",
      baseUrl: set(e.ANTHROPIC_BEDROCK_BASE_URL),
      accessKeyId: set(e.AWS_ACCESS_KEY_ID),
      secretAccessKey: set(e.AWS_SECRET_ACCESS_KEY),
      sessionToken: set(e.AWS_SESSION_TOKEN),
      apiKey: set(e.AWS_BEARER_TOKEN_BEDROCK),
      profile: set(e.AWS_PROFILE),
      files: [
        set(e.AWS_SHARED_CREDENTIALS_FILE) ?? join(home, ".aws", "credentials"),
        set(e.AWS_CONFIG_FILE) ?? join(home, ".aws", "config"),
      ],
    },
    vertex: {
      region: set(e.CLOUD_ML_REGION),
      projectId: set(e.ANTHROPIC_VERTEX_PROJECT_ID),
      baseUrl: set(e.ANTHROPIC_VERTEX_BASE_URL),
      credentialsFile: set(e.GOOGLE_APPLICATION_CREDENTIALS),
      adcFile: join(set(e.CLOUDSDK_CONFIG) ?? join(home, ".config", "gcloud"), "application_default_credentials.json"),
    },
  };
}

/** Where the provider's credentials come from, named but never shown; `found: false` with what to do. */
export function platformCredentials(p: ProviderConfig): { found: boolean; detail: string } {
  if (p.name === "bedrock") {
    const b = p.bedrock;
    if (b.apiKey) return { found: true, detail: `Bedrock in ${b.region}: AWS_BEARER_TOKEN_BEDROCK is set` };
    if (b.accessKeyId && b.secretAccessKey)
      return {
        found: true,
        detail: `Bedrock in ${b.region}: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are set${b.sessionToken ? " (with a session token)" : ""}`,
      };
    const file = b.files.find((f) => existsSync(f));
    if (file)
      return { found: true, detail: `Bedrock in ${b.region}: AWS profile ${b.profile ?? "default"} from ${file}` };
    return {
      found: false,
      detail: `Bedrock in ${b.region}: no AWS credentials (neither AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_BEARER_TOKEN_BEDROCK, nor ${b.files.join(" / ")})`,
    };
  }
  if (p.name === "vertex") {
    const v = p.vertex;
    if (!v.region) return { found: false, detail: "Vertex: CLOUD_ML_REGION is not set" };
    const where = `Vertex in ${v.region}${v.projectId ? `, project ${v.projectId}` : ""}`;
    if (v.credentialsFile)
      return existsSync(v.credentialsFile)
        ? { found: true, detail: `${where}: GOOGLE_APPLICATION_CREDENTIALS (${v.credentialsFile})` }
        : {
            found: false,
            detail: `${where}: GOOGLE_APPLICATION_CREDENTIALS names ${v.credentialsFile}, which does not exist`,
          };
    if (existsSync(v.adcFile))
      return { found: true, detail: `${where}: Application Default Credentials from ${v.adcFile}` };
    return {
      found: false,
      detail: `${where}: no Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS unset, no ${v.adcFile}; on Google Cloud the metadata server may still serve them)`,
    };
  }
  return { found: false, detail: "the first-party API" };
}
