// A private git submodule fetched in setup through the egress proxy, which adds the credential
// (issue 46, §3's git part), through runJob in a real sandbox: the superproject's .gitmodules names
// https://git.test/private-lib.git, served by an HTTPS git server with basic auth on a loopback
// address of its own (test/support/git-http.ts); the worker's operator configures the credential
// (PATCHBAY_EGRESS_CREDENTIALS, the password in the worker's environment), the JobSpec only names it.
// `git submodule update --init` completes, the agent finds the submodule's file, the git server saw
// the Authorization on every request, and the password is found nowhere: not in the transcript or
// the result, not in the sandbox at the start of the agent phase (its files, every process's
// environment, argv and memory: findCanary, raw, base64, and base64 of user:password). Without the
// credential, setup fails with git's own authentication error.
//
// Backend: Docker (the setup network, the policy's limits, the engine's refusals, a browser over
// real jobs).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { loadConfig, type Config } from "../../src/core/config/config.js";
import type { EventOf, TranscriptEvent } from "../../src/core/spec/spec.js";
import { runJob } from "../../src/job/run.js";
import { EgressProxy } from "../../src/net/proxy.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { searchCanary, type CanaryReport } from "../support/canary.js";
import {
  reply,
  startFakeAnthropic,
  text,
  toolResults,
  toolResultText,
  toolUse,
  type FakeAnthropic,
} from "../support/fake-anthropic.js";
import { startGitHttp, type GitHttpServer } from "../support/git-http.js";
import { makePrivateSubmodule, type PrivateSubmodule } from "../support/private-submodule.js";

// The password is the canary: fresh for each run, long enough for the search (16 bytes at least).
const USER = { username: "ci-bot", password: `gitpw-${randomBytes(12).toString("hex")}` };
const BASIC = Buffer.from(`${USER.username}:${USER.password}`).toString("base64");

let dir = "";
let server: GitHttpServer;
let sub: PrivateSubmodule;
let config: Config;
let fake: FakeAnthropic | undefined;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "pb-cred-git-"));
  // index 2: an address apart from private-submodule.test.ts's server (index 0).
  server = await startGitHttp(join(dir, "repos"), { auth: USER, tls: { name: "git.test", index: 2 } });
  sub = makePrivateSubmodule(join(dir, "repos"), server.url);
  const file = join(dir, "credentials.yaml");
  writeFileSync(
    file,
    [
      "credentials:",
      "  git-private:",
      "    host: git.test",
      "    basic:",
      `      username: ${USER.username}`,
      "      password: { env: PB_TEST_GIT_PASSWORD }",
      `    ca: ${server.tls!.caFile}`,
      "",
    ].join("\n"),
  );
  config = loadConfig({ ...process.env, PATCHBAY_EGRESS_CREDENTIALS: file, PB_TEST_GIT_PASSWORD: USER.password });
});
afterAll(async () => {
  await server?.close();
  if (sub) rmSync(sub.superproject, { recursive: true, force: true });
  if (dir) rmSync(dir, { recursive: true, force: true });
});
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

// The test proxy: git.test is the git server's loopback address, exempted from the address check.
const proxy = () =>
  new EgressProxy({
    allowPrivate: [`${server.tls!.ip}/32`],
    resolve: async (h) => {
      if (h === "git.test") return [server.tls!.ip];
      throw Object.assign(new Error("no such host"), { code: "ENOTFOUND" });
    },
  });

const egressEvents = (events: TranscriptEvent[]) => events.filter((e): e is EventOf<"egress"> => e.type === "egress");

