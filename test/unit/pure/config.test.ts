// Environment parsing: every knob's default, overrides, coercion, and one clear error. Pure.
import { parseForges, tokenVariable } from "../../../src/core/config/forges.js";
import { describe, expect, it } from "vitest";
import { DEFAULT_IMAGE, DEFAULT_MODEL, enginePidsLimit, loadConfig } from "../../../src/core/config/config.js";

describe("loadConfig", () => {
  it("gives every default from an empty environment", () => {
    expect(loadConfig({})).toEqual({
      redisUrl: "redis://127.0.0.1:6379",
      redisTls: { ca: undefined, cert: undefined, key: undefined },
      redisWait: { replicas: "auto", timeoutMs: 2000 },
      queueName: "patchbay",
      image: DEFAULT_IMAGE,
      model: DEFAULT_MODEL,
      contextWindow: undefined,
      compactAt: 0.8,
      concurrency: 2,
      workerId: undefined,
      poolSize: undefined,
      removals: 2,
      removalsQueued: undefined,
      lockDurationMs: 20_000,
      lockRenewMs: 5_000,
      checkpoints: true,
      checkpointMaxBytes: 8 * 1024 * 1024,
      seedMaxBytes: 256 * 1024 * 1024,
      stalledIntervalMs: 5_000,
      reapEveryMs: 60_000,
      drainDeadlineMs: 30_000,
      hardDeadlineGraceMs: 120_000,
      cancelPollMs: 2000,
      cancelPubSub: true,
      heartbeatEveryMs: 10_000,
      healthMinMs: 1000,
      healthMaxMs: 30_000,
      healthTimeoutMs: 10_000,
      throttleMs: 10_000,
      throttleMaxMs: 60_000,
      policy: {
        allowBridge: false,
        maxMemoryMb: 8192,
        maxCpus: 4,
        maxPids: 1024,
        maxDiskMb: 10_240,
        maxTimeoutSec: 14_400,
        maxCommandTimeoutSec: 3600,
        images: undefined,
        allowCustomTools: true,
        allowMcp: true,
        allowPtrace: false,
        providers: ["anthropic"],
        maxBudgetUsd: undefined,
        maxTurns: undefined,
        maxCandidates: 16,
        maxTokens: undefined,
        models: undefined,
        runtime: undefined,
      },
      gitCredentials: undefined,
      retentionSec: 7 * 24 * 3600,
      dashboardMaxStreams: 64,
      apiTokens: [],
      apiCorsOrigins: [],
      apiRepoRoots: [],
      localRepoRoots: undefined,
      apiGitHosts: ["github.com", "gitlab.com"],
      backend: "docker",
      testBackends: false,
      egressCredentials: new Map(),
      anthropicApiKey: undefined,
      anthropicAuthToken: undefined,
      anthropicBaseUrl: undefined,
      debug: false,
      engine: { host: undefined, tls: false, certPath: undefined },
      pip: { indexUrl: undefined, extraIndexUrls: [], configFile: undefined },
      telemetry: {
        enabled: false,
        headers: {},
        serviceName: "patchbay",
        resourceAttributes: {},
        scheduleDelayMs: 5000,
      },
      hostEnv: {},
      trackEveryMs: 600_000,
      forges: {
        hosts: [
          { host: "github.com", kind: "github", apiUrl: "https://api.github.com" },
          { host: "gitlab.com", kind: "gitlab", apiUrl: "https://gitlab.com" },
        ],
        token: expect.any(Function),
      },
      provider: {
        name: "anthropic",
        bedrock: expect.objectContaining({ region: "us-east-1", accessKeyId: undefined }),
        vertex: expect.objectContaining({ region: undefined, credentialsFile: undefined }),
      },
    });
    expect(DEFAULT_IMAGE).toBe("patchbay-sandbox:latest");
    expect(DEFAULT_MODEL).toBe("claude-sonnet-5-5");
  });

  it("reads every knob, coercing numbers", () => {
    const env = {
      REDIS_URL: "redis://r:1",
      PATCHBAY_REDIS_TLS_CA: "/ca.pem",
      PATCHBAY_REDIS_TLS_CERT: "/c.pem",
      PATCHBAY_REDIS_TLS_KEY: "/k.pem",
      PATCHBAY_REDIS_WAIT_REPLICAS: "2",
      PATCHBAY_QUEUE: "q",
      PATCHBAY_IMAGE: "img:1",
      PATCHBAY_MODEL: "m",
      PATCHBAY_CONTEXT_WINDOW: "50000",
      PATCHBAY_COMPACT_AT: "0.5",
      PATCHBAY_CONCURRENCY: "7",
      PATCHBAY_WORKER_ID: "h:1:x",
      PATCHBAY_POOL: "0",
      PATCHBAY_REMOVALS: "3",
      PATCHBAY_REMOVALS_QUEUE: "0",
      PATCHBAY_LOCK_MS: "1",
      PATCHBAY_STALLED_MS: "2",
      PATCHBAY_REAP_MS: "3",
      PATCHBAY_DRAIN_MS: "4",
      PATCHBAY_HARD_GRACE_MS: "5",
      PATCHBAY_CANCEL_POLL_MS: "6",
      PATCHBAY_CANCEL_PUBSUB: "0",
      PATCHBAY_HEARTBEAT_MS: "8",
      PATCHBAY_HEALTH_MIN_MS: "9",
      PATCHBAY_HEALTH_MAX_MS: "10",
      PATCHBAY_HEALTH_TIMEOUT_MS: "11",
      PATCHBAY_THROTTLE_MS: "12",
      PATCHBAY_THROTTLE_MAX_MS: "13",
      PATCHBAY_LOCK_RENEW_MS: "14",
      PATCHBAY_CHECKPOINTS: "0",
      PATCHBAY_CHECKPOINT_MAX_BYTES: "15",
      ANTHROPIC_API_KEY: "k",
      ANTHROPIC_AUTH_TOKEN: "t",
      ANTHROPIC_BASE_URL: "http://x",
      PATCHBAY_ALLOW_BRIDGE: "1",
      PATCHBAY_MAX_MEMORY_MB: "4096",
      PATCHBAY_MAX_CPUS: "1.5",
      PATCHBAY_MAX_PIDS: "300",
      PATCHBAY_MAX_DISK_MB: "2048",
      PATCHBAY_MAX_TIMEOUT_SEC: "3600",
      PATCHBAY_MAX_COMMAND_TIMEOUT_SEC: "600",
      PATCHBAY_IMAGES: " py:3.12, @from ,",
      PATCHBAY_GIT_CREDENTIALS: "/etc/patchbay/git-credentials",
      PATCHBAY_RETENTION_SEC: "120",
      PATCHBAY_DASHBOARD_MAX_STREAMS: "5",
      PATCHBAY_DASHBOARD_TLS_CERT: "/c.pem",
      PATCHBAY_DASHBOARD_TLS_KEY: "/k.pem",
      PATCHBAY_EGRESS_DIR: "/var/e",
      PATCHBAY_BACKEND: "local",
      PATCHBAY_TEST_BACKENDS: "1",
      PATCHBAY_API_TOKENS: " ci:write:0123456789abcdef, grafana:read:fedcba98:76543210 ",
      PATCHBAY_API_CORS_ORIGINS: "https://app.example.org, http://localhost:3000",
      PATCHBAY_API_REPO_ROOTS: "/srv/repos, /home/ci/work/",
      PATCHBAY_TRACK_EVERY_MS: "90000",
      PATCHBAY_ALLOW_CUSTOM_TOOLS: "0",
      PATCHBAY_ALLOW_MCP: "0",
      PATCHBAY_ALLOW_PTRACE: "1",
      PATCHBAY_LOCAL_REPO_ROOTS: "/srv/repos/",
      PATCHBAY_API_GIT_HOSTS: "git.example.org, 10.1.2.3:8443",
      PATCHBAY_MAX_BUDGET_USD: "2.5",
      PATCHBAY_MAX_TURNS: "20",
      PATCHBAY_MAX_TOKENS: "4096",
      PATCHBAY_MODELS: " claude-haiku-*, claude-opus-4-5 ",
      PATCHBAY_RUNTIME: "runsc",
      PATCHBAY_DEBUG: "1",
      DOCKER_HOST: "tcp://e:2376",
      DOCKER_TLS: "yes",
      DOCKER_CERT_PATH: "/certs",
      PIP_INDEX_URL: "https://pi/simple",
      PIP_EXTRA_INDEX_URL: " https://a/s  https://b/s ",
      PIP_CONFIG_FILE: "/pip.conf",
      GIT_SSH_COMMAND: "ssh -i k",
      PATH: "/bin",
      PATCHBAY_PROVIDER: "bedrock",
      PATCHBAY_PROVIDERS: " vertex, bedrock ",
      AWS_REGION: "eu-west-3",
      AWS_DEFAULT_REGION: "eu-west-1",
      AWS_ACCESS_KEY_ID: "AKIA1",
      AWS_SECRET_ACCESS_KEY: "s",
      AWS_SESSION_TOKEN: "st",
      AWS_PROFILE: "ops",
      AWS_SHARED_CREDENTIALS_FILE: "/aws/c",
      AWS_CONFIG_FILE: "/aws/k",
      AWS_BEARER_TOKEN_BEDROCK: "bt",
      ANTHROPIC_BEDROCK_BASE_URL: "http://b",
      CLOUD_ML_REGION: "us-east5",
      ANTHROPIC_VERTEX_PROJECT_ID: "p",
      ANTHROPIC_VERTEX_BASE_URL: "http://v/v1",
      GOOGLE_APPLICATION_CREDENTIALS: "/g.json",
      CLOUDSDK_CONFIG: "/gc",
    };
    const c = loadConfig(env);
    expect(c).toEqual({
      redisUrl: "redis://r:1",
      redisTls: { ca: "/ca.pem", cert: "/c.pem", key: "/k.pem" },
      redisWait: { replicas: 2, timeoutMs: 1 },
      queueName: "q",
      image: "img:1",
      model: "m",
      contextWindow: 50_000,
      compactAt: 0.5,
      concurrency: 7,
      workerId: "h:1:x",
      poolSize: 0,
      removals: 3,
      removalsQueued: 0,
      lockDurationMs: 1,
      lockRenewMs: 1,
      checkpoints: false,
      checkpointMaxBytes: 15,
      seedMaxBytes: 256 * 1024 * 1024,
      stalledIntervalMs: 2,
      reapEveryMs: 3,
      drainDeadlineMs: 4,
      hardDeadlineGraceMs: 5,
      cancelPollMs: 6,
      cancelPubSub: false,
      heartbeatEveryMs: 8,
      healthMinMs: 9,
      healthMaxMs: 10,
      healthTimeoutMs: 11,
      throttleMs: 12,
      throttleMaxMs: 13,
      anthropicApiKey: "k",
      anthropicAuthToken: "t",
      anthropicBaseUrl: "http://x",
      policy: {
        allowBridge: true,
        maxMemoryMb: 4096,
        maxCpus: 1.5,
        maxPids: 300,
        maxDiskMb: 2048,
        maxTimeoutSec: 3600,
        maxCommandTimeoutSec: 600,
        images: ["py:3.12", "@from"],
        allowCustomTools: false,
        allowMcp: false,
        allowPtrace: true,
        providers: ["bedrock", "vertex"],
        maxBudgetUsd: 2.5,
        maxTurns: 20,
        maxCandidates: 16,
        maxTokens: 4096,
        models: ["m", "claude-haiku-*", "claude-opus-4-5"],
        runtime: "runsc",
      },
      gitCredentials: "/etc/patchbay/git-credentials",
      retentionSec: 120,
      trackEveryMs: 90_000,
      dashboardMaxStreams: 5,
      dashboardTls: { cert: "/c.pem", key: "/k.pem" },
      egressDir: "/var/e",
      egressCredentials: new Map(),
      backend: "local",
      testBackends: true,
      apiTokens: [
        { name: "ci", scope: "write", token: "0123456789abcdef" },
        { name: "grafana", scope: "read", token: "fedcba98:76543210" },
      ],
      apiCorsOrigins: ["https://app.example.org", "http://localhost:3000"],
      apiRepoRoots: ["/srv/repos", "/home/ci/work"],
      localRepoRoots: ["/srv/repos"],
      apiGitHosts: ["git.example.org", "10.1.2.3:8443"],
      debug: true,
      engine: { host: "tcp://e:2376", tls: true, certPath: "/certs" },
      pip: { indexUrl: "https://pi/simple", extraIndexUrls: ["https://a/s", "https://b/s"], configFile: "/pip.conf" },
      telemetry: {
        enabled: false,
        headers: {},
        serviceName: "patchbay",
        resourceAttributes: {},
        scheduleDelayMs: 5000,
      },
      // What host-side child processes get: the whole environment as given, fixed then.
      hostEnv: env,
      forges: { hosts: expect.any(Array), token: expect.any(Function) },
      provider: {
        name: "bedrock",
        bedrock: {
          region: "eu-west-3",
          baseUrl: "http://b",
          accessKeyId: "AKIA1",
          secretAccessKey: "s",
          sessionToken: "st",
          apiKey: "bt",
          profile: "ops",
          files: ["/aws/c", "/aws/k"],
        },
        vertex: {
          region: "us-east5",
          projectId: "p",
          baseUrl: "http://v/v1",
          credentialsFile: "/g.json",
          adcFile: "/gc/application_default_credentials.json",
        },
      },
    });
    expect(Object.isFrozen(c.hostEnv)).toBe(true);
    env.PATH = "/changed";
    expect(c.hostEnv.PATH).toBe("/bin");
    expect(loadConfig({ PATCHBAY_CANCEL_PUBSUB: "1" }).cancelPubSub).toBe(true);
    // The lock is renewed within its duration: a quarter of it unless set.
    expect(loadConfig({ PATCHBAY_LOCK_MS: "8000" }).lockRenewMs).toBe(2000);
    // A result's WAIT stays well inside its job's lock: a quarter of it by default, at most half when set.
    expect(loadConfig({ PATCHBAY_LOCK_MS: "3000" }).redisWait.timeoutMs).toBe(750);
    expect(loadConfig({ PATCHBAY_LOCK_MS: "30000", PATCHBAY_REDIS_WAIT_MS: "15000" }).redisWait.timeoutMs).toBe(15000);
    expect(() => loadConfig({ PATCHBAY_LOCK_MS: "6000", PATCHBAY_REDIS_WAIT_MS: "15000" })).toThrow(
      "PATCHBAY_REDIS_WAIT_MS: must be at most half of PATCHBAY_LOCK_MS (6000 ms; got 15000)",
    );
    expect(() => loadConfig({ PATCHBAY_LOCK_MS: "10000", PATCHBAY_REDIS_WAIT_MS: "5001" })).toThrow(
      "PATCHBAY_REDIS_WAIT_MS: must be at most half of PATCHBAY_LOCK_MS (10000 ms; got 5001)",
    );
    expect(loadConfig({ PATCHBAY_LOCK_MS: "10000", PATCHBAY_REDIS_WAIT_MS: "5000" }).redisWait.timeoutMs).toBe(5000);
    expect(loadConfig({ PATCHBAY_LOCK_MS: "8000", PATCHBAY_LOCK_RENEW_MS: "3000" }).lockRenewMs).toBe(3000);
    // The health backoff's ceiling is never below its floor.
    expect(loadConfig({ PATCHBAY_HEALTH_MIN_MS: "5000", PATCHBAY_HEALTH_MAX_MS: "2000" })).toMatchObject({
      healthMinMs: 5000,
      healthMaxMs: 5000,
    });
  });

  it.each([
    [{ PATCHBAY_CONCURRENCY: "0" }, /^bad environment: PATCHBAY_CONCURRENCY: /],
    [{ PATCHBAY_CONCURRENCY: "-1" }, /PATCHBAY_CONCURRENCY/],
    [{ PATCHBAY_CONCURRENCY: "1.5" }, /PATCHBAY_CONCURRENCY/],
    [{ PATCHBAY_ALLOW_PTRACE: "yes" }, /^bad environment: PATCHBAY_ALLOW_PTRACE: /],
    [{ PATCHBAY_LOCK_MS: "soon" }, /PATCHBAY_LOCK_MS/],
    [{ PATCHBAY_QUEUE: "" }, /PATCHBAY_QUEUE/],
    [{ PATCHBAY_IMAGE: "" }, /PATCHBAY_IMAGE/],
    [{ PATCHBAY_MODEL: "" }, /PATCHBAY_MODEL/],
    [{ PATCHBAY_CANCEL_PUBSUB: "yes" }, /PATCHBAY_CANCEL_PUBSUB/],
    [{ PATCHBAY_HEARTBEAT_MS: "0" }, /PATCHBAY_HEARTBEAT_MS/],
    [{ PATCHBAY_CANCEL_POLL_MS: "0" }, /PATCHBAY_CANCEL_POLL_MS/],
    [{ PATCHBAY_HARD_GRACE_MS: "0" }, /PATCHBAY_HARD_GRACE_MS/],
    [{ PATCHBAY_STALLED_MS: "0" }, /PATCHBAY_STALLED_MS/],
    [{ PATCHBAY_CHECKPOINTS: "yes" }, /PATCHBAY_CHECKPOINTS/],
    [{ PATCHBAY_CHECKPOINT_MAX_BYTES: "0" }, /PATCHBAY_CHECKPOINT_MAX_BYTES/],
    [{ PATCHBAY_REAP_MS: "0" }, /PATCHBAY_REAP_MS/],
    [{ PATCHBAY_REMOVALS: "0" }, /PATCHBAY_REMOVALS/],
    [{ PATCHBAY_DRAIN_MS: "0" }, /PATCHBAY_DRAIN_MS/],
    [{ PATCHBAY_HEALTH_MIN_MS: "0" }, /PATCHBAY_HEALTH_MIN_MS/],
    [{ PATCHBAY_HEALTH_MAX_MS: "0" }, /PATCHBAY_HEALTH_MAX_MS/],
    [{ PATCHBAY_HEALTH_TIMEOUT_MS: "0" }, /PATCHBAY_HEALTH_TIMEOUT_MS/],
    [{ PATCHBAY_THROTTLE_MS: "0" }, /PATCHBAY_THROTTLE_MS/],
    [{ PATCHBAY_THROTTLE_MAX_MS: "0" }, /PATCHBAY_THROTTLE_MAX_MS/],
    [{ PATCHBAY_POOL: "-1" }, /PATCHBAY_POOL/],
    [{ PATCHBAY_POOL: "1.5" }, /PATCHBAY_POOL/],
    [{ PATCHBAY_ALLOW_BRIDGE: "yes" }, /PATCHBAY_ALLOW_BRIDGE/],
    // A bound below what a spec gets by default would refuse every spec.
    [
      { PATCHBAY_MAX_MEMORY_MB: "1024" },
      /^bad environment: PATCHBAY_MAX_MEMORY_MB: must be a number of at least 2048 \(the default a spec gets\)$/,
    ],
    [{ PATCHBAY_MAX_PIDS: "128" }, /PATCHBAY_MAX_PIDS: must be a number of at least 256 /],
    [{ PATCHBAY_MAX_CPUS: "0.5" }, /PATCHBAY_MAX_CPUS/],
    [{ PATCHBAY_MAX_TIMEOUT_SEC: "60" }, /PATCHBAY_MAX_TIMEOUT_SEC/],
    [{ PATCHBAY_MAX_COMMAND_TIMEOUT_SEC: "lots" }, /PATCHBAY_MAX_COMMAND_TIMEOUT_SEC/],
    [{ PATCHBAY_MAX_DISK_MB: "2048.5" }, /PATCHBAY_MAX_DISK_MB/],
    [{ PATCHBAY_GIT_CREDENTIALS: "" }, /PATCHBAY_GIT_CREDENTIALS/],
  ])("refuses %o with one message naming the variable", (env, re) => {
    expect(() => loadConfig(env)).toThrow(re);
  });

  it.each([
    ["ci:admin:0123456789abcdef", "entry 1 (ci): the scope must be read or write"],
    ["ci:write:short", "entry 1 (ci): the token must be at least 16 characters"],
    [
      "a:read:0123456789abcdef,b c:read:fedcba9876543210",
      "entry 2: must be name:scope:token, the name 1-64 characters from A-Z a-z 0-9 _ . -",
    ],
    ["a:read:0123456789abcdef,a:write:fedcba9876543210", "entry 2 (a): the name is used twice"],
    ["a:read:0123456789abcdef,b:write:0123456789abcdef", "entry 2 (b): the token is used twice"],
  ])("refuses PATCHBAY_API_TOKENS=%s, naming the entry and never a token", (tokens, message) => {
    expect(() => loadConfig({ PATCHBAY_API_TOKENS: tokens })).toThrow(
      `bad environment: PATCHBAY_API_TOKENS: ${message}`,
    );
    let thrown = "";
    try {
      loadConfig({ PATCHBAY_API_TOKENS: tokens });
    } catch (err) {
      thrown = (err as Error).message;
    }
    expect(thrown).not.toMatch(/0123456789abcdef|fedcba9876543210|short/);
  });

  it.each(["*", "https://app.example.org/", "app.example.org", "ftp://x.example"])(
    "refuses PATCHBAY_API_CORS_ORIGINS=%s: not an origin",
    (origins) => {
      expect(() => loadConfig({ PATCHBAY_API_CORS_ORIGINS: origins })).toThrow(
        /^bad environment: PATCHBAY_API_CORS_ORIGINS: .* is not an origin/,
      );
    },
  );

  it("names every bad variable, separated by semicolons", () => {
    expect(() => loadConfig({ PATCHBAY_CONCURRENCY: "0", PATCHBAY_QUEUE: "" })).toThrow(
      /^bad environment: (PATCHBAY_QUEUE|PATCHBAY_CONCURRENCY): .+; (PATCHBAY_QUEUE|PATCHBAY_CONCURRENCY): /,
    );
  });

  it("reads process.env by default", () => {
    process.env.PATCHBAY_QUEUE = "from-process-env";
    try {
      expect(loadConfig().queueName).toBe("from-process-env");
    } finally {
      delete process.env.PATCHBAY_QUEUE;
    }
  });
});

