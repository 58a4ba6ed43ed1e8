// The worker's policy on what a JobSpec may ask of its sandbox (src/job/policy.ts), the JobSpec's
// absolute caps (src/core/spec/spec.ts), and the git URL credentials helpers (src/git/credentials.ts). Pure.
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/core/config/config.js";
import {
  credentialHelper,
  hasCredentials,
  matchCredential,
  parseCredentialStore,
  redact,
  scrub,
  splitUrl,
} from "../../src/git/credentials.js";
import { runJob } from "../../src/job/run.js";
import { policyProblem } from "../../src/job/admit.js";
import {
  FROM_BUILDS,
  imageVerdict,
  normalizeImage,
  policyRefusal,
  policyViolations,
  withCaps,
  type SandboxPolicy,
} from "../../src/job/policy.js";
import { assertJobSpec, JobSpecError, parseJobSpec, type JobSpec } from "../../src/core/spec/spec.js";

const SB = "patchbay-sandbox:latest";
const DEFAULT = loadConfig({}).policy;
const spec = (extra: Record<string, unknown> = {}): JobSpec =>
  assertJobSpec({ task: "t", repo: { path: "/r" }, ...extra });
const check = (extra: Record<string, unknown>, policy: SandboxPolicy = DEFAULT, facts = {}) =>
  policyViolations(spec(extra), policy, SB, facts);

