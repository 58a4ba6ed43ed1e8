// The Docker side of a sandbox: one dockerode client, hardened container + workspace volume
// creation, removal, and the reaper for labelled leftovers.
import Docker from "dockerode";
import { randomBytes } from "node:crypto";
import { readFileSync, readlinkSync } from "node:fs";
import { homedir, hostname } from "node:os";
import { join } from "node:path";
import { defaults } from "../config.js";

export const LABEL = {
  managed: "patchbay",
  job: "patchbay.job",
  worker: "patchbay.worker",
  deadline: "patchbay.deadline",
  /** Set by workers: the queue whose heartbeats tell whether the owner lives. */
  queue: "patchbay.queue",
  /** Set by workers: the id of their Redis (src/queue/keys.ts `deployment`); heartbeats live there. */
  redis: "patchbay.redis",
  /** The owner process as `boot id/pid namespace/pid/start time`: where (and whether) its pid can be checked. */
  process: "patchbay.process",
} as const;

/** Capabilities of the container's root processes (patchbay's own); the agent's uid has none. */
export const SANDBOX_CAPS = ["KILL", "SETUID", "SETGID", "DAC_OVERRIDE"] as const;
/** A root-only tmpfs for patchbay's private git store. */
export const PRIVATE_DIR = "/patchbay";

export interface SandboxLimits {
  memoryMb: number;
  cpus: number;
  pids: number;
  diskMb: number;
  tmpMb: number;
  network: "none" | "bridge";
}

let client: Docker | undefined;
/**
 * One client per process, for the engine the environment names the way the docker CLI reads it:
 * DOCKER_HOST (unix:// or tcp://), DOCKER_TLS_VERIFY / DOCKER_TLS (any non-empty value: TLS) and
 * DOCKER_CERT_PATH (default ~/.docker). dockerode alone takes TLS only for "1" or port 2376.
 */
export function docker(): Docker {
  client ??= new Docker(engineOptions(process.env));
  return client;
}