// The exact words of the knobs issue 25 added (the mutation run found them unheld by a pure test).
describe("config: issue 25's knobs, word for word", () => {
  const err = (env: Record<string, string>) => {
    try {
      loadConfig(env);
      return "ok";
    } catch (e) {
      return (e as Error).message;
    }
  };
  it("REDIS_URL must be redis:// or rediss://, its password never shown", () => {
    expect(err({ REDIS_URL: "http://u:secret@127.0.0.1:6379" })).toContain(
      "REDIS_URL: Redis URL http://u:***@127.0.0.1:6379: not a redis://, rediss://, redis+sentinel:// or redis+cluster:// URL; the forms are",
    );
    expect(err({ REDIS_URL: "REDISS://h:1" })).toBe("ok");
  });
  it("API tokens, origins and repo roots: each bad entry named, no token shown", () => {
    expect(err({ PATCHBAY_API_TOKENS: "ci:write:short" })).toContain(
      "entry 1 (ci): the token must be at least 16 characters",
    );
    expect(err({ PATCHBAY_API_TOKENS: "ci:admin:0123456789abcdef" })).toContain(
      "entry 1 (ci): the scope must be read or write",
    );
    expect(err({ PATCHBAY_API_TOKENS: "b@d:read:0123456789abcdef" })).toContain("entry 1: must be name:scope:token");
    const two = err({ PATCHBAY_API_TOKENS: "a:read:0123456789abcdef, a:write:fedcba9876543210" });
    expect(two).toContain("entry 2 (a): the name is used twice");
    expect(two).not.toContain("0123456789abcdef");
    expect(loadConfig({ PATCHBAY_API_TOKENS: "a:read:0123456789abcdef:with:colons" }).apiTokens).toEqual([
      { name: "a", scope: "read", token: "0123456789abcdef:with:colons" },
    ]);
    expect(err({ PATCHBAY_API_CORS_ORIGINS: "https://app.example.org/path" })).toContain(
      '"https://app.example.org/path" is not an origin (scheme://host[:port], nothing after it)',
    );
    expect(err({ PATCHBAY_API_CORS_ORIGINS: "ftp://x.org" })).toContain("is not an origin");
    expect(loadConfig({ PATCHBAY_API_CORS_ORIGINS: " https://a.org , http://localhost:3000" }).apiCorsOrigins).toEqual([
      "https://a.org",
      "http://localhost:3000",
    ]);
    expect(err({ PATCHBAY_API_REPO_ROOTS: "/srv/repos,rel" })).toContain(
      'PATCHBAY_API_REPO_ROOTS: each must be an absolute directory (got "rel")',
    );
    expect(loadConfig({ PATCHBAY_API_REPO_ROOTS: " /srv/repos/ ,/x" }).apiRepoRoots).toEqual(["/srv/repos", "/x"]);
    expect(loadConfig({}).apiRepoRoots).toEqual([]);
  });
  it("a duration in ms: whole, positive, at most 7 days", () => {
    expect(err({ PATCHBAY_LOCK_MS: "1.5" })).toContain("PATCHBAY_LOCK_MS: must be a whole number of ms (got 1.5)");
    expect(err({ PATCHBAY_LOCK_MS: "0" })).toContain("PATCHBAY_LOCK_MS: must be a positive number of ms (got 0)");
    expect(err({ PATCHBAY_LOCK_MS: "604800001" })).toContain("PATCHBAY_LOCK_MS: must be at most 604800000 ms");
    expect(err({ PATCHBAY_LOCK_MS: "604800000" })).toBe("ok");
  });
});

