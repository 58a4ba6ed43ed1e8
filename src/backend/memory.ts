// The memory backend, FOR SIMULATIONS ONLY (the fleet bench, bench/fleet.ts): it isolates nothing
// and executes nothing. A box is an object in this process with its files in a Map; no process,
// container or directory is made. What patchbay runs in a box is answered by small stand-ins that
// speak its protocols: the agent's shell (the PBSTART/PBEND framing of sandbox/shell.ts), the
// supervisor (its PB<nonce> replies), the file agent (sandbox/agent-protocol.ts's JSON lines and
// frames); the commands they are asked to run, by backend/memory-exec.ts. So a whole scripted job
// runs (repo in, the agent's tools, the patch, verify) and the only real costs left are the
// worker, Redis and the model server. A worker refuses it unless PATCHBAY_TEST_BACKENDS=1.
import { createHash } from "node:crypto";
import { LABEL } from "./owner.js";
import { simRun, interpret, type SimBox } from "./memory-exec.js";
import type { Attached, Box, BoxSpec, BoxState, ProcessOptions, ReapReport, Backend } from "./types.js";

export class MemoryBackend implements Backend {
  readonly kind = "memory";
  readonly simulated = true;
  private readonly boxes = new Map<string, MemoryBox>();

  async create(spec: BoxSpec): Promise<Box> {
    const box = new MemoryBox(spec.name, spec.labels);
    this.boxes.set(spec.name, box);
    return box;
  }

  async remove(name: string): Promise<void> {
    this.boxes.get(name)?.stop();
    this.boxes.delete(name);
  }

  async retryRemovals(): Promise<number> {
    return 0;
  }

  async reap(dead: (labels: Record<string, string>) => Promise<boolean>): Promise<ReapReport> {
    const report: ReapReport = { containers: [], volumes: [] };
    for (const [name, box] of [...this.boxes]) {
      if (box.labels[LABEL.managed] && (await dead(box.labels))) {
        await this.remove(name);
        report.containers.push(name);
      }
    }
    return report;
  }

  async health(): Promise<string | undefined> {
    return undefined;
  }

  /** How many boxes it holds (tests: none left after a job). */
  get size(): number {
    return this.boxes.size;
  }
}

/** A process's stdin, read by the stand-in that plays it: lines, counts of bytes, or all of it. */
class Input {
  private buf = Buffer.alloc(0);
  private ended = false;
  private wake?: () => void;
  push(b: Buffer): void {
    this.buf = Buffer.concat([this.buf, b]);
    this.wake?.();
  }
  end(): void {
    this.ended = true;
    this.wake?.();
  }
  private async until(ready: () => number): Promise<Buffer | undefined> {
    for (;;) {
      const n = ready();
      if (n >= 0) {
        const out = this.buf.subarray(0, n);
        this.buf = this.buf.subarray(n);
        return out;
      }
      if (this.ended) return undefined;
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }
  /** Up to and with `sep` (a byte). */
  upTo(sep: number): Promise<Buffer | undefined> {
    return this.until(() => {
      const i = this.buf.indexOf(sep);
      return i < 0 ? -1 : i + 1;
    });
  }
  bytes(n: number): Promise<Buffer | undefined> {
    return this.until(() => (this.buf.length >= n ? n : -1));
  }
  async all(): Promise<Buffer> {
    return (await this.until(() => (this.ended ? this.buf.length : -1))) ?? Buffer.alloc(0);
  }
}

type Program = (input: Input, say: (b: Buffer | string) => void, pid: number) => Promise<number>;

class MemoryBox implements Box, SimBox {
  readonly files = new Map<string, Buffer>();
  readonly dirs = new Set<string>(["/workspace", "/tmp", "/patchbay"]);
  readonly trees = new Map<string, Map<string, Buffer>>();
  private running = true;
  private pids = 1;
  private readonly procs = new Set<Attached>();

  constructor(
    readonly name: string,
    readonly labels: Record<string, string>,
  ) {}

  stop(): void {
    this.running = false;
    for (const p of this.procs) p.destroy();
    this.procs.clear();
    this.files.clear();
    this.trees.clear();
  }

