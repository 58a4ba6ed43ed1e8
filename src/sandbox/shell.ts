// One persistent bash per sandbox over one attached exec. Each command is framed by markers
// carrying an unguessable per-command nonce (shell-protocol.ts); its exit code follows the end
// marker. Docker cannot kill an exec, so timeouts are enforced from inside the container by the
// supervisor (supervisor.ts), which kills every process started since the command began.
import { count } from "../core/count.js";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { defaults } from "../core/config/config.js";
import { HeadTail } from "../core/truncate.js";
import type { Liveness } from "./liveness.js";
import type { Attached, Box } from "../backend/types.js";
import { EXIT_MARKER, findMarker, SHELL_INIT } from "./shell-protocol.js";
import { CAPTURE_STATE, parseShellState, startScript, STATE_MAX_BYTES, type ShellState } from "./shell-state.js";
import { startBash, Supervisor, type KillReport } from "./supervisor.js";
import { kinded } from "../core/errors.js";

/** How a command runs in the agent's shell (Shell.run) or a fresh one (Sandbox.runFresh). */
export interface RunOptions {
  /**
   * Seconds after which the command is killed (the result says timedOut).
   * @default 120
   */
  timeoutSec?: number;
  /**
   * Bytes of output kept (head + tail); the rest is counted and cut.
   * @default 30000
   */
  maxOutputBytes?: number;
  /** Aborting kills the command the way a timeout does (the result says aborted). */
  signal?: AbortSignal;
}

/** How Shell.killAgent and Sandbox.killAgentProcesses kill the agent's processes. */
export interface KillOptions {
  /**
   * Spares the idle shell and its state (cwd, env); otherwise the next command gets a fresh shell.
   * @default false
   */
  keepShell?: boolean;
}

/** What a command run in a shell did. */
export interface RunResult {
  /** Its stdout and stderr as one text, in arrival order: the head and tail of it past `maxOutputBytes`. */
  output: string;
  /** Its exit status (124 when its timeout killed it). */
  exitCode: number;
  /** Whether its timeout killed it. */
  timedOut: boolean;
  /** Stopped through RunOptions.signal (job timeout or cancellation). */
  aborted?: boolean;
  /** Whether output was cut to its head and tail. */
  truncated: boolean;
  /** How long it ran, in ms. */
  durationMs: number;
  /** Set when the shell had to be replaced: cwd, env and functions were reset. */
  shellRestarted?: boolean;
  /** Set when the shell ended under the command (an `exit`, or its container stopped). */
  shellExited?: boolean;
}

/** Output that arrives while no command runs (a background `yes`) is dropped up to this much; then the stream is paused until the next command. */
const IDLE_BYTES = 256 * 1024;
/** Output held while the supervisor checks a claimed shell exit; past it the stream is paused. */
const HOLD_BYTES = 1024 * 1024;

/** A command whose sandbox's container stopped: what it printed, and why it ended. */
function lostResult(why: string, started: number, out?: HeadTail): RunResult {
  const text = out?.text() ?? "";
  return {
    output: `${text}${text ? "\n" : ""}[patchbay: ${why}: the sandbox is lost]`,
    exitCode: 255,
    timedOut: false,
    truncated: out?.truncated ?? false,
    durationMs: Date.now() - started,
    shellExited: true,
  };
}

interface Pending {
  nonce: string;
  phase: "start" | "output";
  /** Bytes held back: what could be the start of a marker split across chunks (a few bytes). */
  buf: Buffer;
  shellExited?: boolean;
  /** The helper cuts this command's output in the box (Attached.cut). */
  cut: boolean;
  /**
   * A claim of the shell's exit was found false in this command: later ones are output (each
   * check is a supervisor round trip; a true exit still ends the shell's stream, with its status).
   */
  refuted?: boolean;
  /**
   * A claimed shell exit the supervisor is checking: the output from the claim on, held, with the
   * counts of bytes the helper cut in it where they fell.
   */
  checking?: { code: number; held: (Buffer | number)[]; bytes: number };
  out: HeadTail;
  /** The command's exit status once its end was read (null: the shell ended without one). */
  code: number | null;
  finish: (exitCode: number | null) => void;
}

