// The backend interface: what patchbay needs of whatever runs a sandbox. A backend makes a box (a
// container, or a directory with namespaces of its own) with /workspace, /tmp and a root-only
// /patchbay, starts processes in it with their stdio attached, says whether it still runs, and
// removes it with its storage. Everything above (the shell, the supervisor, the file agent, git for
// the baseline and the patch, verify) is built from those few calls, the same for every backend.
// Backends: Docker (backend/docker.ts; runc or gVisor's runsc as its OCI runtime), local
// (backend/local.ts: a host directory per box, for tests and simulations only) and memory
// (backend/memory.ts: boxes as objects in this process that execute nothing, for simulations).
import type { Readable } from "node:stream";

/** patchbay's private store in every box: root's alone (mode 0700), never the agent's. */
export const PRIVATE_DIR = "/patchbay";

/**
 * The environment of every root process patchbay starts in a box, and nothing of the image's (whose
 * ENV may point PATH, LD_PRELOAD, BASH_ENV or GIT_* where the agent writes): a backend starts a
 * root process with this alone, plus BOX_ENV_VAR. The helper (src/sandbox/py/trusted.py, which
 * holds the same PATH: test/trusted.test.ts) gives it to every root process it starts.
 */
export const TRUSTED_ENV = [
  "PATH=/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/sbin:/usr/local/bin",
  "LANG=C.UTF-8",
] as const;
/** Where a root process finds the box's own environment (JSON ["K=V", ...]): the agent's processes get it. */
export const BOX_ENV_VAR = "PATCHBAY_BOX_ENV";
/** Whether a process of `user` ("uid:gid", default the agent's) is root's. */
export const isRoot = (user: string | undefined) => user !== undefined && /^(0|root)(:|$)/.test(user);

/** What a box may use; the docker backend has the engine hold it to them, the local backend isolates nothing. */
export interface SandboxLimits {
  /** Memory in MB, with no swap; past it the kernel kills a process of the box. */
  memoryMb: number;
  /** CPUs, a fraction allowed (a cpu quota). */
  cpus: number;
  /** Processes and threads at once. */
  pids: number;
  /** The size in MB of /workspace (and of /patchbay). */
  diskMb: number;
  /** /tmp's size in MB (memory-backed). */
  tmpMb: number;
  /** "none": no network at all; "bridge": the engine's bridge network (only where the worker allows it). */
  network: "none" | "bridge";
}

/** How a box is made: the backend applies what it can (the local backend isolates nothing). */
export interface BoxSpec {
  /** The box's name, unique on its backend. */
  name: string;
  /** The image it is made from. */
  image: string;
  /** What it may use. */
  limits: SandboxLimits;
  /** The OCI runtime of the Docker backend. */
  runtime: "runc" | "runsc";
  /** Labels recorded on it (its owner, job and deadline for the reaper). */
  labels: Record<string, string>;
  /** Gives the box's processes ptrace and process_vm_readv/writev back (the worker's PATCHBAY_ALLOW_PTRACE=1; backend/seccomp.ts). */
  allowPtrace?: boolean;
  /** A host directory mounted read-only at the same path (the setup phase's egress socket). */
  mounts?: { source: string; target: string }[];
}

/**
 * A bound on a process's output, applied in the box where the backend can (a helper's channel,
 * sandbox/helper.ts): the head passes, then only the last `tail` bytes are kept and the rest is
 * counted and never leaves the box. Elsewhere nothing is cut, and the caller's own bound applies.
 */
export interface OutputCut {
  /** Bytes that pass first. */
  head: number;
  /** Bytes kept from the end: before `end`'s first sight, else before the output's end. */
  tail: number;
  /** Output before this marker's first sight is dropped and the head counts from after it; none: from the start. */
  start?: Buffer;
  /** The marker, followed by 1-3 digits and a newline, that ends the cut; none: the output's end. */
  end?: Buffer;
  /** Called with the count of bytes cut, in order with the output: before the kept tail. */
  onCut: (bytes: number) => void;
}

/** How Box.attach starts a process. */
export interface ProcessOptions {
  /** "uid:gid"; default the agent's (AGENT_USER, backend/agent-user.ts). */
  user?: string;
  /** KEY=VALUE pairs over the box's own environment (a root process's: over TRUSTED_ENV). */
  env?: string[];
  /** Default /workspace. */
  cwd?: string;
  /** Its whole output cut (no markers) where the backend can: see OutputCut. */
  cut?: Omit<OutputCut, "start" | "end">;
  /**
   * An end of the box's gate at fd 9, where the backend can (a helper's box, src/sandbox/py/helper.py):
   * "read" for the agent's shell, "write" for the supervisor (root only). The supervisor writes a
   * command's token once its begin is done, and the shell waits for it before the command runs.
   */
  gate?: "read" | "write";
}