  async state(): Promise<BoxState> {
    return this.running ? { running: true } : { running: false, exitCode: 137 };
  }

  async attach(
    argv: string[],
    onData: (chunk: Buffer, stream: 1 | 2) => void,
    opts: ProcessOptions = {},
  ): Promise<Attached> {
    if (!this.running)
      throw Object.assign(new Error(`the memory box ${this.name} is not running`), { statusCode: 409 });
    const script = argv[argv.indexOf("-c") + 1] ?? "";
    const program: Program =
      argv[0] === "bash" && argv.length === 3
        ? shellProgram(this)
        : script.startsWith("# supervisor.py")
          ? supervisorProgram
          : script.startsWith("# file_agent.py")
            ? agentProgram(this)
            : execProgram(this, argv, opts.cwd);
    const proc = startProc(program, onData, ++this.pids);
    this.procs.add(proc);
    void proc.ended.then(() => this.procs.delete(proc));
    return proc;
  }
}

/** A stand-in as an Attached: its stdin an Input, its output to onData after attach resolved. */
function startProc(program: Program, onData: (chunk: Buffer, stream: 1 | 2) => void, pid: number): Attached {
  const input = new Input();
  let alive = true;
  let done!: (code: number) => void;
  const exit = new Promise<number>((r) => (done = r));
  const ended = exit.then(() => void (alive = false));
  const say = (b: Buffer | string) => void (alive && onData(Buffer.from(b), 1));
  setImmediate(() => void program(input, say, pid).then(done, () => done(1)));
  const write = (d: string | Buffer) => void (alive && input.push(Buffer.from(d)));
  return {
    write,
    send: async (d) => write(d),
    endInput: () => input.end(),
    pipeIn: async (source) => {
      for await (const c of source) write(c);
      input.end();
    },
    ended,
    get alive() {
      return alive;
    },
    pause: () => {},
    resume: () => {},
    destroy: () => {
      input.end();
      alive = false;
      done(-1);
    },
    exitCode: () => exit,
  };
}

/** A command in a fresh exec: its stdin read to the end, then its output (stderr on 2). */
function execProgram(box: MemoryBox, argv: string[], cwd?: string): Program {
  return async (input, say) => {
    const r = simRun(box, argv, await input.all(), cwd);
    say(r.out);
    return r.code;
  };
}

/** The agent's persistent shell: the init (answered with PBREADY), then framed commands. */
function shellProgram(box: MemoryBox): Program {
  return async (input, say, pid) => {
    let cwd = "/workspace";
    for (;;) {
      const line = (await input.upTo(10))?.toString("utf8");
      if (line === undefined) return 0;
      if (line.includes("PBREADY:")) say(`PBREADY:${pid}\n`);
      const nonce = /^__pb_pre (\S+)\n$/.exec(line)?.[1];
      if (!nonce) continue;
      const command = (await input.upTo(0))?.toString("utf8").slice(0, -1) ?? "";
      await input.upTo(10); // the rest: __pb_exec …; __pb_post <nonce> $?
      const cd = /^\s*cd\s+(\S+)\s*$/.exec(command.split(/&&|;/)[0] ?? "");
      const r = interpret(box, command, cwd);
      if (cd && r.code === 0) cwd = cd[1]!;
      say(`PBSTART${nonce}:\n${r.out.toString("utf8")}\nPBEND${nonce}:${r.code}\n`);
    }
  };
}

/** The supervisor: nothing runs, so nothing to kill; every request answered "0 0" ("dead": yes). */
const supervisorProgram: Program = async (input, say, pid) => {
  say(`PBREADY:${pid}\n`);
  for (;;) {
    const line = (await input.upTo(10))?.toString("utf8");
    if (line === undefined) return 0;
    const [op, nonce] = line.trim().split(" ");
    if (nonce) say(`PB${nonce} ${op === "dead" ? 1 : 0} 0\n`);
  }
};

/** The file agent: one JSON line and a body (or frames) in, one JSON line and a body out. */
function agentProgram(box: MemoryBox): Program {
  return async (input, say, pid) => {
    for (;;) {
      const line = await input.upTo(10);
      if (line === undefined) return 0;
      const req = JSON.parse(line.toString("utf8")) as Record<string, unknown> & {
        op: string;
        path: string;
        len: number;
      };
      let body = (await input.bytes(req.len)) ?? Buffer.alloc(0);
      if (req.stream) body = await frames(input);
      const [header, out] = agentOp(box, req, body, pid);
      say(Buffer.concat([Buffer.from(`${JSON.stringify({ ...header, len: out.length })}\n`), out]));
    }
  };
}

async function frames(input: Input): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (;;) {
    const n = (await input.bytes(4))?.readUInt32BE(0) ?? 0;
    if (n === 0) return Buffer.concat(parts);
    parts.push((await input.bytes(n)) ?? Buffer.alloc(0));
  }
}

