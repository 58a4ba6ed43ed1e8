// One persistent bash per sandbox over one attached exec. Each command is framed by markers
// carrying an unguessable per-command nonce; its exit code follows the end marker. Docker cannot
// kill an exec, so timeouts are enforced from inside the container by a second small bash (the
// supervisor) that stops and kills every process started since the command began.
import type Docker from "dockerode";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { defaults } from "../config.js";
import { HeadTail } from "../truncate.js";
import type { Liveness } from "./liveness.js";
import type { Attached } from "./attach.js";
import { startBash, Supervisor } from "./supervisor.js";

export interface RunOptions {
  timeoutSec?: number;
  /** Bytes of output kept (head + tail); the rest is counted and cut. */
  maxOutputBytes?: number;
  /** Aborting kills the command the way a timeout does (the result says aborted). */
  signal?: AbortSignal;
}

export interface RunResult {
  output: string;
  exitCode: number;
  timedOut: boolean;
  /** Stopped through RunOptions.signal (job timeout or cancellation). */
  aborted?: boolean;
  truncated: boolean;
  durationMs: number;
  /** Set when the shell had to be replaced: cwd, env and functions were reset. */
  shellRestarted?: boolean;
  /** Set when the shell ended under the command (an `exit`, or its container stopped). */
  shellExited?: boolean;
}

// stderr joins stdout for the whole session so output is interleaved as a terminal shows it.
// The last-pid field of /proc/loadavg is the watermark: every process a command starts has a
// higher pid (pids are per namespace and a sandbox never comes near wrapping them). gVisor shows
// 0 there; a throwaway background `:` gives the same number for one fork.
const SHELL_INIT = String.raw`
exec 2>&1
exec {__pb_fd}>&1
unset HISTFILE
__pb_mem() { local k v f; __pb_o=0; for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do if [ -r "$f" ]; then while read -r k v; do [ "$k" = oom_kill ] && __pb_o=$v; done < "$f"; return 0; fi; done; }
__pb_mem; __pb_oom=$__pb_o
__pb_pre() { trap 'return 124' USR1; local wm; read -r _ _ _ _ wm < /proc/loadavg; case "$wm" in ""|0) : & wm=$!; wait $!;; esac; IFS= read -r -d '' __pb_cmd; builtin printf 'PBSTART%s:%s\n' "$1" "$wm"; }
__pb_exec() { : __pb; eval "$__pb_cmd"; }
trap 'return 124' USR1
__pb_post() { if [ "$2" -ge 128 ]; then __pb_mem; if [ "$__pb_o" -gt "$__pb_oom" ]; then __pb_oom=$__pb_o; builtin printf '\n[patchbay: the command was killed by the kernel: the sandbox ran out of memory]'; fi; fi; builtin printf '\nPBEND%s:%d\n' "$1" "$2"; }
`;

/** A command whose sandbox's container stopped: what it printed, and why it ended. */
function lostResult(why: string, started: number, out?: HeadTail): RunResult {
  const text = out?.text() ?? "";
  return { output: `${text}${text ? "\n" : ""}[patchbay: ${why}: the sandbox is lost]`, exitCode: 255, timedOut: false, truncated: out?.truncated ?? false, durationMs: Date.now() - started, shellExited: true };
}

interface Pending {
  nonce: string;
  phase: "start" | "output";
  buf: Buffer;
  watermark?: number;
  shellExited?: boolean;
  out: HeadTail;
  finish: (exitCode: number | null) => void;
}

export class Shell {
  private proc?: Attached;
  private session = "";
  private pid = 0;
  private pending?: Pending;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly supervisor: Supervisor;

  constructor(
    private container: Docker.Container,
    private liveness?: Liveness,
  ) {
    this.supervisor = new Supervisor(container, liveness);
  }

  /** Starts the shell and the supervisor (in parallel); called by Sandbox.create. */
  async start(): Promise<void> {
    await Promise.all([this.spawn(), this.supervisor.ensure()]);
  }

