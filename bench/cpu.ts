// CPU accounting for the speed bench: core-ms of the engine's processes (dockerd, containerd:
// shared with whatever else uses the engine, so an upper bound), of the bench's own containers
// (their cgroup) and their shims (with the runc children they reaped), and of this process.
import { readdirSync, readFileSync } from "node:fs";
import type { Readable } from "node:stream";
import { docker } from "../src/sandbox/docker.js";

const TICK_MS = 10; // USER_HZ 100 on Linux

/** utime + stime + cutime + cstime of a pid, in ms; undefined when it is gone. */
function procMs(pid: string): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * TICK_MS;
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
  for (const p of [`/sys/fs/cgroup/cpuacct/docker/${id}/cpuacct.usage`, `/sys/fs/cgroup/system.slice/docker-${id}.scope/cpu.stat`]) {
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
  total: number;
}

/** Samples every 50 ms until stop(); containers are those created with `label` meanwhile. */
export async function cpuMeter(label: string) {
  const ids = new Set<string>();
  const events = (await docker().getEvents({ filters: { type: ["container"], event: ["create"], label: [label] } })) as unknown as Readable;
  events.on("data", (d: Buffer) => {
    for (const line of d.toString().split("\n").filter(Boolean)) ids.add((JSON.parse(line) as { id: string }).id);
  });
  const engine = (name: string) => readdirSync("/proc").filter((p) => /^\d+$/.test(p) && cmdline(p).split(" ")[0]!.endsWith(name));
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
      const ms = procMs(p);
      if (ms !== undefined) last.set(`shim:${p}`, ms);
    }
    for (const id of ids) {
      const ms = cgroupMs(id);
      if (ms !== undefined) last.set(`ct:${id}`, ms);
    }
  };
  const cpu0 = process.cpuUsage();
  const timer = setInterval(sample, 50);
  return {
    stop(jobs: number): CpuReport {
      clearInterval(timer);
      sample();
      events.destroy();
      const cpu = process.cpuUsage(cpu0);
      const sum = (pred: (k: string) => boolean) => [...last].filter(([k]) => pred(k)).reduce((a, [k, v]) => a + v - (base.get(k) ?? 0), 0);
      const r = {
        container: sum((k) => k.startsWith("ct:")),
        shims: sum((k) => k.startsWith("shim:")),
        dockerd: sum((k) => dockerd.includes(k)),
        containerd: sum((k) => containerd.includes(k)),
        worker: (cpu.user + cpu.system) / 1000,
      };
      const per = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Math.round(v / jobs)])) as Omit<CpuReport, "total">;
      return { ...per, total: per.container + per.shims + per.dockerd + per.containerd + per.worker };
    },
  };
}
