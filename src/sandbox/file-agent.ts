// A fast lane for small file operations: one persistent python3 process per sandbox over an
// attached exec, speaking JSON-line headers followed by raw bytes. It runs as root with the
// agent's file identity (setfsuid/setfsgid 1000): every file operation has exactly the agent's
// permissions, while the agent cannot signal it, trace it or write into its pipes. Python starts
// isolated (-I -S, cwd /) so nothing in /workspace is imported. Docker 20.10's archive
// API re-executes dockerd for every call (~38 ms each), which would make one str_replace cost
// >100 ms; through this channel it costs a few ms. The archive API stays the path for bulk
// transfers (loading a repo) and the fallback when the image has no python3.
import { defaults } from "../core/config/config.js";
import { gather } from "../backend/gather.js";
import type { Attached, Box } from "../backend/types.js";
import { AGENT_SCRIPT } from "./file-agent-script.js";
import {
  agentArgs,
  parseReply,
  PROTOCOL_VERSION,
  type AgentOp,
  type AgentFeature,
  type AgentReplyOf,
  type AgentRequest,
  type ErrorReply,
} from "./agent-protocol.js";
import { AGENT_GID, AGENT_UID } from "../backend/agent-user.js";
import type { Liveness } from "./liveness.js";
import { PatchbayError } from "../core/errors.js";

export { AGENT_SCRIPT };

/** The agent's program and its arguments (tests run variants of the script). */
export const agentArgv = (script = AGENT_SCRIPT) => [
  "python3",
  "-I",
  "-S",
  "-u",
  "-c",
  script,
  agentArgs(AGENT_UID, AGENT_GID),
];

/** A reply as framed: its header line (not yet checked against the request) and body. */
interface RawReply {
  header: Record<string, unknown>;
  body: Buffer;
}

/** A reply checked against its request's op: the reply, or the error the agent reported; the body either way. */
export type Answer<Op extends AgentOp> =
  { reply: AgentReplyOf<Op>; error?: undefined; body: Buffer } | { reply?: undefined; error: ErrorReply; body: Buffer };

/** What a command run through the agent gave: as Sandbox.exec's result. */
export interface AgentRun {
  stdout: Buffer;
  stderr: string;
  exitCode: number;
  truncated: boolean;
}

export interface RunOptions {
  uid: number;
  gid: number;
  cwd?: string;
  env?: string[];
  stdin?: Buffer;
  /** stdin as a stream, sent in frames as it is read (e.g. a repo's tar). */
  stream?: AsyncIterable<Buffer>;
  /** Files written before the command runs (see Sandbox.exec); not with `stream`. */
  put?: { path: string; data: Buffer }[];
  timeoutSec: number;
  maxBytes: number;
}

/** The stream given to FileAgent.run failed: the command saw its input end there. */
/** The stream given to write from failed (the repo's tar, say): of its own kind when it has one (a RepoError's is "repo"), else the host's. */
export class StreamSourceError extends PatchbayError {
  constructor(readonly source: unknown) {
    super(
      source instanceof PatchbayError ? source.kind : "infra",
      `the input stream failed: ${(source as Error)?.message ?? String(source)}`,
    );
  }
}

export interface FileAgentOptions {
  /** A request not answered in this time kills the agent (the caller falls back); default 60 s. */
  timeoutMs?: number;
  /** Replies announcing a longer body are a protocol violation; default the read limit + 1 MiB. */
  maxReplyBytes?: number;
  /** The program, for tests of a misbehaving agent. */
  argv?: string[];
  /** The sandbox's: a request to a container seen stopped fails at once (SandboxLostError). */
  liveness?: Liveness;
}

interface CallOptions {
  timeoutMs?: number;
  maxReplyBytes?: number;
  /** Sent after the header as [u32 length][bytes] frames, then a zero length. */
  frames?: AsyncIterable<Buffer>;
  /** Set once the request was written to a live agent. */
  sent?: { value: boolean };
}

export class FileAgent {
  private proc?: Attached;
  private starting?: Promise<boolean>;
  private chunks: Buffer[] = [];
  private buffered = 0;
  private header?: RawReply["header"];
  private waiter?: (r: RawReply | undefined) => void;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly timeoutMs: number;
  private readonly maxReplyBytes: number;
  private limit: number;
  private readonly argv: string[];
  private readonly liveness?: Liveness;
  /** False once the agent said it cannot run commands (not root: gVisor). */
  private canRun = true;
  /** What the running agent said in its hello it does beyond the protocol's first form (`has`). */
  private features = new Set<string>();

