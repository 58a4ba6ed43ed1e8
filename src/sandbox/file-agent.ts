// A fast lane for small file operations: one persistent python3 process per sandbox over an
// attached exec, speaking JSON-line headers followed by raw bytes. It runs as root with the
// agent's file identity (setfsuid/setfsgid 1000): every file operation has exactly the agent's
// permissions, while the agent cannot signal it, trace it or write into its pipes. Python starts
// isolated (-I -S, cwd /) so nothing in /workspace is imported. Docker 20.10's archive
// API re-executes dockerd for every call (~38 ms each), which would make one str_replace cost
// >100 ms; through this channel it costs a few ms. The archive API stays the path for bulk
// transfers (loading a repo) and the fallback when the image has no python3.
import type Docker from "dockerode";
import { defaults } from "../config.js";
import { attachExec, type Attached } from "./attach.js";

const AGENT = String.raw`
import sys, os, json, stat, hashlib, ctypes
libc = ctypes.CDLL(None, use_errno=True)
os.setgroups([1000]); libc.setfsgid(1000); libc.setfsuid(1000)
# setfsuid reports the previous id: 1000 now, or the switch failed. gVisor has no setfsuid: there
# the agent becomes uid 1000 outright (the worker's timeouts and bounds still hold it to the protocol).
if libc.setfsuid(1000) != 1000 or libc.setfsgid(1000) != 1000:
    os.setgid(1000); os.setuid(1000)
os.umask(0o022)
inp, out = sys.stdin.buffer, sys.stdout.buffer
def reply(h, body=b""):
    h["len"] = len(body)
    out.write(json.dumps(h).encode() + b"\n"); out.write(body); out.flush()
def kind(m):
    return "directory" if stat.S_ISDIR(m) else "file" if stat.S_ISREG(m) else "other"
def read_fd(fd, limit):
    chunks, n = [], 0
    while True:
        b = os.read(fd, 1 << 20)
        if not b: return b"".join(chunks)
        chunks.append(b); n += len(b)
        if n > limit: raise OSError(27, "File too large")
def op_stat(r, body):
    p = r["path"]
    try: st = os.stat(p)
    except FileNotFoundError: return {"missing": True}, b""
    real = os.path.realpath(p)
    return {"type": kind(st.st_mode), "size": st.st_size, "mode": st.st_mode & 0o7777, "mtime": st.st_mtime_ns, "real": real, "link": os.path.islink(p) or real != os.path.abspath(p)}, b""
def op_read(r, body):
    # O_NONBLOCK: opening a FIFO the agent made must not hang us.
    fd = os.open(r["path"], os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode): raise IsADirectoryError(21, "Is a directory")
        if not stat.S_ISREG(st.st_mode): raise OSError(22, "not a regular file")
        if st.st_size > r["max"]: return {"error": "EFBIG", "size": st.st_size}, b""
        data = read_fd(fd, r["max"])
        return {"mode": st.st_mode & 0o7777, "uid": st.st_uid, "gid": st.st_gid, "real": os.path.realpath(r["path"])}, data
    finally: os.close(fd)
def op_write(r, body):
    p = r["path"]
    exists = os.path.exists(p)
    if exists and os.path.isdir(p): raise IsADirectoryError(21, "Is a directory")
    # Opened without O_CREAT when it exists, so its mode and owner stay; truncated only after the
    # check. A dangling symlink is written through (O_EXCL would refuse it).
    if exists: fd = os.open(p, os.O_RDWR | os.O_NONBLOCK)
    else: fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK | os.O_CREAT | (0 if os.path.islink(p) else os.O_EXCL), r.get("mode", 0o644))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode): raise OSError(22, "not a regular file")
        if exists and r.get("expect") is not None:
            if hashlib.sha256(read_fd(fd, 1 << 31)).hexdigest() != r["expect"]: return {"error": "ECHANGED"}, b""
        # Reserve the space first: on a full disk the write fails before the old content is gone.
        try: os.posix_fallocate(fd, 0, max(len(body), 1))
        except OSError as e:
            if e.errno == 28: raise
        os.lseek(fd, 0, 0); os.ftruncate(fd, 0)
        mv = memoryview(body)
        while mv: mv = mv[os.write(fd, mv):]
        if r.get("mode") is not None: os.fchmod(fd, r["mode"])
    finally: os.close(fd)
    return {}, b""
def op_mkdirp(r, body):
    os.makedirs(r["path"], 0o755, exist_ok=True); return {}, b""
def op_remove(r, body):
    os.remove(r["path"]); return {}, b""
def op_list(r, body):
    root, res = r["path"], []
    for name in sorted(os.listdir(root)):
        if name.startswith("."): continue
        p = os.path.join(root, name); res.append(p)
        if os.path.isdir(p) and not os.path.islink(p):
            try: res += [os.path.join(p, n) for n in sorted(os.listdir(p)) if not n.startswith(".")]
            except OSError: pass
    return {"entries": res}, b""
OPS = {"stat": op_stat, "read": op_read, "write": op_write, "mkdirp": op_mkdirp, "remove": op_remove, "list": op_list}
while True:
    line = inp.readline()
    if not line: break
    r = json.loads(line); n = r.get("len", 0); body = inp.read(n) if n else b""
    try: h, data = OPS[r["op"]](r, body)
    except OSError as e: h, data = {"error": {2: "ENOENT", 20: "ENOTDIR", 21: "EISDIR", 13: "EACCES", 30: "EROFS", 28: "ENOSPC", 27: "EFBIG"}.get(e.errno, "EIO"), "message": e.strerror or str(e)}, b""
    except Exception as e: h, data = {"error": "EINVAL", "message": str(e)}, b""  # e.g. a NUL in a path
    reply(h, data)
`;