describe("the worker's policy: network and bounds", () => {
  it("a default worker refuses limits.network bridge, naming the knob that allows it; none is fine", () => {
    expect(check({ limits: { network: "bridge" } })).toEqual([
      'limits.network: "bridge" (the full network in every phase) is not allowed by this worker; its sandboxes have none (PATCHBAY_ALLOW_BRIDGE=1 on the worker allows it; for setup, network.setup.allow names hosts instead)',
    ]);
    expect(check({ limits: { network: "none" } })).toEqual([]);
    expect(check({ limits: { network: "bridge" } }, { ...DEFAULT, allowBridge: true })).toEqual([]);
    expect(check({ limits: { network: "bridge" } }, loadConfig({ PATCHBAY_ALLOW_BRIDGE: "1" }).policy)).toEqual([]);
  });

  it.each([
    ["limits.memoryMb", { limits: { memoryMb: 8193 } }, 8192, "PATCHBAY_MAX_MEMORY_MB"],
    ["limits.cpus", { limits: { cpus: 4.5 } }, 4, "PATCHBAY_MAX_CPUS"],
    ["limits.pids", { limits: { pids: 1025 } }, 1024, "PATCHBAY_MAX_PIDS"],
    ["limits.diskMb", { limits: { diskMb: 10_241 } }, 10_240, "PATCHBAY_MAX_DISK_MB"],
    ["timeoutSec", { timeoutSec: 14_401 }, 14_400, "PATCHBAY_MAX_TIMEOUT_SEC"],
    ["commandTimeoutSec", { commandTimeoutSec: 3600.5 }, 3600, "PATCHBAY_MAX_COMMAND_TIMEOUT_SEC"],
  ])("%s over the default bound is refused naming the bound and its knob", (field, extra, max, knob) => {
    const [line, ...rest] = check(extra);
    expect(rest).toEqual([]);
    expect(line).toMatch(
      new RegExp(
        `^${field.replace(".", "\\.")}: [\\d.]+ is over this worker's bound of ${max} \\(${knob} on the worker raises it\\)$`,
      ),
    );
  });

  it("at the bound is fine, and a raised bound lets more through", () => {
    expect(
      check({
        limits: { memoryMb: 8192, cpus: 4, pids: 1024, diskMb: 10_240 },
        timeoutSec: 14_400,
        commandTimeoutSec: 3600,
      }),
    ).toEqual([]);
    const raised = loadConfig({ PATCHBAY_MAX_MEMORY_MB: "65536", PATCHBAY_MAX_TIMEOUT_SEC: "86400" }).policy;
    expect(check({ limits: { memoryMb: 65_536 }, timeoutSec: 86_400 }, raised)).toEqual([]);
    expect(check({ limits: { memoryMb: 65_537 } }, raised)).toEqual([
      "limits.memoryMb: 65537 is over this worker's bound of 65536 (PATCHBAY_MAX_MEMORY_MB on the worker raises it)",
    ]);
  });

  it("every violation is its own line, and the refusal is one line holding them all", () => {
    const lines = check({ limits: { network: "bridge", memoryMb: 9000, pids: 2000 }, timeoutSec: 99_999 });
    expect(lines.map((l) => l.split(":")[0])).toEqual([
      "limits.network",
      "limits.memoryMb",
      "limits.pids",
      "timeoutSec",
    ]);
    expect(policyRefusal(lines)).toBe(`JobSpec refused by this worker's policy: ${lines.join("; ")}`);
    expect(policyRefusal(lines)).not.toContain("\n");
  });

  it("runJob (the library path, no worker) refuses such a spec with a JobSpecError before it makes anything", async () => {
    const err = await runJob({ task: "t", repo: { path: "/nowhere" }, limits: { network: "bridge", cpus: 64 } }).catch(
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(JobSpecError);
    expect((err as Error).message).toMatch(
      /^JobSpec refused by this worker's policy: limits\.network: "bridge" .*PATCHBAY_ALLOW_BRIDGE=1.*; limits\.cpus: 64 is over this worker's bound of 4 \(PATCHBAY_MAX_CPUS on the worker raises it\)$/,
    );
  });
});

describe("the worker's policy: the provider a spec names", () => {
  it("its own provider is fine; another only where PATCHBAY_PROVIDERS lists it; a bad name is a spec error", () => {
    expect(check({ provider: "anthropic" })).toEqual([]);
    expect(check({ provider: "bedrock" })).toEqual([
      'provider: "bedrock" is not allowed by this worker, which reaches Claude through anthropic (PATCHBAY_PROVIDERS=anthropic,bedrock on the worker allows it, with that platform\'s credentials there)',
    ]);
    expect(check({ provider: "bedrock" }, loadConfig({ PATCHBAY_PROVIDERS: "anthropic,bedrock" }).policy)).toEqual([]);
    expect(check({ provider: "anthropic" }, loadConfig({ PATCHBAY_PROVIDER: "vertex" }).policy)).toEqual([
      expect.stringMatching(
        /^provider: "anthropic" is not allowed by this worker, which reaches Claude through vertex/,
      ),
    ]);
    expect(parseJobSpec({ task: "t", repo: { path: "/r" }, provider: "azure" })).toMatchObject({
      ok: false,
      error: 'invalid JobSpec: provider: must be one of anthropic, bedrock, vertex (got "azure")',
    });
  });
});

describe("the worker's policy: images", () => {
  it("names images as the engine does", () => {
    expect(normalizeImage("python")).toBe("python:latest");
    expect(normalizeImage("docker.io/library/python:3.12")).toBe("python:3.12");
    expect(normalizeImage("docker.io/me/env")).toBe("me/env:latest");
    expect(normalizeImage("localhost:5000/env")).toBe("localhost:5000/env:latest");
    expect(normalizeImage("env@sha256:abc")).toBe("env@sha256:abc");
    expect(normalizeImage("registry.example.org/envs/*")).toBe("registry.example.org/envs/*");
  });

  it("by default: the sandbox image, and any other only where image build --from made it", () => {
    for (const image of [SB, "patchbay-sandbox", "docker.io/library/patchbay-sandbox:latest"])
      expect(check({ image })).toEqual([]);
    expect(imageVerdict("py-env:1", SB, DEFAULT)).toBe("lookup");
    expect(check({ image: "py-env:1" }, DEFAULT, { builtFrom: true })).toEqual([]);
    expect(check({ image: "py-env:1" }, DEFAULT, { builtFrom: false })).toEqual([
      `image: "py-env:1" is not in this worker's image allow-list; allowed: the sandbox image ${SB}, images built by patchbay image build --from (PATCHBAY_IMAGES on the worker sets the list)`,
    ]);
    expect(check({ image: "py-env:1" }, DEFAULT, {})[0]).toMatch(
      /^image: "py-env:1" is not in this worker's image allow-list \(and no such image is on this worker's engine\); /,
    );
    // The configured sandbox image is the one allowed.
    const other = loadConfig({ PATCHBAY_IMAGE: "corp/sandbox:7" });
    expect(policyViolations(spec({ image: "corp/sandbox:7" }), other.policy, other.image)).toEqual([]);
    expect(imageVerdict(SB, other.image, other.policy)).toBe("lookup");
  });

  it("PATCHBAY_IMAGES sets the list: exact names, prefixes with *, @from for image build --from's; empty: the sandbox image alone", () => {
    const policy = loadConfig({ PATCHBAY_IMAGES: "python:3.12, registry.example.org/envs/*" }).policy;
    expect(imageVerdict("python:3.12", SB, policy)).toBe("allowed");
    expect(imageVerdict("docker.io/library/python:3.12", SB, policy)).toBe("allowed");
    expect(imageVerdict("python", SB, policy)).toBe("refused"); // :latest is another image
    expect(imageVerdict("registry.example.org/envs/node:20", SB, policy)).toBe("allowed");
    expect(imageVerdict("registry.example.org/other/node:20", SB, policy)).toBe("refused");
    expect(imageVerdict(SB, SB, policy)).toBe("allowed");
    expect(check({ image: "py-env:1" }, policy, { builtFrom: true })[0]).toBe(
      `image: "py-env:1" is not in this worker's image allow-list; allowed: the sandbox image ${SB}, python:3.12, registry.example.org/envs/* (PATCHBAY_IMAGES on the worker sets the list)`,
    );
    expect(imageVerdict("py-env:1", SB, loadConfig({ PATCHBAY_IMAGES: `python:3.12,${FROM_BUILDS}` }).policy)).toBe(
      "lookup",
    );
    const none = loadConfig({ PATCHBAY_IMAGES: "" }).policy;
    expect(none.images).toEqual([]);
    expect(imageVerdict("py-env:1", SB, none)).toBe("refused");
    expect(imageVerdict("patchbay-sandbox", SB, none)).toBe("allowed");
  });
});