/** A kill's targets outlived it: the sandbox's own state (the agent's doing), never retried elsewhere. */
export class SurvivorsError extends kinded("sandbox-step") {}

export interface ShellOptions {
  /** Fails every wait on the container once it is seen stopped. */
  liveness?: Liveness;
  /** The sandbox's pids limit (see Supervisor). */
  pidsLimit?: number;
  /** Pids no kill may touch although they run as the agent's uid: the file agent's under gVisor. */
  keep?: () => number[];
}

/**
 * The agent's persistent bash in a sandbox: one command at a time, its cwd, variables and functions
 * kept between commands, each command's output bounded and its exit status read back.
 */
export class Shell {
  private proc?: Attached;
  private pid = 0;
  private pending?: Pending;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly supervisor: Supervisor;
  private readonly liveness?: Liveness;
  private readonly keep: () => number[];
  /** Output dropped since the last command ended; past IDLE_BYTES the stream is paused. */
  private idleBytes = 0;
  /** Why the shell's stream is not read now: idle output, output held for an exit check. */
  private readonly holds = new Set<"idle" | "check">();
  /** What every fresh shell starts from (see quiesce): the image's environment and /workspace where unset. */
  private startState?: ShellState;

  constructor(
    private box: Box,
    opts: ShellOptions = {},
  ) {
    this.liveness = opts.liveness;
    this.keep = opts.keep ?? (() => []);
    this.supervisor = new Supervisor(box, opts.liveness, opts.pidsLimit);
  }

  /**
   * Starts the shell; called by Sandbox.create. The supervisor starts with the first command, or
   * earlier through supervised() (a job calls it once its repo is in, a warm pool while it waits):
   * off the sandbox's path to ready either way.
   */
  async start(): Promise<void> {
    await this.spawn();
  }

  /** Starts the supervisor unless it runs; resolves once it does (see start). */
  supervised(): Promise<void> {
    return this.supervisor.ensure();
  }

  private async spawn(): Promise<void> {
    const init = SHELL_INIT + (this.startState ? startScript(this.startState) : "");
    const { proc, pid } = await startBash(this.box, init, (b) => this.onData(b), { gate: "read" });
    this.proc = proc;
    this.pid = pid;
    this.holds.clear();
    this.idleBytes = 0;
    void proc.ended.then(async () => {
      if (this.proc !== proc || !this.pending) return;
      // The exec's stream ended (the engine's word, not the shell's): a claimed exit is true.
      const p = this.pending;
      if (p.checking) {
        p.shellExited = true;
        return p.finish(p.checking.code);
      }
      // No claim was seen (it may have been cut in the box with the output around it): the
      // shell's own status, as the helper reaped it.
      const code = await proc.exitCode();
      if (this.pending !== p) return;
      if (p.phase === "output" && p.buf.length && !p.checking) p.out.push(p.buf); // held for a marker that never came
      p.buf = Buffer.alloc(0);
      if (code >= 0) p.shellExited = true;
      p.finish(code >= 0 ? code : null);
    });
  }

  /** The shell's connection is up (it is replaced on the next command otherwise). */
  get alive(): boolean {
    return Boolean(this.proc?.alive);
  }

  /** Runs one command in the persistent shell. Commands are serialised. */
  run(command: string, opts: RunOptions = {}): Promise<RunResult> {
    return this.serial(() => this.runNow(command, opts));
  }

  /** A fresh shell: every process of the agent is killed, cwd and env start over. */
  restart(): Promise<void> {
    return this.serial(() => this.restartNow());
  }

  /** Ends the shell and its supervisor's connection (the sandbox's destroy does). */
  close(): void {
    this.proc?.destroy();
    this.supervisor.close();
  }

