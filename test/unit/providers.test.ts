// Claude on Bedrock and Vertex: PATCHBAY_PROVIDER's Config, the model ids per provider, and a whole
// scripted job through each platform's own Anthropic SDK client (the real SigV4 signing and
// event-stream decoding; the real Google ADC token refresh) against local stand-ins that check
// what the real endpoints check (test/support/platform-fakes.ts), on the local backend.
//
// Backend: local (runJob through the Bedrock and Vertex SDK clients).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { modelCheck } from "../../src/cli/doctor.js";
import { checkCredentials } from "../../src/queue/health.js";
import { ensureBuilt, patchbay } from "../support/cli-helpers.js";
import { loadConfig } from "../../src/core/config/config.js";
import { platformCredentials } from "../../src/core/config/provider.js";
import { MAPPED_MODELS, providerModelId } from "../../src/agent/provider-models.js";
import { pricePrefix } from "../../src/agent/prices.js";
import { runJob } from "../../src/job/run.js";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { localBackend, localWorkerConfig } from "../support/backend.js";
import { reply, text, toolUse } from "../support/fake-anthropic.js";
import { startBedrockFake, startVertexFake, type PlatformFake } from "../support/platform-fakes.js";

const CLAMP = new URL("../../examples/clamp", import.meta.url).pathname;
const AWS = {
  AWS_ACCESS_KEY_ID: "AKIAPATCHBAYTEST0001",
  AWS_SECRET_ACCESS_KEY: "secret-never-shown-9f8e7d",
  AWS_SESSION_TOKEN: "session-token-never-shown",
};
// A clean slate for the platforms' variables, whatever this machine's environment holds.
const NO_PLATFORM_ENV = Object.fromEntries(
  [
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
    "CLOUD_ML_REGION",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "GOOGLE_APPLICATION_CREDENTIALS",
  ].map((k) => [k, ""]),
);

let fake: PlatformFake | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await fake?.close();
  fake = undefined;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), "pb-provider-"));
  dirs.push(d);
  return d;
};

describe("PATCHBAY_PROVIDER's Config", () => {
  it("the first-party API by default; the platforms' standard variables read as their SDKs name them", () => {
    expect(loadConfig({}).provider.name).toBe("anthropic");
    const b = loadConfig({
      PATCHBAY_PROVIDER: "bedrock",
      AWS_DEFAULT_REGION: "eu-west-3",
      ...AWS,
      ANTHROPIC_BEDROCK_BASE_URL: "http://127.0.0.1:1",
    }).provider;
    expect(b).toMatchObject({
      name: "bedrock",
      bedrock: {
        region: "eu-west-3",
        accessKeyId: AWS.AWS_ACCESS_KEY_ID,
        sessionToken: AWS.AWS_SESSION_TOKEN,
        baseUrl: "http://127.0.0.1:1",
      },
    });
    expect(
      loadConfig({ PATCHBAY_PROVIDER: "bedrock", AWS_REGION: "us-west-2", AWS_DEFAULT_REGION: "eu-west-3" }).provider
        .bedrock.region,
    ).toBe("us-west-2");
    expect(loadConfig({ PATCHBAY_PROVIDER: "bedrock" }).provider.bedrock.region).toBe("us-east-1"); // the SDK's default
    const v = loadConfig({
      PATCHBAY_PROVIDER: "vertex",
      CLOUD_ML_REGION: "us-east5",
      ANTHROPIC_VERTEX_PROJECT_ID: "p-1",
      GOOGLE_APPLICATION_CREDENTIALS: "/x/adc.json",
    }).provider;
    expect(v).toMatchObject({
      name: "vertex",
      vertex: { region: "us-east5", projectId: "p-1", credentialsFile: "/x/adc.json" },
    });
  });

  it("refuses an unknown provider, a malformed region and a base URL that is not http(s)", () => {
    expect(() => loadConfig({ PATCHBAY_PROVIDER: "azure" })).toThrow(/PATCHBAY_PROVIDER/);
    expect(() => loadConfig({ CLOUD_ML_REGION: "us east/../5" })).toThrow(/CLOUD_ML_REGION/);
    expect(() => loadConfig({ ANTHROPIC_VERTEX_BASE_URL: "file:///etc/passwd" })).toThrow(/ANTHROPIC_VERTEX_BASE_URL/);
  });

  it("says where the credentials come from without showing them", () => {
    const home = tmp();
    const none = platformCredentials(
      loadConfig({
        PATCHBAY_PROVIDER: "bedrock",
        AWS_SHARED_CREDENTIALS_FILE: join(home, "c"),
        AWS_CONFIG_FILE: join(home, "k"),
      }).provider,
    );
    expect(none.found).toBe(false);
    const keys = platformCredentials(loadConfig({ PATCHBAY_PROVIDER: "bedrock", ...AWS }).provider);
    expect(keys).toMatchObject({ found: true, detail: expect.stringContaining("AWS_ACCESS_KEY_ID") });
    writeFileSync(join(home, "c"), "[ops]\naws_access_key_id = AKIA…\n");
    const profile = platformCredentials(
      loadConfig({
        PATCHBAY_PROVIDER: "bedrock",
        AWS_PROFILE: "ops",
        AWS_SHARED_CREDENTIALS_FILE: join(home, "c"),
        AWS_CONFIG_FILE: join(home, "k"),
      }).provider,
    );
    expect(profile).toMatchObject({ found: true, detail: expect.stringContaining("profile ops") });
    expect(
      platformCredentials(
        loadConfig({ PATCHBAY_PROVIDER: "vertex", CLOUD_ML_REGION: "global", CLOUDSDK_CONFIG: home }).provider,
      ).found,
    ).toBe(false);
    writeFileSync(join(home, "application_default_credentials.json"), "{}");
    expect(
      platformCredentials(
        loadConfig({ PATCHBAY_PROVIDER: "vertex", CLOUD_ML_REGION: "global", CLOUDSDK_CONFIG: home }).provider,
      ).found,
    ).toBe(true);
    expect(
      platformCredentials(loadConfig({ PATCHBAY_PROVIDER: "vertex", CLOUDSDK_CONFIG: home }).provider),
    ).toMatchObject({ found: false, detail: expect.stringContaining("CLOUD_ML_REGION") });
    for (const c of [none, keys, profile])
      for (const secret of Object.values(AWS)) expect(c.detail).not.toContain(secret);
  });
});