type Reply = [Record<string, unknown>, Buffer];
const EMPTY = Buffer.alloc(0);

function agentOp(box: MemoryBox, r: Record<string, unknown> & { path: string }, body: Buffer, pid: number): Reply {
  const isDir = (p: string) => box.dirs.has(p) || [...box.files.keys()].some((f) => f.startsWith(`${p}/`));
  const file = box.files.get(r.path);
  switch (r.op) {
    case "hello":
      return [{ pid, root: true, version: 2 }, EMPTY]; // the file agent protocol's version (sandbox/agent-protocol.ts PROTOCOL_VERSION)
    case "stat":
      if (file)
        return [
          { type: "file", size: file.length, mode: 0o644, mtime: Date.now() * 1e6, real: r.path, link: false },
          EMPTY,
        ];
      return [
        isDir(r.path)
          ? { type: "directory", size: 4096, mode: 0o755, mtime: Date.now() * 1e6, real: r.path, link: false }
          : { missing: true },
        EMPTY,
      ];
    case "read":
      if (!file)
        return [
          isDir(r.path)
            ? { error: "EISDIR", message: "Is a directory" }
            : { error: "ENOENT", message: "No such file or directory" },
          EMPTY,
        ];
      if (file.length > Number(r.max)) return [{ error: "EFBIG", size: file.length }, EMPTY];
      return [{ mode: 0o644, uid: 1000, gid: 1000, real: r.path }, file];
    case "write":
      if (file && typeof r.expect === "string" && createHash("sha256").update(file).digest("hex") !== r.expect)
        return [{ error: "ECHANGED" }, EMPTY];
      box.files.set(r.path, Buffer.from(body));
      return [{}, EMPTY];
    case "mkdirp":
      box.dirs.add(r.path);
      return [{}, EMPTY];
    case "remove":
      box.files.delete(r.path);
      return [{}, EMPTY];
    case "list":
      return [{ entries: [...box.files.keys(), ...box.dirs].filter((p) => p.startsWith(`${r.path}/`)).sort() }, EMPTY];
    case "digest":
      return [
        {
          digest: createHash("sha1")
            .update(JSON.stringify([...box.files].map(([p, b]) => [p, createHash("sha1").update(b).digest("hex")])))
            .digest("hex"),
        },
        EMPTY,
      ];
    case "run":
      return agentRun(box, r, body);
    default:
      return [{ error: "EINVAL", message: `unknown op ${String(r.op)}` }, EMPTY];
  }
}

function agentRun(box: MemoryBox, r: Record<string, unknown>, body: Buffer): Reply {
  let stdin = body;
  for (const [path, n] of (r.put as [string, number][] | undefined) ?? []) {
    box.files.set(path, Buffer.from(stdin.subarray(0, n)));
    stdin = stdin.subarray(n);
  }
  const ran = simRun(box, r.argv as string[], stdin, r.cwd as string | undefined);
  const max = Number(r.max);
  const out = ran.out.subarray(0, max);
  const err = Buffer.from(ran.err);
  return [
    { exit: ran.code, out: out.length, err: err.length, truncated: ran.out.length > max, timedOut: false },
    Buffer.concat([out, err]),
  ];
}