/** A process in a box whose stdin we write and whose stdout/stderr we read, in arrival order. */
export interface Attached {
  /** Writes to the process's stdin without waiting. */
  write(data: string | Buffer): void;
  /** Its end of the box's gate is at fd 9 (ProcessOptions.gate, where the backend gave it). */
  readonly gate?: boolean;
  /** Writes and waits while the buffer is full (backpressure). */
  send(data: Buffer): Promise<void>;
  /** Closes the process's stdin (it reads EOF). */
  endInput(): void;
  /** Writes a stream into the process's stdin with backpressure, then closes it; rejects when the stream fails. */
  pipeIn(source: AsyncIterable<Buffer | string>): Promise<void>;
  /** Resolves when the process's output ends (it exited, and nothing else holds its output). */
  readonly ended: Promise<void>;
  /** Whether it still runs, as far as its stdio says. */
  readonly alive: boolean;
  /** Stops reading the process's output: once the buffers fill, its writers block. */
  pause(): void;
  /** Reads its output again after pause. */
  resume(): void;
  /** Ends it: closes its stdio, and the backend kills it. */
  destroy(): void;
  /** Why patchbay ended it, where it did (its stdin not read past the bound: see sandbox/helper.ts). */
  readonly failure?: string;
  /** Its exit status, once it ended (-1 when the backend cannot say). */
  exitCode(): Promise<number>;
  /** Cuts its output from now on, in the box (see OutputCut); absent where the backend cannot. */
  cut?(c: OutputCut): void;
}

/** Whether a box runs; undefined from Box.state when the backend cannot say now. */
export interface BoxState {
  /** Whether its first process still runs. */
  running: boolean;
  /** Its first process's exit status, once it stopped. */
  exitCode?: number;
}

/** What a backend makes: a container, a host directory with namespaces of its own, or an object. */
export interface Box {
  /** Its name, as BoxSpec gave it. */
  readonly name: string;
  /** Starts argv in the box with its stdio attached; `onData` gets stdout (1) and stderr (2). */
  attach(argv: string[], onData: (chunk: Buffer, stream: 1 | 2) => void, opts?: ProcessOptions): Promise<Attached>;
  /** Whether it runs; undefined when the backend cannot say now. */
  state(): Promise<BoxState | undefined>;
  /** Extracts a tar into `dir` without a process in the box (Docker's archive API): for images without tar. */
  putArchive?(tar: Readable, dir: string): Promise<void>;
}

/** What a reap removed. */
export interface ReapReport {
  /** The boxes removed, by name (containers on the docker backend). */
  containers: string[];
  /** Storage removed apart from its box (Docker volumes). */
  volumes: string[];
}

/** Which backend: `docker`, `local` (tests only) or `memory` (simulations); PATCHBAY_BACKEND names one. */
export type BackendKind = "docker" | "local" | "memory";

/** Where boxes run: makes them, removes them, reaps the ones no one owns any more, and says whether it can run them now. */
export interface Backend {
  /** Which backend this is. */
  readonly kind: BackendKind;
  /** Its boxes run no real processes (the memory backend): patchbay's in-sandbox helper (sandbox/helper.ts) is not started in them. */
  readonly simulated?: boolean;
  /** Makes a box and starts it. */
  create(spec: BoxSpec): Promise<Box>;
  /** Removes a box and its storage; idempotent. A failure is remembered for retryRemovals. */
  remove(name: string): Promise<void>;
  /** Tries the failed removals again; resolves to how many succeeded. */
  retryRemovals(): Promise<number>;
  /** Removes the boxes (and their storage) of patchbay's that `dead` says are no one's any more. */
  reap(dead: (labels: Record<string, string>) => Promise<boolean>): Promise<ReapReport>;
  /** Why this backend cannot run sandboxes of `image` now (engine away, image missing), or undefined; each question bounded by `timeoutMs`. */
  health(image: string, timeoutMs?: number): Promise<string | undefined>;
  /** One line on what runs the boxes, for the worker's start (the engine, rootless, what it refuses); undefined where it cannot say now. */
  describe?(): Promise<string | undefined>;
}
