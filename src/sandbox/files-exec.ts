// The file operations' fallback when the file agent cannot run (an agent that cannot be
// restarted): one process per operation (the helper's child), as uid 1000, of bash and coreutils
// (what every sandbox image has). The engine's archive API would act as root: a read of
// /root, a write into /patchbay (the private git store) or over a root-owned file would pass.
// Here the kernel checks every open as the agent's uid. A read opens the file once and takes its
// type, size, mode and owner from that open file (/proc/self/fd/3), so no swap in between can pair
// one file's bytes with another's check. The process is the agent's uid, so the agent can meddle
// with it: what it says is bounded, parsed strictly, and only ever reaches the agent itself.
import { count } from "../core/count.js";
import { asset } from "../core/assets.js";
import { HeadTail } from "../core/truncate.js";
import type { Box } from "../backend/types.js";
import { PatchbayError } from "../core/errors.js";
import { AGENT_USER } from "../backend/agent-user.js";

// LC_ALL=C: the error texts below are matched in English. BASH_ENV/ENV empty: no startup file.
const ENV = ["LC_ALL=C", "BASH_ENV=", "ENV=", "HOME=/home/agent"];

// The program (src/sandbox/sh/files-exec.sh: its header says each operation's arguments, output
// and exit codes).
const SCRIPT = asset("sandbox/sh/files-exec.sh");

export type ExecCode = "ENOENT" | "ENOTDIR" | "EACCES" | "EISDIR" | "EROFS" | "ENOSPC" | "EFBIG" | "EINVAL" | "EIO";

export class ExecFileError extends PatchbayError {
  constructor(
    message: string,
    readonly code: ExecCode,
    /** EFBIG: the file's size. */
    readonly size?: number,
  ) {
    super("tool", message);
  }
}

/** The script's own exit codes, and for 3 (a tool failed) the errno its words name. */
function codeOf(exit: number, stderr: string): ExecCode {
  const own: Record<number, ExecCode> = {
    2: "ENOENT",
    5: "EIO",
    20: "ENOTDIR",
    21: "EISDIR",
    22: "EINVAL",
    27: "EFBIG",
    28: "ENOSPC",
  };
  if (own[exit]) return own[exit];
  if (exit !== 3) return "EIO";
  const words: [RegExp, ExecCode][] = [
    [/No such file or directory/, "ENOENT"],
    [/Not a directory/, "ENOTDIR"],
    [/Permission denied|Operation not permitted/, "EACCES"],
    [/Is a directory/, "EISDIR"],
    [/Read-only file system/, "EROFS"],
    [/No space left on device|Disk quota exceeded/, "ENOSPC"],
    [/Too many levels of symbolic links|File exists/, "EINVAL"],
  ];
  return words.find(([re]) => re.test(stderr))?.[1] ?? "EIO";
}

export interface ExecStat {
  type: "file" | "directory" | "other";
  size: number;
  mode: number;
  mtime: string;
  real: string;
  link: boolean;
}

export class ExecFiles {
  constructor(
    private box: Box,
    private timeoutSec = 60,
  ) {}

  /** Runs one operation; stdout up to `maxOut` bytes (more is a protocol violation). */
  private async run(
    args: string[],
    maxOut: number,
    stdin?: Buffer,
  ): Promise<{ out: Buffer; exit: number; stderr: string }> {
    const out: Buffer[] = [];
    let outLen = 0;
    let over = false;
    const err = new HeadTail(4096);
    const cmd = [
      "timeout",
      "-s",
      "KILL",
      String(this.timeoutSec),
      "bash",
      "--noprofile",
      "--norc",
      "-c",
      SCRIPT,
      "pb-files",
      ...args,
    ];
    const proc = await this.box.attach(
      cmd,
      (chunk, stream) => {
        if (stream === 2) return err.push(chunk);
        if ((outLen += chunk.length) > maxOut) return void ((over = true), proc.destroy());
        out.push(Buffer.from(chunk));
      },
      { user: AGENT_USER, cwd: "/", env: ENV },
    );
    // The timeout in the container ends it; this one covers a stream that never ends (a dead gVisor sandbox).
    const timer = setTimeout(() => proc.destroy(), (this.timeoutSec + 15) * 1000);
    try {
      if (stdin?.length) await proc.send(stdin);
      proc.endInput();
      await proc.ended;
    } finally {
      clearTimeout(timer);
    }
    if (over) throw new ExecFileError(`the sandbox's file read answered more than ${count(maxOut, "byte")}`, "EIO");
    const exit = await proc.exitCode();
    return { out: Buffer.concat(out, Math.min(outLen, maxOut)), exit, stderr: err.text() };
  }

