// The option bags and results of the public Sandbox (sandbox.ts), apart so that each member can say
// what it does and what it defaults to without burying the class.
import type { Backend, SandboxLimits } from "../backend/types.js";

/** How Sandbox.create makes a sandbox: every member is optional. */
export interface SandboxOptions {
  /**
   * The image the box is made from; it needs bash, coreutils and git.
   * @default "patchbay-sandbox:latest"
   */
  image?: string;
  /**
   * Limits over the defaults; a pids limit the OCI runtime cannot work with is refused.
   * @default { memoryMb: 2048, cpus: 1, pids: 256, diskMb: 1024, tmpMb: 256, network: "none" }
   */
  limits?: Partial<SandboxLimits>;
  /**
   * The OCI runtime of the box: runc, or gVisor's runsc (whose engine limit gets room for its threads).
   * @default "runc"
   */
  runtime?: "runc" | "runsc";
  /** Labels recorded on the box besides patchbay's own (a worker's queue and instance, a test's name). */
  labels?: Record<string, string>;
  /**
   * Recorded on the box for the reaper, which removes it once its owner is gone.
   * @default this process (host:pid:random)
   */
  owner?: string;
  /** The job the sandbox serves, recorded on the box. */
  jobId?: string;
  /**
   * Seconds after which the reaper may remove the sandbox whatever its owner.
   * @default 21600 (6 hours)
   */
  deadlineSec?: number;
  /**
   * Gives ptrace and process_vm_readv/writev back to its processes (the worker's PATCHBAY_ALLOW_PTRACE=1).
   * @default false
   */
  allowPtrace?: boolean;
  /** Host directories mounted read-only at the same path (only the setup phase's egress directory: see egress.ts). */
  mounts?: { source: string; target: string }[];
  /**
   * The backend that makes the box.
   * @default the Docker backend
   */
  backend?: Backend;
}

/** How Sandbox.exec runs a command. */
export interface ExecOptions {
  /** Written to the command's stdin, which is then closed; without it stdin is closed at once. */
  stdin?: Buffer | string;
  /**
   * Seconds after which the command is killed.
   * @default 300
   */
  timeoutSec?: number;
  /**
   * Bytes of stdout kept; the rest is cut and the result says `truncated`.
   * @default 67108864 (64 MiB)
   */
  maxBytes?: number;
  /**
   * Who runs it, "uid:gid".
   * @default "1000:1000" (the agent's)
   */
  user?: string;
  /** KEY=VALUE pairs over the box's environment (for a root command: over the trusted environment alone). */
  env?: string[];
  /**
   * The working directory.
   * @default "/workspace"
   */
  cwd?: string;
  /** Files written as root (mode 0600) before the command runs, each under /patchbay. */
  put?: PutFile[];
}

/** What a command run by Sandbox.exec did. */
export interface ExecResult {
  /** Its stdout, at most `maxBytes` of it. */
  stdout: Buffer;
  /** The head and tail of its stderr (8 KiB in all). */
  stderr: string;
  /** Its exit status. */
  exitCode: number;
  /** Whether stdout passed `maxBytes` and was cut. */
  truncated: boolean;
}

/** A file written before a command runs (Sandbox.exec `put`): as root, mode 0600, only under the private dir. */
export interface PutFile {
  /** Where, an absolute path under /patchbay without `.` or `..` parts. */
  path: string;
  /** Its bytes. */
  data: Buffer;
}

/** How Sandbox.spawn starts a long-lived process. */
export interface SpawnOptions {
  /** KEY=VALUE pairs over the box's environment (HOME is the agent's). */
  env?: string[];
}