  private async spawn(): Promise<void> {
    // Docker closes an exec's stream only ~2 s after the process exits; an EXIT trap tells at once.
    this.session = randomBytes(8).toString("hex");
    const trap = `trap 'builtin printf "\\nPBEXIT${this.session}:%d\\n" $?' EXIT\n`;
    const { proc, pid } = await startBash(this.container, SHELL_INIT + trap, (b) => this.onData(b));
    this.proc = proc;
    this.pid = pid;
    void proc.ended.then(() => {
      if (this.proc === proc) this.pending?.finish(null);
    });
  }

  /** The shell's connection is up (it is replaced on the next command otherwise). */
  get alive(): boolean {
    return Boolean(this.proc?.alive);
  }

  /** Runs one command in the persistent shell. Commands are serialised. */
  run(command: string, opts: RunOptions = {}): Promise<RunResult> {
    const next = this.queue.then(() => this.runNow(command, opts));
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** A fresh shell: every process of the agent is killed, cwd and env start over. */
  restart(): Promise<void> {
    const next = this.queue.then(() => this.restartNow());
    this.queue = next.catch(() => undefined);
    return next;
  }

  close(): void {
    this.proc?.destroy();
    this.supervisor.close();
  }

  /**
   * Kills every process of the agent (uid 1000), e.g. before the patch and verify, so nothing the
   * agent left running can change files or print into them. With `keepShell` the idle shell and
   * its state (cwd, env) survive; otherwise the next command gets a fresh shell. Resolves to how
   * many processes were killed.
   */
  killAgent(opts: { keepShell?: boolean } = {}): Promise<number> {
    const next = this.queue.then(async () => {
      if (opts.keepShell && this.proc?.alive) return this.supervisor.killAbove(1, 0, this.pid);
      this.proc?.destroy();
      this.proc = undefined;
      return this.supervisor.killAbove(1);
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async restartNow(): Promise<void> {
    this.proc?.destroy();
    this.proc = undefined;
    await this.supervisor.killAbove(1); // the agent's uid only: root's init and our helpers survive
    await this.spawn();
  }

  private async runNow(command: string, opts: RunOptions): Promise<RunResult> {
    const started = Date.now();
    if (this.liveness?.gone) return lostResult(this.liveness.gone, started);
    let restarted = false;
    if (!this.proc?.alive) {
      await this.restartNow();
      restarted = this.proc !== undefined;
    }
    // Processes the agent left in the background (a fork bomb, say) may hold the pids limit, so
    // that this command could not even fork: they are killed, and the output says so.
    const reclaimed = await this.supervisor.reclaim(this.pid);
    const timeoutSec = opts.timeoutSec ?? defaults.shell.timeoutSec;
    const nonce = randomBytes(16).toString("hex");
    const out = new HeadTail(opts.maxOutputBytes ?? defaults.shell.maxOutputBytes);
    let exitCode: number | null = null;
    let pending!: Pending;
    const ended = new Promise<void>((resolve) => {
      this.pending = pending = {
        nonce,
        phase: "start",
        buf: Buffer.alloc(0),
        out,
        finish: (c) => {
          if (this.pending?.nonce === nonce) this.pending = undefined;
          exitCode = c;
          resolve();
        },
      };
    });
    // A NUL ends the command text (bash strings cannot hold one); stdin is /dev/null so a command
    // that reads stdin gets EOF instead of eating the protocol.
    const text = command.replace(/\0/g, "");
    this.proc!.write(`__pb_pre ${nonce}\n${text}\0__pb_exec </dev/null >&$__pb_fd 2>&$__pb_fd; __pb_post ${nonce} $?\n`);

    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const timeout = new Promise<void>((r) => (timer = setTimeout(r, timeoutSec * 1000)));
    const abort = new Promise<void>((r) => {
      onAbort = () => r();
      if (opts.signal?.aborted) r();
      else opts.signal?.addEventListener("abort", onAbort, { once: true });
    });
    // The container dying under the command (the runtime lost it) ends the wait at once: under
    // gVisor the shell's stream would not end.
    let lost: string | undefined;
    let release!: () => void; // the wait on the container ends with this one (a timed-out command's `ended` never comes)
    const released = new Promise<void>((r) => (release = r));
    const gone = this.liveness ? this.liveness.guard(Promise.race([ended, released])).catch((err: Error) => void (lost = err.message)) : new Promise<void>(() => {});
    await Promise.race([ended, timeout, abort, gone]);
    release();
    clearTimeout(timer);
    if (onAbort) opts.signal?.removeEventListener("abort", onAbort);
    if (lost !== undefined && !this.pendingDone(nonce)) {
      if (pending.phase === "output" && pending.buf.length) out.push(pending.buf);
      this.pending = undefined;
      this.proc?.destroy();
      this.proc = undefined;
      return lostResult(lost, started, out);
    }
    const aborted = !this.pendingDone(nonce) && Boolean(opts.signal?.aborted);
    if (!this.pendingDone(nonce)) {
      timedOut = true;
      const wm = this.pending?.watermark;
      if (wm !== undefined) {
        await this.supervisor.killAbove(wm, this.pid);
        await Promise.race([ended, sleep(3000)]);
      }
      if (!this.pendingDone(nonce)) {
        // The shell itself is stuck (a builtin loop, or it lost its stdout): replace it.
        this.pending = undefined;
        await this.restartNow();
        restarted = true;
      }
    }
    // Output held back while looking for a marker that never came (the shell died or was replaced).
    if (pending.phase === "output" && pending.buf.length && exitCode === null) out.push(pending.buf);
    this.pending = undefined;
    let output = out.text();
    if (reclaimed) output = `[patchbay: ${reclaimed} background processes held the sandbox's process limit; they were killed before this command ran]\n${output}`;
    const durationMs = Date.now() - started;
    const shellExited = (exitCode === null || Boolean(pending.shellExited)) && !timedOut;
    if (shellExited) output += `${output ? "\n" : ""}[patchbay: the shell exited; a fresh shell (cwd and environment reset) starts with the next command]`;
    return { output, exitCode: exitCode ?? (timedOut ? 124 : 255), timedOut: timedOut && !aborted, ...(aborted ? { aborted } : {}), truncated: out.truncated, durationMs, ...(restarted ? { shellRestarted: true } : {}), ...(shellExited ? { shellExited } : {}) };
  }

  private pendingDone(nonce: string): boolean {
    return this.pending?.nonce !== nonce;
  }

  private onData(chunk: Buffer): void {
    const p = this.pending;
    if (!p) return; // output of background jobs between commands
    let buf = p.buf.length ? Buffer.concat([p.buf, chunk]) : chunk;
    if (p.phase === "start") {
      const marker = `PBSTART${p.nonce}:`;
      const i = buf.indexOf(marker);
      const nl = i >= 0 ? buf.indexOf(10, i) : -1;
      if (nl < 0) {
        p.buf = Buffer.from(buf.subarray(Math.max(0, buf.length - 4096)));
        return;
      }
      p.watermark = Number(buf.subarray(i + marker.length, nl).toString("latin1"));
      p.phase = "output";
      buf = buf.subarray(nl + 1);
    }
    let marker = Buffer.from(`\nPBEND${p.nonce}:`);
    let i = buf.indexOf(marker);
    const exit = Buffer.from(`\nPBEXIT${this.session}:`);
    const j = buf.indexOf(exit);
    if (j >= 0 && (i < 0 || j < i)) {
      // The command ended the shell (exit, exec, set -e): report its status, replace it next time.
      [marker, i] = [exit, j];
      p.shellExited = true;
    }
    if (i < 0) {
      // Hold back what could be the start of a marker split across chunks.
      const keep = Math.min(buf.length, marker.length + 16);
      p.out.push(buf.subarray(0, buf.length - keep));
      p.buf = Buffer.from(buf.subarray(buf.length - keep));
      return;
    }
    const nl = buf.indexOf(10, i + marker.length);
    if (nl < 0) {
      p.out.push(buf.subarray(0, i));
      p.buf = Buffer.from(buf.subarray(i));
      return;
    }
    p.out.push(buf.subarray(0, i));
    if (p.shellExited) this.proc?.destroy();
    p.finish(Number(buf.subarray(i + marker.length, nl).toString("latin1")));
  }
}