  /**
   * Kills every process of the agent (uid 1000), atomically, and waits until they are dead: e.g.
   * before the patch, so nothing the agent left running can change files under it. With
   * `keepShell` the idle shell and its state (cwd, env) survive; otherwise the next command gets a
   * fresh shell. Resolves to how many processes were killed; rejects if any survived.
   */
  killAgent(opts: KillOptions = {}): Promise<number> {
    return this.serial(async () => {
      if (opts.keepShell && this.proc?.alive)
        return this.killed(await this.supervisor.kill("others", this.pid, this.keep()));
      return this.killed(await this.killAllThenDrop());
    });
  }

  /**
   * The running shell's working directory and exported variables, as data (shell-state.ts);
   * undefined where it gives no well-formed answer within `timeoutSec` (a shell the repo took over).
   */
  async captureState(timeoutSec = 10): Promise<ShellState | undefined> {
    const r = await this.run(CAPTURE_STATE, { timeoutSec, maxOutputBytes: STATE_MAX_BYTES * 2 });
    if (r.timedOut || r.truncated || r.shellRestarted || r.shellExited) return undefined;
    return parseShellState(r.output);
  }

  /**
   * A quiet window (after setup): every process of the agent's uid is killed, the shell and the
   * kept ones (the file agent under gVisor) included, and confirmed dead; `read` runs while none
   * can start (no command or restart of this shell comes between: they wait in this queue; the
   * agent's tools wait for the job's `loaded`; only `read`'s own steps run as the uid, ended by its
   * end); then none may be alive (else SurvivorsError), and only then does a fresh shell start,
   * from `next` (see shell-state.ts) as every later one does.
   */
  quiesce<T>(read: () => Promise<T>, next?: ShellState): Promise<T> {
    return this.serial(async () => {
      this.startState = next;
      try {
        this.killed(await this.supervisor.kill("all", 0, []));
      } finally {
        this.proc?.destroy();
        this.proc = undefined;
      }
      const out = await read();
      const after = await this.supervisor.kill("all", 0, this.keep());
      if (after.killed)
        throw new SurvivorsError(
          `${count(after.killed, "process", "processes")} of the agent's uid were alive after the workspace was read, where none may run`,
        );
      await this.spawn();
      return out;
    });
  }

