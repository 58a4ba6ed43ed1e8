// Which engine the Docker API reaches — Docker, or Podman's compatible service — and what it can
// hold a sandbox to. Podman answers dockerode like Docker for what patchbay uses, with four
// differences the Docker backend (docker.ts) handles through this module: a tmpfs volume is sized
// in pages (its `size=` asks for an XFS project quota), gVisor is not a runtime it runs, a rootless
// Podman on cgroup v1 drops every memory, pids and cpu limit (patchbay's runtime wrapper,
// scripts/podman/patchbay-runc, applies them from the container's PATCHBAY_LIMITS), and on cgroup
// v2 it applies only the controllers delegated to its user. What it cannot hold a sandbox to is
// refused: the worker's engine check fails with the reason and the worker takes no job.
import { plural } from "../core/count.js";
import type Docker from "dockerode";
import { kinded } from "../core/errors.js";

export interface EngineInfo {
  name: "docker" | "podman";
  version: string;
  /** Podman run by an unprivileged user: container root is that user on the host. */
  rootless: boolean;
  cgroup: "v1" | "v2";
  /** The OCI runtime a container gets by default (its path where the engine says). */
  runtimePath?: string;
  /** Controllers this engine's cgroups can use (rootless Podman on v2: the delegated ones). */
  controllers?: string[];
  /** Host ids container uids map to (rootless Podman): container id, host id, length. */
  uidMap?: { container: number; host: number; size: number }[];
  /** Podman's cgroup manager (systemd or cgroupfs). */
  cgroupManager?: string;
  /** Docker's own word on whether it can apply memory, pids and cpu limits (a rootless Docker on v1 cannot). */
  limitsSupported?: boolean;
  /** Docker: the arguments it runs gVisor's runsc with, where it registers runsc. */
  runscArgs?: string[];
}

/** A box asks for what its engine cannot give (gVisor under Podman): the worker's setting, not the job's. */
export class EngineConfigError extends kinded("config") {}

/** The wrapper's file name, as the engine reports its default runtime's path. */
export const LIMITS_WRAPPER = "patchbay-runc";

const known = new WeakMap<Docker, { at: number; info: Promise<EngineInfo> }>();

/**
 * What the engine behind `d` is; asked once per client (a failed ask is asked again), and again
 * once `maxAgeMs` old where a caller gives one (the worker's health checks: an engine restarted
 * with another runtime is seen within it; Podman's info takes hundreds of ms, so not every job).
 */
export function engineInfo(d: Docker, maxAgeMs = Infinity): Promise<EngineInfo> {
  const had = known.get(d);
  if (had && Date.now() - had.at <= maxAgeMs) return had.info;
  const info = ask(d);
  const entry = { at: Date.now(), info };
  info.catch(() => known.get(d) === entry && known.delete(d));
  known.set(d, entry);
  return info;
}

async function ask(d: Docker): Promise<EngineInfo> {
  const v = (await d.version()) as { Version?: string; Components?: { Name?: string; Version?: string }[] };
  const podman = v.Components?.find((c) => c.Name === "Podman Engine");
  if (!podman) {
    const i = (await d.info()) as {
      CgroupVersion?: string;
      ServerVersion?: string;
      SecurityOptions?: string[];
      MemoryLimit?: boolean;
      PidsLimit?: boolean;
      CpuCfsQuota?: boolean;
      Runtimes?: Record<string, { runtimeArgs?: string[] }>;
    };
    const runsc = i.Runtimes?.runsc;
    return {
      name: "docker",
      version: i.ServerVersion ?? v.Version ?? "?",
      rootless: Boolean(i.SecurityOptions?.includes("name=rootless")),
      cgroup: i.CgroupVersion === "2" ? "v2" : "v1",
      limitsSupported: i.MemoryLimit !== false && i.PidsLimit !== false && i.CpuCfsQuota !== false,
      ...(runsc ? { runscArgs: runsc.runtimeArgs ?? [] } : {}),
    };
  }
  // libpod's own info says what the compatible one does not: rootless, the controllers, the id maps.
  const info = await new Promise<PodmanInfo>((resolve, reject) =>
    d.modem.dial(
      { path: "/v4.0.0/libpod/info", method: "GET", statusCodes: { 200: true }, options: {} },
      (err, data) => (err ? reject(err) : resolve(data ?? {})),
    ),
  );
  const h = info.host ?? {};
  return {
    name: "podman",
    version: podman.Version ?? v.Version ?? "?",
    rootless: Boolean(h.security?.rootless),
    cgroup: h.cgroupVersion === "v2" ? "v2" : "v1",
    runtimePath: h.ociRuntime?.path,
    cgroupManager: h.cgroupManager,
    controllers: h.cgroupControllers ?? [],
    uidMap: (h.idMappings?.uidmap ?? []).map((m) => ({ container: m.container_id, host: m.host_id, size: m.size })),
  };
}

interface PodmanInfo {
  host?: {
    cgroupVersion?: string;
    cgroupManager?: string;
    cgroupControllers?: string[];
    ociRuntime?: { path?: string };
    security?: { rootless?: boolean };
    idMappings?: { uidmap?: { container_id: number; host_id: number; size: number }[] };
  };
}

