// One attached exec per sandbox: every process patchbay starts in a box (the agent's shell, the
// supervisor, the file agent, verify's bash, a snapshot's tar, an MCP server) is a child of the
// in-sandbox helper (py/helper.py, framing in helper-protocol.ts), its stdio a channel of the
// helper's one stream. A `docker exec` costs the engine ~55-60 core-ms (runc, the shim, dockerd);
// three or more per job were a fifth of its CPU. HelperBox is a Box over a backend's box: the
// shell, supervisor and file agent run on it unchanged. If the helper's exec ends (the OOM killer,
// a stopped container), its processes' streams end with it and the next start makes a new one.
import { count } from "../core/count.js";
import { asset } from "../core/assets.js";
import type { Attached, Box, BoxState, OutputCut, ProcessOptions } from "../backend/types.js";
import { AGENT_USER } from "../backend/agent-user.js";
import { pipeGathered } from "../backend/gather.js";
import { startHelper } from "./supervisor.js";
import {
  CHUNK,
  countFrame,
  countOf,
  CUT_MAX,
  cutFrame,
  cutOf,
  exitOf,
  frame,
  FrameReader,
  spawnFrame,
  WINDOW,
  type Frame,
  type SpawnRequest,
} from "./helper-protocol.js";
import { HeadTail } from "../core/truncate.js";
import { withTrustedRule } from "./trusted.js";
import { kinded } from "../core/errors.js";

export const HELPER_SCRIPT = withTrustedRule(asset("sandbox/py/helper.py"));
const HELPER_ARGV = ["python3", "-I", "-S", "-B", "-u", "-c", HELPER_SCRIPT];
/** How long an exit status is waited for once a process's output ended (it may hold no pipe and run on). */
const EXIT_WAIT_MS = 5000;
/**
 * Stdin waiting in the worker for a process that does not read it (beyond the helper's WINDOW): a
 * write that finds more than this waiting for its process, or more than MAX_WAITING_JOB for all of
 * the sandbox's (one job's), ends that process with an error. A process with nothing waiting may
 * always be given one buffer (its caller holds it anyway: an exec's stdin).
 */
export const MAX_WAITING = 8 << 20;
export const MAX_WAITING_JOB = 64 << 20;
/** The same in writes (each costs its caller more than its bytes: an MCP answer is a few dozen). */
export const MAX_WAITING_WRITES = 8192;

/** A process's stdin passed its bound (MAX_WAITING): it was ended. */
export class StdinOverflowError extends kinded("sandbox-step") {}

/** A backend's box whose processes all run under one helper process. */
export class HelperBox implements Box {
  readonly name: string;
  readonly putArchive?: Box["putArchive"];
  private conn?: Promise<Connection>;
  private closed = false;

  constructor(private readonly inner: Box) {
    this.name = inner.name;
    if (inner.putArchive) this.putArchive = (tar, dir) => inner.putArchive!(tar, dir);
  }

  state(): Promise<BoxState | undefined> {
    return this.inner.state();
  }

  async attach(
    argv: string[],
    onData: (chunk: Buffer, stream: 1 | 2) => void,
    opts: ProcessOptions = {},
  ): Promise<Attached> {
    const conn = await this.connection();
    const cut = opts.cut && { head: Math.min(opts.cut.head, CUT_MAX), tail: Math.min(opts.cut.tail, CUT_MAX) };
    return conn.open(
      {
        argv,
        user: opts.user ?? AGENT_USER,
        env: opts.env ?? [],
        cwd: opts.cwd ?? "/workspace",
        ...(cut ? { cut } : {}),
        ...(opts.gate ? { gate: opts.gate } : {}),
      },
      onData,
      opts.cut?.onCut,
    );
  }

  /** The helper's pid in the box, once it runs (tests). */
  async helperPid(): Promise<number> {
    return (await this.connection()).pid;
  }

  /** Ends the helper's stream (its processes' pipes close); the box's removal does the rest. */
  close(): void {
    this.closed = true;
    void this.conn?.then(
      (c) => c.close(),
      () => {},
    );
  }

  private async connection(): Promise<Connection> {
    for (;;) {
      if (this.closed) throw new Error(`the sandbox ${this.name} is being removed`);
      const current = this.conn;
      if (current) {
        const c = await current.catch(() => undefined);
        if (c?.alive) return c;
        if (this.conn !== current) continue; // another caller began a new one meanwhile
      }
      // One start at a time; a failed one is tried again by the next caller.
      this.conn = Connection.start(this.inner);
      return this.conn;
    }
  }
}

