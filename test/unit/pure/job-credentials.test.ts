// Guards a JobSpec's network.setup.credentials: the spec's own bounds (names only, at most 16, no
// duplicates, never without an allow-list) and the worker's check (src/job/credentials.ts): each
// name configured on this worker, each credential's host:port allowed by the spec for CONNECT,
// and a refusal that fails the job without a retry, naming names and hosts only. Only the
// operator's own jobs may name credentials: one from the HTTP API, or one that does not say who
// sent it, is refused at the API and at the worker (red team of issue 46).
import { describe, expect, it } from "vitest";
import type { EgressCredential } from "../../../src/core/config/credentials.js";
import { kindOf } from "../../../src/core/errors.js";
import { JobSpecError, parseJobSpec, type JobSpec } from "../../../src/core/spec/spec.js";
import { credentialOriginProblem, credentialProblems, credentialsFor } from "../../../src/job/credentials.js";
import { apiCredentialProblem } from "../../../src/web/api/repo-roots.js";

const base = { task: "t", repo: { path: "/r" } };
const withSetup = (setup: unknown) => parseJobSpec({ ...base, network: { setup } });
const errorOf = (setup: unknown) => {
  const r = withSetup(setup);
  if (r.ok) throw new Error("it parsed");
  return r.error;
};

describe("JobSpec network.setup.credentials", () => {
  it("takes names of credentials beside the allow-list", () => {
    const r = withSetup({ allow: ["registry.example.org"], credentials: ["npm-private", "git.internal_2"] });
    expect(r.ok && r.spec.network?.setup?.credentials).toEqual(["npm-private", "git.internal_2"]);
    expect(withSetup({ allow: ["npm"], credentials: [] }).ok).toBe(true);
  });

  it("refuses a name off the pattern, a value that is not a name, a duplicate, more than 16", () => {
    expect(errorOf({ allow: ["a.org"], credentials: ["NPM"] })).toContain(
      `network.setup.credentials[0]: must be a credential's name: 1-64 characters from a-z 0-9 . _ - (got "NPM")`,
    );
    expect(errorOf({ allow: ["a.org"], credentials: ["-x"] })).toContain("network.setup.credentials[0]");
    expect(errorOf({ allow: ["a.org"], credentials: ["a".repeat(65)] })).toContain("network.setup.credentials[0]");
    expect(errorOf({ allow: ["a.org"], credentials: [{ env: "NPM_TOKEN" }] })).toContain(
      "network.setup.credentials[0]: must be a credential's name (got an object)",
    );
    expect(errorOf({ allow: ["a.org"], credentials: "npm-private" })).toContain(
      `network.setup.credentials: must be an array of credential names (got "npm-private")`,
    );
    expect(errorOf({ allow: ["a.org"], credentials: ["a", "b", "a"] })).toContain(
      `network.setup.credentials: names "a" twice`,
    );
    const many = Array.from({ length: 17 }, (_, i) => `c${i}`);
    expect(errorOf({ allow: ["a.org"], credentials: many })).toContain(
      "network.setup.credentials: must name at most 16 credentials (got 17)",
    );
    expect(withSetup({ allow: ["a.org"], credentials: many.slice(1) }).ok).toBe(true);
  });

  it("refuses credentials with an empty allow-list, or with none at all", () => {
    expect(errorOf({ allow: [], credentials: ["npm-private"] })).toContain(
      "network.setup.credentials: names credentials but network.setup.allow is empty",
    );
    expect(errorOf({ credentials: ["npm-private"] })).toContain("network.setup.allow: required");
  });

  it("suggests the field for a typo", () => {
    expect(errorOf({ allow: ["a.org"], credential: ["x"] })).toContain(
      'network.setup.credential: unknown key (did you mean "credentials"?)',
    );
  });
});

/** A configured credential (only its names and hosts matter here). */
const cred = (name: string, host: string, port = 443): EgressCredential => ({
  name,
  host,
  port,
  header: "authorization",
  value: "Bearer s3cret-CANARY",
  secrets: ["Bearer s3cret-CANARY", "s3cret-CANARY"],
});
const configured = new Map([
  ["npm-private", cred("npm-private", "registry.example.org")],
  ["git", cred("git", "git.example.org", 8443)],
]);
const specOf = (allow: string[], credentials?: string[]): JobSpec => {
  const r = parseJobSpec({ ...base, network: { setup: { allow, ...(credentials ? { credentials } : {}) } } });
  if (!r.ok) throw new Error(r.error);
  return r.spec;
};

