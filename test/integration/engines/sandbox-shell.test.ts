// The persistent shell against a real container.
//
// Backend: Docker (the hardened container and its image).
import { describe, expect, it } from "vitest";
import { useSandbox } from "../../support/sandbox.js";

// bash reports a background job killed by a timeout ("main: line 3:    57 Killed    sleep 1000")
// whenever it next reaps it, which may be during a later command: such notices are not that
// command's output.
const JOB_NOTICE = /^\S+: line \d+: +\d+ (Killed|Stopped|Terminated|Hangup)\b.*$\n?/gm;
const withoutJobNotices = (s: string) => s.replace(JOB_NOTICE, "");

// The agent's live processes of the kinds the timed-out commands below start (by name: the
// pipeline's own children may show as `bash` before their exec or `[awk]` during it; zombies,
// already dead and not yet reaped, do not count).
const LEFT =
  "ps -u 1000 -o pid=,stat=,comm=,args= | awk '$2 !~ /^Z/ && $3 ~ /^(sleep|sh|nohup|setsid)$/ { print \"LEFT:\" $0 }'; echo checked";

describe("sandbox.shell (real engine)", () => {
  const sb = useSandbox();

  it("keeps cwd, env and functions between commands", async () => {
    await sb().shell.run("mkdir -p /tmp/d && cd /tmp/d && export FOO=bar && greet() { echo hello $1; }");
    const r = await sb().shell.run("pwd; echo $FOO; greet you");
    expect(r.output).toBe("/tmp/d\nbar\nhello you\n");
    expect(r.exitCode).toBe(0);
  });

  it("reports exit codes and interleaves stdout and stderr in order", async () => {
    const r = await sb().shell.run(
      "echo one; echo two >&2; echo three; ls /nope; exit_code() { return 3; }; exit_code",
    );
    expect(r.output).toBe("one\ntwo\nthree\nls: cannot access '/nope': No such file or directory\n");
    expect(r.exitCode).toBe(3);
  });

  it("gives EOF to a command that reads stdin", async () => {
    const r = await sb().shell.run("cat; read x; echo read=$?", { timeoutSec: 5 });
    expect(r).toMatchObject({ timedOut: false, exitCode: 0, output: "read=1\n" });
  });

  it("completes commands ending in a comment, &, an open heredoc or a backslash, with their output and status", async () => {
    const cases: [string, string | RegExp, number][] = [
      ["echo a # trailing comment", "a\n", 0],
      ["sleep 0.1 &", "", 0],
      ["cat <<EOF\nbody\n", /^(.*here-document.*delimited by end-of-file.*\n)?body\n$/, 0],
      ["echo b \\", "b \\\n", 0],
      ["false # and a comment", "", 1],
    ];
    for (const [cmd, output, exitCode] of cases) {
      const r = await sb().shell.run(cmd, { timeoutSec: 5 });
      expect(r.timedOut, cmd).toBe(false);
      expect(r.exitCode, cmd).toBe(exitCode);
      if (typeof output === "string") expect(r.output, cmd).toBe(output);
      else expect(r.output, cmd).toMatch(output);
    }
  });

  it("times out `sleep 1000`, leaves no process behind, and stays usable", async () => {
    await sb().shell.run("cd /tmp && export KEEP=1");
    const r = await sb().shell.run("sleep 1000 & sleep 1000; echo never", { timeoutSec: 2 });
    expect(r).toMatchObject({ timedOut: true, exitCode: 124 });
    expect(r.output).not.toMatch(/never/);
    const ps = await sb().shell.run(LEFT);
    expect(withoutJobNotices(ps.output)).toBe("checked\n");
    const after = await sb().shell.run("pwd; echo $KEEP");
    expect(withoutJobNotices(after.output)).toBe("/tmp\n1\n");
    expect(after.exitCode).toBe(0);
  });

  it("a timeout kills grandchildren too: sh -c, subshells, setsid and nohup leave nothing behind", async () => {
    // Only the first level are children of the shell; every `sleep` here is a grandchild or is
    // reparented to the container's init once its parent dies.
    const cmd =
      "sh -c 'sleep 1001 & sleep 1002' & (sleep 1003 &); setsid sleep 1004 & nohup sh -c 'sleep 1005 & sleep 1006' >/dev/null 2>&1 & sleep 1; sleep 1007; echo never";
    const r = await sb().shell.run(cmd, { timeoutSec: 3 });
    expect(r).toMatchObject({ timedOut: true, exitCode: 124 });
    expect(r.output).not.toMatch(/never/);
    const ps = await sb().shell.run(LEFT);
    expect(withoutJobNotices(ps.output)).toBe("checked\n");
    expect((await sb().shell.run("echo alive")).output).toMatch(/alive\n$/);
  });

  it("cuts `yes | head -c 200M` keeping head and tail while the worker's memory stays bounded", async () => {
    global.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const probe = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    const r = await sb().shell.run("yes | head -c 200M; echo; echo THE-END", {
      timeoutSec: 120,
      maxOutputBytes: 20_000,
    });
    clearInterval(probe);
    expect(r.truncated).toBe(true);
    expect(r.exitCode).toBe(0);
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

  // A background `yes` streamed into the worker between commands, costing dockerd, the shim and the
  // worker CPU that no cgroup of the job's counted. Now what comes while no command runs is dropped,
  // and past 256 KiB the stream is paused: the writer blocks on its full pipe. During a command the
  // helper cuts it in the box (helper-cut.test.ts has the exact bytes).
  it("output while no command runs is dropped, then its stream paused: a background `yes` blocks, and during a command is cut in the box", async () => {
    await sb().shell.run("yes & echo $! > /tmp/yes.pid; echo started");
    // The bytes yes has written (its /proc/PID/io, read as the agent through the file agent: not the shell's stream).
    const written = async () =>
      Number(
        /wchar: (\d+)/.exec(
          (await sb().exec(["bash", "-c", "cat /proc/$(cat /tmp/yes.pid)/io"])).stdout.toString(),
        )![1],
      );
    await new Promise((r) => setTimeout(r, 1000)); // a measuring window, not a synchronisation
    const before = await written();
    await new Promise((r) => setTimeout(r, 3000));
    const more = (await written()) - before;
    expect(more).toBeLessThan(1024 * 1024); // blocked on its full pipe, not streaming (it wrote hundreds of MB)
    // During a command its output is the command's: the helper reads all of it in the box and
    // passes the head and the tail only, so that a `sleep 3` beside it carries no more than its
    // bound through dockerd, the shim and the worker, and the worker's CPU stays low.
    const cpu0 = process.cpuUsage();
    const during = await sb().shell.run("sleep 3; echo slept", { timeoutSec: 30, maxOutputBytes: 10_000 });
    const cpu = process.cpuUsage(cpu0);
    expect(during).toMatchObject({ exitCode: 0, timedOut: false, truncated: true });
    expect(during.output).toMatch(/bytes of output cut \(\d+ in all\)/);
    expect(during.output.length).toBeLessThan(10_300);
    expect((cpu.user + cpu.system) / 1000).toBeLessThan(1000);
    // (wait: yes may still be blocked in a write when kill returns, and finish it after an echo)
    const next = await sb().shell.run("kill $(cat /tmp/yes.pid); wait $(cat /tmp/yes.pid); echo next");
    expect(next.output).toMatch(/next\n$/);
    expect(next.output.length).toBeLessThan(40_000);
  });

  // A daemon left by an earlier command keeps forking short-lived children; a later command times
  // out. Its kill freezes everything, kills the command's processes, lets the daemon go on, and
  // waits only for what it killed: the daemon's new children are not "survivors" (they were said
  // to be, and the command failed with an error instead of a timeout).
  it("a timeout beside a daemon that keeps forking kills the command and leaves the daemon", async () => {
    await sb().shell.run(
      "python3 -c 'import os, signal, time\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\nwhile True:\n  if os.fork() == 0: time.sleep(0.05); os._exit(0)\n  time.sleep(0.005)' >/dev/null 2>&1 & echo $! > /tmp/forker.pid; echo started",
    );
    const r = await sb().shell.run("sleep 1000; echo never", { timeoutSec: 2 });
    expect(r).toMatchObject({ timedOut: true, exitCode: 124 });
    const after = await sb().shell.run(
      "kill -0 $(cat /tmp/forker.pid) && echo daemon-alive; pgrep -u 1000 -x sleep || echo no-sleep",
    );
    expect(withoutJobNotices(after.output)).toBe("daemon-alive\nno-sleep\n");
    await sb().shell.run("kill $(cat /tmp/forker.pid)");
  });

  it("restart() kills background jobs and resets state", async () => {
    await sb().shell.run("export X=1; cd /tmp; sleep 500 &");
    await sb().shell.restart();
    const r = await sb().shell.run("echo ${X:-unset}; pwd; pgrep -u 1000 sleep || echo none");
    expect(r.output).toBe("unset\n/workspace\nnone\n");
  });
});

// The end of a command is told by a marker with a fresh random nonce: `\nPBEND<32 hex>:<code>`
// (and `PBSTART<32 hex>:` before it); `\nPBEXIT:<code>` says the shell itself exited (believed once the
// supervisor sees the shell's pid dead). A
// command that prints markers must neither end early nor change its exit code.
describe("sandbox.shell: spoofed end markers (real engine)", () => {
  const sb = useSandbox();

  // Prints every candidate as start, end and exit markers, then goes on and exits 3.
  const spoofing = (candidates: string) =>
    `for n in ${candidates}; do printf '\\nPBSTART%s:1\\n\\nPBEND%s:0\\n\\nPBEXIT%s:0\\n\\nPBEXIT%s:0\\n' "\${n:0:32}" "\${n:0:32}" "\${n:0:16}" "\${n: -16}"; done; sleep 0.3; echo still-here; (exit 3)`;
  const expectNotSpoofed = async (r: {
    output: string;
    exitCode: number;
    timedOut: boolean;
    shellRestarted?: boolean;
  }) => {
    expect(r.output).toMatch(/still-here\n$/);
    expect(r.exitCode).toBe(3);
    expect(r.timedOut).toBe(false);
    expect(r.output).not.toMatch(/shell exited/);
    // The shell was not replaced: its state is still there.
    const after = await sb().shell.run("echo $SPOOF_KEEP");
    expect(after.output).toBe("kept\n");
    expect(after.shellRestarted).toBeUndefined();
  };

  it("markers in the real format with random, zero and counter nonces", async () => {
    await sb().shell.run("export SPOOF_KEEP=kept");
    const guesses =
      "$(head -c 128 /dev/urandom | od -An -tx1 | tr -d ' \\n' | fold -w32) $(for i in $(seq 0 64); do printf '%032x ' $i; done) ffffffffffffffffffffffffffffffff";
    const r = await sb().shell.run(spoofing(guesses), { timeoutSec: 20 });
    expect(r.output.match(/PBEND[0-9a-f]{32}:0/g)!.length).toBeGreaterThan(60); // the markers were printed
    await expectNotSpoofed(r);
  });

  it("nonces guessed from the shell's own state: variables, functions, history, cmdline, environ, stdin", async () => {
    await sb().shell.run("export SPOOF_KEEP=kept");
    // Everything the shell shows of itself to a command it runs (the command text and the nonce
    // reach the shell on its stdin).
    const state =
      '{ set; declare -p; declare -f; alias; history; echo "$BASH_COMMAND $_ ${BASH_ARGV[*]}"; cat /proc/$$/cmdline /proc/$$/environ /proc/$PPID/cmdline /proc/$PPID/environ; timeout 0.3 cat /proc/$$/fd/0; } 2>&1';
    // (`:` first: `$_` holding the nonce is a known hole of its own, below.)
    const r = await sb().shell.run(
      `:; cands=$(${state} | grep -aoE '[0-9a-f]{16,}' | sort -u); echo "candidates: $(echo "$cands" | wc -w)"; ${spoofing("$cands")}`,
      { timeoutSec: 20 },
    );
    await expectNotSpoofed(r);
  });

  // `$_` (the last argument of the previous command) was the nonce when a command started.
  it("`$_` at the start of a command does not give away its nonce", async () => {
    await sb().shell.run("export SPOOF_KEEP=kept");
    const r = await sb().shell.run(`n=$_; ${spoofing("$n")}`, { timeoutSec: 20 });
    await expectNotSpoofed(r);
  });

  // KNOWN HOLES in src/sandbox/shell.ts. Each it.fails runs the attack and passes while the attack
  // works: once shell.ts is fixed it goes red, and must become a plain it(). They only let a
  // command fool the agent about its own output: verify and the patch do not use the shell.
  // The EXIT trap once carried a session nonce that `trap -p EXIT` showed, so a command could fake
  // "the shell exited". Now its line has no nonce at all and is believed only once the supervisor
  // (root) sees the shell's pid dead: a command printing the very line the trap prints, from the
  // shell itself and from a child, is output.
  it("a command printing the EXIT trap's own line (from `trap -p`) cannot fake the shell's exit", async () => {
    await sb().shell.run("export SPOOF_KEEP=kept");
    const r = await sb().shell.run(
      `eval "$(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\\1/")"; sh -c 'printf "\\nPBEXIT:0\\n"'; ${spoofing("")}`,
      { timeoutSec: 20 },
    );
    expect(r.output.match(/PBEXIT:0/g)).toHaveLength(2);
    await expectNotSpoofed(r);
  });

  // 3. The shell runs as the agent's uid and is dumpable, and the engine has no Yama: a command can
  //    read the shell's memory (/proc/$PPID/mem) and find the nonce of the line it parsed,
  //    `__pb_post <nonce> $?`.
  it.fails("KNOWN HOLE: a nonce read from the shell's memory cannot end the command early", async () => {
    await sb().shell.run("export SPOOF_KEEP=kept");
    const scan = `python3 -c '
import os, re
pid = os.getppid(); found = set()
mem = open("/proc/%d/mem" % pid, "rb")
for line in open("/proc/%d/maps" % pid):
    addr, perms = line.split()[:2]
    if "r" not in perms: continue
    a, b = (int(x, 16) for x in addr.split("-"))
    try: mem.seek(a); data = mem.read(b - a)
    except OSError: continue
    found.update(m.decode() for m in re.findall(rb"[0-9a-f]{32}", data))
print(" ".join(sorted(found)))
'`;
    const r = await sb().shell.run(`cands=$(${scan}); ${spoofing("$cands")}`, { timeoutSec: 20 });
    await expectNotSpoofed(r);
  });
});

describe("sandbox.shell: commands that fight the protocol (real engine)", () => {
  const sb = useSandbox();

  it("survives `exec >/dev/null` and `exec 2>&-` inside a command, keeping its state", async () => {
    await sb().shell.run("cd /tmp && export KEEP=yes");
    const r = await sb().shell.run("echo before; exec >/dev/null; echo hidden", { timeoutSec: 5 });
    expect(r).toMatchObject({ timedOut: false, exitCode: 0, output: "before\n" });
    await sb().shell.run("exec 2>&-", { timeoutSec: 5 });
    const after = await sb().shell.run("echo $KEEP; pwd; ls /nonexistent", { timeoutSec: 5 });
    expect(after.output).toMatch(/^yes\n\/tmp\nls: cannot access/);
    expect(after.exitCode).toBe(2);
    expect(after.shellRestarted).toBeUndefined();
  });

  it("a user's USR1 trap does not break the timeout kill", async () => {
    await sb().shell.run("export KEEP2=1; trap - USR1");
    const r = await sb().shell.run("sleep 100; echo never", { timeoutSec: 1 });
    expect(r).toMatchObject({ timedOut: true, exitCode: 124 });
    expect(r.output).not.toMatch(/never/);
    expect(withoutJobNotices((await sb().shell.run("echo $KEEP2")).output)).toBe("1\n");
  });

  it("keeps output printed just before the shell is killed", async () => {
    const r = await sb().shell.run("printf 'partial-before-kill'; kill -9 $$", { timeoutSec: 10 });
    expect(r.output).toMatch(/^partial-before-kill/);
    expect(r.output).toMatch(/shell exited/);
    expect(r.timedOut).toBe(false);
  });
});