/** The helper's stream: its channels by number. */
class Connection {
  private readonly channels = new Map<number, Channel>();
  private readonly reader = new FrameReader();
  private next = 1;
  private proc!: Attached;
  /** Stdin bytes waiting in the worker for all its processes (their Channel.queued). */
  waiting = 0;
  pid = 0;
  /** The helper's own stderr (a traceback), bounded: said by a start on a helper that is gone. */
  readonly stderr = new HeadTail(4096);

  static async start(box: Box): Promise<Connection> {
    const c = new Connection();
    const { proc, pid } = await startHelper(box, HELPER_ARGV, (b, stream) => c.onData(b, stream), {
      user: "0:0",
      cwd: "/",
    });
    [c.proc, c.pid] = [proc, pid];
    void proc.ended.then(() => c.lost());
    return c;
  }

  get alive(): boolean {
    return this.proc.alive;
  }

  /**
   * Frames sent in one tick of the worker go to the helper in one write (one wakeup of the engine's
   * stream and of the helper): a command's begin to the supervisor and its text to the shell, say.
   * process.nextTick runs after the promise callbacks queued meanwhile, so those are in it too.
   */
  send(buf: Buffer): void {
    if (this.out.push(buf) === 1) process.nextTick(() => this.flush());
  }

  private out: Buffer[] = [];

  private flush(): void {
    const bufs = this.out;
    this.out = [];
    this.proc.write(bufs.length === 1 ? bufs[0]! : Buffer.concat(bufs));
  }

  open(req: SpawnRequest, onData: (chunk: Buffer, stream: 1 | 2) => void, onCut?: (bytes: number) => void): Attached {
    if (!this.alive)
      throw new Error(
        `the sandbox's helper is gone${this.stderr.text().trim() ? `: ${this.stderr.text().trim().slice(-400)}` : ""}`,
      );
    const id = this.next++;
    const ch = new Channel(this, id, onData, onCut, req.gate !== undefined);
    this.channels.set(id, ch);
    this.send(spawnFrame(id, req));
    return ch;
  }

  forget(id: number): void {
    this.channels.delete(id);
  }

  close(): void {
    this.proc.destroy();
    this.lost();
  }

  private onData(b: Buffer, stream: 1 | 2): void {
    if (stream === 2) return this.stderr.push(b);
    let frames: Frame[];
    try {
      frames = this.reader.push(b);
    } catch {
      return this.close(); // it said what it never says: nothing more of it is believed
    }
    for (const f of frames) this.channels.get(f.channel)?.onFrame(f);
  }

  private lost(): void {
    for (const ch of this.channels.values()) ch.lost();
    this.channels.clear();
  }
}

/** A process under the helper, as an Attached: what Docker's attached exec offers, over frames. */
class Channel implements Attached {
  readonly ended: Promise<void>;
  private endedNow!: () => void;
  private readonly exit: Promise<number>;
  private exitNow!: (code: number) => void;
  private open = true;
  private outputEnded = false;
  private paused = false;
  /** Output held while paused, in order: bytes with their stream, or a count of bytes cut (a K frame). */
  private held: ([Buffer, 1 | 2] | number)[] = [];
  /** Output bytes delivered and not yet acknowledged to the helper. */
  private consumed = 0;
  /** Stdin bytes sent and not yet acknowledged, and what waits to be sent (null: the EOF). */
  private inFlight = 0;
  private queue: (Buffer | null)[] = [];
  private queued = 0;
  private drained: (() => void)[] = [];

  constructor(
    private readonly conn: Connection,
    private readonly id: number,
    private readonly onData: (chunk: Buffer, stream: 1 | 2) => void,
    private onCut?: (bytes: number) => void,
    /** Its end of the box's gate is at fd 9 (the helper gives every spawn that asks one). */
    readonly gate = false,
  ) {
    this.ended = new Promise((r) => (this.endedNow = r));
    this.exit = new Promise((r) => (this.exitNow = r));
  }

  get alive(): boolean {
    return this.open;
  }

  write(data: string | Buffer): void {
    if (!this.open) return;
    const b = typeof data === "string" ? Buffer.from(data) : data;
    if (
      this.queued > 0 &&
      (this.queued > MAX_WAITING || this.queue.length > MAX_WAITING_WRITES || this.conn.waiting > MAX_WAITING_JOB)
    )
      return this.overflow();
    for (let at = 0; at < b.length; at += CHUNK) this.queue.push(b.subarray(at, at + CHUNK));
    this.setQueued(this.queued + b.length);
    this.pump();
  }

  async send(data: Buffer): Promise<void> {
    this.write(data);
    if (this.open && this.queued > 0) await new Promise<void>((r) => this.drained.push(r));
    if (this.failure) throw new StdinOverflowError(this.failure);
  }