  private fail(r: { exit: number; stderr: string }, size?: number): never {
    const code = codeOf(r.exit, r.stderr);
    const why =
      code === "EINVAL"
        ? "not a regular file"
        : code !== "EIO"
          ? code
          : r.exit === 137
            ? "timed out"
            : r.stderr.trim().split("\n").pop()?.slice(0, 300) || `exit ${r.exit}`;
    throw new ExecFileError(why, code, size);
  }

  async stat(p: string): Promise<ExecStat | undefined> {
    const r = await this.run(["stat", p], 64 * 1024);
    if (r.exit !== 0) {
      if (codeOf(r.exit, r.stderr) === "ENOENT") return undefined;
      this.fail(r);
    }
    const text = r.out.toString("utf8");
    const nl = text.indexOf("\n");
    const m = /^(file|directory|other)\|(\d+)\|([0-7]+)\|([\d.]+)\|([01])$/.exec(text.slice(0, nl));
    if (nl < 0 || !m) throw new ExecFileError(`${p}: malformed stat from the sandbox`, "EIO");
    return {
      type: m[1] as ExecStat["type"],
      size: Number(m[2]),
      mode: parseInt(m[3]!, 8) & 0o7777,
      mtime: m[4]!,
      link: m[5] === "1",
      real: text.slice(nl + 1),
    };
  }

  /** A regular file's bytes (at most `max`), mode, owner and real path, all from one open. */
  async read(p: string, max: number): Promise<{ bytes: Buffer; mode: number; uid: number; gid: number; real: string }> {
    const r = await this.run(["read", p, String(max)], max + 2 * 4096 + 256);
    if (r.exit === 27) this.fail(r, Number(r.out.toString("latin1").trim()) || undefined);
    if (r.exit !== 0) this.fail(r);
    const nl = r.out.indexOf(10);
    const m = /^file\|(\d+)\|([0-7]+)\|[\d.]+\|(\d+)\|(\d+)\|(\d+)$/.exec(r.out.toString("latin1", 0, Math.max(0, nl)));
    if (nl < 0 || !m) throw new ExecFileError(`${p}: malformed read from the sandbox`, "EIO");
    const pathLen = Number(m[5]);
    const body = r.out.subarray(nl + 1 + pathLen + 1);
    if (r.out[nl + 1 + pathLen] !== 10) throw new ExecFileError(`${p}: malformed read from the sandbox`, "EIO");
    // It grew past the bound after its size was taken.
    if (body.length > max) throw new ExecFileError("EFBIG", "EFBIG");
    return {
      bytes: Buffer.from(body),
      mode: parseInt(m[2]!, 8) & 0o7777,
      uid: Number(m[3]),
      gid: Number(m[4]),
      real: r.out.toString("utf8", nl + 1, nl + 1 + pathLen),
    };
  }

  async write(p: string, bytes: Buffer, mode?: number): Promise<void> {
    const r = await this.run(
      ["write", p, String(bytes.length), mode === undefined ? "" : (mode & 0o7777).toString(8)],
      4096,
      bytes,
    );
    if (r.exit !== 0) this.fail(r);
  }

  async mkdirp(p: string): Promise<void> {
    const r = await this.run(["mkdirp", p], 4096);
    if (r.exit !== 0) this.fail(r);
  }

  async remove(p: string): Promise<void> {
    const r = await this.run(["remove", p], 4096);
    if (r.exit !== 0) this.fail(r);
  }
}
