// The README's two commands, `npm run demo` and `npm test`, from a clone in a directory only root
// can enter (mode 0700, as root's home is on a fresh Debian machine). Both set up services as
// other users (the rootless Podman engine's user), and such a user cannot enter the clone: every
// command run as another user must start in a directory it can read. The clone is of this
// checkout's HEAD; its node_modules is a link to this checkout's (npm ci itself is what .ci/run
// runs). Of `npm test` it runs what depends on where the clone is: its setup (`npm run pretest`,
// the lifecycle script `npm test` runs first: services, build, image, the rootless engine) and
// vitest on one small test file; the type check and the lint between them read only the tree
// (a nested whole-tree lint took over ten minutes on a loaded 2-core machine).
//
// Backend: Docker and the rootless Podman engine (both set up by the scripts under test).
import { execFile, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, statSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify, stripVTControlCharacters } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../support/cli-helpers.js";

const run = promisify(execFile);

/** Runs `npm run <args>` in the clone with the caller's environment (less vitest's own), collecting its output. */
function npm(cwd: string, args: string[], env: Record<string, string>): Promise<{ code: number; output: string }> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("VITEST")));
  return new Promise((resolve) => {
    const child = spawn("npm", args, { cwd, env: { ...clean, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (b: Buffer) => (output += b.toString()));
    child.stderr.on("data", (b: Buffer) => (output += b.toString()));
    // On exit, not on close: a daemon the scripts start (dockerd, Redis, the Podman service) may hold
    // the pipes open for as long as it runs.
    child.on("exit", (code) =>
      setTimeout(() => resolve({ code: code ?? -1, output: stripVTControlCharacters(output) }), 200),
    );
  });
}

// Setting up the services as their users needs root: in CI (CI=true) this runs whatever the user
// and fails when not root; off CI a non-root developer skips it.
const asRoot = process.getuid!() === 0 || process.env.CI === "true";

describe.runIf(asRoot)("the README's two commands from a clone in a 0700 directory", () => {
  const home = mkdtempSync(join(tmpdir(), "pb-home-"));
  const clone = join(home, "patchbay");
  const queue = `readme-clone-${process.pid}`;

  beforeAll(async () => {
    chmodSync(home, 0o700);
    await run("git", ["clone", "-q", ROOT, clone]);
    symlinkSync(join(ROOT, "node_modules"), join(clone, "node_modules"));
  }, 60_000);
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("the clone sits where no other user can enter", () => {
    expect(statSync(home).mode & 0o777).toBe(0o700);
  });

  it("`npm run demo` ends with the patch, exit 0", async () => {
    // Its own queue, so no other test's worker takes the demo's job; no key: the scripted model.
    const r = await npm(clone, ["run", "demo"], { PATCHBAY_QUEUE: queue, ANTHROPIC_API_KEY: "" });
    expect(r.output).not.toMatch(/cannot chdir|Permission denied/);
    expect(r.code, r.output.slice(-3000)).toBe(0);
    expect(r.output).toMatch(/demo: the job completed/);
  }, 600_000);

  it("`npm test`'s setup sets everything up (the rootless engine too), then its tests run", async () => {
    const setup = await npm(clone, ["run", "pretest"], {});
    expect(setup.output).not.toMatch(/cannot chdir|Permission denied/);
    expect(setup.code, setup.output.slice(-3000)).toBe(0);
    expect(setup.output).toMatch(/DOCKER_HOST=unix:\/\/\/run\/user\/\d+\/podman|setting up rootless Podman/);
    const tests = await npm(clone, ["exec", "--", "vitest", "run", "test/unit/pure/truncate.test.ts"], {});
    expect(tests.code, tests.output.slice(-3000)).toBe(0);
    expect(tests.output).toMatch(/Test Files\s+1 passed/);
  }, 900_000);
});
