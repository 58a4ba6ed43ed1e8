// The local backend (src/backend/local.ts): a box is a host directory seen at /workspace, /patchbay
// and /tmp through namespaces of its own. The same Sandbox runs on it: shell, supervisor, files,
// the worker's commands. No Docker; root and util-linux's unshare/nsenter.
//
// Backend: local (the backend itself; the file agent on it).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/core/config/config.js";
import { LocalBackend } from "../../src/backend/local.js";
import { reap } from "../../src/sandbox/reaper.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";
import { startWorker } from "../../src/queue/worker.js";

const backend = new LocalBackend();

describe("the local backend", () => {
  let sb: Sandbox;
  beforeAll(async () => {
    sb = await Sandbox.create({ backend, labels: { "patchbay.test": "runtime-local" } });
  });
  afterAll(async () => {
    await sb?.destroy();
  });

  it("runs the sandbox: the agent's shell as uid 1000 with no capabilities in /workspace, root's /patchbay closed to it", async () => {
    const r = await sb.shell.run(
      "id -u; pwd; grep CapEff /proc/self/status; ls /patchbay 2>&1 | head -1; touch /workspace/x && echo wrote",
    );
    expect(r.output).toMatch(
      /^1000\n\/workspace\nCapEff:\s+0+\nls: cannot open directory '\/patchbay': Permission denied\nwrote\n$/,
    );
  });

  it("keeps files, exec and timeouts as the Docker backend does", async () => {
    await sb.files.write("/workspace/a.txt", Buffer.from("hello"));
    expect((await sb.files.read("/workspace/a.txt")).toString()).toBe("hello");
    const e = await sb.exec(["bash", "-c", "id -u; cat a.txt; exit 3"]);
    expect(e).toMatchObject({ exitCode: 3, stdout: Buffer.from("1000\nhello") });
    const t = await sb.shell.run("sleep 100 & sleep 100; echo never", { timeoutSec: 1 });
    expect(t).toMatchObject({ timedOut: true, exitCode: 124 });
    expect((await sb.shell.run("pgrep -u 1000 -x sleep || echo none")).output).toMatch(/none\n$/);
  });

  it("a kill of the agent's uid stays in the box: uid 1000 outside it lives on", async () => {
    const outside = spawn("setpriv", ["--reuid=1000", "--regid=1000", "--clear-groups", "sleep", "30"], {
      stdio: "ignore",
    });
    try {
      await new Promise((r) => setTimeout(r, 200)); // setpriv has exec'd sleep (a pause, not a synchronisation of the test's outcome)
      await sb.shell.run("kill -9 -1; true");
      expect(await sb.killAgentProcesses()).toBeGreaterThanOrEqual(0);
      expect(outside.exitCode).toBeNull();
      expect(() => process.kill(outside.pid!, 0)).not.toThrow();
    } finally {
      outside.kill("SIGKILL");
    }
  });

  it("removing a box ends every process in it and its directory; the reaper finds a dead owner's", async () => {
    const other = await Sandbox.create({
      backend,
      owner: "elsewhere:1:x",
      labels: { "patchbay.test": "runtime-local" },
    });
    await other.shell.run("sleep 1000 & echo started");
    expect(await other.running()).toBe(true);
    const report = await reap(async (owner) => owner !== "elsewhere:1:x", backend);
    expect(report.containers).toContain(other.name);
    expect(await other.running()).toBe(false);
    expect(existsSync(`/tmp/patchbay-local/${other.name}`)).toBe(false);
    expect(await sb.running()).toBe(true); // this process's own stays
    await other.destroy();
  });

  // The box's /tmp hides the caller's directory when that is under /tmp (a checkout there): the
  // box died at once (pyenv's python3 shim could not find its working directory).
  it("works whatever the caller's working directory, one under /tmp included", async () => {
    const here = process.cwd();
    const dir = mkdtempSync("/tmp/pb-cwd-");
    process.chdir(dir);
    try {
      const box = await Sandbox.create({ backend, labels: { "patchbay.test": "runtime-local" } });
      try {
        expect((await box.shell.run("echo one")).output).toBe("one\n");
        await box.files.write("/workspace/f", Buffer.from("x"));
        expect((await box.exec(["cat", "/workspace/f"])).stdout.toString()).toBe("x");
        expect(await box.running()).toBe(true);
      } finally {
        await box.destroy();
      }
    } finally {
      process.chdir(here);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("a worker and the local backend", () => {
  it("refuses it unless PATCHBAY_TEST_BACKENDS=1: it isolates nothing", async () => {
    const saved = { ...process.env };
    process.env.PATCHBAY_BACKEND = "local";
    delete process.env.PATCHBAY_TEST_BACKENDS;
    try {
      expect(loadConfig().backend).toBe("local");
      await expect(startWorker({ queueName: "runtime-local-refused" })).rejects.toThrow(
        /PATCHBAY_BACKEND=local runs repos with no isolation: a worker refuses it/,
      );
    } finally {
      process.env = saved;
    }
  });
});