describe("credentialsFor: the worker's check", () => {
  it("gives the named credentials in the spec's order, [] for a spec that names none", () => {
    const spec = specOf(["registry.example.org", "git.example.org:8443"], ["git", "npm-private"]);
    expect(credentialsFor(spec, { egressCredentials: configured }).map((c) => c.name)).toEqual(["git", "npm-private"]);
    expect(credentialsFor(specOf(["npm"]), { egressCredentials: configured })).toEqual([]);
    expect(credentialsFor({ ...base, task: "t" }, {})).toEqual([]);
  });

  it("a wildcard entry allows the credential's host as it allows a CONNECT", () => {
    expect(credentialsFor(specOf(["*.example.org"], ["npm-private"]), { egressCredentials: configured })).toHaveLength(
      1,
    );
  });

  it("refuses a name this worker does not have, listing the ones it has and saying who configures them", () => {
    const spec = specOf(["registry.example.org"], ["npm-privat"]);
    let err: unknown;
    try {
      credentialsFor(spec, { egressCredentials: configured });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(JobSpecError);
    expect(kindOf(err)).toBe("spec"); // fails the job, not retried
    expect((err as Error).message).toBe(
      `JobSpec refused by this worker's policy: network.setup.credentials: "npm-privat" is not a credential of this worker's (this worker has git, npm-private); the worker's operator configures them in PATCHBAY_EGRESS_CREDENTIALS`,
    );
    expect(credentialProblems(spec, undefined)).toEqual([
      `network.setup.credentials: "npm-privat" is not a credential of this worker's (this worker has none); the worker's operator configures them in PATCHBAY_EGRESS_CREDENTIALS`,
    ]);
  });

  it("lists at most 20 configured names", () => {
    const lots = new Map(
      Array.from({ length: 25 }, (_, i) => [`c${String(i).padStart(2, "0")}`, cred(`c${i}`, `h${i}.org`)]),
    );
    const [line] = credentialProblems(specOf(["a.org"], ["zz"]), lots);
    expect(line).toContain("c19 and 5 more)");
    expect(line).not.toContain("c20");
  });

  it("refuses a credential for a host or port the spec's allow-list does not allow by CONNECT", () => {
    expect(credentialProblems(specOf(["other.example.org"], ["npm-private"]), configured)).toEqual([
      `network.setup.credentials: "npm-private" is for registry.example.org:443, which network.setup.allow does not allow (not on the allow-list); name the host there (registry.example.org; a preset does not count)`,
    ]);
    const [port] = credentialProblems(specOf(["git.example.org"], ["git"]), configured);
    expect(port).toContain(`"git" is for git.example.org:8443, which network.setup.allow does not allow (port 8443:`);
    expect(port).toContain("name the host there (git.example.org:8443;");
    // A preset's hosts are the worker's to read, not the spec's: the host must be named itself.
    expect(credentialProblems(specOf(["npm"], ["npm-private"]), configured)).toHaveLength(1);
  });

  it("names every problem at once, and never a value", () => {
    const problems = credentialProblems(specOf(["a.org"], ["npm-private", "nope", "git"]), configured);
    expect(problems).toHaveLength(3);
    expect(problems.join("\n")).not.toContain("s3cret");
  });
});

describe("who may name credentials: the operator's own jobs only", () => {
  const spec = (credentials?: string[]) =>
    ({
      ...base,
      network: { setup: { allow: ["registry.example.org"], ...(credentials ? { credentials } : {}) } },
    }) as JobSpec;

  it("a job from the HTTP API, or one that does not say, naming a credential is refused at the worker", () => {
    for (const origin of ["api", undefined, "Operator", 1])
      expect(credentialOriginProblem(spec(["npm-private"]), origin)).toMatch(
        /^network\.setup\.credentials: a job from the HTTP API .* cannot name this worker's egress credentials \(1 named\)/,
      );
    expect(credentialOriginProblem(spec(["npm-private"]), "operator")).toBeUndefined();
    expect(credentialOriginProblem(spec([]), "api")).toBeUndefined();
    expect(credentialOriginProblem(spec(), "api")).toBeUndefined();
  });

  it("the HTTP API refuses a body naming credentials before it reaches Redis, whatever its shape", () => {
    expect(apiCredentialProblem(spec(["npm-private"]))).toMatch(
      /^network\.setup\.credentials: the HTTP API takes no job/,
    );
    for (const body of [spec(), spec([]), null, "x", { network: null }, { network: { setup: 1 } }])
      expect(apiCredentialProblem(body)).toBeUndefined();
  });
});
