// The supervisor: a second small bash per sandbox, as root, that stops and kills the agent's
// processes (Docker cannot kill an exec), and the start of a bash on an attached exec that the
// shell (shell.ts) and the supervisor share.
import type Docker from "dockerode";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { attachExec, type Attached } from "./attach.js";
import type { Liveness } from "./liveness.js";

// The supervisor is a root bash (CAP_KILL, nothing else of use) that the agent can neither signal
// nor write to. Kill pass: SIGSTOP first so nothing can fork while we sweep (fork bombs), then
// SIGKILL, every process whose real uid is the agent's, above a pid watermark, but one excepted pid;
// again until a pass finds none (up to 8), since a bomb forks between the passes of one sweep.
// Only builtins (it lives in /proc, so the glob lists pids): it must work when the pids limit
// leaves no room for a new process. bash's read keeps what it read ahead in one buffer for every
// file, and gives it back with an lseek that fails once the process is gone: lines of a process that
// died mid-check then come first from the next file read. So a status counts only from its own Name
// line to its Uid line, with its own Pid in between (else a uid-1000 line of a dead process once
// stopped root's processes: the file agent, the supervisor itself); numbers read elsewhere are checked.
const SUPERVISOR_INIT = String.raw`
exec 2>&1
cd /proc
__pb_agent() { local k r z= me=; while read -r k r _; do case "$k" in Name:) z= me=;; State:) z=$r;; Pid:) [ "$r" = "$1" ] && me=1;; Uid:) [ -n "$me" ] && [ "$z" != Z ] && [ "$r" = 1000 ]; return;; esac; done 2>/dev/null < "$1/status"; return 1; }
__pb_sweep() { local p pass n=0; for pass in 1 2 3; do for p in [0-9]*; do if [ "$p" -gt "$1" ] && [ "$p" != "$2" ] && __pb_agent "$p"; then kill -STOP "$p" 2>/dev/null; fi; done; done; for p in [0-9]*; do if [ "$p" -gt "$1" ] && [ "$p" != "$2" ] && __pb_agent "$p"; then kill -KILL "$p" 2>/dev/null && n=$((n+1)); fi; done; __pb_n=$n; }
__pb_sweeps() { local r t=0; for r in 1 2 3 4 5 6 7 8; do __pb_sweep "$1" "$2"; t=$((t+__pb_n)); [ "$__pb_n" = 0 ] && break; done; __pb_n=$t; }
__pb_kill() { [ "$3" -gt 0 ] && kill -USR1 "$3" 2>/dev/null; __pb_sweeps "$1" "$4"; builtin printf 'PBKILLED%s:%d\n' "$2" "$__pb_n"; }
__pb_reclaim() { local d c=0 m=max; for d in /sys/fs/cgroup /sys/fs/cgroup/pids; do if [ -r $d/pids.current ]; then read -r c < $d/pids.current; read -r m < $d/pids.max; break; fi; done; __pb_n=0; case "$c$m" in *[!0-9a-z]*) c=0 m=max;; esac; if [ "$m" != max ] && [ $((c * 4)) -ge $((m * 3)) ]; then __pb_sweeps 1 "$2"; fi; builtin printf 'PBKILLED%s:%d\n' "$1" "$__pb_n"; }
`;

const BASH = ["bash", "--noprofile", "--norc"];
const ENV = ["TERM=dumb", "PAGER=cat", "GIT_PAGER=cat", "PS1="];

/** Waits for `marker` followed by a line in the stream fed to `feed`. Bounded memory. */
export class LineWaiter {
  private buf = "";
  private resolve!: (rest: string) => void;
  readonly done: Promise<string>;
  constructor(private marker: string) {
    this.done = new Promise((r) => (this.resolve = r));
  }
  feed(chunk: Buffer): void {
    this.buf = (this.buf + chunk.toString("latin1")).slice(-4096);
    const i = this.buf.indexOf(this.marker);
    const nl = i >= 0 ? this.buf.indexOf("\n", i) : -1;
    if (nl >= 0) this.resolve(this.buf.slice(i + this.marker.length, nl));
  }
}