  constructor(
    private box: Box,
    opts: FileAgentOptions = {},
  ) {
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    this.maxReplyBytes = this.limit = opts.maxReplyBytes ?? defaults.files.maxReadBytes + 1024 * 1024;
    this.argv = opts.argv ?? agentArgv();
    this.liveness = opts.liveness;
  }

  private agentPid?: number;
  /** Its pid in the container (a kill of the agent's uid must spare it under gVisor, where it is that uid). */
  get pid(): number | undefined {
    return this.proc?.alive ? this.agentPid : undefined;
  }

  /** Whether the agent said it does `feature` (false before it started, or when it never said). */
  has(feature: AgentFeature): boolean {
    return this.features.has(feature);
  }

  /** Not failed: running, or never started (an image without python3 stays on the archive API). */
  get alive(): boolean {
    return !this.proc || this.proc.alive;
  }

  /** Starts the agent; resolves false when the image cannot run it (no python3). */
  start(): Promise<boolean> {
    this.starting ??= (async () => {
      try {
        this.reset();
        this.features = new Set();
        const proc = await this.box.attach(this.argv, (b, stream) => this.onData(b, stream), {
          user: "0:0",
          cwd: "/",
          env: ["PYTHONDONTWRITEBYTECODE=1"],
        });
        this.proc = proc;
        void proc.ended.then(() => {
          if (this.proc === proc) this.fail();
        });
        // The handshake: the agent's pid (a kill must spare it under gVisor) and the protocol it speaks.
        const raw = await this.call({ op: "hello" });
        const hello = raw && parseReply("hello", raw.header);
        if (!hello?.ok || hello.reply.version !== PROTOCOL_VERSION) {
          if (raw) this.fail(); // another program, or another version of it: not ours to talk to
          return false;
        }
        this.agentPid = hello.reply.pid;
        this.features = new Set(hello.reply.has ?? []);
        return true;
      } catch {
        return false;
      }
    })();
    return this.starting;
  }

  /**
   * One request; undefined when the agent is gone or misbehaved (the caller falls back to an exec).
   * A reply that fits neither the op's reply nor an error is a protocol violation: the agent is
   * restarted.
   */
  async request<Op extends AgentOp>(
    req: Extract<AgentRequest, { op: Op }>,
    body?: Buffer,
    o: CallOptions = {},
  ): Promise<Answer<Op> | undefined> {
    const raw = await this.requestRaw(req, body, o);
    if (!raw) return undefined;
    const r = parseReply(req.op, raw.header);
    if (!r) return void this.fail();
    return r.ok ? { reply: r.reply, body: raw.body } : { error: r.error, body: raw.body };
  }

  private async requestRaw(header: AgentRequest, body?: Buffer, o: CallOptions = {}): Promise<RawReply | undefined> {
    if (!this.liveness) return this.requestNow(header, body, o);
    try {
      return await this.liveness.guard(this.requestNow(header, body, o));
    } catch (err) {
      this.fail(); // its stream may never end (gVisor): the agent is given up with the container
      throw err;
    }
  }

  private async requestNow(header: AgentRequest, body?: Buffer, o: CallOptions = {}): Promise<RawReply | undefined> {
    if (!(await this.start())) return undefined;
    if (!this.proc?.alive) {
      // Gone after a protocol violation or a timeout: start a new one.
      this.starting = undefined;
      if (!(await this.start())) return undefined;
    }
    return this.call(header, body, o);
  }

  /**
   * Runs argv in the container as uid:gid through the agent, saving a process of its own. Undefined when
   * the agent cannot (no python3, not root, or gone before the command was sent): start it on the box then.
   * A stream that fails ends the command's input and throws StreamSourceError once it is done.
   */
  async run(argv: string[], o: RunOptions): Promise<AgentRun | undefined> {
    if (!this.canRun || !(await this.start())) return undefined;
    const put = o.put?.length ? o.put : undefined;
    if (put && o.stream) throw new Error("FileAgent.run: put needs the stdin in hand, not a stream");
    const header: AgentRequest = {
      op: "run",
      argv,
      uid: o.uid,
      gid: o.gid,
      cwd: o.cwd,
      env: o.env ?? [],
      timeout: o.timeoutSec,
      max: o.maxBytes,
      stream: !!o.stream,
      ...(put ? { put: put.map((f): [string, number] => [f.path, f.data.length]) } : {}),
    };
    const body = put ? Buffer.concat([...put.map((f) => f.data), o.stdin ?? Buffer.alloc(0)]) : o.stdin;
    let sourceErr: unknown;
    const frames =
      o.stream &&
      (async function* () {
        try {
          for await (const chunk of gather(o.stream!)) yield chunk;
        } catch (err) {
          sourceErr = err;
        }
      })();
    const sent = { value: false };
    const r = await this.request<"run">(header, body, {
      timeoutMs: o.timeoutSec * 1000 + 30_000,
      maxReplyBytes: o.maxBytes + 64 * 1024,
      frames,
      sent,
    });
    if (sourceErr !== undefined) throw new StreamSourceError(sourceErr);
    // Sent, then no answer (the agent died, or did not answer in time): the command may have run,
    // so it is not run again on the box.
    if (!r && sent.value) throw new Error(`the sandbox's file agent stopped while running ${argv[0]}`);
    if (!r) return undefined;
    if (r.error?.error === "EPERM") return void (this.canRun = false);
    if (r.error) throw new Error(`running ${argv[0]} in the sandbox failed: ${r.error.message ?? r.error.error}`);
    const h = r.reply;
    if (h.out + h.err !== r.body.length) throw new Error("the file agent's reply to a run is malformed");
    return {
      stdout: r.body.subarray(0, h.out),
      stderr: r.body.subarray(h.out).toString("utf8"),
      exitCode: h.exit,
      truncated: h.truncated,
    };
  }

