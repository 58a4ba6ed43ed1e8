// The Docker backend: one dockerode client for the engine the environment names, a hardened
// container per box with a tmpfs-backed workspace volume, processes as attached execs, removal that
// is retried when the engine was away, and the reap of labelled leftovers. The only module of
// patchbay's that runs sandboxes on Docker (image.ts and image-from.ts build its images).
import Docker from "dockerode";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import type { Duplex, Readable } from "node:stream";
import { engineEnv, enginePidsLimit, type EngineEnv } from "../core/config/config.js";
import { withTimeout } from "../core/timeout.js";
import { AGENT_GID, AGENT_UID, AGENT_USER } from "./agent-user.js";
import {
  createProblem,
  describeEngine,
  EngineConfigError,
  engineInfo,
  limitsEnv,
  limitsProblem,
  wrapped,
} from "./engine.js";
import { pipeGathered } from "./gather.js";
import { LABEL } from "./owner.js";
import { seccompOption } from "./seccomp.js";
import {
  BOX_ENV_VAR,
  isRoot,
  PRIVATE_DIR,
  TRUSTED_ENV,
  type Attached,
  type Box,
  type BoxSpec,
  type BoxState,
  type ProcessOptions,
  type ReapReport,
  type Backend,
} from "./types.js";

/** Capabilities of the container's root processes (patchbay's own); the agent's uid has none. */
export const SANDBOX_CAPS = ["KILL", "SETUID", "SETGID", "DAC_OVERRIDE"] as const;

let client: Docker | undefined;
/**
 * One client per process, for the engine the environment names the way the docker CLI reads it:
 * DOCKER_HOST (unix:// or tcp://), DOCKER_TLS_VERIFY / DOCKER_TLS (any non-empty value: TLS) and
 * DOCKER_CERT_PATH (default ~/.docker). dockerode alone takes TLS only for "1" or port 2376.
 */
export function docker(): Docker {
  client ??= new Docker(engineOptions(engineEnv()));
  return client;
}