describe("model ids per provider", () => {
  it("maps the first-party ids to Bedrock's and Vertex's forms, and lets a provider's own form through", () => {
    expect(providerModelId("bedrock", "claude-sonnet-4-5")).toBe("anthropic.claude-sonnet-4-5-20250929-v1:0");
    expect(providerModelId("bedrock", "claude-sonnet-4-5-20250929")).toBe("anthropic.claude-sonnet-4-5-20250929-v1:0");
    expect(providerModelId("vertex", "claude-sonnet-4-5")).toBe("claude-sonnet-4-5@20250929");
    expect(providerModelId("bedrock", "claude-sonnet-5-5")).toBe("anthropic.claude-sonnet-5-5");
    expect(providerModelId("vertex", "claude-sonnet-5-5")).toBe("claude-sonnet-5-5");
    expect(providerModelId("anthropic", "claude-sonnet-4-5")).toBe("claude-sonnet-4-5");
    for (const own of [
      "global.anthropic.claude-sonnet-5-5",
      "us.anthropic.claude-haiku-4-5-20251001-v1:0",
      "arn:aws:bedrock:us-east-1:1:inference-profile/x",
    ])
      expect(providerModelId("bedrock", own)).toBe(own);
    expect(providerModelId("vertex", "claude-opus-4-1@20250805")).toBe("claude-opus-4-1@20250805");
    expect(providerModelId("vertex", "someone-elses-model")).toBe("someone-elses-model");
  });

  it("every mapped id is priced, as its first-party id is (the platforms' list prices are the first-party ones)", () => {
    for (const id of MAPPED_MODELS) {
      for (const p of ["bedrock", "vertex"] as const)
        expect([id, p, pricePrefix(providerModelId(p, id))]).toEqual([id, p, pricePrefix(id)]);
    }
  });
});

const script = () => [
  reply(toolUse("bash", { command: "cd /workspace && echo provider-ok > note.txt" })),
  reply(text("Wrote note.txt.")),
];

async function job(config: ReturnType<typeof loadConfig>, extra: Record<string, unknown> = {}) {
  const events: TranscriptEvent[] = [];
  const result = await runJob(
    { task: "Write note.txt.", repo: { path: CLAMP }, maxTurns: 4, ...extra },
    { config, onEvent: (e) => events.push(e), backend: localBackend(), labels: { "patchbay.test": "providers" } },
  );
  return { result, events };
}

