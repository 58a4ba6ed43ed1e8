// Guards the operator's credentials file (PATCHBAY_EGRESS_CREDENTIALS, src/core/config/credentials.ts):
// each scheme's header, value and secrets; YAML and JSON; every refusal naming the credential and
// the field and never a secret; and a Config that prints and serializes without any secret.
// Files in a temporary directory only.
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/core/config/config.js";
import { loadEgressCredentials } from "../../../src/core/config/credentials.js";

const dir = mkdtempSync(join(tmpdir(), "pb-creds-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
/** A file in the test's directory holding `text`; its path. */
const file = (text: string, name = `f${n++}`) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

const TOKEN = "npm_t0ken_CANARY_4f1e";
const PASSWORD = "pa55word-CANARY-77";
const ENV = { NPM_TOKEN: TOKEN, GIT_PASSWORD: PASSWORD, SHORT: "abc", EMPTY: "" };

const CA = `-----BEGIN CERTIFICATE-----
MIIBjTCCATOgAwIBAgIUF89f2v4RDnmDTIFxwNYG3tFXyCswCgYIKoZIzj0EAwIw
GzEZMBcGA1UEAwwQcGF0Y2hiYXkgdGVzdCBDQTAgFw0yNjEyMDcxMjA3NDdaGA8y
MTI2MTExMzEyMDc0N1owGzEZMBcGA1UEAwwQcGF0Y2hiYXkgdGVzdCBDQTBZMBMG
ByqGSM49AgEGCCqGSM49AwEHA0IABEQh3OFmsSMcHp62sZoDtbjHNpVtdb7QZS+/
ggPk3JNEssuW773r06SMNKWZJFSG9HqmGLK5AUa9QLZBkCc+BHijUzBRMB0GA1Ud
DgQWBBSLKmSGp8vAfroZF4OQjr9P93p9jjAfBgNVHSMEGDAWgBSLKmSGp8vAfroZ
F4OQjr9P93p9jjAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIQCf
hAOAheXtcUTx+SOSUqWN4pJiGKGu87TmPyACD7L7sgIgbVXld9MO+qseg52085a1
QEkn1Vd42Y85vj3yoGv32VQ=
-----END CERTIFICATE-----
`;

/** The credentials of a file holding `yaml`, read with ENV. */
const load = (yaml: string, env: NodeJS.ProcessEnv = ENV) => loadEgressCredentials(file(yaml), env);
/** The message loading `yaml` fails with (it must fail). */
const problem = (yaml: string, env: NodeJS.ProcessEnv = ENV): string => {
  try {
    load(yaml, env);
  } catch (err) {
    const m = (err as Error).message;
    for (const secret of [TOKEN, PASSWORD, "inline-secret-value", "ZmFrZS"]) expect(m).not.toContain(secret);
    return m;
  }
  throw new Error("it loaded");
};

describe("each scheme's header, value and secrets", () => {
  it("bearer: Authorization: Bearer <token>; the value and the token are secrets; port 443 by default", () => {
    const c = load(`credentials:\n  npm-private:\n    host: Registry.Example.ORG.\n    bearer: { env: NPM_TOKEN }\n`);
    const cred = c.get("npm-private")!;
    expect({ ...cred }).toEqual({
      name: "npm-private",
      host: "registry.example.org",
      port: 443,
      header: "authorization",
      value: `Bearer ${TOKEN}`,
      secrets: [`Bearer ${TOKEN}`, TOKEN],
    });
  });

  it("basic: Basic base64(user:password); the value, the password and the pair are secrets", () => {
    const c = load(
      `credentials:\n  git-internal:\n    host: git.example.org\n    port: 8443\n    basic:\n      username: build-bot\n      password: { env: GIT_PASSWORD }\n`,
    );
    const pair = Buffer.from(`build-bot:${PASSWORD}`).toString("base64");
    expect(c.get("git-internal")).toMatchObject({
      port: 8443,
      header: "authorization",
      value: `Basic ${pair}`,
      secrets: [`Basic ${pair}`, PASSWORD, pair],
    });
  });

  it("header: a named header, lower-cased, with the raw value (the value its one secret)", () => {
    const secret = file(`${TOKEN}\n\n`);
    const c = load(
      `credentials:\n  artifactory:\n    host: art.example.org\n    header: { name: X-JFrog-Art-Api, value: { file: ${secret} } }\n`,
    );
    expect(c.get("artifactory")).toMatchObject({ header: "x-jfrog-art-api", value: TOKEN, secrets: [TOKEN] });
  });

  it("a file secret loses its trailing newlines only; a relative path is the credentials file's directory's", () => {
    file(`  ${TOKEN} \r\n`, "relative-secret");
    const c = load(
      `credentials:\n  a:\n    host: a.example.org\n    header: { name: x-key, value: { file: relative-secret } }\n`,
    );
    expect(c.get("a")!.value).toBe(`  ${TOKEN} `);
  });

  it("reads JSON as well as YAML, several credentials by name", () => {
    const json = JSON.stringify({
      credentials: {
        one: { host: "one.example.org", bearer: { env: "NPM_TOKEN" } },
        two: { host: "two.example.org", port: 444, basic: { username: "u", password: { env: "GIT_PASSWORD" } } },
      },
    });
    const c = load(json);
    expect([...c.keys()]).toEqual(["one", "two"]);
    expect(c.get("two")!.port).toBe(444);
  });

  it("keeps the CA file's certificates for the upstream's chain", () => {
    const ca = file(`# the internal CA\n${CA}`);
    const c = load(`credentials:\n  a:\n    host: a.example.org\n    bearer: { env: NPM_TOKEN }\n    ca: ${ca}\n`);
    expect(c.get("a")!.ca).toBe(CA);
  });

  it("reads docs/operations.md's example as written (its files here, its variables set)", () => {
    const md = readFileSync(join(import.meta.dirname, "../../../docs/operations.md"), "utf8");
    const example = /## The credentials file[\s\S]*?```yaml\n([\s\S]*?)```/.exec(md)![1]!;
    const ca = file(CA);
    const password = file(PASSWORD);
    const yaml = example.replace("/etc/ssl/internal-ca.pem", ca).replace("/run/secrets/git-password", password);
    const c = load(yaml, { NPM_TOKEN: TOKEN, ART_API_KEY: "art-key-CANARY-1234" });
    expect([...c.values()].map((x) => [x.name, `${x.host}:${x.port}`, x.header])).toEqual([
      ["npm-private", "registry.example.org:443", "authorization"],
      ["git-internal", "git.example.org:443", "authorization"],
      ["artifactory", "art.example.org:443", "x-jfrog-art-api"],
    ]);
  });

  it("is empty when the variable is unset or empty, and in a loaded Config", () => {
    expect(loadEgressCredentials(undefined, ENV).size).toBe(0);
    expect(loadEgressCredentials("", ENV).size).toBe(0);
    expect(loadConfig({}).egressCredentials.size).toBe(0);
  });
});

describe("every refusal names the credential and the field, never a secret", () => {
  const head = (body: string, name = "npm-private") => `credentials:\n  ${name}:\n${body}`;
  const bearerAt = (host: string) => head(`    host: "${host}"\n    bearer: { env: NPM_TOKEN }\n`);

  it("an inline secret, saying why", () => {
    expect(problem(head(`    host: a.example.org\n    bearer: inline-secret-value\n`))).toMatch(
      /credential "npm-private": bearer: must be \{ env: NAME \} or \{ file: \/path \}, not the secret itself: a secret is never written in this file/,
    );
    expect(
      problem(head(`    host: a.example.org\n    basic: { username: u, password: inline-secret-value }\n`)),
    ).toMatch(
      /credential "npm-private": basic\.password: must be \{ env: NAME \} or \{ file: \/path \}, not the secret/,
    );
  });

  it("a missing or empty variable, an unreadable or empty file, naming where it looked", () => {
    expect(problem(head(`    host: a.example.org\n    bearer: { env: NOPE }\n`))).toContain(
      `credential "npm-private": bearer: NOPE is not set in the worker's environment`,
    );
    expect(problem(head(`    host: a.example.org\n    bearer: { env: EMPTY }\n`))).toContain(
      `credential "npm-private": bearer: the environment variable EMPTY is empty`,
    );
    expect(problem(head(`    host: a.example.org\n    bearer: { file: /nonexistent/token }\n`))).toContain(
      `credential "npm-private": bearer: cannot read /nonexistent/token (ENOENT)`,
    );
    const empty = file("\n");
    expect(problem(head(`    host: a.example.org\n    bearer: { file: ${empty} }\n`))).toContain(
      `bearer: the file ${empty} is empty`,
    );
    if (process.getuid?.() !== 0) {
      const locked = file(TOKEN);
      chmodSync(locked, 0);
      expect(problem(head(`    host: a.example.org\n    bearer: { file: ${locked} }\n`))).toContain(
        `cannot read ${locked} (EACCES)`,
      );
    }
  });

  it("a secret too short to be one (any of its forms under 8 characters)", () => {
    expect(problem(head(`    host: a.example.org\n    bearer: { env: SHORT }\n`))).toContain(
      `credential "npm-private": the secret is too short to be one (3 characters; at least 8)`,
    );
    expect(problem(head(`    host: a.example.org\n    basic: { username: u, password: { env: SHORT } }\n`))).toContain(
      "too short",
    );
  });

  it("a secret a header cannot carry (a newline inside, a control character)", () => {
    expect(
      problem(head(`    host: a.example.org\n    bearer: { env: BAD }\n`), { BAD: "abcdefgh\r\nX-Evil: 1" }),
    ).toContain("bearer: the environment variable BAD holds a control character");
  });

  it("a host that is a wildcard, an IP address, a host:port or not a name", () => {
    expect(problem(bearerAt("*.example.org"))).toContain(
      `credential "npm-private": host: must be one exact host name, not a wildcard`,
    );
    expect(problem(bearerAt("10.0.0.1"))).toContain("host: must be a host name, not an IP address");
    expect(problem(bearerAt("[::1]"))).toContain("not an IP address");
    expect(problem(bearerAt("a.example.org:443"))).toContain("host: must be a host name alone (the port goes in port)");
    expect(problem(bearerAt("https://a.example.org"))).toContain("host: must be a host name");
  });

  it("a bad port, and a scheme missing or doubled", () => {
    expect(problem(head(`    host: a.example.org\n    port: 70000\n    bearer: { env: NPM_TOKEN }\n`))).toContain(
      `credential "npm-private": port: must be 1 to 65535`,
    );
    expect(problem(head(`    host: a.example.org\n`))).toContain(
      `credential "npm-private": must have exactly one of bearer, basic and header (has none)`,
    );
    expect(
      problem(
        head(
          `    host: a.example.org\n    bearer: { env: NPM_TOKEN }\n    header: { name: x-a, value: { env: NPM_TOKEN } }\n`,
        ),
      ),
    ).toContain("must have exactly one of bearer, basic and header (has bearer, header)");
    expect(problem(head(`    host: a.example.org\n    bearer: { env: NPM_TOKEN, file: /x }\n`))).toContain(
      "bearer: must give exactly one of env and file",
    );
  });

  it("a header the proxy cannot set: hop-by-hop, Host, Proxy-*, framing, bad characters", () => {
    for (const name of ["Connection", "Transfer-Encoding", "Host", "Proxy-Authorization", "Content-Length", "Upgrade"])
      expect(
        problem(head(`    host: a.example.org\n    header: { name: ${name}, value: { env: NPM_TOKEN } }\n`)),
      ).toContain(`credential "npm-private": header.name: "${name.toLowerCase()}" cannot be set by the proxy`);
    expect(
      problem(head(`    host: a.example.org\n    header: { name: "x key", value: { env: NPM_TOKEN } }\n`)),
    ).toContain("header.name: must be a header name");
  });

  it("a username with a colon", () => {
    expect(
      problem(head(`    host: a.example.org\n    basic: { username: "a:b", password: { env: GIT_PASSWORD } }\n`)),
    ).toContain(`credential "npm-private": basic.username: must hold no colon`);
  });

  it("a bad name, an unknown key, two credentials for one host:port", () => {
    expect(problem(bearerAt("a.example.org").replace("npm-private", "NPM_Private"))).toContain(
      `credential "NPM_Private": the name must be 1-64 characters from a-z 0-9 . _ -`,
    );
    expect(problem(head(`    host: a.example.org\n    bearer: { env: NPM_TOKEN }\n    hots: x\n`))).toContain(
      `credential "npm-private": unknown key "hots" (did you mean "host"?)`,
    );
    // A key that is no near miss may be a secret written where a key goes: not shown.
    const m = problem(head(`    host: a.example.org\n    bearer: { inline-secret-value }\n`));
    expect(m).toContain(
      `credential "npm-private": bearer: an unknown key (not shown: it may be a secret in the wrong place; the keys here are env, file)`,
    );
    expect(
      problem(
        `credentials:\n  a:\n    host: a.example.org\n    bearer: { env: NPM_TOKEN }\n  b:\n    host: A.example.org\n    port: 443\n    bearer: { env: GIT_PASSWORD }\n`,
      ),
    ).toContain(`credentials "a" and "b" are both for a.example.org:443: one credential per host and port`);
  });

  it("a CA file that is missing, holds no certificate, or one that does not parse", () => {
    const at = (ca: string) => head(`    host: a.example.org\n    bearer: { env: NPM_TOKEN }\n    ca: ${ca}\n`);
    expect(problem(at("/nonexistent/ca.pem"))).toContain(
      `credential "npm-private": ca: cannot read /nonexistent/ca.pem (ENOENT)`,
    );
    const none = file("not a certificate\n");
    expect(problem(at(none))).toContain(`ca: ${none} holds no PEM certificate`);
    const broken = file(CA.replace("MIIBjTCC", "MIIBjTXX"));
    expect(problem(at(broken))).toContain(`ca: certificate 1 of ${broken} does not parse`);
  });

  it("a file that is missing, not YAML, or not { credentials }; each says the variable and the file", () => {
    expect(() => loadEgressCredentials(join(dir, "missing.yaml"), ENV)).toThrow(
      `bad environment: PATCHBAY_EGRESS_CREDENTIALS (${join(dir, "missing.yaml")}): cannot read it (ENOENT)`,
    );
    expect(problem("credentials: [a\n  inline-secret-value: {")).toMatch(
      /PATCHBAY_EGRESS_CREDENTIALS \(.*\): not YAML or JSON \(\w+ at line \d+, column \d+\)/,
    );
    expect(problem("npm: { host: a.example.org }\n")).toContain(
      "an unknown key (not shown: it may be a secret in the wrong place; the keys here are credentials)",
    );
    expect(problem("just text\n")).toContain("must be a mapping with one key, credentials");
  });

  it("every problem of the file at once, and through loadConfig", () => {
    const yaml = `credentials:\n  a:\n    host: "*.x.org"\n    bearer: { env: NPM_TOKEN }\n  b:\n    host: b.example.org\n    bearer: { env: NOPE }\n`;
    const m = problem(yaml);
    expect(m).toContain(`credential "a": host:`);
    expect(m).toContain(`credential "b": bearer: NOPE is not set`);
    expect(() => loadConfig({ PATCHBAY_EGRESS_CREDENTIALS: file(yaml) })).toThrow(
      /^bad environment: PATCHBAY_EGRESS_CREDENTIALS/,
    );
  });
});

describe("a Config shows no secret when printed or serialized", () => {
  it("JSON.stringify and util.inspect of the Config, the map and a credential hold no secret", () => {
    const token = file(TOKEN);
    const password = file(PASSWORD);
    const path = file(
      `credentials:\n  npm-private:\n    host: registry.example.org\n    bearer: { file: ${token} }\n  git:\n    host: git.example.org\n    basic: { username: bot, password: { file: ${password} } }\n`,
    );
    const config = loadConfig({ PATCHBAY_EGRESS_CREDENTIALS: path });
    const pair = Buffer.from(`bot:${PASSWORD}`).toString("base64");
    const cred = config.egressCredentials.get("git")!;
    expect(cred.value).toBe(`Basic ${pair}`); // the proxy reads it
    const shown = [
      JSON.stringify(config),
      inspect(config, { depth: 10 }),
      inspect(config.egressCredentials, { depth: 10 }),
      JSON.stringify(cred),
      inspect(cred),
      `${JSON.stringify([...config.egressCredentials.values()])}`,
    ];
    for (const text of shown) for (const secret of [TOKEN, PASSWORD, pair]) expect(text).not.toContain(secret);
    expect(inspect(cred)).toContain("git.example.org");
    expect(JSON.parse(JSON.stringify(cred))).toEqual({
      name: "git",
      host: "git.example.org",
      port: 443,
      header: "authorization",
      value: "(hidden)",
      secrets: "(3 hidden)",
    });
  });

  it("a secret from the environment is not shown either: the Config's copy of the environment prints names only", () => {
    const path = file(`credentials:\n  npm-private:\n    host: registry.example.org\n    bearer: { env: NPM_TOKEN }\n`);
    const config = loadConfig({ PATCHBAY_EGRESS_CREDENTIALS: path, NPM_TOKEN: TOKEN, PATH: "/usr/bin" });
    for (const text of [JSON.stringify(config), inspect(config, { depth: 10 }), inspect(config.hostEnv)])
      expect(text).not.toContain(TOKEN);
    expect(JSON.stringify(config.hostEnv)).toBe(
      JSON.stringify("(the environment: NPM_TOKEN, PATCHBAY_EGRESS_CREDENTIALS, PATH)"),
    );
    // What host-side children are given still holds every value.
    expect({ ...config.hostEnv }.NPM_TOKEN).toBe(TOKEN);
    expect(Object.keys(config.hostEnv).sort()).toEqual(["NPM_TOKEN", "PATCHBAY_EGRESS_CREDENTIALS", "PATH"]);
  });

  it("a credential is frozen: nothing can swap its host or value", () => {
    const c = load(`credentials:\n  a:\n    host: a.example.org\n    bearer: { env: NPM_TOKEN }\n`).get("a")!;
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.secrets)).toBe(true);
  });
});
