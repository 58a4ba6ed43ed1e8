// The persistent shell against a real container.
import { describe, expect, it } from "vitest";
import { useSandbox } from "./support/sandbox.js";

describe("sandbox.shell (real engine)", () => {
  const sb = useSandbox();

  it("keeps cwd, env and functions between commands", async () => {
    await sb().shell.run("mkdir -p /tmp/d && cd /tmp/d && export FOO=bar && greet() { echo hello $1; }");
    const r = await sb().shell.run("pwd; echo $FOO; greet you");
    expect(r.output).toBe("/tmp/d\nbar\nhello you\n");
    expect(r.exitCode).toBe(0);
  });

  it("reports exit codes and interleaves stdout and stderr in order", async () => {
    const r = await sb().shell.run("echo one; echo two >&2; echo three; ls /nope; exit_code() { return 3; }; exit_code");
    expect(r.output).toBe("one\ntwo\nthree\nls: cannot access '/nope': No such file or directory\n");
    expect(r.exitCode).toBe(3);
  });

  it("gives EOF to a command that reads stdin", async () => {
    const r = await sb().shell.run("cat; read x; echo read=$?", { timeoutSec: 5 });
    expect(r.timedOut).toBe(false);
    expect(r.output).toBe("read=1\n");
  });

  it("completes commands ending in a comment, &, an open heredoc or a backslash", async () => {
    for (const cmd of ["echo a # trailing comment", "sleep 0.1 &", "cat <<EOF\nbody\n", "echo b \\"]) {
      const r = await sb().shell.run(cmd, { timeoutSec: 5 });
      expect(r.timedOut, cmd).toBe(false);
    }
  });

  it("times out `sleep 1000` in under 5 s, leaves no process behind, and stays usable", async () => {
    await sb().shell.run("cd /tmp && export KEEP=1");
    const t0 = Date.now();
    const r = await sb().shell.run("sleep 1000 & sleep 1000; echo never", { timeoutSec: 2 });
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(r.timedOut).toBe(true);
    expect(r.output).not.toMatch(/never/);
    const ps = await sb().shell.run("ps -eo user,comm --no-headers | grep -c sleep || true");
    expect(ps.output.trim()).toBe("1"); // only the container's own root `sleep infinity`
    const after = await sb().shell.run("pwd; echo $KEEP");
    expect(after.output).toBe("/tmp\n1\n");
  });

  it("cuts `yes | head -c 200M` keeping head and tail while the worker's memory stays bounded", async () => {
    global.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const probe = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    const r = await sb().shell.run("yes | head -c 200M; echo; echo THE-END", { timeoutSec: 120, maxOutputBytes: 20_000 });
    clearInterval(probe);
    expect(r.truncated).toBe(true);
    expect(r.output.startsWith("y\ny\n")).toBe(true);
    expect(r.output.endsWith("THE-END\n")).toBe(true);
    expect(r.output).toMatch(/\[\.\.\. \d+ bytes of output cut \(209715\d\d\d in all\)/);
    expect(r.output.length).toBeLessThan(21_000);
    expect(peak - before).toBeLessThan(100 * 1024 * 1024);
  });

  it("survives the shell exiting and restarts with a clean state", async () => {
    const r = await sb().shell.run("export GONE=1; exit 7");
    expect(r.exitCode).toBe(7);
    expect(r.output).toMatch(/shell exited/);
    const next = await sb().shell.run("echo ${GONE:-unset}; pwd");
    expect(next.output).toBe("unset\n/workspace\n");
    expect(next.shellRestarted).toBe(true);
  });

  it("restart() kills background jobs and resets state", async () => {
    await sb().shell.run("export X=1; cd /tmp; sleep 500 &");
    await sb().shell.restart();
    const r = await sb().shell.run("echo ${X:-unset}; pwd; pgrep -u 1000 sleep || echo none");
    expect(r.output).toBe("unset\n/workspace\nnone\n");
  });

  it("cannot spoof the end marker", async () => {
    const r = await sb().shell.run("echo 'PBEND0000:0'; printf '\\nPBEXIT1234:0\\n'; sleep 0.2; echo still-here");
    expect(r.output).toMatch(/still-here/);
  });
});

describe("sandbox.shell: commands that fight the protocol (real engine)", () => {
  const sb = useSandbox();

  it("survives `exec >/dev/null` and `exec 2>&-` inside a command, keeping its state", async () => {
    await sb().shell.run("cd /tmp && export KEEP=yes");
    const r = await sb().shell.run("echo before; exec >/dev/null; echo hidden", { timeoutSec: 5 });
    expect(r.timedOut).toBe(false);
    expect(r.output).toBe("before\n");
    await sb().shell.run("exec 2>&-", { timeoutSec: 5 });
    const after = await sb().shell.run("echo $KEEP; pwd; ls /nonexistent", { timeoutSec: 5 });
    expect(after.output).toMatch(/^yes\n\/tmp\nls: cannot access/);
    expect(after.shellRestarted).toBeUndefined();
  });

  it("a user's USR1 trap does not break the timeout kill", async () => {
    await sb().shell.run("export KEEP2=1; trap - USR1");
    const r = await sb().shell.run("sleep 100; echo never", { timeoutSec: 1 });
    expect(r.timedOut).toBe(true);
    expect(r.output).not.toMatch(/never/);
    expect((await sb().shell.run("echo $KEEP2")).output).toBe("1\n");
  });

  it("keeps output printed just before the shell is killed", async () => {
    const r = await sb().shell.run("printf 'partial-before-kill'; kill -9 $$", { timeoutSec: 10 });
    expect(r.output).toMatch(/^partial-before-kill/);
    expect(r.output).toMatch(/shell exited/);
  });
});