describe("the JobSpec's absolute caps (whatever the worker)", () => {
  const error = (extra: Record<string, unknown>) => {
    const r = parseJobSpec({ task: "t", repo: { path: "/r" }, ...extra });
    return r.ok ? "" : r.error;
  };
  it.each([
    [{ limits: { memoryMb: 2_000_000 } }, "limits.memoryMb: must be at most 1048576 (got 2000000)"],
    [{ limits: { memoryMb: 4 } }, "limits.memoryMb: must be at least 6, Docker's minimum (got 4)"],
    [{ limits: { memoryMb: 100.5 } }, "limits.memoryMb: must be a positive integer (got 100.5)"],
    [{ limits: { cpus: 0.001 } }, "limits.cpus: must be at least 0.01, Docker's minimum (got 0.001)"],
    [{ limits: { cpus: 5000 } }, "limits.cpus: must be at most 1024 (got 5000)"],
    [{ limits: { pids: 5_000_000 } }, "limits.pids: must be at most 4194304 (got 5000000)"],
    [{ limits: { diskMb: 1e9 } }, "limits.diskMb: must be at most 16777216 (got 1000000000)"],
    [{ limits: { diskMb: 0.5 } }, "limits.diskMb: must be a positive integer (got 0.5)"],
    // Past 2^31 ms Node's timers fire at once: a huge timeout would end the job at its start.
    [{ timeoutSec: 3e6 }, "timeoutSec: must be at most 604800 (seconds, 7 days) (got 3000000)"],
    [{ commandTimeoutSec: 3e6 }, "commandTimeoutSec: must be at most 604800 (seconds, 7 days) (got 3000000)"],
    [{ maxTurns: 1e6 }, "maxTurns: must be at most 10000 (got 1000000)"],
    [{ maxTokens: 1e7 }, "maxTokens: must be at most 1000000 (got 10000000)"],
  ])("%o is refused: %s", (extra, message) => {
    expect(error(extra)).toBe(`invalid JobSpec: ${message}`);
  });
  it("values at the caps parse", () => {
    expect(
      error({
        limits: { memoryMb: 1_048_576, cpus: 1024, pids: 4_194_304, diskMb: 16_777_216 },
        timeoutSec: 604_800,
        commandTimeoutSec: 604_800,
        maxTurns: 10_000,
        maxTokens: 1_000_000,
      }),
    ).toBe("");
  });
});