export interface AgentReply {
  header: Record<string, unknown> & { error?: string; message?: string };
  body: Buffer;
}

export interface FileAgentOptions {
  /** A request not answered in this time kills the agent (the caller falls back); default 60 s. */
  timeoutMs?: number;
  /** Replies announcing a longer body are a protocol violation; default the read limit + 1 MiB. */
  maxReplyBytes?: number;
  /** The program, for tests of a misbehaving agent. */
  argv?: string[];
}

export class FileAgent {
  private proc?: Attached;
  private starting?: Promise<boolean>;
  private chunks: Buffer[] = [];
  private buffered = 0;
  private header?: AgentReply["header"];
  private waiter?: (r: AgentReply | undefined) => void;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly timeoutMs: number;
  private readonly maxReplyBytes: number;
  private readonly argv: string[];

  constructor(
    private container: Docker.Container,
    opts: FileAgentOptions = {},
  ) {
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    this.maxReplyBytes = opts.maxReplyBytes ?? defaults.files.maxReadBytes + 1024 * 1024;
    this.argv = opts.argv ?? ["python3", "-I", "-S", "-u", "-c", AGENT];
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
        const proc = await attachExec(this.container, this.argv, (b, stream) => this.onData(b, stream), { user: "0:0", cwd: "/", env: ["PYTHONDONTWRITEBYTECODE=1"] });
        this.proc = proc;
        void proc.ended.then(() => {
          if (this.proc === proc) this.fail();
        });
        const probe = await this.call({ op: "stat", path: "/" });
        return probe !== undefined && !probe.header.error;
      } catch {
        return false;
      }
    })();
    return this.starting;
  }

  /** One request; undefined when the agent is gone or misbehaved (the caller falls back to the archive API). */
  async request(header: Record<string, unknown>, body?: Buffer): Promise<AgentReply | undefined> {
    if (!(await this.start())) return undefined;
    if (!this.proc?.alive) {
      // Gone after a protocol violation or a timeout: start a new one.
      this.starting = undefined;
      if (!(await this.start())) return undefined;
    }
    return this.call(header, body);
  }

  private call(header: Record<string, unknown>, body?: Buffer): Promise<AgentReply | undefined> {
    const next = this.queue.then(
      () =>
        new Promise<AgentReply | undefined>((resolve) => {
          if (!this.proc?.alive) return resolve(undefined);
          const timer = setTimeout(() => this.fail(), this.timeoutMs);
          this.waiter = (r) => (clearTimeout(timer), (this.waiter = undefined), resolve(r));
          this.proc.write(Buffer.concat([Buffer.from(JSON.stringify({ ...header, len: body?.length ?? 0 }) + "\n"), body ?? Buffer.alloc(0)]));
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
        let header: AgentReply["header"] | undefined;
        try {
          header = JSON.parse(buf.subarray(0, nl).toString("utf8"));
        } catch {
          header = undefined;
        }
        const len = (header as { len?: unknown } | undefined)?.len;
        if (!header || typeof header !== "object" || !Number.isSafeInteger(len) || (len as number) < 0 || (len as number) > this.maxReplyBytes) return this.fail();
        this.header = header;
        this.chunks = [buf.subarray(nl + 1)];
        this.buffered = buf.length - nl - 1;
      }
      const len = this.header!.len as number;
      if (this.buffered < len) return; // keep collecting without re-concatenating
      const buf = this.take();
      const header = this.header!;
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