describe("a whole scripted job through each platform's SDK client", () => {
  it("Bedrock: SigV4-signed invoke-with-response-stream to the mapped model, answered in event-stream frames", async () => {
    const bedrock = await startBedrockFake(script(), {
      accessKeyId: AWS.AWS_ACCESS_KEY_ID,
      secretAccessKey: AWS.AWS_SECRET_ACCESS_KEY,
      region: "eu-west-3",
      sessionToken: AWS.AWS_SESSION_TOKEN,
    });
    fake = bedrock;
    const config = localWorkerConfig({
      ...NO_PLATFORM_ENV,
      PATCHBAY_PROVIDER: "bedrock",
      AWS_REGION: "eu-west-3",
      ...AWS,
      ANTHROPIC_BEDROCK_BASE_URL: bedrock.url,
      PATCHBAY_MODEL: "claude-sonnet-4-5",
    });
    const { result, events } = await job(config);
    expect(result.status).toBe("completed");
    expect(result.patch).toContain("+provider-ok");
    expect(bedrock.seen.map((s) => [s.path, s.problems])).toEqual([
      ["/model/anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream", []],
      ["/model/anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream", []],
    ]);
    expect(bedrock.seen[0]!.model).toBe("anthropic.claude-sonnet-4-5-20250929-v1:0");
    expect(bedrock.seen[1]!.body.messages.at(-1).content[0]).toMatchObject({ type: "tool_result" }); // the tool's result went back
    expect(result.costUsd).toBeGreaterThan(0); // priced as claude-sonnet-4-5
    const recorded = JSON.stringify({ result, events });
    for (const secret of Object.values(AWS)) expect(recorded).not.toContain(secret);
  });

  it("Vertex: Google ADC's token, streamRawPredict on the project's model path, answered as SSE", async () => {
    const vertex = await startVertexFake(script(), { project: "patchbay-test", region: "us-east5" });
    fake = vertex;
    const adcFile = join(tmp(), "adc.json");
    writeFileSync(adcFile, JSON.stringify(vertex.adc));
    const config = localWorkerConfig({
      ...NO_PLATFORM_ENV,
      PATCHBAY_PROVIDER: "vertex",
      CLOUD_ML_REGION: "us-east5",
      ANTHROPIC_VERTEX_PROJECT_ID: "patchbay-test",
      GOOGLE_APPLICATION_CREDENTIALS: adcFile,
      ANTHROPIC_VERTEX_BASE_URL: `${vertex.url}/v1`,
      PATCHBAY_MODEL: "claude-sonnet-5-5",
    });
    const { result, events } = await job(config);
    expect(result.status).toBe("completed");
    expect(result.patch).toContain("+provider-ok");
    expect(vertex.seen.map((s) => [s.path, s.problems])).toEqual([
      [
        "/v1/projects/patchbay-test/locations/us-east5/publishers/anthropic/models/claude-sonnet-5-5:streamRawPredict",
        [],
      ],
      [
        "/v1/projects/patchbay-test/locations/us-east5/publishers/anthropic/models/claude-sonnet-5-5:streamRawPredict",
        [],
      ],
    ]);
    expect(vertex.tokensIssued).toBe(1); // one refresh, reused
    expect(vertex.seen[0]!.body.anthropic_version).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    const recorded = JSON.stringify({ result, events });
    for (const secret of [vertex.adc.client_secret!, vertex.adc.refresh_token!, "ya29.fake-1"])
      expect(recorded).not.toContain(secret);
  });

  it("a JobSpec's provider: a worker on the first-party API whose PATCHBAY_PROVIDERS lists bedrock runs that job on Bedrock; one that does not refuses it", async () => {
    const bedrock = await startBedrockFake(script(), {
      accessKeyId: AWS.AWS_ACCESS_KEY_ID,
      secretAccessKey: AWS.AWS_SECRET_ACCESS_KEY,
      region: "eu-west-3",
    });
    fake = bedrock;
    const env = {
      ...NO_PLATFORM_ENV,
      AWS_REGION: "eu-west-3",
      AWS_ACCESS_KEY_ID: AWS.AWS_ACCESS_KEY_ID,
      AWS_SECRET_ACCESS_KEY: AWS.AWS_SECRET_ACCESS_KEY,
      ANTHROPIC_BEDROCK_BASE_URL: bedrock.url,
      ANTHROPIC_BASE_URL: "http://127.0.0.1:9",
      PATCHBAY_MODEL: "claude-sonnet-4-5",
    };
    const { result } = await job(localWorkerConfig({ ...env, PATCHBAY_PROVIDERS: "anthropic,bedrock" }), {
      provider: "bedrock",
    });
    expect(result.status, result.error).toBe("completed");
    expect(bedrock.seen.map((s) => s.problems)).toEqual([[], []]);
    await expect(job(localWorkerConfig(env), { provider: "bedrock" })).rejects.toThrow(
      /provider: "bedrock" is not allowed by this worker, which reaches Claude through anthropic/,
    );
  });

  it("the Bedrock stand-in refuses what Bedrock refuses: a request signed for another region, or with another secret", async () => {
    const bedrock = await startBedrockFake([...script(), ...script()], {
      accessKeyId: AWS.AWS_ACCESS_KEY_ID,
      secretAccessKey: AWS.AWS_SECRET_ACCESS_KEY,
      region: "eu-west-3",
    });
    fake = bedrock;
    const base = { ...NO_PLATFORM_ENV, PATCHBAY_PROVIDER: "bedrock", ...AWS, ANTHROPIC_BEDROCK_BASE_URL: bedrock.url };
    const wrongRegion = await job(localWorkerConfig({ ...base, AWS_REGION: "us-west-2" }));
    expect(wrongRegion.result.status).toBe("failed");
    expect(wrongRegion.result.error).toMatch(/403/);
    expect(bedrock.seen.at(-1)!.problems).toEqual(["the credential's region is us-west-2, not eu-west-3"]);
    const wrongSecret = await job(
      localWorkerConfig({ ...base, AWS_REGION: "eu-west-3", AWS_SECRET_ACCESS_KEY: "another-secret" }),
    );
    expect(wrongSecret.result.status).toBe("failed");
    expect(bedrock.seen.at(-1)!.problems).toEqual(["the signature does not match the request (SignatureDoesNotMatch)"]);
  });

  it("the Vertex stand-in's token endpoint refuses a refresh token it did not issue, and no request reaches the model", async () => {
    const vertex = await startVertexFake(script(), { project: "patchbay-test", region: "us-east5" });
    fake = vertex;
    const adcFile = join(tmp(), "adc.json");
    writeFileSync(adcFile, JSON.stringify({ ...vertex.adc, refresh_token: "stolen" }));
    const config = localWorkerConfig({
      ...NO_PLATFORM_ENV,
      PATCHBAY_PROVIDER: "vertex",
      CLOUD_ML_REGION: "us-east5",
      ANTHROPIC_VERTEX_PROJECT_ID: "patchbay-test",
      GOOGLE_APPLICATION_CREDENTIALS: adcFile,
      ANTHROPIC_VERTEX_BASE_URL: `${vertex.url}/v1`,
    });
    const run = job(config);
    await expect(run).rejects.toThrow(/Google OAuth|Connection error/);
    expect(vertex.tokensIssued).toBe(0);
    expect(vertex.seen).toEqual([]);
  });
});

