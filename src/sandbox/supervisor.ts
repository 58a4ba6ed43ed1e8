// The supervisor: a small root process per sandbox (python3, supervisor-script.ts) that kills the
// agent's processes (Docker cannot kill an exec), and the start of a helper on an attached exec that
// the shell (shell.ts) and the supervisor share.
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Attached, Box } from "../backend/types.js";
import type { Liveness } from "./liveness.js";
import { AGENT_UID } from "../backend/agent-user.js";
import { SUPERVISOR_SCRIPT } from "./supervisor-script.js";
import { kinded } from "../core/errors.js";

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
export function startBash(
  box: Box,
  init: string,
  onData: (b: Buffer, stream: 1 | 2) => void,
  o: { user?: string; gate?: "read" } = {},
) {
  return startHelper(box, BASH, onData, { ...o, env: ENV, init: `${init}builtin printf 'PBREADY:%s\\n' "$$"\n` });
}

/**
 * How long a helper's start may take before it is given up: a start takes well under a second, and
 * an engine that never answers an exec (rootless Podman's, once, on a loaded host) must fail the
 * start with a reason, not hold it for ever. The next caller starts it again.
 */
export const HELPER_START_MS = 60_000;

/** Starts `argv` on an attached exec (writing `init` to it) and waits for its `PBREADY:<pid>` line. */
export async function startHelper(
  box: Box,
  argv: string[],
  onData: (b: Buffer, stream: 1 | 2) => void,
  o: { user?: string; env?: string[]; cwd?: string; init?: string; startMs?: number; gate?: "read" | "write" },
) {
  let waiter: LineWaiter | undefined = new LineWaiter("PBREADY:");
  let started = false;
  const done = new AbortController(); // ends the check's wait with the start: no timer outlives it
  const startMs = o.startMs ?? HELPER_START_MS;
  const polled = (async () => {
    while (!started) {
      if (!(await sleep(1000, true, { signal: done.signal }).catch(() => false))) return undefined;
      const state = await box.state().catch(() => undefined);
      if (!started && state && !state.running)
        return `the sandbox's container stopped while its ${argv[0]} started (exit code ${state.exitCode ?? "unknown"})`;
    }
    return undefined;
  })();
  // Its own timer: a poll of the state waits on the same engine that may not answer.
  const late = sleep(startMs, true, { signal: done.signal }).then(
    () => `the sandbox's ${argv[0]} did not start within ${startMs / 1000} s: the engine did not answer its exec`,
    () => undefined,
  );
  const stopped = Promise.race([polled, late]);
  const fail = (why: string | undefined) =>
    Promise.reject(
      new Error(
        why ??
          `the sandbox's ${argv[0]} exited while starting (is the container running, and is ${argv[0]} in its image?)`,
      ),
    );
  const attaching = box.attach(argv, (b, stream) => (waiter ? waiter.feed(b) : onData(b, stream)), {
    env: o.env,
    user: o.user,
    cwd: o.cwd,
    ...(o.gate ? { gate: o.gate } : {}),
  });
  try {
    const proc = await Promise.race([attaching, stopped.then(fail)]);
    if (o.init) proc.write(o.init);
    const pid = await Promise.race([waiter.done, proc.ended.then(() => undefined), stopped]);
    if (pid === undefined || !/^\d+$/.test(pid)) {
      proc.destroy();
      return await fail(pid);
    }
    return { proc, pid: Number(pid) };
  } catch (err) {
    void attaching.then(
      (p) => p.destroy(),
      () => {},
    ); // an attach that comes after we gave up
    throw err;
  } finally {
    started = true;
    done.abort();
    waiter = undefined;
  }
}

/** Who a kill spares: `all` nothing but `keep`; `others` the shell too; `command` what started before the command began. */
export type KillMode = "all" | "others" | "command";

export interface KillReport {
  killed: number;
  /** Targets still alive after the supervisor's wait (uninterruptible sleep, say): never expected. */
  left: number;
}

export class Supervisor {
  private proc?: Attached;
  private starting?: Promise<void>;
  private waiter?: LineWaiter;
  private queue: Promise<unknown> = Promise.resolve();
  constructor(
    private box: Box,
    private liveness?: Liveness,
    /** The sandbox's pids limit: where the container shows no pids cgroup (gVisor), tasks are counted against it. */
    private pidsLimit = 0,
  ) {}

