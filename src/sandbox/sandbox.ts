// The public Sandbox: a disposable box (a hardened container, made by a backend: src/backend/) with
// a persistent shell, its supervisor, file access and the worker's own commands. The same for
// every backend: it asks of the box only to start processes, say whether it runs, and go.
import { count } from "../core/count.js";
import type { Readable, Writable } from "node:stream";
import { asset } from "../core/assets.js";
import { defaults } from "../core/config/config.js";
import { HeadTail } from "../core/truncate.js";
import { isRoot, PRIVATE_DIR, type Attached, type Box, type Backend } from "../backend/types.js";
import { startEgressBridge, type EgressBridge } from "./egress.js";
import { FileAgent, StreamSourceError } from "./file-agent.js";
import { Files } from "./files.js";
import { Liveness } from "./liveness.js";
import { HelperBox } from "./helper.js";
import { defaultLimits, makeBareBox, type BareBox } from "./bare-box.js";
import { Shell } from "./shell.js";
import { extractTarStream, StreamUnavailable, TAR_EXTRACT } from "./stream.js";
import { kinded } from "../core/errors.js";
import { AGENT_GID, AGENT_UID, AGENT_USER } from "../backend/agent-user.js";
import type { ExecOptions, ExecResult, PutFile, SandboxOptions, SpawnOptions } from "./sandbox-options.js";
import type { KillOptions, RunOptions } from "./shell.js";

export type { ExecOptions, ExecResult, PutFile, SandboxOptions, SpawnOptions };
export { defaultLimits, makeBareBox, type BareBox };

/** Sandbox.exportTar's output passed its bound: what the repo (and its setup) put there is too large. */
export class TarTooLargeError extends kinded("repo") {}