/**
 * Whether runsc runs with --oci-seccomp, without which gVisor ignores the OCI spec's seccomp section
 * (it implements ptrace itself). The gVisor of Debian 12 (20221219) applies it to the container's
 * own process only, not to exec'd ones (every process of patchbay's): there its own ptrace rule
 * holds, a process traces only its descendants (test/integration/sandbox-gvisor.test.ts).
 */
export const runscSeccomp = (e: EngineInfo): boolean =>
  Boolean(e.runscArgs?.some((a) => /^--?oci-seccomp(=true)?$/.test(a)));

/** Whether the engine's default runtime is patchbay's wrapper (which reads PATCHBAY_LIMITS). */
export const wrapped = (e: EngineInfo): boolean => Boolean(e.runtimePath?.endsWith(`/${LIMITS_WRAPPER}`));

/** Why this engine cannot hold a sandbox to its limits, or undefined when it can. */
export function limitsProblem(e: EngineInfo): string | undefined {
  if (e.name === "docker") {
    if (e.limitsSupported !== false) return undefined;
    return `this Docker engine${e.rootless ? " (rootless)" : ""} says it cannot apply memory, pids or cpu limits (cgroup ${e.cgroup}${e.rootless ? ": a rootless Docker needs cgroup v2 with those controllers delegated" : ""}): run the worker on an engine that can, e.g. rootless Podman (docs/rootless.md)`;
  }
  if (!e.rootless) return undefined;
  if (e.cgroup === "v1") {
    if (wrapped(e)) return undefined;
    return `this rootless Podman runs on cgroup v1, where it silently drops every memory, pids and cpu limit (its default runtime is ${e.runtimePath ?? "unknown"}): set it up with \`bash scripts/services.sh --engine podman\` as root (patchbay's runtime wrapper applies the limits), or boot the host with cgroup v2 and delegate memory, pids and cpu to the engine's user`;
  }
  // With cgroupfs a rootless container gets no cgroup path of its own, and runc drops the limits
  // it cannot write, whatever controllers the service's own cgroup lists.
  if (e.cgroupManager !== "systemd")
    return `this rootless Podman on cgroup v2 uses the ${e.cgroupManager ?? "unknown"} cgroup manager, under which it applies no limits: set cgroup_manager = "systemd" in its containers.conf, with a systemd user session for its user (loginctl enable-linger)`;
  const missing = ["memory", "pids", "cpu"].filter((c) => !e.controllers?.includes(c));
  if (!missing.length) return undefined;
  return `this rootless Podman's cgroup lacks the ${missing.join(", ")} ${plural(missing.length, "controller")}, so those limits would not hold: delegate them to the engine's user (systemd: Delegate=memory pids cpu in /etc/systemd/system/user@.service.d/delegate.conf, then log in again)`;
}

/** One line for doctor and logs: "podman 4.3.1, rootless (container root = host uid 999; uid 1000 = host uid 200999), cgroup v1". */
export function describeEngine(e: EngineInfo, agentUid: number): string {
  const parts = [`${e.name} ${e.version}`];
  if (e.name === "podman") parts.push(e.rootless ? `rootless (${idsOf(e, agentUid)})` : "rootful");
  parts.push(`cgroup ${e.cgroup}`);
  return parts.join(", ");
}

/** The host uid a container uid runs as, from the engine's map (undefined where it has none). */
export function hostUid(e: EngineInfo, uid: number): number | undefined {
  const m = e.uidMap?.find((r) => uid >= r.container && uid < r.container + r.size);
  return m ? m.host + (uid - m.container) : undefined;
}

function idsOf(e: EngineInfo, agentUid: number): string {
  return `container root = host uid ${hostUid(e, 0) ?? "?"}; uid ${agentUid} = host uid ${hostUid(e, agentUid) ?? "?"}`;
}

/**
 * Why this engine refuses a box of this spec for a worker running as `workerUid`, or undefined: the
 * limits it would drop; gVisor under Podman; under a rootless engine, a setup network (its proxy
 * socket, the worker's and mode 0600, reaches only the sandbox root of an engine run by the same user).
 */
export function createProblem(
  e: EngineInfo,
  spec: { runtime: string; mounts?: unknown[] },
  workerUid: number | undefined,
): string | undefined {
  const limits = limitsProblem(e);
  if (limits) return limits;
  if (e.name === "podman" && spec.runtime !== "runc")
    return `runtime ${spec.runtime} (gVisor) is not available under Podman: run jobs that ask for it on a worker with a Docker engine that registers runsc`;
  const root = hostUid(e, 0);
  if (e.rootless && spec.mounts?.length && root !== undefined && workerUid !== root) {
    return `the setup phase's network under rootless Podman needs the worker to run as the engine's user (uid ${root}), which alone can reach its proxy socket from the sandbox; this worker runs as uid ${workerUid ?? "unknown"}`;
  }
  return undefined;
}

/**
 * The container's PATCHBAY_LIMITS for the runtime wrapper: memory bytes, pids, cpu quota and period
 * (microseconds). Set only where the engine's default runtime is the wrapper (`wrapped`), which
 * takes it out of the spec the sandbox gets.
 */
export function limitsEnv(l: { memoryMb: number; pids: number; cpus: number }): string {
  const period = 100_000;
  return `PATCHBAY_LIMITS=${l.memoryMb * 1024 * 1024},${l.pids},${Math.round(l.cpus * period)},${period}`;
}
