// CPU accounting for the speed bench: core-ms of the engine's processes (dockerd, containerd:
// shared with whatever else uses the engine, so an upper bound), of the bench's own containers
// (their cgroup), their shims (their own time: what they reap includes the container's exec'd
// processes, already in the cgroup), and of this process; the machine's busy time (/proc/stat)
// is the total, and what the parts leave of it is runc, the kernel and everything else.
import { readdirSync, readFileSync } from "node:fs";
import type { Readable } from "node:stream";
import { docker } from "../src/backend/docker.js";

const TICK_MS = 10; // USER_HZ 100 on Linux

/** utime + stime (+ cutime + cstime with `reaped`) of a pid, in ms; undefined when it is gone. */
export function procMs(pid: string, reaped = true): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12]) + (reaped ? Number(f[13]) + Number(f[14]) : 0)) * TICK_MS;
  } catch {
    return undefined;
  }
}

function cmdline(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
  } catch {
    return "";
  }
}

function cgroupMs(id: string): number | undefined {
  for (const p of [
    `/sys/fs/cgroup/cpuacct/docker/${id}/cpuacct.usage`,
    `/sys/fs/cgroup/system.slice/docker-${id}.scope/cpu.stat`,
  ]) {
    try {
      const t = readFileSync(p, "utf8");
      return p.endsWith("usage") ? Number(t) / 1e6 : Number(/usage_usec (\d+)/.exec(t)?.[1]) / 1000;
    } catch {
      // not this layout
    }
  }
  return undefined;
}

export interface CpuReport {
  container: number;
  shims: number;
  dockerd: number;
  containerd: number;
  worker: number;
  /** The machine's busy time less the parts above: runc, the kernel's own work, anything else running. */
  runc_kernel_other: number;
  total: number;
}

/** Busy core-ms of the whole machine since boot (user, nice, system, irq, softirq, steal). */
export function machineMs(): number {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  return (f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!) * TICK_MS;
}

/** Samples every 50 ms until stop(); containers are those created with `label` meanwhile. */
export async function cpuMeter(label: string) {
  const ids = new Set<string>();
  const events = (await docker().getEvents({
    filters: { type: ["container"], event: ["create"], label: [label] },
  })) as unknown as Readable;
  events.on("data", (d: Buffer) => {
    for (const line of d.toString().split("\n").filter(Boolean)) ids.add((JSON.parse(line) as { id: string }).id);
  });
  const engine = (name: string) =>
    readdirSync("/proc").filter((p) => /^\d+$/.test(p) && cmdline(p).split(" ")[0]!.endsWith(name));
  const [dockerd, containerd] = [engine("dockerd"), engine("containerd")];
  const base = new Map<string, number>();
  for (const p of [...dockerd, ...containerd]) base.set(p, procMs(p) ?? 0);
  const last = new Map<string, number>();
  const shimOf = new Map<string, string>();
  const sample = () => {
    for (const p of [...dockerd, ...containerd]) last.set(p, procMs(p) ?? last.get(p) ?? 0);
    for (const p of readdirSync("/proc")) {
      if (!/^\d+$/.test(p)) continue;
      if (!shimOf.has(p)) {
        const c = cmdline(p);
        const id = / -id ([0-9a-f]{64})/.exec(c)?.[1];
        if (!c.includes("containerd-shim") || !id || !ids.has(id)) continue;
        shimOf.set(p, id);
      }
      const ms = procMs(p, false);
      if (ms !== undefined) last.set(`shim:${p}`, ms);
    }
    for (const id of ids) {
      const ms = cgroupMs(id);
      if (ms !== undefined) last.set(`ct:${id}`, ms);
    }
  };
  const cpu0 = process.cpuUsage();
  const machine0 = machineMs();
  const timer = setInterval(sample, 50);
  return {
    stop(jobs: number): CpuReport {
      clearInterval(timer);
      sample();
      events.destroy();
      const cpu = process.cpuUsage(cpu0);
      const machine = machineMs() - machine0;
      const sum = (pred: (k: string) => boolean) =>
        [...last].filter(([k]) => pred(k)).reduce((a, [k, v]) => a + v - (base.get(k) ?? 0), 0);
      const r = {
        container: sum((k) => k.startsWith("ct:")),
        shims: sum((k) => k.startsWith("shim:")),
        dockerd: sum((k) => dockerd.includes(k)),
        containerd: sum((k) => containerd.includes(k)),
        worker: (cpu.user + cpu.system) / 1000,
      };
      const per = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Math.round(v / jobs)])) as Omit<
        CpuReport,
        "total" | "runc_kernel_other"
      >;
      const total = Math.round(machine / jobs);
      const parts = per.container + per.shims + per.dockerd + per.containerd + per.worker;
      return { ...per, runc_kernel_other: Math.max(0, total - parts), total: Math.max(total, parts) };
    },
  };
}