describe("git URL credentials (src/git/credentials.ts)", () => {
  it("splits the URL git is given from the credentials it carried", () => {
    expect(splitUrl("https://alice:s3cret@host.example/o/r.git")).toEqual({
      url: "https://host.example/o/r.git",
      protocol: "https",
      host: "host.example",
      path: "/o/r.git",
      credential: { username: "alice", password: "s3cret" },
      secrets: ["s3cret"],
    });
    // A token alone as the user name is the secret; percent-encoding is decoded; a raw @ stays the password's.
    expect(splitUrl("https://ghp_TOKEN123@github.com/o/r")).toMatchObject({
      url: "https://github.com/o/r",
      credential: { username: "ghp_TOKEN123", password: "" },
      secrets: ["ghp_TOKEN123"],
    });
    expect(splitUrl("http://u:p%40ss%3Aw@127.0.0.1:8080/r")).toMatchObject({
      url: "http://127.0.0.1:8080/r",
      host: "127.0.0.1:8080",
      credential: { username: "u", password: "p@ss:w" },
    });
    expect(splitUrl("https://u:p@ss@host/r")).toMatchObject({
      url: "https://host/r",
      host: "host",
      credential: { password: "p@ss" },
    });
    // ssh logins are not secrets; a password in an ssh URL is (ssh never uses it), and the login stays.
    expect(splitUrl("ssh://git@github.com/o/r.git")).toMatchObject({
      url: "ssh://git@github.com/o/r.git",
      secrets: [],
    });
    expect(splitUrl("ssh://git:pw123@github.com/o/r.git")).toMatchObject({
      url: "ssh://git@github.com/o/r.git",
      secrets: ["pw123"],
    });
    expect(splitUrl("git@github.com:o/r.git")).toEqual({ url: "git@github.com:o/r.git", secrets: [] });
    expect(splitUrl("/srv/repos/r")).toEqual({ url: "/srv/repos/r", secrets: [] });
    expect(splitUrl("https://host/path@v1")).toMatchObject({ url: "https://host/path@v1", secrets: [] });
  });

  it("hasCredentials is what the queue refuses", () => {
    expect(hasCredentials("https://a:b@h/r")).toBe(true);
    expect(hasCredentials("https://tok@h/r")).toBe(true);
    expect(hasCredentials("HTTPS://tok@h/r")).toBe(true);
    expect(hasCredentials("ssh://u:pw@h/r")).toBe(true);
    for (const url of ["https://h/r", "ssh://git@h/r", "git@h:r", "/abs/path", "file:///abs/path", "https://h/r@v1"])
      expect(hasCredentials(url)).toBe(false);
  });

  it("redact and scrub hide userinfo anywhere in a text, and the given secrets", () => {
    expect(redact("fatal: clone of 'https://u:p@ss@h/r' and http://tok@h2:8/x failed")).toBe(
      "fatal: clone of 'https://***@h/r' and http://***@h2:8/x failed",
    );
    expect(redact("see https://h/r@v1 and ssh://git@h/r")).toBe("see https://h/r@v1 and ssh://***@h/r");
    expect(scrub("remote: hello s3cret, bye s3cret", ["s3cret"])).toBe("remote: hello ***, bye ***");
    // A remote's long text of words and dots (each word a start of a scheme that never comes) is
    // read once, not once per word, and a URL after it is still hidden.
    const run = "a.".repeat(200_000);
    expect(redact(`${run} https://u:p@h/r`)).toBe(`${run} https://***@h/r`);
  });

  it("a git-credentials store: lines matched by protocol, host and port, and path where the line has one", () => {
    const store = parseCredentialStore(
      [
        "# comment",
        "",
        "https://a:1@git.example.org",
        "https://b:2@GIT.example.org:8443",
        "http://c:3@git.example.org/team/r.git",
        "https://no-secret.example.org",
        "https://d:4@git.example.org/team",
      ].join("\n"),
    );
    expect(store.map((s) => s.credential.password)).toEqual(["1", "2", "3", "4"]);
    expect(matchCredential(store, "https://git.example.org/x/y.git")?.credential.username).toBe("a");
    expect(matchCredential(store, "https://git.example.org:8443/x")?.credential.username).toBe("b");
    expect(matchCredential(store, "http://git.example.org/team/r.git")?.credential.username).toBe("c");
    expect(matchCredential(store, "http://git.example.org/team/r")?.credential.username).toBe("c");
    expect(matchCredential(store, "http://git.example.org/team/other")).toBeUndefined();
    expect(matchCredential(store, "https://other.example.org/r")).toBeUndefined();
    expect(matchCredential(store, "git@git.example.org:r")).toBeUndefined();
    // A client's URL with a long run of slashes is read once, not once per slash.
    expect(matchCredential(store, `https://git.example.org/a${"/".repeat(1 << 20)}b`)?.credential.username).toBe("a");
    expect(
      matchCredential(parseCredentialStore("https://d:4@h.example/team\n"), "https://h.example/team/r.git")?.credential
        .password,
    ).toBe("4");
    expect(
      matchCredential(parseCredentialStore("https://d:4@h.example/team\n"), "https://h.example/teammate/r.git"),
    ).toBeUndefined();
  });

  it("the helper's secret is in its environment, not its argv; a newline (which could forge a key) is refused", () => {
    const h = credentialHelper("https", "h.example", { username: "u", password: "s3cret" });
    expect(h.args.join(" ")).not.toContain("s3cret");
    expect(h.env).toEqual({
      PATCHBAY_GIT_PROTOCOL: "https",
      PATCHBAY_GIT_HOST: "h.example",
      PATCHBAY_GIT_USERNAME: "u",
      PATCHBAY_GIT_PASSWORD: "s3cret",
    });
    expect(() => credentialHelper("https", "h", { username: "u", password: "x\nhost=evil" })).toThrow(
      "a git credential contains a newline or NUL",
    );
  });
});