describe("a private git submodule through the egress proxy", () => {
  it("setup fetches it with the credential the proxy adds; the password is nowhere in the sandbox, the transcript or the result", async () => {
    let sandbox: Sandbox | undefined;
    let search: CanaryReport | undefined;
    fake = await startFakeAnthropic(async ({ index }) => {
      if (index === 0) {
        // The agent phase has begun and nothing of the agent's has run yet: the box as setup left it.
        search = await searchCanary(sandbox!.name, USER.password, { user: USER.username });
        return reply(
          toolUse("bash", { command: `cat ${sub.path}/${sub.file.path}; git -C ${sub.path} rev-parse HEAD` }),
        );
      }
      return reply(text("Read it."));
    });
    const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
    const events: TranscriptEvent[] = [];
    const before = server.requests.length;
    const t0 = performance.now();
    const result = await runJob(
      {
        task: "Read the private library.",
        repo: { path: sub.superproject },
        setup: "git submodule update --init",
        network: { setup: { allow: ["git.test"], credentials: ["git-private"] } },
      },
      { model, egress: proxy(), config, onEvent: (e) => events.push(e), onSandbox: (sb) => (sandbox = sb) },
    );
    const setup = events.find((e): e is EventOf<"setup"> => e.type === "setup")!;
    expect(setup.exitCode, setup.outputTail).toBe(0);
    expect(result.status, result.error).toBe("completed");

    // The agent's first tool call: the submodule's file, at the commit the superproject records.
    const out = toolResultText(toolResults(fake.requests[1])[0]);
    expect(out).toBe(`${sub.file.content}${sub.commit}`); // the tool result ends without the last newline

    // The git server: every request of this job came with the credential, none was refused.
    const mine = server.requests.slice(before);
    expect(mine.length).toBeGreaterThanOrEqual(2); // info/refs, then git-upload-pack
    expect(mine.every((r) => r.authorization === `Basic ${BASIC}` && r.user === USER.username)).toBe(true);
    expect(mine.map((r) => r.path)).toContain("/private-lib.git/git-upload-pack");

    // The egress events: each request inside the terminated tunnel, with the credential's name.
    const eg = egressEvents(events);
    expect(eg.length).toBe(mine.length);
    for (const e of eg)
      expect(e).toMatchObject({ host: "git.test", port: 443, allowed: true, credential: "git-private", status: 200 });
    expect(eg.map((e) => e.path)).toEqual(mine.map((r) => r.path));
    expect(result.egress).toMatchObject({ allowed: eg.length, refused: 0 });
    expect(result.egress!.refusals ?? []).toEqual([]);

    // The password: in no event, not in the result, nowhere in the sandbox.
    for (const where of [JSON.stringify(events), JSON.stringify(result)]) {
      expect(where).not.toContain(USER.password);
      expect(where).not.toContain(BASIC);
    }
    expect(search!.findings).toEqual([]);
    expect(search!.processes).toBeGreaterThan(3);
    expect(search!.files).toBeGreaterThan(1000);
    console.log(
      `git submodule through the terminating proxy: ${eg.length} requests, setup ${setup.ms} ms, job ${Math.round(performance.now() - t0)} ms; ` +
        `canary search: ${search!.files} files (${search!.fileBytes} bytes), ${search!.processes} processes (${search!.memoryBytes} bytes of memory)`,
    );
  });

  it("without the credential, setup fails with git's authentication error, and the server saw no Authorization", async () => {
    const model = new AnthropicModel({ apiKey: "test-key", baseURL: "http://127.0.0.1:9", maxRetries: 0 });
    const before = server.requests.length;
    // The tunnel is a plain one now: git itself trusts the server's CA, so what stops it is the 401.
    const trust = `printf '%s' '${server.tls!.caPem}' > /tmp/git-ca.pem`;
    const result = await runJob(
      {
        task: "t",
        repo: { path: sub.superproject },
        setup: `${trust} && GIT_SSL_CAINFO=/tmp/git-ca.pem git submodule update --init`,
        network: { setup: { allow: ["git.test"] } },
      },
      { model, egress: proxy(), config },
    );
    expect(result.status).toBe("failed");
    expect(result.error).toMatch(/^setup command failed \(exit 1\): /);
    expect(result.error).toMatch(/could not read Username for 'https:\/\/git\.test'/);
    expect(result.error).toMatch(
      /Failed to clone 'vendor\/private-lib'|clone of 'https:\/\/git\.test\/private-lib\.git'/,
    );
    const mine = server.requests.slice(before);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((r) => r.authorization === "")).toBe(true);
    expect(result.egress).toMatchObject({ refused: 0 });
  });
});