describe("forges (PATCHBAY_FORGES and the tokens)", () => {
  it("adds hosts, replaces a default's API, and gives each host only its own token", () => {
    const c = loadConfig({
      PATCHBAY_FORGES:
        " ghe.acme.example=github@https://ghe.acme.example/api/v3/ , git.corp:8443=gitlab@http://git.corp:8443,github.com=github@https://gh-proxy.example",
      GITHUB_TOKEN: "gh-public-token-0000",
      GITLAB_TOKEN: "gl-public-token-0000",
      PATCHBAY_FORGE_TOKEN_GHE_ACME_EXAMPLE: "ghe-token-00000000",
      PATCHBAY_FORGE_TOKEN_GIT_CORP_8443: "corp-token-0000000",
    });
    expect(c.forges.hosts).toEqual([
      { host: "github.com", kind: "github", apiUrl: "https://gh-proxy.example" },
      { host: "gitlab.com", kind: "gitlab", apiUrl: "https://gitlab.com" },
      { host: "ghe.acme.example", kind: "github", apiUrl: "https://ghe.acme.example/api/v3" },
      { host: "git.corp:8443", kind: "gitlab", apiUrl: "http://git.corp:8443" },
    ]);
    expect(
      ["github.com", "gitlab.com", "ghe.acme.example", "GIT.CORP:8443", "elsewhere.example"].map((h) =>
        c.forges.token(h),
      ),
    ).toEqual(["gh-public-token-0000", "gl-public-token-0000", "ghe-token-00000000", "corp-token-0000000", undefined]);
    // GITHUB_TOKEN is github.com's alone, not an Enterprise host's.
    expect(
      loadConfig({
        PATCHBAY_FORGES: "ghe.x=github@https://ghe.x/api/v3",
        GITHUB_TOKEN: "gh-public-token-0000",
      }).forges.token("ghe.x"),
    ).toBeUndefined();
    // A Config printed or serialised carries no token.
    expect(JSON.stringify(c.forges)).not.toMatch(/token-0000/);
    expect(tokenVariable("127.0.0.1:8080")).toBe("PATCHBAY_FORGE_TOKEN_127_0_0_1_8080");
  });

  it("a bad list is refused naming the entry", () => {
    expect(() => loadConfig({ PATCHBAY_FORGES: "ghe.x=bitbucket@https://x" })).toThrow(
      /PATCHBAY_FORGES: entry 1 must be HOST=github@API_URL or HOST=gitlab@API_URL/,
    );
    expect(() => loadConfig({ PATCHBAY_FORGES: "a.x=github@https://a.x,a.x=gitlab@https://a.x" })).toThrow(
      /entry 2 \(a\.x\): the host is named twice/,
    );
    expect(() => loadConfig({ PATCHBAY_FORGES: "a.x=github@ftp://a.x" })).toThrow(
      /entry 1 \(a\.x\): the API URL must be http\(s\) without credentials/,
    );
    expect(() => loadConfig({ PATCHBAY_FORGES: "a.x=github@https://u:p@a.x" })).toThrow(/without credentials/);
    expect(() => loadConfig({ PATCHBAY_FORGES: "a.x=github@nota url" })).toThrow(/entry 1 must be/);
    expect(parseForges("a.x=github@http://[bad")).toMatch(/is not a URL/);
  });
});

describe("PATCHBAY_PROVIDERS", () => {
  it("the providers a spec may name: the worker's own first, then the list; a bad name refused", () => {
    expect(loadConfig({}).policy.providers).toEqual(["anthropic"]);
    expect(
      loadConfig({ PATCHBAY_PROVIDER: "vertex", PATCHBAY_PROVIDERS: "anthropic,vertex" }).policy.providers,
    ).toEqual(["vertex", "anthropic"]);
    expect(() => loadConfig({ PATCHBAY_PROVIDERS: "anthropic,azure" })).toThrow(
      /PATCHBAY_PROVIDERS: each must be one of anthropic, bedrock, vertex \(got "azure"\)/,
    );
  });
});

describe("the engine's pids limit per runtime", () => {
  it("is the spec's limit under runc, and 8 per pid plus 64 under runsc (gVisor's own threads)", () => {
    expect(enginePidsLimit(256, "runc")).toBe(256);
    expect(enginePidsLimit(256, "runsc")).toBe(2112);
    expect(enginePidsLimit(32, "runsc")).toBe(320);
  });
});