export function engineOptions(env: EngineEnv): Docker.DockerOptions {
  const host = env.host ?? "";
  // dockerode's ssh transport (ssh2) is given no host key check: anyone on the path could be the engine.
  if (/^ssh:/i.test(host)) {
    throw new Error(
      `DOCKER_HOST=${host}: ssh:// is not supported (dockerode does not check the host key). Forward the engine's socket with OpenSSH instead, e.g. ssh -nNT -L /run/patchbay-engine.sock:/var/run/docker.sock USER@HOST and DOCKER_HOST=unix:///run/patchbay-engine.sock; or use TCP with TLS`,
    );
  }
  if (!/^(tcp|https?):\/\//.test(host) || !env.tls) return {};
  const dir = env.certPath ?? join(homedir(), ".docker");
  const read = (f: string) => readFileSync(join(dir, f));
  return { protocol: "https", ca: read("ca.pem"), cert: read("cert.pem"), key: read("key.pem") };
}

/** This process's identity as a container owner: host:pid:random. */
export function statusOf(err: unknown): number | undefined {
  return (err as { statusCode?: number } | null)?.statusCode;
}

/** The Docker backend (runc, or gVisor's runsc as a box's OCI runtime). */
export class DockerBackend implements Backend {
  readonly kind = "docker";

  async create(o: BoxSpec): Promise<Box> {
    const d = docker();
    const engine = await engineInfo(d);
    const podman = engine.name === "podman";
    // Every way to a sandbox (a worker, `run --local`, the pool, runJob), not only a worker's health.
    const refused = createProblem(engine, o, process.getuid?.());
    if (refused) throw new EngineConfigError(refused);
    const volume = `${o.name}-ws`;
    // A tmpfs-backed named volume: bounded, gone with the sandbox, and (unlike HostConfig.Tmpfs)
    // visible to the archive API under a read-only rootfs. Podman takes `size=` as an XFS project
    // quota: its size goes in 4 KiB pages instead.
    const size = podman ? `nr_blocks=${o.limits.diskMb * 256}` : `size=${o.limits.diskMb}m`;
    await d.createVolume({
      Name: volume,
      Driver: "local",
      DriverOpts: { type: "tmpfs", device: "tmpfs", o: `${size},uid=${AGENT_UID},gid=${AGENT_GID},mode=0755` },
      Labels: o.labels,
    });
    try {
      const container = await d.createContainer({
        name: o.name,
        Image: o.image,
        // The container's own process runs as root so that the agent (uid 1000) cannot kill it with
        // `kill -9 -1` and stop the sandbox; it is `sleep` under tini. Every command of the agent
        // runs as uid 1000 through exec, with no capabilities (CapEff/CapPrm 0, no new privileges).
        // By its absolute path: a root process is never looked up through the image's PATH, which
        // may name /workspace (trusted.py holds the same for every root spawn of the helper's).
        User: "0:0",
        Cmd: ["/bin/sleep", "infinity"],
        Entrypoint: [],
        // Nothing of the host environment enters; the image's ENV stays. Where the engine runs
        // patchbay's runtime wrapper (engine.ts), the limits for it, which it takes out again.
        Env: wrapped(engine) ? [limitsEnv(o.limits)] : [],
        WorkingDir: "/workspace",
        Labels: o.labels,
        NetworkDisabled: o.limits.network === "none",
        HostConfig: {
          NetworkMode: o.limits.network,
          CapDrop: ["ALL"],
          // For patchbay's own root execs only, which the agent cannot signal or write to: KILL for the
          // supervisor (kills the agent's processes by uid), SETUID/SETGID for the file agent (takes
          // the agent's file identity with setfsuid), DAC_OVERRIDE for the patch's git (reads every
          // workspace file into a store the agent cannot reach). All four are in Docker's default set;
          // DAC_READ_SEARCH (open_by_handle_at) is deliberately not.
          CapAdd: [...SANDBOX_CAPS],
          // Docker's default seccomp profile less ptrace and its relatives (seccomp.ts): no process of
          // the agent's uid reads or drives another's (the shell an MCP server, a verify command).
          SecurityOpt: ["no-new-privileges", seccompOption(engine.name, { allowPtrace: o.allowPtrace })],
          ReadonlyRootfs: true,
          Tmpfs: {
            "/tmp": `rw,nosuid,nodev,size=${o.limits.tmpMb}m,mode=1777`,
            // patchbay's private git store (baseline and final trees): root's alone, mode 0700.
            [PRIVATE_DIR]: `rw,nosuid,nodev,noexec,size=${o.limits.diskMb}m,mode=0700`,
          },
          Mounts: [
            { Type: "volume", Source: volume, Target: "/workspace" },
            ...(o.mounts ?? []).map((m) => ({
              Type: "bind" as const,
              Source: m.source,
              Target: m.target,
              ReadOnly: true,
            })),
          ],
          PidsLimit: enginePidsLimit(o.limits.pids, o.runtime),
          Memory: o.limits.memoryMb * 1024 * 1024,
          MemorySwap: o.limits.memoryMb * 1024 * 1024, // = Memory: no swap
          NanoCpus: Math.round(o.limits.cpus * 1e9),
          Init: true,
          LogConfig: { Type: "json-file", Config: { "max-size": "1m", "max-file": "1" } },
          ...(o.runtime !== "runc" ? { Runtime: o.runtime } : {}),
        },
      });
      await container.start();
      return new DockerBox(o.name, container);
    } catch (err) {
      await removeQuietly(o.name, volume);
      throw err;
    }
  }

  remove(name: string): Promise<void> {
    return removeQuietly(name, `${name}-ws`);
  }

  retryRemovals(): Promise<number> {
    return retryRemovals();
  }

  reap(dead: (labels: Record<string, string>) => Promise<boolean>): Promise<ReapReport> {
    return reapLabelled(dead);
  }

  /** "podman 4.3.1, rootless (container root = host uid 999; …), cgroup v1; gVisor refused", or undefined while the engine does not answer. */
  describe(): Promise<string | undefined> {
    return engineInfo(docker()).then(
      (e) =>
        `${describeEngine(e, AGENT_UID)}${e.name === "podman" ? "; gVisor (runsc) jobs are handed to other workers" : ""}`,
      () => undefined,
    );
  }

  /** Does the engine answer, can it hold a sandbox to its limits, and does it have the image? */
  async health(image: string, timeoutMs = 10_000): Promise<string | undefined> {
    const d = docker();
    const within = <T>(p: Promise<T>) =>
      withTimeout(p, timeoutMs, `the Docker engine did not answer within ${timeoutMs} ms`);
    try {
      await within(d.ping());
    } catch (err) {
      return `the Docker engine is unreachable (${(err as Error).message})`;
    }
    const limits = await within(engineInfo(d, 60_000)).then(
      limitsProblem,
      (err: Error) => `the engine does not say what it is (${err.message})`,
    );
    if (limits) return limits;
    try {
      await within(d.getImage(image).inspect());
    } catch (err) {
      if (statusOf(err) === 404) return `the sandbox image ${image} is missing (npx patchbay image build)`;
      return `the sandbox image ${image} cannot be inspected (${(err as Error).message})`;
    }
    return undefined;
  }
}

/** A container as a box. */
export class DockerBox implements Box {
  constructor(
    readonly name: string,
    readonly container: Docker.Container,
  ) {}

  private boxEnv?: Promise<string[]>;

  async attach(
    argv: string[],
    onData: (chunk: Buffer, stream: 1 | 2) => void,
    opts: ProcessOptions = {},
  ): Promise<Attached> {
    if (!isRoot(opts.user)) return attachExec(this.container, argv, onData, opts);
    // A root exec (the helper) gets TRUSTED_ENV and nothing of the image's: an exec's Env only adds
    // to the container's, so every other variable of it is emptied ("K=": Podman refuses Docker's
    // bare "K" that unsets), and the container's own handed over in BOX_ENV_VAR for the agent's processes.
    const env = await (this.boxEnv ??= containerEnv(this.container).catch((err: unknown) => {
      this.boxEnv = undefined;
      throw err;
    }));
    const keep = new Set(TRUSTED_ENV.map((kv) => kv.slice(0, kv.indexOf("="))));
    const emptied = env
      .map((kv) => kv.slice(0, kv.indexOf("=")))
      .filter((k) => !keep.has(k))
      .map((k) => `${k}=`);
    return attachExec(this.container, argv, onData, {
      ...opts,
      env: [...emptied, ...TRUSTED_ENV, `${BOX_ENV_VAR}=${JSON.stringify(env)}`, ...(opts.env ?? [])],
    });
  }

  /** A 404 is a container that is gone; an engine that does not answer decides nothing (undefined). */
  state(): Promise<BoxState | undefined> {
    return this.container.inspect().then(
      (i) => ({ running: Boolean(i.State.Running), ...(i.State.Running ? {} : { exitCode: i.State.ExitCode }) }),
      (err) => (statusOf(err) === 404 ? { running: false } : undefined),
    );
  }

  async putArchive(tar: Readable, dir: string): Promise<void> {
    await this.container.putArchive(tar, { path: dir });
  }
}

/** The environment the engine gives the container's processes (the image's ENV, ours, its HOSTNAME); a failed ask is asked again. */
async function containerEnv(container: Docker.Container): Promise<string[]> {
  const c = (await container.inspect()).Config;
  // (PATCHBAY_LIMITS is for the runtime wrapper alone, which takes it out of every process.)
  const env = (c.Env ?? []).filter((kv) => kv.includes("=") && !kv.startsWith("PATCHBAY_LIMITS="));
  return env.some((kv) => kv.startsWith("HOSTNAME=")) || !c.Hostname ? env : [...env, `HOSTNAME=${c.Hostname}`];
}

const pendingRemovals = new Map<string, string>();

/** Tries the failed removals again; returns how many succeeded. */
async function retryRemovals(): Promise<number> {
  let n = 0;
  for (const [name, volume] of [...pendingRemovals])
    if (
      await removeQuietly(name, volume).then(
        () => true,
        () => false,
      )
    )
      n++;
  return n;
}

/** Removes container and volume; missing ones are fine (idempotent). A failure is remembered for retryRemovals. */
async function removeQuietly(containerName: string, volume: string): Promise<void> {
  try {
    await removeNow(containerName, volume);
    pendingRemovals.delete(containerName);
  } catch (err) {
    pendingRemovals.set(containerName, volume);
    throw err;
  }
}

async function removeNow(containerName: string, volume: string): Promise<void> {
  const d = docker();
  try {
    await d.getContainer(containerName).remove({ force: true, v: true });
  } catch (err) {
    if (statusOf(err) !== 404 && statusOf(err) !== 409) throw err;
  }
  for (let i = 0; i < 20; i++) {
    try {
      await d.getVolume(volume).remove();
      return;
    } catch (err) {
      if (statusOf(err) === 404) return;
      // 409: still in use while the container's removal finishes.
      if (statusOf(err) !== 409) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Removes labelled containers, and volumes with none, that `dead` says are no one's any more. */
async function reapLabelled(
  isDead: (labels: Record<string, string>) => Promise<boolean>,
  now = Date.now(),
): Promise<ReapReport> {
  const d = docker();
  const report: ReapReport = { containers: [], volumes: [] };
  const dead = (labels: Record<string, string> | undefined) => isDead(labels ?? {});
  const containers = await d.listContainers({ all: true, filters: { label: [LABEL.managed] } });
  const live = new Set<string>();
  for (const c of containers) {
    if (await dead(c.Labels)) {
      try {
        await d.getContainer(c.Id).remove({ force: true, v: true });
        report.containers.push(c.Names[0]?.replace(/^\//, "") ?? c.Id);
      } catch (err) {
        if (statusOf(err) !== 404 && statusOf(err) !== 409) throw err;
      }
    } else {
      for (const m of c.Mounts ?? []) if (m.Name) live.add(m.Name);
    }
  }
  const { Volumes } = await d.listVolumes({ filters: { label: [LABEL.managed] } });
  for (const v of Volumes ?? []) {
    if (live.has(v.Name)) continue;
    // A volume with no live container is an orphan once its owner is gone or its deadline passed;
    // one left without a container for minutes is one whose creation failed half-way.
    const created = Date.parse((v as { CreatedAt?: string }).CreatedAt ?? "") || now;
    if (!(await dead(v.Labels)) && now - created < 5 * 60_000) continue;
    try {
      await d.getVolume(v.Name).remove();
      report.volumes.push(v.Name);
    } catch (err) {
      if (statusOf(err) !== 404 && statusOf(err) !== 409) throw err;
    }
  }
  return report;
}

/** A process as an attached exec: stdin written, stdout and stderr (Docker's multiplexed frames, Tty off) read in arrival order. */
async function attachExec(
  container: Docker.Container,
  cmd: string[],
  onData: (chunk: Buffer, stream: 1 | 2) => void,
  opts: ProcessOptions = {},
): Promise<Attached> {
  const exec = await container.exec({
    Cmd: cmd,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    User: opts.user ?? AGENT_USER,
    WorkingDir: opts.cwd ?? "/workspace",
    Env: opts.env ?? [],
  });
  const socket = await exec.start({ hijack: true, stdin: true });
  let alive = true;
  demultiplex(socket, onData);
  const ended = new Promise<void>((resolve) => {
    const done = () => {
      alive = false;
      resolve();
    };
    socket.on("end", done);
    socket.on("close", done);
    socket.on("error", done);
  });
  const send = async (data: Buffer) => {
    if (!alive || socket.write(data)) return;
    await drainedOrExited(socket, exec);
  };
  return {
    write: (data) => {
      if (alive) socket.write(data);
    },
    send,
    endInput: () => socket.end(),
    pipeIn: (source) =>
      pipeGathered(
        source,
        send,
        () => alive,
        () => socket.end(),
      ),
    ended,
    get alive() {
      return alive;
    },
    pause: () => void socket.pause(),
    resume: () => void socket.resume(),
    destroy: () => {
      alive = false;
      socket.destroy();
    },
    exitCode: () =>
      exec.inspect().then(
        (i) => i.ExitCode ?? -1,
        () => -1,
      ),
  };
}

/**
 * attachExec's reader of the exec's output: Docker frames, [stream, 0, 0, 0, size (u32 BE)] then
 * size bytes, each passed to onData as it completes. Both streams are passed on in arrival order;
 * the shells we run send stderr to stdout anyway, so order is the terminal's.
 */
function demultiplex(socket: Duplex, onData: (chunk: Buffer, stream: 1 | 2) => void): void {
  let carry: Buffer = Buffer.alloc(0);
  socket.on("data", (chunk: Buffer) => {
    let buf = carry.length ? Buffer.concat([carry, chunk]) : chunk;
    while (buf.length >= 8) {
      const size = buf.readUInt32BE(4);
      if (buf.length < 8 + size) break;
      if (size > 0) onData(buf.subarray(8, 8 + size), buf[0] === 2 ? 2 : 1);
      buf = buf.subarray(8 + size);
    }
    carry = buf.length ? Buffer.from(buf) : Buffer.alloc(0);
  });
}

/**
 * attachExec's wait after a write the socket buffered: until it drains or closes. Both listeners go
 * once either fires: a long stream must not pile up "close" listeners. A process that exited without
 * reading all its stdin (a write that hit a full disk) never drains it, and the engine may then hold
 * the stream open for good: its state is asked meanwhile, and once it ended the stream is closed from here.
 */
function drainedOrExited(socket: Duplex, exec: Docker.Exec): Promise<void> {
  return new Promise<void>((r) => {
    let timer: NodeJS.Timeout | undefined;
    const go = () => (clearTimeout(timer), socket.off("drain", go), socket.off("close", go), r());
    const check = () => {
      // (what it printed may still be on its way: a moment more for the engine to send it)
      timer = setTimeout(
        () =>
          void exec.inspect().then(
            (i) => (i.Running ? check() : (timer = setTimeout(() => (socket.destroy(), go()), 300))),
            () => check(),
          ),
        500,
      );
      timer.unref?.();
    };
    socket.once("drain", go);
    socket.once("close", go);
    check();
  });
}