describe("the worker's policy: what a spec may spend, and the runtime", () => {
  const capped = loadConfig({
    PATCHBAY_MAX_BUDGET_USD: "2",
    PATCHBAY_MAX_TURNS: "10",
    PATCHBAY_MAX_TOKENS: "100000",
    PATCHBAY_MODELS: "claude-haiku-*",
    PATCHBAY_RUNTIME: "runsc",
  });

  it("refuses a spec over a cap, a model off the list, and another runtime; a pids limit fits either runtime", () => {
    expect(
      check(
        { budget: { usd: 2.5 }, maxTurns: 11, maxTokens: 100_001, model: "claude-opus-4-5", runtime: "runc" },
        capped.policy,
      ),
    ).toEqual([
      "budget.usd: 2.5 is over this worker's bound of 2 (PATCHBAY_MAX_BUDGET_USD on the worker raises it)",
      "maxTurns: 11 is over this worker's bound of 10 (PATCHBAY_MAX_TURNS on the worker raises it)",
      "maxTokens: 100001 is over this worker's bound of 100000 (PATCHBAY_MAX_TOKENS on the worker raises it)",
      'model: "claude-opus-4-5" is not in this worker\'s model allow-list; allowed: claude-sonnet-5-5, claude-haiku-* (PATCHBAY_MODELS on the worker sets the list)',
      'runtime: "runc" is not allowed by this worker, which runs every sandbox under runsc (PATCHBAY_RUNTIME on the worker)',
    ]);
    // The pids limit means the guest's processes under either runtime: a forced runsc asks no more.
    expect(check({ limits: { pids: 64 } }, capped.policy)).toEqual([]);
    expect(
      check({ budget: { usd: 2 }, maxTurns: 10, model: "claude-haiku-4-5", runtime: "runsc" }, capped.policy),
    ).toEqual([]);
    expect(check({ budget: { usd: 500 }, maxTurns: 10_000, model: "anything" })).toEqual([]); // no caps by default
  });

  it("gives a spec that sets nothing the caps (a turns or tokens cap only where it is below the default), and the forced runtime", () => {
    expect(withCaps(spec(), capped.policy)).toEqual({ ...spec(), budget: { usd: 2 }, maxTurns: 10, runtime: "runsc" }); // 100000 tokens is above the default 8192
    expect(withCaps(spec({ budget: { outputTokens: 5 }, maxTurns: 3 }), capped.policy)).toEqual({
      ...spec(),
      budget: { outputTokens: 5, usd: 2 },
      maxTurns: 3,
      runtime: "runsc",
    });
    expect(withCaps(spec(), DEFAULT)).toEqual(spec());
  });

  it("refuses a model whose price is unknown where a USD cap is set: the cap could not be held", async () => {
    const why = await policyProblem(spec({ model: "claude-haiku-9-private" }), capped);
    expect(why).toContain(
      'model: the price of "claude-haiku-9-private" is unknown, so this worker\'s cap on what a job spends (PATCHBAY_MAX_BUDGET_USD=2) cannot be held',
    );
  });

  it("refuses, before any sandbox, a spec whose setup names a credential this worker does not have", async () => {
    const setup = { network: { setup: { allow: ["registry.example.org"], credentials: ["npm-private"] } } };
    expect(await policyProblem(spec(setup), loadConfig({}))).toBe(
      `JobSpec refused by this worker's policy: network.setup.credentials: "npm-private" is not a credential of this worker's (this worker has none); the worker's operator configures them in PATCHBAY_EGRESS_CREDENTIALS`,
    );
    const npm = {
      name: "npm-private",
      host: "registry.example.org",
      port: 443,
      header: "authorization",
      value: "Bearer x-CANARY-1",
      secrets: ["Bearer x-CANARY-1", "x-CANARY-1"],
    };
    expect(
      await policyProblem(spec(setup), { ...loadConfig({}), egressCredentials: new Map([["npm-private", npm]]) }),
    ).toBeUndefined();
    await expect(runJob(spec(setup), { config: loadConfig({}) })).rejects.toThrow(JobSpecError);
  });
});
