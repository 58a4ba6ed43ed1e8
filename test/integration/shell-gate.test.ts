// The box's gate (src/sandbox/py/helper.py): the worker sends a command's begin to the supervisor
// and the command to the agent's shell at once, and the shell waits on the gate for the begin's
// token before it reads the command. So a command takes one round trip, and still nothing of it
// starts before its begin (which notes when it began: a timeout kills what started since). Shown
// on the local backend: a command waits for a stopped supervisor; only the shell and the supervisor
// get an end of the gate, the write end only as root, and the agent's commands none; an agent that
// steals its shell's tokens only delays its own command; a supervisor whose gate nobody reads
// goes on answering.
//
// Backend: local (the helper, the shell and the supervisor on this host).
import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Box } from "../../src/backend/types.js";
import type { HelperBox } from "../../src/sandbox/helper.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";
import { SUPERVISOR_SCRIPT } from "../../src/sandbox/supervisor-script.js";
import { localBackend } from "../support/backend.js";

async function run(box: Box, argv: string[], opts: { user?: string; gate?: "read" | "write" } = {}) {
  let out = "";
  const p = await box.attach(argv, (b) => (out += b.toString()), { user: opts.user, cwd: "/", gate: opts.gate });
  p.endInput();
  await p.ended;
  return { out, code: await p.exitCode(), gate: p.gate === true };
}

/** The pid of the sandbox's process named `comm`, a child of its helper. */
async function childNamed(sb: Sandbox, comm: string): Promise<number> {
  const helper = await (sb.box as HelperBox).helperPid();
  const ps = await run(sb.box, ["ps", "-o", "pid=,comm=", "--ppid", String(helper)], { user: "0:0" });
  const line = ps.out.split("\n").find((l) => l.trim().endsWith(` ${comm}`));
  if (!line) throw new Error(`no ${comm} under the helper:\n${ps.out}`);
  return Number(line.trim().split(/\s+/)[0]);
}