  private killed(r: KillReport): number {
    if (r.left > 0)
      throw new SurvivorsError(
        `${r.left} of the agent's processes were still alive 5 s after SIGKILL (uninterruptible sleep?)`,
      );
    return r.killed;
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /**
   * The agent's uid killed in one pass (root's init and our helpers survive), then the shell's
   * stream closed. Not the other way round: a shell that read EOF would exit ahead of the kill, and
   * a process watching for its parent to go (a zombie leader's live thread) would write in between.
   */
  private async killAllThenDrop(): Promise<KillReport> {
    try {
      return await this.supervisor.kill("all", 0, this.keep());
    } finally {
      this.proc?.destroy();
      this.proc = undefined;
    }
  }

  private async restartNow(): Promise<void> {
    this.killed(await this.killAllThenDrop());
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
    // that this command could not even fork: they are killed, and the output says so. Then the
    // supervisor notes what runs before this command: a timeout kills only what came after. Where
    // the box has a gate (helper.py), the begin goes with the command and the shell waits for the
    // begin's token before it reads the command: one round trip. Elsewhere the begin comes first.
    const nonce = randomBytes(16).toString("hex");
    await this.supervisor.ensure().catch(() => {}); // a start that fails is tried again by the begin, and said there
    const gated = this.proc?.gate === true && this.supervisor.gated;
    const begun = this.supervisor.begin(this.pid, this.keep(), gated ? nonce : undefined);
    // A begin that failed never opens the gate: the shell waiting for it is ended, as one whose
    // begin failed before its command was sent would be unused (the error is the command's).
    if (gated) begun.catch(() => this.proc?.destroy());
    let reclaimed = gated ? 0 : await begun;
    const timeoutSec = opts.timeoutSec ?? defaults.shell.timeoutSec;
    const out = new HeadTail(opts.maxOutputBytes ?? defaults.shell.maxOutputBytes);
    const { pending, ended } = this.send(command, out, nonce, gated);

    const stop = await this.waitFor(ended, timeoutSec, opts.signal);
    if (stop.lost !== undefined && !this.pendingDone(nonce)) {
      if (pending.phase === "output" && pending.buf.length) out.push(pending.buf);
      if (pending.cut && out.total >= out.headLimit) out.skipUnknown();
      this.pending = undefined;
      this.proc?.destroy();
      this.proc = undefined;
      return lostResult(stop.lost, started, out);
    }
    const aborted = !this.pendingDone(nonce) && Boolean(opts.signal?.aborted);
    let timedOut = false;
    if (!this.pendingDone(nonce)) {
      timedOut = true;
      if (await this.stopTimedOut(pending, ended, () => pending.code)) restarted = true;
    }
    if (gated) reclaimed = await begun;
    // Output held back while looking for a marker that never came (the shell died or was replaced).
    const exitCode = pending.code;
    if (pending.phase === "output" && exitCode === null) {
      if (pending.buf.length) out.push(pending.buf);
      for (const b of pending.checking?.held ?? []) {
        if (typeof b === "number") out.skip(b);
        else out.push(b);
      }
      // The helper may hold a cut's count and tail it never sent: the shell was replaced first.
      if (pending.cut && out.total >= out.headLimit) out.skipUnknown();
    }
    this.pending = undefined;
    let output = timedOut || aborted ? withoutKillNotice(out.text()) : out.text();
    if (reclaimed)
      output = `[patchbay: ${count(reclaimed, "background process", "background processes")} held the sandbox's process limit; they were killed before this command ran]\n${output}`;
    const durationMs = Date.now() - started;
    const shellExited = (exitCode === null || Boolean(pending.shellExited)) && !timedOut;
    if (shellExited)
      output += `${output ? "\n" : ""}[patchbay: the shell exited; a fresh shell (cwd and environment reset) starts with the next command]`;
    return {
      output,
      exitCode: exitCode ?? (timedOut ? 124 : 255),
      timedOut: timedOut && !aborted,
      ...(aborted ? { aborted } : {}),
      truncated: out.truncated,
      durationMs,
      ...(restarted ? { shellRestarted: true } : {}),
      ...(shellExited ? { shellExited } : {}),
    };
  }

  /**
   * Sends one command to the shell, framed by its nonce's markers and its output cut in the box;
   * `ended` resolves once its end is read (its status then in `pending.code`).
   */
  private send(
    command: string,
    out: HeadTail,
    nonce: string,
    gated: boolean,
  ): { pending: Pending; ended: Promise<void> } {
    let pending!: Pending;
    const ended = new Promise<void>((resolve) => {
      this.pending = pending = {
        nonce,
        cut: this.proc?.cut !== undefined,
        phase: "start",
        buf: Buffer.alloc(0),
        out,
        code: null,
        finish: (c) => {
          if (this.pending?.nonce === nonce) this.pending = undefined;
          pending.code = c;
          resolve();
        },
      };
    });
    // What background processes wrote meanwhile comes first and is dropped before PBSTART.
    this.idleBytes = 0;
    this.release("idle");
    // The helper cuts the command's output in the box (OutputCut): its head passes, then only the
    // last bytes before the end marker are kept and the rest is counted. Output of any size costs
    // the worker, the engine's stream and the shim no more than `out` keeps; the reads and the
    // count are the box's own CPU.
    this.proc!.cut?.({
      head: out.headLimit,
      tail: out.limit - out.headLimit,
      start: Buffer.from(`PBSTART${nonce}:\n`),
      end: Buffer.from(`\nPBEND${nonce}:`),
      onCut: (n) => this.onCut(pending, n),
    });
    // A NUL ends the command text (bash strings cannot hold one); stdin is /dev/null so a command
    // that reads stdin gets EOF instead of eating the protocol. With the gate, __pb_pre first waits
    // for the begin's token; a shell that holds the gate's fd never lets a command have it.
    const text = command.replace(/\0/g, "");
    this.proc!.write(
      `__pb_pre ${nonce}${gated ? " gate" : ""}\n${text}\0__pb_exec </dev/null >&$__pb_fd 2>&$__pb_fd${this.proc!.gate ? " 9<&-" : ""}; __pb_post ${nonce} $?\n`,
    );

    return { pending, ended };
  }

  /**
   * A timed-out command's processes killed, and the shell replaced where it is stuck or the kill
   * ended it too; whether it was replaced.
   */
  private async stopTimedOut(pending: Pending, ended: Promise<void>, exitCode: () => number | null): Promise<boolean> {
    if (pending.phase === "output") {
      this.killed(await this.supervisor.kill("command", this.pid, this.keep()));
      const wait = new AbortController(); // no timer left behind once the command ended
      await Promise.race([ended, sleep(3000, undefined, { signal: wait.signal }).catch(() => {})]).finally(() =>
        wait.abort(),
      );
    }
    if (!this.pendingDone(pending.nonce)) {
      // The shell itself is stuck (a builtin loop, or it lost its stdout): replace it.
      this.pending = undefined;
      await this.restartNow();
      return true;
    }
    // A container that stopped meanwhile is not restarted here: the next command reports it lost.
    if ((exitCode() !== null && !pending.shellExited) || this.liveness?.gone) return false;
    // The kill ended the shell too: a non-interactive bash exits when a fork fails for good, and
    // the kill's SIGUSR1 ends its wait between fork retries (a fork bomb holding the pids limit).
    // Replaced now, so that this command's result says so, not the next one's.
    await this.restartNow();
    return true;
  }

  /**
   * Waits for the command to end, its timeout, the signal, or its container to stop (under gVisor
   * the shell's stream would not end): `lost` says why the container is gone.
   */
  private async waitFor(ended: Promise<void>, timeoutSec: number, signal?: AbortSignal): Promise<{ lost?: string }> {
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const timeout = new Promise<void>((r) => (timer = setTimeout(r, timeoutSec * 1000)));
    const abort = new Promise<void>((r) => {
      onAbort = () => r();
      if (signal?.aborted) r();
      else signal?.addEventListener("abort", onAbort, { once: true });
    });
    let lost: string | undefined;
    let release!: () => void; // the wait on the container ends with this one (a timed-out command's `ended` never comes)
    const released = new Promise<void>((r) => (release = r));
    const gone = this.liveness
      ? this.liveness.guard(Promise.race([ended, released])).catch((err: Error) => void (lost = err.message))
      : new Promise<void>(() => {});
    await Promise.race([ended, timeout, abort, gone]);
    release();
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener("abort", onAbort);
    return { lost };
  }

  private pendingDone(nonce: string): boolean {
    return this.pending?.nonce !== nonce;
  }

  private hold(why: "idle" | "check"): void {
    if (!this.holds.size) this.proc?.pause();
    this.holds.add(why);
  }

  private release(why: "idle" | "check"): void {
    if (this.holds.delete(why) && !this.holds.size) this.proc?.resume();
  }

  /** Output while no command runs: dropped, and past IDLE_BYTES the stream is paused (the writers block). */
  private idle(chunk: Buffer): void {
    this.idleBytes += chunk.length;
    if (this.idleBytes > IDLE_BYTES) this.hold("idle");
  }

  /**
   * The helper cut `n` bytes of the command's output here: what was held back for a marker is
   * output, and the count goes between the head and the tail (HeadTail.skip).
   */
  private onCut(p: Pending, n: number): void {
    if (this.pending !== p || p.phase !== "output") return;
    if (p.checking) return void p.checking.held.push(n);
    if (p.buf.length) p.out.push(p.buf);
    p.buf = Buffer.alloc(0);
    p.out.skip(n);
  }

  private onData(chunk: Buffer): void {
    const p = this.pending;
    if (!p) return this.idle(chunk);
    if (p.checking) {
      // Held until the supervisor says whether the shell really exited; a flood meanwhile pauses the stream.
      p.checking.held.push(Buffer.from(chunk));
      if ((p.checking.bytes += chunk.length) > HOLD_BYTES) this.hold("check");
      return;
    }
    let buf = p.buf.length ? Buffer.concat([p.buf, chunk]) : chunk;
    if (p.phase === "start") {
      const marker = `PBSTART${p.nonce}:\n`;
      const i = buf.indexOf(marker);
      if (i < 0) {
        p.buf = Buffer.from(buf.subarray(Math.max(0, buf.length - marker.length)));
        return;
      }
      p.phase = "output";
      buf = buf.subarray(i + marker.length);
    }
    const end = findMarker(buf, Buffer.from(`\nPBEND${p.nonce}:`));
    const exit = p.refuted ? undefined : findMarker(buf, EXIT_MARKER);
    const first = end && exit ? (exit.at < end.at ? exit : end) : (end ?? exit);
    if (!first) {
      // Hold back what could be the start of a marker split across chunks.
      const keep = Math.min(buf.length, Math.max(EXIT_MARKER.length, p.nonce.length + 7) + 4);
      p.out.push(buf.subarray(0, buf.length - keep));
      p.buf = Buffer.from(buf.subarray(buf.length - keep));
      return;
    }
    p.out.push(buf.subarray(0, first.at));
    if (first.code === undefined) {
      p.buf = Buffer.from(buf.subarray(first.at)); // a marker's first bytes: at most a few
      return;
    }
    p.buf = Buffer.alloc(0);
    if (first === end) return p.finish(first.code);
    this.checkExit(p, first.code, buf.subarray(first.at));
  }

  /**
   * The shell says it is exiting (its EXIT trap): believed only once the supervisor sees its pid
   * dead. A command that prints the same line is shown as output and the command goes on.
   */
  private checkExit(p: Pending, code: number, rest: Buffer): void {
    p.checking = { code, held: [Buffer.from(rest)], bytes: rest.length };
    const pid = this.pid;
    void this.supervisor
      .dead(pid)
      .catch(() => false)
      .then((dead) => {
        if (this.pending !== p || !p.checking) return;
        const [claim, ...rest] = p.checking.held as [Buffer, ...(Buffer | number)[]];
        p.checking = undefined;
        this.release("check");
        if (dead && pid === this.pid) {
          p.shellExited = true;
          this.proc?.destroy();
          return p.finish(code);
        }
        p.refuted = true;
        // Not an exit: the claim is output, and what came after it is read again, in order.
        p.out.push(claim.subarray(0, EXIT_MARKER.length));
        const after = [claim.subarray(EXIT_MARKER.length), ...rest];
        for (const b of after) {
          if (this.pending !== p) return;
          if (typeof b === "number") this.onCut(p, b);
          else this.onData(b);
        }
      });
  }
}

/**
 * A non-interactive bash reports a foreground command killed by a signal on its stderr (here the
 * output): "main: line 25:    40 Killed                  sleep 60". After patchbay's own kill (a
 * timeout, an abort) that line is noise about the kill the result already states: the lines of it
 * that end the output are dropped.
 */
export function withoutKillNotice(output: string): string {
  // Line by line from the end, each line tested alone: the output is the agent's, and one pattern
  // over all of it (a repeated group anchored at the end) took exponential time in the number of
  // notice lines before a last line that is not one (22 lines: 8 s of the worker's event loop).
  let cut = output.length;
  for (;;) {
    const end = cut > 0 && output[cut - 1] === "\n" ? cut - 1 : cut;
    const start = output.lastIndexOf("\n", end - 1) + 1;
    if (end === start || !KILL_NOTICE.test(output.slice(start, end))) break;
    cut = Math.max(0, start - 1);
    if (cut === 0) break;
  }
  return output.slice(0, cut);
}

/** One line of bash's notice (see withoutKillNotice): no newline in it, so each test is linear. */
const KILL_NOTICE = /line \d+: +\d+ (?:Killed|Terminated)(?: .*)?$/;