  private call(header: AgentRequest, body?: Buffer, o: CallOptions = {}): Promise<RawReply | undefined> {
    const next = this.queue.then(
      () =>
        new Promise<RawReply | undefined>((resolve) => {
          const proc = this.proc;
          if (!proc?.alive) return resolve(undefined);
          // A splice to an agent that never said it splices would be written as the whole file.
          if (header.op === "write" && header.splice && !this.features.has("splice")) return resolve(undefined);
          const timer = setTimeout(() => this.fail(), o.timeoutMs ?? this.timeoutMs);
          this.limit = o.maxReplyBytes ?? this.maxReplyBytes;
          let answered = false;
          this.waiter = (r) => ((answered = true), clearTimeout(timer), (this.waiter = undefined), resolve(r));
          proc.write(
            Buffer.concat([
              Buffer.from(JSON.stringify({ ...header, len: body?.length ?? 0 }) + "\n"),
              body ?? Buffer.alloc(0),
            ]),
          );
          if (o.sent) o.sent.value = true;
          if (!o.frames) return;
          const failOwn = () => (this.proc === proc ? this.fail() : proc.destroy());
          void (async () => {
            for await (const chunk of o.frames!) {
              if (answered || !proc.alive) break;
              const len = Buffer.alloc(4);
              len.writeUInt32BE(chunk.length);
              await proc.send(Buffer.concat([len, chunk]));
            }
            // A reply before the end of the frames is not our protocol. (Only this request's own
            // agent is failed: one started since, after this one died, is not this loop's.)
            if (answered) failOwn();
            else proc.write(Buffer.alloc(4));
          })().catch(failOwn);
        }),
    );
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** A protocol violation, a timeout or the end of the process: kill it, answer the waiter with nothing. */
  private fail(): void {
    this.proc?.destroy();
    this.reset();
    this.waiter?.(undefined);
  }

  private reset(): void {
    this.chunks = [];
    this.buffered = 0;
    this.header = undefined;
  }

  private onData(chunk: Buffer, stream: 1 | 2): void {
    if (stream === 2) return; // python's own complaints; replies come on stdout only
    // Anything with no request waiting for it, or a header line that never ends, is not our protocol.
    if (!this.waiter) return this.fail();
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    for (;;) {
      if (!this.header) {
        const buf = this.take();
        const nl = buf.indexOf(10);
        if (nl < 0) return void (buf.length > 64 * 1024 && this.fail());
        let header: unknown;
        try {
          header = JSON.parse(buf.subarray(0, nl).toString("utf8"));
        } catch {
          header = undefined;
        }
        const len = (header as { len?: unknown } | undefined)?.len;
        if (
          !header ||
          typeof header !== "object" ||
          !Number.isSafeInteger(len) ||
          (len as number) < 0 ||
          (len as number) > this.limit
        )
          return this.fail();
        this.header = header as RawReply["header"]; // a JSON object, as checked above
        this.chunks = [buf.subarray(nl + 1)];
        this.buffered = buf.length - nl - 1;
      }
      const len = this.header.len as number;
      if (this.buffered < len) return; // keep collecting without re-concatenating
      const buf = this.take();
      const header = this.header;
      this.header = undefined;
      this.chunks = [buf.subarray(len)];
      this.buffered = buf.length - len;
      if (!this.waiter) return this.fail(); // a second reply to one request
      this.waiter({ header, body: Buffer.from(buf.subarray(0, len)) });
      if (this.buffered > 0 && !this.waiter) return this.fail();
    }
  }

  private take(): Buffer {
    const buf = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.chunks = [buf];
    return buf;
  }

  close(): void {
    this.proc?.destroy();
  }
}
