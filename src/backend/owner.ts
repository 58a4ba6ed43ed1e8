// Who owns a sandbox: the labels every box carries, and this process's identity as an owner, so
// that a reaper on any host can tell a live owner's sandboxes from a dead one's (see reaper.ts).
import { randomBytes } from "node:crypto";
import { readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";

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
  /** Set by workers: a random id of one startWorker call, so its drain's sweep removes its own boxes only (ids may be shared). */
  instance: "patchbay.instance",
} as const;

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

/** Whether the owner of a box (a worker id, with the box's labels) is still alive: the reaper removes the boxes of a dead one. */
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
