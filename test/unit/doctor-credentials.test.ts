// Guards `patchbay doctor`'s egress credentials line (src/cli/doctor.ts credentialsCheck): each
// configured credential by name, host:port and header, and never a value or any of its secrets.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { credentialsCheck } from "../../src/cli/doctor.js";
import { loadConfig } from "../../src/core/config/config.js";

const dir = mkdtempSync(join(tmpdir(), "pb-doctor-creds-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("doctor's egress credentials line", () => {
  it("lists each credential by name, host:port and header, never a value", () => {
    const token = "tok-CANARY-9b2e7c";
    const password = "pw-CANARY-51f0aa";
    writeFileSync(
      join(dir, "creds.yaml"),
      [
        "credentials:",
        "  npm-private: { host: registry.example.org, bearer: { env: NPM_TOKEN } }",
        "  git: { host: git.example.org, port: 8443, basic: { username: bot, password: { env: GIT_PW } } }",
        "  art: { host: art.example.org, header: { name: X-Api-Key, value: { env: NPM_TOKEN } } }",
      ].join("\n"),
    );
    const config = loadConfig({
      PATCHBAY_EGRESS_CREDENTIALS: join(dir, "creds.yaml"),
      NPM_TOKEN: token,
      GIT_PW: password,
    });
    const check = credentialsCheck(config);
    expect(check).toEqual({
      name: "egress credentials",
      ok: true,
      required: false,
      detail:
        "npm-private → registry.example.org:443 (authorization), git → git.example.org:8443 (authorization), art → art.example.org:443 (x-api-key)",
    });
    const pair = Buffer.from(`bot:${password}`).toString("base64");
    for (const secret of [token, password, pair]) expect(JSON.stringify(check)).not.toContain(secret);
  });

  it("says there are none, and what that means for a job, when the variable is unset", () => {
    expect(credentialsCheck(loadConfig({})).detail).toBe(
      "none (PATCHBAY_EGRESS_CREDENTIALS unset: a job naming network.setup.credentials is refused)",
    );
  });
});