export function engineOptions(env: NodeJS.ProcessEnv): Docker.DockerOptions {
  const host = env.DOCKER_HOST ?? "";
  // dockerode's ssh transport (ssh2) is given no host key check: anyone on the path could be the engine.
  if (/^ssh:/i.test(host)) {
    throw new Error(`DOCKER_HOST=${host}: ssh:// is not supported (dockerode does not check the host key). Forward the engine's socket with OpenSSH instead, e.g. ssh -nNT -L /run/patchbay-engine.sock:/var/run/docker.sock USER@HOST and DOCKER_HOST=unix:///run/patchbay-engine.sock; or use TCP with TLS`);
  }
  if (!/^(tcp|https?):\/\//.test(host) || !(env.DOCKER_TLS_VERIFY || env.DOCKER_TLS)) return {};
  const dir = env.DOCKER_CERT_PATH || join(homedir(), ".docker");
  const read = (f: string) => readFileSync(join(dir, f));
  return { protocol: "https", ca: read("ca.pem"), cert: read("cert.pem"), key: read("key.pem") };
}

/** This process's identity as a container owner: host:pid:random. */
export const processOwnerId = `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;

/** `boot id/pid namespace` of this process: a pid is meaningful only within both. */
const pidSpace = (() => {
  try {
    const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    return `${boot}/${readlinkSync("/proc/self/ns/pid").replace(/\D/g, "")}`;
  } catch {
    return undefined; // not Linux: owners are judged by hostname
  }
})();

/** A process's start time (clock ticks since boot), which tells a reused pid from the one that was; "" when there is no such process. */
function startTimeOf(pid: number | "self"): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT" ? "" : undefined;
  }
}

/**
 * The label that lets a reaper judge this process as an owner. Hostnames repeat across hosts (and
 * two engines on one machine share one), and a worker in a container has a pid namespace of its
 * own: only a reaper in the same boot and pid namespace checks the pid, and the start time
 * tells a reused pid from the owner.
 */
export function processLabel(): Record<string, string> {
  const start = startTimeOf("self");
  return pidSpace && start ? { [LABEL.process]: `${pidSpace}/${process.pid}/${start}` } : {};
}

/** True when this process can judge the owner by its pid: same boot and pid namespace (labelled), else same hostname. */
export function ownerIsLocal(owner: string, labels: Record<string, string>): boolean {
  const proc = labels[LABEL.process];
  if (proc) return pidSpace !== undefined && proc.split("/").slice(0, 2).join("/") === pidSpace;
  return owner.split(":")[0] === hostname();
}

export function statusOf(err: unknown): number | undefined {
  return (err as { statusCode?: number } | null)?.statusCode;
}

export interface CreateOptions {
  name: string;
  image: string;
  limits: SandboxLimits;
  runtime: "runc" | "runsc";
  labels: Record<string, string>;
  /** Extra mounts, e.g. the setup phase's egress directory (src/sandbox/egress.ts). */
  mounts?: Docker.MountSettings[];
}

/** Creates the workspace volume (tmpfs-backed, size-bounded) and the hardened container, and starts it. */
export async function createContainer(o: CreateOptions): Promise<{ container: Docker.Container; volume: string }> {
  const d = docker();
  const volume = `${o.name}-ws`;
  // A tmpfs-backed named volume: bounded, gone with the sandbox, and (unlike HostConfig.Tmpfs)
  // visible to the archive API under a read-only rootfs.
  await d.createVolume({
    Name: volume,
    Driver: "local",
    DriverOpts: { type: "tmpfs", device: "tmpfs", o: `size=${o.limits.diskMb}m,uid=1000,gid=1000,mode=0755` },
    Labels: o.labels,
  });
  try {
    const container = await d.createContainer({
      name: o.name,
      Image: o.image,
      // The container's own process runs as root so that the agent (uid 1000) cannot kill it with
      // `kill -9 -1` and stop the sandbox; it is `sleep` under tini. Every command of the agent
      // runs as uid 1000 through exec, with no capabilities (CapEff/CapPrm 0, no new privileges).
      User: "0:0",
      Cmd: ["sleep", "infinity"],
      Entrypoint: [],
      Env: [], // nothing of the host environment enters; the image's ENV stays
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
        SecurityOpt: ["no-new-privileges"],
        ReadonlyRootfs: true,
        Tmpfs: {
          "/tmp": `rw,nosuid,nodev,size=${o.limits.tmpMb}m,mode=1777`,
          // patchbay's private git store (baseline and final trees): root's alone, mode 0700.
          [PRIVATE_DIR]: `rw,nosuid,nodev,noexec,size=${o.limits.diskMb}m,mode=0700`,
        },
        Mounts: [{ Type: "volume", Source: volume, Target: "/workspace" }, ...(o.mounts ?? [])],
        PidsLimit: o.limits.pids,
        Memory: o.limits.memoryMb * 1024 * 1024,
        MemorySwap: o.limits.memoryMb * 1024 * 1024, // = Memory: no swap
        NanoCpus: Math.round(o.limits.cpus * 1e9),
        Init: true,
        LogConfig: { Type: "json-file", Config: { "max-size": "1m", "max-file": "1" } },
        ...(o.runtime !== "runc" ? { Runtime: o.runtime } : {}),
      },
    });
    await container.start();
    return { container, volume };
  } catch (err) {
    await removeQuietly(o.name, volume);
    throw err;
  }
}

// Removals that failed because the engine was away (restarted, say). The reaper of a live owner
// keeps its containers, so the owner itself tries these again (retryRemovals, on each reaper pass).
const pendingRemovals = new Map<string, string>();

/** Tries the failed removals again; returns how many succeeded. */
export async function retryRemovals(): Promise<number> {
  let n = 0;
  for (const [name, volume] of [...pendingRemovals]) if (await removeQuietly(name, volume).then(() => true, () => false)) n++;
  return n;
}

/** Removes container and volume; missing ones are fine (idempotent). A failure is remembered for retryRemovals. */
export async function removeQuietly(containerName: string, volume: string): Promise<void> {
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

export type OwnerAlive = (workerId: string, labels: Record<string, string>) => Promise<boolean>;

/** Default owner check: a worker whose pid can be checked here is alive iff its pid is; elsewhere, trust the deadline. */
export const localOwnerAlive: OwnerAlive = async (owner, labels) => {
  if (owner === processOwnerId) return true;
  if (!ownerIsLocal(owner, labels)) return true;
  const proc = labels[LABEL.process];
  if (proc) {
    const [, , pid, start] = proc.split("/");
    const now = startTimeOf(Number(pid));
    return now === undefined || now === start; // unreadable (hidepid): not ours to judge
  }
  const [, pid] = owner.split(":");
  if (!pid) return true;
  // Our own pid under another id: an earlier process (a restarted worker container reuses pids).
  if (Number(pid) === process.pid) return false;
  try {
    process.kill(Number(pid), 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
};

export interface ReapReport {
  containers: string[];
  volumes: string[];
}

/** Removes labelled containers and volumes whose owner is gone or whose deadline passed. */
export async function reap(ownerAlive: OwnerAlive = localOwnerAlive, now = Date.now()): Promise<ReapReport> {
  const d = docker();
  const report: ReapReport = { containers: [], volumes: [] };
  const verdicts = new Map<string, Promise<boolean>>();
  const dead = (labels: Record<string, string> | undefined): Promise<boolean> => {
    const deadline = Number(labels?.[LABEL.deadline] ?? 0);
    if (deadline && deadline * 1000 < now) return Promise.resolve(true);
    const owner = labels?.[LABEL.worker];
    if (!owner) return Promise.resolve(false);
    // The verdict may depend on the queue label too (a worker judges only its own queue's owners).
    const key = `${owner}\0${labels?.[LABEL.queue] ?? ""}`;
    if (!verdicts.has(key)) verdicts.set(key, ownerAlive(owner, labels ?? {}).then((a) => !a));
    return verdicts.get(key)!;
  };
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

export function defaultLimits(over: Partial<SandboxLimits> = {}): SandboxLimits {
  const s = defaults.sandbox;
  return { memoryMb: s.memoryMb, cpus: s.cpus, pids: s.pids, diskMb: s.diskMb, tmpMb: s.tmpMb, network: s.network, ...over };
}
