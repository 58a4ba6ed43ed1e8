// End to end with the real npm registry this machine reaches (through the worker host, never from
// the sandbox directly): a per-repo image with Node and npm made by `patchbay image build --from`
// (test/support/node-image.ts), a repo depending on one small package, `setup: npm ci` with network.setup.allow ["npm"] (the
// preset read from this host's `npm config get registry`). Without the allow-list setup fails
// naming the registry; in the agent phase npm and python cannot reach it.
//
// Backend: Docker (the setup network, the policy's limits, the engine's refusals, a browser over
// real jobs).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AnthropicModel } from "../../src/agent/model.js";
import { runJob } from "../../src/job/run.js";
import type { EventOf, TranscriptEvent } from "../../src/core/spec/spec.js";
import { patchbay } from "../support/cli-helpers.js";
import { buildNodeImage, NODE_IMAGE } from "../support/node-image.js";
import {
  reply,
  startFakeAnthropic,
  text,
  toolResults,
  toolResultText,
  toolUse,
  type FakeAnthropic,
} from "../support/fake-anthropic.js";

const TAG = NODE_IMAGE;
const REGISTRY = new URL(execFileSync("npm", ["config", "get", "registry"], { encoding: "utf8" }).trim()).hostname;

let fake: FakeAnthropic | undefined;
let repo = "";
beforeAll(async () => {
  await buildNodeImage();

  repo = mkdtempSync(join(tmpdir(), "pb-npm-"));
  writeFileSync(
    join(repo, "package.json"),
    JSON.stringify(
      { name: "egress-e2e", version: "1.0.0", private: true, dependencies: { "is-number": "7.0.0" } },
      null,
      2,
    ),
  );
  writeFileSync(join(repo, ".gitignore"), "node_modules/\n");
  writeFileSync(join(repo, "index.js"), "const isNumber = require('is-number');\nconsole.log(isNumber(5));\n");
  // The lockfile, made on this host (which reaches the registry itself).
  execFileSync("npm", ["install", "--package-lock-only", "--ignore-scripts"], { cwd: repo, stdio: "ignore" });
  expect(
    JSON.parse(readFileSync(join(repo, "package-lock.json"), "utf8")).packages["node_modules/is-number"].version,
  ).toBe("7.0.0");
}, 900_000);
afterAll(() => {
  if (repo) rmSync(repo, { recursive: true, force: true });
});
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

describe("setup network with the real npm registry", () => {
  it('npm ci completes with allow ["npm"]; in the agent phase npm view and python cannot reach the registry', async () => {
    let port = 0;
    fake = await startFakeAnthropic(({ index }) =>
      index === 0
        ? reply(
            toolUse("bash", {
              command: [
                "node index.js",
                `npm view is-number version --fetch-retries=0 --fetch-timeout=15000 >/dev/null 2>&1; echo view=$?`,
                `HTTPS_PROXY=http://127.0.0.1:${port} npm view is-number version --fetch-retries=0 --fetch-timeout=15000 >/dev/null 2>&1; echo view-proxy=$?`,
                `python3 -c 'import urllib.request; urllib.request.urlopen("https://${REGISTRY}/is-number", timeout=15)' 2>&1 | tail -1`,
              ].join("; "),
            }),
          )
        : reply(text("Checked.")),
    );
    const events: TranscriptEvent[] = [];
    const model = new AnthropicModel({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
    const result = await runJob(
      {
        task: "Check the install.",
        repo: { path: repo },
        image: TAG,
        setup: "npm ci && ls node_modules",
        network: { setup: { allow: ["npm"] } },
      },
      { model, onEvent: (e) => events.push(e), onEgressBridge: (p) => (port = p) },
    );
    const setup = events.find((e) => e.type === "setup") as EventOf<"setup">;
    expect(setup.exitCode, setup.outputTail).toBe(0);
    expect(setup.outputTail).toMatch(/added 1 package/);
    expect(setup.outputTail).toMatch(/is-number/);
    expect(result.status).toBe("completed");
    expect(result.patch).toBe(""); // node_modules is setup's, not the agent's

    const eg = events.filter((e): e is EventOf<"egress"> => e.type === "egress");
    expect(eg.length).toBeGreaterThan(0);
    expect(eg.every((e) => e.host === REGISTRY && e.port === 443 && e.method === "CONNECT" && e.allowed)).toBe(true);
    expect(result.egress!.allowed).toBe(eg.length);
    expect(result.egress!.refused).toBe(0);
    expect(result.egress!.bytesDown).toBeGreaterThan(1000);

    const out = toolResultText(toolResults(fake.requests[1])[0]);
    expect(out).toMatch(/^true\n/); // the installed package works in the agent phase
    expect(out).toMatch(/\nview=1\n/);
    expect(out).toMatch(/\nview-proxy=1\n/);
    expect(out).toMatch(/URLError|Temporary failure|Name or service not known|Errno/);
    console.log(
      `npm ci through the proxy: ${eg.length} connections, ${result.egress!.bytesDown} bytes down, setup ${setup.ms} ms`,
    );
  });

  it("without the allow-list, npm ci fails setup with a message naming the refused registry host", async () => {
    const model = new AnthropicModel({ apiKey: "test-key", baseURL: "http://127.0.0.1:9", maxRetries: 0 });
    const spec = {
      task: "t",
      repo: { path: repo },
      image: TAG,
      setup: "npm ci --fetch-retries=0 --fetch-timeout=15000",
    };
    const empty = await runJob({ ...spec, network: { setup: { allow: [] } } }, { model });
    expect(empty.status).toBe("failed");
    expect(empty.error).toContain(`refused by the egress proxy: ${REGISTRY}:443 (not on the allow-list)`);
    expect(empty.egress!.allowed).toBe(0);
    expect(empty.egress!.refused).toBeGreaterThan(0);
    const none = await runJob(spec, { model });
    expect(none.status).toBe("failed");
    expect(none.error).toContain(REGISTRY);
    expect(none.error).toContain("setup had no network");
  });
});

describe("image build --from", () => {
  it("refuses a base that is neither on the engine nor pullable, naming the offline way", async () => {
    const dir = mkdtempSync(join(tmpdir(), "pb-from-"));
    try {
      writeFileSync(join(dir, "Dockerfile"), "FROM patchbay-test-missing-base:nope AS b\nFROM b\n");
      const r = await patchbay(
        ["image", "build", "--from", dir, "--tag", "patchbay-test-never:x"],
        {},
        { timeoutMs: 120_000 },
      );
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        /the base image patchbay-test-missing-base:nope is not on this engine and cannot be pulled .*FROM patchbay-sandbox:latest/,
      );
      expect((await patchbay(["image", "build", "--from", dir])).stderr).toMatch(/--from needs --tag/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