function checkPut(put: PutFile[]): PutFile[] {
  for (const f of put) {
    if (!f.path.startsWith(`${PRIVATE_DIR}/`) || /(^|\/)\.\.?(\/|$)/.test(f.path) || /["$`\\\n]/.test(f.path))
      throw new Error(`Sandbox.exec: put path not allowed: ${JSON.stringify(f.path)}`);
  }
  return put;
}

// tar present (exit 4: but head is not GNU's; 3: no tar).
const TOOLS_PROBE = asset("sandbox/sh/tools-probe.sh");
// The files of `put` split off a docker exec's stdin (where the file agent cannot run them).
const PUT_FILES = asset("sandbox/sh/put-files.sh");

/**
 * A disposable box with patchbay's helper, shell, supervisor and file agent in it: made by
 * Sandbox.create, used through its shell, files and exec, and removed by destroy.
 */
export class Sandbox {
  private destroyed?: Promise<void>;
  /** Execs still attached: a call given up on (its container seen stopped) leaves its stream open, closed on destroy. */
  private readonly attached = new Set<Attached>();
  /** Whether the file agent can run tar, and whether the image's head is GNU's (asked once). */
  private agentTools?: Promise<{ tar: boolean; gnuHead: boolean }>;
  /** When the reaper may remove it whatever its owner (epoch seconds). */
  deadline = 0;

  private constructor(
    readonly name: string,
    /** What runs it; job code never needs it (everything goes through the methods below). */
    readonly box: Box,
    private readonly backend: Backend,
    readonly shell: Shell,
    readonly files: Files,
    private readonly agent: FileAgent,
    /** Fails every wait on the container once it is seen stopped (see liveness.ts). */
    readonly liveness: Liveness,
  ) {}

  /**
   * Makes a box on the backend and starts its shell and file agent; destroy it when done. With
   * `bare`, a box made ahead (makeBareBox: the warm pool's) is the one finished instead.
   */
  static async create(opts: SandboxOptions = {}, bare?: BareBox): Promise<Sandbox> {
    const { name, made, backend, deadline, limits } = bare ?? (await makeBareBox(opts));
    // Every process of the sandbox under one helper, on one exec (helper.ts), where processes run.
    const box = backend.simulated ? made : new HelperBox(made);
    const liveness = new Liveness(box);
    const agent = new FileAgent(box, { liveness });
    const shell = new Shell(box, { liveness, pidsLimit: limits.pids, keep: () => (agent.pid ? [agent.pid] : []) });
    const sandbox = new Sandbox(name, box, backend, shell, new Files(box, agent), agent, liveness);
    sandbox.deadline = deadline;
    try {
      // The file agent may be unable to run (an image without python3): files then use the archive API.
      await Promise.all([shell.start(), agent.start()]);
    } catch (err) {
      await sandbox.destroy();
      throw err;
    }
    return sandbox;
  }

  /**
   * Runs argv in a fresh exec (not the agent's shell), e.g. git for the patch. stdin is
   * closed after `stdin` is written; stdout is bounded by `maxBytes` (the rest is cut and flagged).
   */
  exec(argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
    return this.liveness.guard(this.execNow(argv, opts));
  }

  private async execNow(argv: string[], opts: ExecOptions): Promise<ExecResult> {
    const max = opts.maxBytes ?? 64 * 1024 * 1024;
    const put = checkPut(opts.put ?? []);
    // Through the file agent where it can (no docker exec, no runc start); docker exec otherwise.
    const ids = /^(\d+):(\d+)$/.exec(opts.user ?? AGENT_USER);
    // The agent's HOME for its commands; a root command's environment is the trusted one (backend/types.ts TRUSTED_ENV).
    const env = isRoot(opts.user) ? (opts.env ?? []) : ["HOME=/home/agent", ...(opts.env ?? [])];
    if (ids) {
      const stdin = opts.stdin === undefined ? undefined : Buffer.from(opts.stdin);
      const r = await this.agent.run(argv, {
        uid: Number(ids[1]),
        gid: Number(ids[2]),
        cwd: opts.cwd ?? "/workspace",
        env,
        stdin,
        timeoutSec: opts.timeoutSec ?? 300,
        maxBytes: max,
        put,
      });
      if (r) return r;
    }
    if (put.length) {
      // Without the agent: split off stdin by GNU head in the container (exact byte counts).
      argv = [
        "bash",
        "-c",
        PUT_FILES,
        "put",
        String(put.length),
        ...put.flatMap((f) => [String(f.data.length), f.path]),
        ...argv,
      ];
      opts = { ...opts, stdin: Buffer.concat([...put.map((f) => f.data), Buffer.from(opts.stdin ?? "")]) };
    }
    const out: Buffer[] = [];
    let outLen = 0;
    let truncated = false;
    const err = new HeadTail(8192);
    const cmd = ["timeout", "-s", "KILL", String(opts.timeoutSec ?? 300), ...argv];
    const proc = await this.box.attach(
      cmd,
      (chunk, stream) => {
        if (stream === 2) return err.push(chunk);
        if (outLen + chunk.length > max) {
          truncated = true;
          chunk = chunk.subarray(0, Math.max(0, max - outLen));
        }
        out.push(Buffer.from(chunk));
        outLen += chunk.length;
      },
      { user: opts.user, cwd: opts.cwd, env },
    );
    this.attached.add(proc);
    if (opts.stdin !== undefined) proc.write(opts.stdin);
    proc.endInput();
    await proc.ended;
    this.attached.delete(proc);
    return { stdout: Buffer.concat(out), stderr: err.text(), exitCode: await proc.exitCode(), truncated };
  }

  /**
   * Starts a long-lived process as the agent's uid in /workspace with its stdio attached (an MCP
   * server): its output goes to `onData`, and it goes with the sandbox.
   */
  async spawn(
    argv: string[],
    onData: (chunk: Buffer, stream: 1 | 2) => void,
    opts: SpawnOptions = {},
  ): Promise<Attached> {
    const proc = await this.box.attach(argv, onData, { env: ["HOME=/home/agent", ...(opts.env ?? [])] });
    this.attached.add(proc);
    void proc.ended.then(
      () => this.attached.delete(proc),
      () => this.attached.delete(proc),
    );
    return proc;
  }

  /**
   * Runs a command in a fresh `bash --noprofile --norc` as the agent's uid, in /workspace, with the
   * image's environment only: nothing of the agent's shell (functions, variables, traps) applies,
   * and the exit code is the engine's, not a marker the agent could print. Used for verify.
   * Aborting kills every process of the agent's uid, this command included.
   */
  async runFresh(
    command: string,
    opts: RunOptions = {},
  ): Promise<{ output: string; exitCode: number; timedOut: boolean; aborted: boolean; truncated: boolean }> {
    const out = new HeadTail(opts.maxOutputBytes ?? defaults.shell.maxOutputBytes);
    const cmd = [
      "timeout",
      "-s",
      "KILL",
      String(opts.timeoutSec ?? defaults.shell.timeoutSec),
      "bash",
      "--noprofile",
      "--norc",
      "-c",
      `exec 2>&1 </dev/null\n${command}`,
    ];
    // Cut in the box where the backend can (OutputCut): only what `out` keeps leaves it.
    const proc = await this.box.attach(cmd, (chunk) => out.push(chunk), {
      env: ["HOME=/home/agent"],
      cut: { head: out.headLimit, tail: out.limit - out.headLimit, onCut: (n) => out.skip(n) },
    });
    this.attached.add(proc);
    proc.endInput();
    let aborted = false;
    const onAbort = () => {
      aborted = true;
      void this.shell.killAgent();
    };
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      await this.liveness.guard(proc.ended);
    } finally {
      opts.signal?.removeEventListener("abort", onAbort);
      if (!proc.alive) this.attached.delete(proc);
    }
    const exitCode = await proc.exitCode();
    // timeout(1) exits 124 when it had to kill the command.
    return { output: out.text(), exitCode, timedOut: exitCode === 124 && !aborted, aborted, truncated: out.truncated };
  }

  /**
   * Streams a tar of `dir` (everything in it: read as root, sparse files kept sparse) into `dest`
   * on the host, with backpressure; resolves to its size. Over `maxBytes` it is stopped and fails.
   */
  async exportTar(dir: string, dest: Writable, maxBytes: number): Promise<number> {
    let bytes = 0;
    let over = false;
    let waiting = false; // for the destination's drain
    const err = new HeadTail(4096);
    const written = new Promise<void>((resolve, reject) => (dest.once("finish", resolve), dest.once("error", reject)));
    written.catch(() => {});
    const cmd = ["timeout", "-s", "KILL", "600", "tar", "-C", dir, "-c", "-S", "-f", "-", "."];
    const proc: Attached = await this.box.attach(
      cmd,
      (chunk, stream) => {
        if (stream === 2) return err.push(chunk);
        if (over) return;
        if ((bytes += chunk.length) > maxBytes) {
          over = true;
          return proc.destroy();
        }
        if (!dest.write(chunk) && !waiting) {
          waiting = true;
          proc.pause();
          dest.once("drain", () => ((waiting = false), proc.resume()));
        }
      },
      { user: "0:0", cwd: "/" },
    );
    this.attached.add(proc);
    proc.endInput();
    try {
      await this.liveness.guard(proc.ended);
    } finally {
      this.attached.delete(proc);
      dest.end();
    }
    await written;
    if (over) throw new TarTooLargeError(`${dir} is over ${count(maxBytes, "byte")} as a tar`);
    const exitCode = await proc.exitCode();
    if (exitCode !== 0) throw new Error(`tar of ${dir} failed (exit ${exitCode}): ${err.text().trim().slice(-400)}`);
    return bytes;
  }

  /**
   * Asks the image, once, what the load through the file agent needs: tar, and GNU head (see splitsStdin). Three
   * processes: a warm sandbox does it while it waits (the worker's pool `prepare`).
   */
  probeTools(): Promise<{ tar: boolean; gnuHead: boolean }> {
    return (this.agentTools ??= this.agent
      .run(["bash", "-c", TOOLS_PROBE], { uid: AGENT_UID, gid: AGENT_GID, cwd: "/", timeoutSec: 30, maxBytes: 4096 })
      .then(
        (r) => ({ tar: r?.exitCode === 0 || r?.exitCode === 4, gnuHead: r?.exitCode === 0 }),
        () => ({ tar: false, gnuHead: false }),
      ));
  }

  /**
   * Extracts a tar stream into `dir` through tar in an exec, as the agent's uid. Resolves false,
   * with the stream untouched, when the image has no tar (use files.putArchive then).
   */
  async putTarStream(dir: string, archive: Readable): Promise<boolean> {
    // Through the file agent when it can run commands and the image has tar (asked first: the
    // archive must stay untouched for the fallbacks).
    void this.probeTools(); // never rejects: a failed probe is "no tar"
    if (this.agentTools && (await this.agentTools).tar) {
      const tar = [...TAR_EXTRACT, dir];
      let r: Awaited<ReturnType<FileAgent["run"]>>;
      try {
        r = await this.liveness.guard(
          this.agent.run(tar, {
            uid: AGENT_UID,
            gid: AGENT_GID,
            cwd: "/",
            stream: archive,
            timeoutSec: 600,
            maxBytes: 64 * 1024,
          }),
        );
      } catch (err) {
        throw err instanceof StreamSourceError ? err.source : err;
      }
      if (!r) throw new Error(`extracting the repo into ${dir} failed: the sandbox's file agent stopped`);
      if (r.exitCode !== 0)
        throw new Error(
          `extracting the repo into ${dir} failed (tar exit ${r.exitCode}): ${r.stderr.trim().slice(-600)}`,
        );
      return true;
    }
    try {
      await this.liveness.guard(extractTarStream(this.box, dir, archive));
      return true;
    } catch (err) {
      if (err instanceof StreamUnavailable) return false;
      throw err;
    }
  }

  /**
   * Whether a command's stdin can be split with `head -c` (GNU head reads no further than asked;
   * busybox's may): known once a repo was loaded through the file agent, else false.
   */
  async splitsStdin(): Promise<boolean> {
    return !!this.agentTools && (await this.agentTools).gnuHead;
  }

  /** Kills every process of the agent's uid (see Shell.killAgent); resolves to how many. */
  killAgentProcesses(opts: KillOptions = {}): Promise<number> {
    return this.shell.killAgent(opts);
  }

  /** Whether its container runs now (asked of the engine; false when the engine cannot say). */
  running(): Promise<boolean> {
    return this.stopped().then((why) => why === undefined);
  }

  /** Why the sandbox is not running, in words for a job's error; undefined while it runs. */
  async stopped(): Promise<string | undefined> {
    const s = await this.box.state().catch(() => undefined);
    if (s?.running) return undefined;
    if (!s) return "the engine did not answer about the sandbox's container";
    return s.exitCode === undefined
      ? "the sandbox's container is gone"
      : `the sandbox's container stopped (exit code ${s.exitCode})`;
  }

  /** The setup phase's path out (see egress.ts): a bridge from a loopback port to the mounted socket. */
  bridgeEgress(maxConnections: number): Promise<EgressBridge> {
    return startEgressBridge(this.box, maxConnections);
  }

  /** False once destroyed, seen stopped, or once its shell's or file agent's connection dropped (a warm sandbox not worth handing out). */
  get alive(): boolean {
    return !this.destroyed && !this.liveness.gone && this.shell.alive && this.agent.alive;
  }

  /** Removes the container and its volume. Idempotent; safe to call concurrently. */
  destroy(): Promise<void> {
    this.destroyed ??= (async () => {
      this.shell.close();
      this.agent.close();
      for (const proc of this.attached) proc.destroy();
      this.attached.clear();
      if (this.box instanceof HelperBox) this.box.close();
      await this.backend.remove(this.name);
    })();
    return this.destroyed;
  }
}