/**
 * Starts a bash on an attached exec, runs `init` and waits for its pid. A container that dies under
 * a starting exec does not always end the exec's stream, or even its attach (gVisor's, when its
 * sandbox process hits the pids limit): its state is checked once a second while the start waits.
 */
export async function startBash(container: Docker.Container, init: string, onData: (b: Buffer) => void, user?: string) {
  init += `builtin printf 'PBREADY:%s\\n' "$$"\n`;
  let waiter: LineWaiter | undefined = new LineWaiter("PBREADY:");
  let started = false;
  const stopped = (async () => {
    while (!started) {
      await sleep(1000);
      const state = await container.inspect().then((i) => i.State, () => undefined);
      if (!started && !state?.Running) return `the sandbox's container stopped while its shell started (exit code ${state?.ExitCode ?? "unknown"})`;
    }
    return undefined;
  })();
  const fail = (why: string | undefined) => Promise.reject(new Error(why ?? "the sandbox shell exited while starting (is the container running?)"));
  const attaching = attachExec(container, BASH, (b) => (waiter ? waiter.feed(b) : onData(b)), { env: ENV, user });
  try {
    const proc = await Promise.race([attaching, stopped.then(fail)]);
    proc.write(init);
    const pid = await Promise.race([waiter.done, proc.ended.then(() => undefined), stopped]);
    if (pid === undefined || !/^\d+$/.test(pid)) {
      proc.destroy();
      return await fail(pid);
    }
    return { proc, pid: Number(pid) };
  } catch (err) {
    void attaching.then((p) => p.destroy(), () => {}); // an attach that comes after we gave up
    throw err;
  } finally {
    started = true;
    waiter = undefined;
  }
}

export class Supervisor {
  private proc?: Attached;
  private waiter?: LineWaiter;
  private queue: Promise<unknown> = Promise.resolve();
  constructor(
    private container: Docker.Container,
    private liveness?: Liveness,
  ) {}

  async ensure(): Promise<void> {
    if (this.proc?.alive) return;
    ({ proc: this.proc } = await startBash(this.container, SUPERVISOR_INIT, (b) => this.waiter?.feed(b), "0:0"));
  }

  /**
   * Stops and kills every process of the agent's uid with a pid above `watermark`, except
   * `except`; resolves to how many were killed. `abortShell` gets SIGUSR1 first: its trap returns
   * from the running command, so the rest of a list (`sleep 1000; echo never`) does not run.
   */
  killAbove(watermark: number, abortShell = 0, except = 0): Promise<number> {
    return this.call((nonce) => `__pb_kill ${watermark} ${nonce} ${abortShell} ${except}\n`);
  }

  /**
   * When the agent's processes hold three quarters of the pids limit or more, kills all of them but
   * `keep` (a fork bomb rises and falls near the limit; a real workload stays far below it).
   */
  reclaim(keep: number): Promise<number> {
    return this.call((nonce) => `__pb_reclaim ${nonce} ${keep}\n`);
  }

  private call(line: (nonce: string) => string): Promise<number> {
    const next = this.queue.then(async () => {
      await this.ensure();
      const nonce = randomBytes(8).toString("hex");
      const waiter = (this.waiter = new LineWaiter(`PBKILLED${nonce}:`));
      this.proc!.write(line(nonce));
      const answer = Promise.race([waiter.done, this.proc!.ended.then(() => "0"), sleep(10_000).then(() => "0")]);
      // A container that is gone has nothing left to kill.
      const n = await (this.liveness ? this.liveness.guard(answer).catch(() => "0") : answer);
      return Number(n) || 0;
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  close(): void {
    this.proc?.destroy();
  }
}
