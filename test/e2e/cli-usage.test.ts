// The CLI's contract with scripts that needs no queue: usage errors exit 2 and name the flag,
// help for every command, --version, and a Redis that refuses connections reported at once.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, patchbay, REFUSED_REDIS, ROOT } from "../support/cli-helpers.js";

const CLAMP = join(ROOT, "examples/clamp");
// Every command that talks to Redis points at a closed port: a usage error must come first (exit 2).
const env = { REDIS_URL: REFUSED_REDIS, PATCHBAY_QUEUE: "cli-usage" };
beforeAll(ensureBuilt); // dist/ runs the commands ~5x faster than src/ through tsx

const COMMANDS = ["run", "enqueue", "status", "result", "watch", "cancel", "list", "worker", "doctor", "image build"];

describe("usage errors exit 2 and name the flag", () => {
  it("`--timeout abc` names --timeout (not timeoutSec)", async () => {
    for (const [flag, value] of [
      ["--timeout", "abc"],
      ["--command-timeout", "-1"],
      ["--max-turns", "2.5"],
    ]) {
      const r = await patchbay(["run", "--repo", CLAMP, "--task", "t", flag!, value!], env);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(flag);
      expect(r.stderr).not.toMatch(/timeoutSec|commandTimeoutSec|maxTurns/);
    }
  });

  it("`run` and `enqueue` with no flags are usage errors", async () => {
    for (const cmd of ["run", "enqueue"]) {
      const r = await patchbay([cmd], env);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(/--repo/);
      expect(r.stderr).toMatch(/--task/);
    }
  });

  it("--repo, --git and --archive are mutually exclusive", async () => {
    for (const pair of [
      ["--repo", CLAMP, "--git", "https://example.com/x.git"],
      ["--repo", CLAMP, "--archive", "/tmp/x.tar"],
      ["--git", "https://example.com/x.git", "--archive", "/tmp/x.tar"],
    ]) {
      const r = await patchbay(["enqueue", ...pair, "--task", "t"], env);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/only one of --repo, --git and --archive/);
    }
  });

  it("a local --repo that does not exist is refused before anything connects to Redis", async () => {
    const r = await patchbay(["enqueue", "--repo", "/nonexistent/patchbay-repo", "--task", "t"], env);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/--repo: \/nonexistent\/patchbay-repo does not exist/);
    expect(r.stderr).not.toMatch(/Redis/);
  });

  it("a bad JobSpec field set by flag is named by its flag; unknown flags and extra arguments are usage errors", async () => {
    const bad = await patchbay(["enqueue", "--repo", CLAMP, "--task", "t", "--tools", "hammer"], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--tools takes one of text_editor_20250728/);
    const unknown = await patchbay(["status", "--jsn", "1"], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/--jsn/);
    const extra = await patchbay(["list", "oops"], env);
    expect(extra.code).toBe(2);
    const missing = await patchbay(["watch"], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/missing <jobId>/);
    const batch = join(mkdtempSync(join(tmpdir(), "pb-usage-")), "jobs.jsonl");
    writeFileSync(batch, `${JSON.stringify({ task: "t", repo: { path: CLAMP } })}\n{"task": 1}\n`);
    const b = await patchbay(["enqueue", "--batch", batch], env);
    expect(b.code).toBe(2);
    expect(b.stderr).toMatch(/jobs\.jsonl:2: invalid JobSpec/);
  });

  it("list --state and --limit are checked", async () => {
    expect((await patchbay(["list", "--state", "finished"], env)).stderr).toMatch(/--state takes active, waiting/);
    expect((await patchbay(["list", "--limit", "0"], env)).code).toBe(2);
  });
});

describe("help and version", () => {
  it("--help for every command: exit 0, its usage and its flags", async () => {
    for (const name of COMMANDS) {
      const r = await patchbay([...name.split(" "), "--help"], env);
      expect(r.code, name).toBe(0);
      expect(r.stdout, name).toContain(`patchbay ${name}`);
      if (name !== "image build") expect(r.stdout, name).toMatch(/Exit status|exit/i);
    }
    const main = await patchbay(["--help"], env);
    for (const name of COMMANDS) expect(main.stdout).toContain(`  ${name} `);
  });

  it("--version prints the package's version", async () => {
    const { version } = (await import("../../package.json", { with: { type: "json" } })).default;
    for (const flag of ["--version", "-V"]) {
      const r = await patchbay([flag], env);
      expect(r).toMatchObject({ code: 0, stdout: `${version}\n` });
    }
  });

  it("`patchbay image` shows its subcommands; an unknown one is a usage error", async () => {
    const r = await patchbay(["image"], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/image build\s+build the sandbox image/);
    expect((await patchbay(["image", "--help"], env)).code).toBe(0);
    const bad = await patchbay(["image", "bild"], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/unknown command 'image bild'/);
  });
});

describe("a Redis that refuses connections", () => {
  it("is reported at once, in one line, by every command that needs it (exit 1)", async () => {
    const calls = [
      ["run", "--repo", CLAMP, "--task", "t"],
      ["enqueue", "--repo", CLAMP, "--task", "t"],
      ["status", "1"],
      ["result", "1"],
      ["watch", "1"],
      ["cancel", "1"],
      ["list"],
      ["worker"],
    ];
    for (const args of calls) {
      // Start-up on this (shared, busy) machine, queue modules loaded: a usage error found after loading them.
      const startup = (await patchbay(["enqueue", "--repo", "/nonexistent/patchbay-repo", "--task", "t"], env)).ms;
      const r = await patchbay(args, env, { timeoutMs: 15_000 });
      expect(r.code, `${args[0]}: ${r.stderr}`).toBe(1);
      expect(r.stderr, args[0]).toMatch(/cannot reach Redis at redis:\/\/127\.0\.0\.1:9 \(connect ECONNREFUSED/);
      expect(r.stderr, args[0]).not.toMatch(/^\s+at /m);
      // The old client retried for ~6 s before giving up; the margin keeps a loaded machine from flaking.
      expect(r.ms - startup, `${args[0]} took ${r.ms} ms, its start-up ${startup} ms`).toBeLessThan(4500);
    }
  }, 180_000);

  it("--redis-url overrides $REDIS_URL", async () => {
    const r = await patchbay(["list", "--redis-url", "redis://127.0.0.1:7"], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cannot reach Redis at redis:\/\/127\.0\.0\.1:7 /);
  });

  it("doctor reports it as a failed check, without a stack trace", async () => {
    const r = await patchbay(["doctor"], env, { timeoutMs: 20_000 });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/FAIL {2}redis: redis:\/\/127\.0\.0\.1:9: connect ECONNREFUSED/);
    expect(r.stdout + r.stderr).not.toMatch(/^\s+at |Unhandled error event/m);
    const json = await patchbay(["doctor", "--json", "--redis-url", "redis://127.0.0.1:7"], env, { timeoutMs: 20_000 });
    expect(JSON.parse(json.stdout)).toContainEqual(
      expect.objectContaining({ name: "redis", ok: false, detail: expect.stringContaining("127.0.0.1:7") }),
    );
  });
});