describe("doctor and the worker's health, per provider", () => {
  beforeAll(ensureBuilt, 240_000);

  it("doctor names the provider and says whether its credentials are found, never what they are", async () => {
    const home = tmp();
    const files = {
      AWS_SHARED_CREDENTIALS_FILE: join(home, "c"),
      AWS_CONFIG_FILE: join(home, "k"),
      CLOUDSDK_CONFIG: home,
    };
    expect(modelCheck(loadConfig({ PATCHBAY_PROVIDER: "bedrock", AWS_REGION: "eu-west-3", ...files }))).toMatchObject({
      name: "provider bedrock",
      ok: false,
      detail: expect.stringContaining("no AWS credentials"),
    });
    expect(
      modelCheck(loadConfig({ PATCHBAY_PROVIDER: "vertex", CLOUD_ML_REGION: "us-east5", ...files })),
    ).toMatchObject({ name: "provider vertex", ok: false, fix: expect.stringContaining("application-default login") });
    expect(modelCheck(loadConfig({}))).toMatchObject({ name: "anthropic" });
    // The real command, as an operator runs it: the JSON names the provider and the variables, not the keys.
    const r = await patchbay(
      ["doctor", "--json", "--redis-url", "redis://127.0.0.1:7"],
      { ...NO_PLATFORM_ENV, ...files, PATCHBAY_PROVIDER: "bedrock", AWS_REGION: "eu-west-3", ...AWS },
      { timeoutMs: 60_000 },
    );
    const checks = JSON.parse(r.stdout) as { name: string; ok: boolean; detail: string }[];
    expect(checks).toContainEqual(
      expect.objectContaining({
        name: "provider bedrock",
        ok: true,
        detail: "Bedrock in eu-west-3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are set (with a session token)",
      }),
    );
    expect(checks.some((c) => c.name === "anthropic")).toBe(false);
    for (const secret of Object.values(AWS)) expect(r.stdout + r.stderr).not.toContain(secret);
  }, 90_000);

  it("a worker on Bedrock or Vertex needs no Anthropic key; on Vertex it needs CLOUD_ML_REGION", async () => {
    expect(await checkCredentials(loadConfig({ PATCHBAY_PROVIDER: "bedrock" }))).toEqual({ ok: true });
    expect(
      await checkCredentials(loadConfig({ PATCHBAY_PROVIDER: "vertex", CLOUD_ML_REGION: "europe-west1" })),
    ).toEqual({ ok: true });
    expect(await checkCredentials(loadConfig({ PATCHBAY_PROVIDER: "vertex" }))).toEqual({
      ok: false,
      reason: expect.stringContaining("CLOUD_ML_REGION"),
    });
  });
});