  /** Starts it unless it runs; one start at a time (the first request waits for one begun at the sandbox's start). */
  ensure(): Promise<void> {
    if (this.proc?.alive) return Promise.resolve();
    this.starting ??= this.startNow().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async startNow(): Promise<void> {
    const argv = ["python3", "-I", "-S", "-u", "-c", SUPERVISOR_SCRIPT, String(this.pidsLimit), String(AGENT_UID)];
    try {
      ({ proc: this.proc } = await startHelper(this.box, argv, (b) => this.waiter?.feed(b), {
        user: "0:0",
        cwd: "/",
        env: ["PYTHONDONTWRITEBYTECODE=1"],
        gate: "write",
      }));
    } catch (err) {
      // With the container running, the sandbox itself cannot start it: its memory or pids limit
      // is held (the agent's doing: memory in a memfd or tmpfs makes the OOM killer take a root
      // helper), or the image lacks python3. Nothing to retry elsewhere.
      if ((await this.box.state().catch(() => undefined))?.running)
        throw new SupervisorError(
          `the sandbox's supervisor could not start (is its memory or process limit exhausted? does the image have python3?): ${(err as Error).message}`,
        );
      throw err;
    }
  }

  /**
   * Before a command: when the agent's processes hold three quarters of the pids limit or more (a
   * fork bomb left running), kills all of them but `shell` and `keep`; then notes when this command
   * began (see kill's `command`), and with a `token` writes it to the box's gate, which lets the
   * shell run the command. Resolves to how many were killed.
   */
  async begin(shell: number, keep: number[] = [], token?: string): Promise<number> {
    const gate = token !== undefined && /^[0-9a-z]{1,64}$/i.test(token) ? ` ${token}` : "";
    return (await this.call(`begin %N ${shell} ${pidList(keep)}${gate}`)).killed;
  }

  /** It holds the write end of the box's gate (ProcessOptions.gate): a begin's token reaches the shell. */
  get gated(): boolean {
    return this.proc?.gate === true;
  }

  /**
   * Kills the agent's processes, atomically against fork (see supervisor-script.ts), and waits
   * for them to be dead: `all` but `keep`; `others` but `shell` and `keep`; `command` the ones
   * started since the last begin but `shell` and `keep`, after SIGUSR1 to `shell` (its trap
   * returns from the running command, so the rest of a list, `sleep 1000; echo never`, does not run).
   */
  kill(mode: KillMode, shell = 0, keep: number[] = []): Promise<KillReport> {
    return this.call(`kill %N ${mode} ${shell} ${pidList(keep)}`);
  }

  /** Whether `pid` is dead (or dies within a second). */
  async dead(pid: number): Promise<boolean> {
    return (await this.call(`dead %N ${pid}`)).killed === 1;
  }

  private call(line: string): Promise<KillReport> {
    // Once more after a failure: the agent can kill the supervisor in the moment it has the agent's
    // uid (see supervisor-script.ts); a new one then does the work. With no request under way it is
    // written at once, in the caller's tick: a begin goes to the helper before its command does.
    const run = () => this.callNow(line).catch(() => this.callNow(line));
    const next = this.calls === 0 ? run() : this.queue.then(run);
    this.calls++;
    this.queue = next.catch(() => undefined).finally(() => this.calls--);
    return next;
  }

  /** Requests not yet answered (each waits for the one before). */
  private calls = 0;

  private async callNow(line: string): Promise<KillReport> {
    {
      if (!this.proc?.alive) await this.ensure();
      const nonce = randomBytes(8).toString("hex");
      const waiter = (this.waiter = new LineWaiter(`PB${nonce} `));
      this.proc!.write(`${line.replace("%N", nonce)}\n`);
      // The 30 s limit's timer ends with the answer: a pending one would keep the process alive after the job (runJob in a script).
      const limit = new AbortController();
      const answer = Promise.race([
        waiter.done,
        this.proc!.ended.then(() => "-1 -1"),
        sleep(30_000, "-1 -1", { signal: limit.signal }).catch(() => "-1 -1"),
      ]);
      // A container that is gone has nothing left to kill.
      const a = await (this.liveness ? this.liveness.guard(answer).catch(() => "0 0") : answer).finally(() =>
        limit.abort(),
      );
      const [killed = -1, left = -1] = a.split(" ").map(Number);
      if (killed < 0 || left < 0) {
        // It died (or hung) under the request: the next request starts a new one.
        this.proc?.destroy();
        throw new SupervisorError(`the sandbox's supervisor did not answer "${line.split(" ")[0]}"`);
      }
      return { killed, left };
    }
  }

  close(): void {
    this.proc?.destroy();
  }
}

/** The supervisor died or hung under a request (it was given up; the next request starts a new one). */
export class SupervisorError extends kinded("sandbox-step") {}

const pidList = (pids: number[]) => pids.filter((p) => Number.isInteger(p) && p > 0).join(",") || "-";