describe("the box's gate (local backend)", () => {
  let sb: Sandbox;
  beforeAll(async () => {
    sb = await Sandbox.create({ backend: localBackend(), labels: { "patchbay.test": "shell-gate" } });
    await sb.shell.run("true");
  });
  afterAll(async () => {
    await sb?.destroy();
  });

  /** Runs `date` with the supervisor stopped for 500 ms: the ms the command ran at, and when it went on. */
  async function withSupervisorStopped(): Promise<{ ranAt: number; resumedAt: number; durationMs: number }> {
    // Signalled from inside the box (its pids are its own namespace's), as root.
    const supervisor = await childNamed(sb, "supervisor.py");
    const signal = (sig: string) => run(sb.box, ["kill", `-${sig}`, String(supervisor)], { user: "0:0" });
    expect((await signal("STOP")).code).toBe(0);
    let resumedAt = 0;
    const resume = sleep(500).then(async () => {
      resumedAt = Date.now();
      expect((await signal("CONT")).code).toBe(0);
    });
    const r = await sb.shell.run("date +%s%3N");
    await resume;
    expect(r.exitCode).toBe(0);
    return { ranAt: Number(r.output.trim()), resumedAt, durationMs: r.durationMs };
  }

  it("a command starts only once its begin is done: it waits for a stopped supervisor", async () => {
    const { ranAt, resumedAt, durationMs } = await withSupervisorStopped();
    // The command's own clock: it ran after the supervisor went on, not when it was sent.
    expect(ranAt).toBeGreaterThanOrEqual(resumedAt - 5);
    expect(durationMs).toBeGreaterThanOrEqual(450);
  });

  it("a gate the agent made non-blocking still holds its commands, and the next shell gets it cleared", async () => {
    // Every copy of the read end is one open file: the agent hands the shell's saved copy (bash
    // keeps fd 9 aside while a command runs) to a program as its stdin, which sets O_NONBLOCK.
    const shellPid = (sb.shell as unknown as { pid: number }).pid;
    const gate = (await run(sb.box, ["readlink", `/proc/${shellPid}/fd/9`], { user: "0:0" })).out.trim();
    expect(gate).toMatch(/^pipe:\[\d+\]$/);
    const set = await sb.shell.run(
      `for f in /proc/$$/fd/*; do [ "$(readlink $f)" = "${gate}" ] && python3 -c 'import os; os.set_blocking(0, False); print("set")' <&\${f##*/}; done`,
    );
    expect(set.output).toContain("set");
    // In that shell a read that fails is no token: the command still waits for its begin.
    let t = await withSupervisorStopped();
    expect(t.ranAt).toBeGreaterThanOrEqual(t.resumedAt - 5);
    // A new shell (as after setup, a timeout or a restart) starts with the gate's flags cleared.
    await sb.shell.restart();
    const flags = await run(sb.box, ["cat", `/proc/${(sb.shell as unknown as { pid: number }).pid}/fdinfo/9`], {
      user: "0:0",
    });
    expect(Number.parseInt(/flags:\s+(\d+)/.exec(flags.out)![1]!, 8) & 0o4000).toBe(0);
    t = await withSupervisorStopped();
    expect(t.ranAt).toBeGreaterThanOrEqual(t.resumedAt - 5);
  }, 60_000);

  it("a TMOUT the agent sets cuts neither the gate's wait nor a long command's text", async () => {
    // bash gives every read TMOUT's timeout: the gate's wait and the command's text are reads.
    expect((await sb.shell.run("export TMOUT=0.01; echo set")).output.trim()).toBe("set");
    const t = await withSupervisorStopped();
    expect(t.ranAt).toBeGreaterThanOrEqual(t.resumedAt - 5);
    const long = await sb.shell.run(`echo ${"x".repeat(60_000)} | wc -c`);
    expect(long).toMatchObject({ exitCode: 0 });
    expect(long.output.trim()).toBe("60001");
    await sb.shell.run("unset TMOUT");
  }, 60_000);

  it("only a spawn that asks gets an end of the gate, the write end only as root; the agent's commands get none", async () => {
    expect((await run(sb.box, ["ls", "/proc/self/fd"])).out.split("\n")).not.toContain("9");
    const read = await run(sb.box, ["ls", "/proc/self/fd"], { gate: "read" });
    expect(read).toMatchObject({ code: 0, gate: true });
    expect(read.out.split("\n")).toContain("9");
    // The read end cannot be opened for writing through /proc by the agent (the pipe is root's).
    const reopen = await run(sb.box, ["bash", "-c", "exec 5>/proc/self/fd/9"], { gate: "read", user: "1000:1000" });
    expect(reopen.code).not.toBe(0);
    expect((await run(sb.box, ["true"], { gate: "write", user: "1000:1000" })).code).toBe(126);
    expect((await run(sb.box, ["true"], { gate: "write", user: "0:0" })).code).toBe(0);
    // The agent's shell holds the read end; a command it runs does not.
    const fds = await sb.shell.run("ls /proc/self/fd");
    expect(fds.output.split("\n")).not.toContain("9");
    const shellFds = await sb.shell.run("ls /proc/$$/fd");
    expect(shellFds.output.split("\n")).not.toContain("9");
  });

  it("an agent that steals its shell's tokens only delays its own command; the next one runs", async () => {
    // A background process with a copy of the gate (the shell's saved fd 9), reading every token.
    // A background process with a copy of every pipe the shell holds past fd 9 (the saved gate among
    // them, while the command runs), reading every token it can.
    const thief = await sb.shell.run(
      "for f in /proc/$$/fd/*; do n=${f##*/}; if [ $n -ge 10 ] && [ -p $f ]; then " +
        "( exec 3<&$n; while IFS= read -r -u 3 t; do :; done ) >/dev/null 2>&1 & fi; done; echo started",
    );
    expect(thief.output).toContain("started");
    const stuck = await sb.shell.run("echo should-wait", { timeoutSec: 2 });
    const next = await sb.shell.run("echo next");
    expect(next).toMatchObject({ exitCode: 0 });
    expect(next.output).toContain("next");
    // Whether the thief had the gate or not, the command either ran or timed out: never ran unframed.
    if (stuck.timedOut) expect(stuck.output).not.toContain("should-wait");
    else expect(stuck.output.trim()).toBe("should-wait");
  }, 60_000);
});

describe("the supervisor's gate (its script on this host)", () => {
  it("a gate nobody reads never holds it: 8,000 begins with tokens past a full buffer are all answered", async () => {
    // fd 9 is a socket nobody reads: the tokens fill its buffer, the rest are dropped. The agent's
    // uid is one no process has, and the shell's pid one no process has: nothing here is killed
    // or touched.
    const p = spawn("python3", ["-I", "-S", "-u", "-c", SUPERVISOR_SCRIPT, "0", "2147480000"], {
      stdio: ["pipe", "pipe", "inherit", "ignore", "ignore", "ignore", "ignore", "ignore", "ignore", "pipe"],
    });
    let out = "";
    p.stdout!.on("data", (b: Buffer) => (out += b.toString()));
    const lines = Array.from({ length: 8000 }, (_, i) => `begin n${i} 2147480001 - ${"t".repeat(56)}${i}\n`);
    p.stdin!.end(lines.join(""));
    const code = await new Promise<number | null>((resolve) => p.once("exit", resolve));
    expect(code).toBe(0);
    const answers = out.split("\n").filter((l) => /^PBn\d+ 0 0$/.test(l));
    expect(answers).toHaveLength(8000);
  }, 60_000);
});