  failure?: string;

  /** Its stdin is not read and more waits for it than the bound: the process is ended, said by `failure`. */
  private overflow(): void {
    const what =
      this.queued > MAX_WAITING
        ? `${MAX_WAITING >> 20} MiB`
        : this.queue.length > MAX_WAITING_WRITES
          ? `${count(MAX_WAITING_WRITES, "write")}`
          : `${MAX_WAITING_JOB >> 20} MiB with the sandbox's other processes'`;
    this.failure = `it did not read its stdin: over ${what} waited for it, so it was ended`;
    this.destroy();
  }

  private setQueued(n: number): void {
    this.conn.waiting += n - this.queued;
    this.queued = n;
  }

  endInput(): void {
    if (!this.open) return;
    this.queue.push(null);
    this.pump();
  }

  pipeIn(source: AsyncIterable<Buffer | string>): Promise<void> {
    return pipeGathered(
      source,
      (b) => this.send(b),
      () => this.open,
      () => this.endInput(),
    );
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    while (!this.paused && this.held.length) {
      const next = this.held.shift()!;
      if (typeof next === "number") this.onCut?.(next);
      else this.deliver(...next);
    }
    if (!this.paused && this.outputEnded) this.end();
  }

  destroy(): void {
    if (!this.open && this.outputEnded) return;
    if (this.open) this.conn.send(frame("C", this.id));
    this.conn.forget(this.id);
    this.held = [];
    this.end();
    this.exitNow(-1);
  }

  exitCode(): Promise<number> {
    return Promise.race([
      this.exit,
      this.ended.then(() => new Promise<number>((r) => setTimeout(r, EXIT_WAIT_MS, -1).unref())),
    ]);
  }

  onFrame(f: Frame): void {
    switch (f.kind) {
      case "O":
      case "e":
        if (this.paused || this.held.length) this.held.push([Buffer.from(f.body), f.kind === "O" ? 1 : 2]);
        else this.deliver(f.body, f.kind === "O" ? 1 : 2);
        return;
      case "K": {
        const n = cutOf(f) ?? 0;
        if (this.paused || this.held.length) this.held.push(n);
        else this.onCut?.(n);
        return;
      }
      case "a":
        this.inFlight = Math.max(0, this.inFlight - (countOf(f) ?? 0));
        return this.pump();
      case "Z":
        this.outputEnded = true;
        if (!this.paused && !this.held.length) this.end();
        return;
      case "X":
        this.exitNow(exitOf(f) ?? -1);
        this.conn.forget(this.id);
        return;
    }
  }

  /**
   * Cuts the output from now on in the helper (OutputCut): what passes the cut's bounds never
   * leaves the box, and `onCut` gets the count of what was cut, in order with the output.
   */
  cut(c: OutputCut): void {
    if (!this.open) return;
    this.onCut = c.onCut;
    // Sent with the stdin that follows it in the same turn (a command's text), in one write to the
    // helper's stream: one wakeup of the helper, not two, per command.
    const first = this.cutPending === undefined;
    this.cutPending = cutFrame(this.id, c);
    if (first)
      queueMicrotask(() => {
        if (this.cutPending && this.open) this.conn.send(this.cutPending);
        this.cutPending = undefined;
      });
  }

  /** An L frame not yet sent: it goes out with the next stdin frame, or at the end of this turn. */
  private cutPending?: Buffer;

  /** The helper went: the stream is over, the status unknown. */
  lost(): void {
    this.outputEnded = true;
    this.held = [];
    this.end();
    this.exitNow(-1);
  }

  private deliver(b: Buffer, stream: 1 | 2): void {
    this.onData(b, stream);
    if ((this.consumed += b.length) >= CHUNK && this.open) {
      this.conn.send(countFrame("A", this.id, this.consumed));
      this.consumed = 0;
    }
  }

  private end(): void {
    this.open = false;
    this.queue = [];
    this.setQueued(0);
    this.endedNow();
    this.release();
  }

  private pump(): void {
    while (this.open && this.queue.length) {
      const head = this.queue[0]!;
      if (head === null) {
        this.conn.send(frame("E", this.id));
      } else {
        if (this.inFlight > 0 && this.inFlight + head.length > WINDOW) break;
        const data = frame("D", this.id, head);
        this.conn.send(this.cutPending ? Buffer.concat([this.cutPending, data]) : data);
        this.cutPending = undefined;
        this.inFlight += head.length;
        this.setQueued(this.queued - head.length);
      }
      this.queue.shift();
    }
    if (this.queued === 0) this.release();
  }

  private release(): void {
    for (const r of this.drained.splice(0)) r();
  }
}
