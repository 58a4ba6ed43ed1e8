// The density row's host sampling (density.ts): the memory and CPU of a step's containers (their
// cgroups), their shims, conmons or runsc processes (from /proc), the worker, and the rest of the
// machine by process tree, every SAMPLE_MS; and the containers a step's worker makes, from the
// engine's events.
import { readdirSync, readFileSync } from "node:fs";
import type { Readable } from "node:stream";
import type Docker from "dockerode";
import type { PatchbayClient } from "../src/queue/client.js";
import { machineMs, procMs } from "./cpu.js";
import { median } from "./lib.js";

const SAMPLE_MS = 500;
const SCAN_EVERY = 4; // a full /proc scan (new shims, conmons, runsc processes) and their PSS every 2 s
const PAGE = 4096;

const read = (p: string): string | undefined => {
  try {
    return readFileSync(p, "utf8");
  } catch {
    return undefined;
  }
};

/** A process's name, parent, resident pages and own CPU ticks, from one read of /proc/PID/stat. */
function stat(pid: string) {
  const s = read(`/proc/${pid}/stat`);
  if (!s) return undefined;
  const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
  return { comm: s.slice(s.indexOf("(") + 1, s.lastIndexOf(")")), ppid: f[1]!, rssBytes: Number(f[21]) * PAGE };
}

const pss = (pid: string) =>
  Number(/^Pss:\s+(\d+) kB/m.exec(read(`/proc/${pid}/smaps_rollup`) ?? "")?.[1] ?? NaN) * 1024;

/** Where a container's cgroup v1 directories are: Docker's (runc, runsc) or the rootless Podman wrapper's. */
function cgroupBases(): string[] {
  const extra = readdirSync("/sys/fs/cgroup/memory").filter((d) => d.startsWith("patchbay-rootless-"));
  return ["docker", ...extra];
}

/** A container's memory working set and raw usage, and its CPU, from its cgroups; undefined when gone. */
function cgroupOf(bases: string[], id: string) {
  for (const b of bases) {
    const usage = read(`/sys/fs/cgroup/memory/${b}/${id}/memory.usage_in_bytes`);
    if (usage === undefined) continue;
    const st = read(`/sys/fs/cgroup/memory/${b}/${id}/memory.stat`) ?? "";
    const inactive = Number(/^total_inactive_file (\d+)$/m.exec(st)?.[1] ?? 0);
    const cpuNs = Number(read(`/sys/fs/cgroup/cpuacct/${b}/${id}/cpuacct.usage`) ?? NaN);
    return { usage: Number(usage), ws: Math.max(0, Number(usage) - inactive), cpuMs: cpuNs / 1e6 };
  }
  return undefined;
}

type Tree = "other_processes" | "redis" | "kernel_threads" | "init_reaped" | "ours";

/**
 * Every live process's CPU (own and reaped children's, ms), by whose it is: a process's CPU moves
 * into its reaper's when it ends, so a class's sum at the end less its sum at the start is what it
 * used between, for trees that reap their own. "ours": the bench's process tree (the worker in it),
 * the step's shims and their containers, dockerd and containerd; "init_reaped": pid 1, which reaps
 * every orphan (the engines' shims among them, so it holds removed containers' CPU, ours too);
 * "other_processes": everything else (other users' builds, tests, workers and their containers).
 */
function treeCpu(ourShim: (pid: string) => boolean): Record<Tree, number> {
  const procs = new Map<string, { ppid: string; comm: string; v: number }>();
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    const s = read(`/proc/${p}/stat`);
    if (!s) continue;
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    const v = (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 10;
    procs.set(p, { ppid: f[1]!, comm: s.slice(s.indexOf("(") + 1, s.lastIndexOf(")")), v });
  }
  const memo = new Map<string, Tree>();
  const classOf = (pid: string): Tree => {
    const known = memo.get(pid);
    if (known) return known;
    const p = procs.get(pid);
    let c: Tree;
    if (pid === "1") c = "init_reaped";
    else if (pid === "2" || p?.ppid === "2") c = "kernel_threads";
    else if (!p || p.ppid === "0") c = "other_processes";
    else if (pid === String(process.pid) || ["dockerd", "containerd"].includes(p.comm) || ourShim(pid)) c = "ours";
    else if (p.comm === "redis-server") c = "redis";
    else c = p.ppid === "1" ? "other_processes" : classOf(p.ppid);
    memo.set(pid, c);
    return c;
  };
  const out: Record<Tree, number> = { other_processes: 0, redis: 0, kernel_threads: 0, init_reaped: 0, ours: 0 };
  for (const [pid, p] of procs) out[classOf(pid)] += p.v;
  return out;
}

type Kind = "shim" | "runsc" | "conmon" | "podman_service";
const CANDIDATES = new Set(["containerd-shim", "exe", "conmon", "podman"]);

export interface Sample {
  t: number;
  inFlight: number;
  done: number;
  containers: number;
  /** Bytes: the containers' working sets and raw usage, and each kind of process's PSS (RSS until its first PSS read). */
  mem: Record<Kind | "containers" | "containers_raw", number>;
  rss: Record<Kind, number>;
  worker: number;
  total: number;
}

/** The containers made with the queue's label, from the engine's events: watched before the worker starts. */
export async function watchContainers(engine: Docker, queueName: string) {
  const ids = new Set<string>();
  const events = (await engine.getEvents({
    filters: { type: ["container"], event: ["create"], label: [`patchbay.queue=${queueName}`] },
  })) as unknown as Readable;
  let rest = ""; // an event can span chunks
  events.on("data", (d: Buffer) => {
    const lines = (rest + d.toString()).split("\n");
    rest = lines.pop()!;
    for (const line of lines.filter(Boolean)) {
      const e = JSON.parse(line) as { id?: string; Actor?: { ID?: string } };
      const id = e.id ?? e.Actor?.ID;
      if (id) ids.add(id);
    }
  });
  events.on("error", () => {});
  return { ids, close: () => events.destroy() };
}

/**
 * Samples the host through one step: the step's containers, the processes that serve them (found
 * by the container id in their command line), the worker, the jobs in flight.
 */
export function hostSampler(o: { ids: Set<string>; workerPid: string; client: PatchbayClient; jobs: number }) {
  const bases = cgroupBases();
  const kinds = new Map<string, Kind>(); // live pids that serve the step's containers
  const kindEver = new Map<string, Kind>();
  const pssOf = new Map<string, number>();
  const cpuCt = new Map<string, number>(); // container id → its cgroup's CPU ms, last seen (kept once it is gone)
  const cpuProc = new Map<string, number>(); // pid → own CPU ms, last seen
  const base = new Map<string, number>(); // what each had used before the step began
  const lifeOf = new Map<string, [number, number]>(); // container id → first and last time its cgroup was seen
  let scans = 0;
  const classify = (pid: string, comm: string): Kind | undefined => {
    if (!CANDIDATES.has(comm)) return undefined;
    const c = (read(`/proc/${pid}/cmdline`) ?? "").replace(/\0/g, " ");
    if (comm === "podman") return / system service/.test(c) ? "podman_service" : undefined;
    const id = /[0-9a-f]{64}/.exec(c)?.[0];
    if (!id || !o.ids.has(id)) return undefined; // another container's, or its create event not here yet
    if (comm === "containerd-shim") return "shim";
    if (comm === "conmon") return "conmon";
    return /^runsc-(sandbox|gofer)/.test(c) ? "runsc" : undefined;
  };
  const scan = () => {
    for (const p of readdirSync("/proc")) {
      if (!/^\d+$/.test(p) || kinds.has(p)) continue;
      const k = classify(p, stat(p)?.comm ?? "");
      if (!k) continue;
      kinds.set(p, k);
      kindEver.set(p, k);
      // Those there at the start count from then; those found later from their birth.
      if (scans === 0) base.set(`p:${p}`, procMs(p, false) ?? 0);
    }
    for (const p of kinds.keys()) {
      const v = pss(p);
      if (Number.isFinite(v)) pssOf.set(p, v);
    }
    scans++;
  };
  const engineProcs = readdirSync("/proc").filter((p) => {
    const c = /^\d+$/.test(p) ? stat(p)?.comm : undefined;
    return c === "dockerd" || c === "containerd";
  });
  for (const p of engineProcs) base.set(`e:${p}`, procMs(p) ?? 0);
  scan();
  const ourShim = (pid: string) => kindEver.get(pid) === "shim";
  const first = {
    machine: machineMs(),
    worker: procMs(o.workerPid) ?? 0,
    self: process.cpuUsage(),
    tree: treeCpu(ourShim),
  };
  const t0 = Date.now();
  let n = 0;
  const sample = async (): Promise<Sample> => {
    if (n++ % SCAN_EVERY === 0) scan();
    const mem = { containers: 0, containers_raw: 0, shim: 0, runsc: 0, conmon: 0, podman_service: 0 };
    const rss = { shim: 0, runsc: 0, conmon: 0, podman_service: 0 };
    let containers = 0;
    for (const id of o.ids) {
      const c = cgroupOf(bases, id);
      if (!c) continue;
      containers++;
      mem.containers += c.ws;
      mem.containers_raw += c.usage;
      if (!Number.isFinite(c.cpuMs)) continue;
      if (n === 1) base.set(`c:${id}`, c.cpuMs);
      cpuCt.set(id, c.cpuMs);
      const life = lifeOf.get(id);
      if (life) life[1] = Date.now();
      else lifeOf.set(id, [Date.now(), Date.now()]);
    }
    for (const [p, k] of kinds) {
      const s = stat(p);
      if (!s) {
        kinds.delete(p);
        continue;
      }
      rss[k] += s.rssBytes;
      mem[k] += pssOf.get(p) ?? s.rssBytes;
      const ms = procMs(p, false);
      if (ms !== undefined) cpuProc.set(p, ms);
    }
    const worker = stat(o.workerPid)?.rssBytes ?? 0;
    const counts = await o.client.queue.getJobCounts("active", "completed", "failed");
    return {
      t: Date.now() - t0,
      inFlight: counts.active ?? 0,
      done: (counts.completed ?? 0) + (counts.failed ?? 0),
      containers,
      mem,
      rss,
      worker,
      // The containers' working sets, the serving processes' PSS (runsc's Sentry and gofer are in
      // their containers' cgroups already, so not again), the worker's RSS.
      total: mem.containers + mem.shim + mem.conmon + mem.podman_service + worker,
    };
  };
  const series: Sample[] = [];
  return {
    series,
    /** Samples every 500 ms until every job has ended or `deadline` (ms from now) passes. */
    async run(deadlineMs: number) {
      for (;;) {
        const t = Date.now();
        const s = await sample();
        series.push(s);
        if (s.done >= o.jobs || s.t > deadlineMs) return s;
        await new Promise((r) => setTimeout(r, Math.max(0, SAMPLE_MS - (Date.now() - t))));
      }
    },
    /**
     * The step's containers by how long they were seen: the jobs' own sandboxes live through their
     * 16 turns, verify's and the pool's spare ones a few seconds; each group's count and core-ms.
     */
    containersByLife(longMs: number) {
      const groups = { lived_over_half_the_turns: [] as number[], shorter: [] as number[] };
      for (const [id, [a, z]] of lifeOf)
        (z - a >= longMs ? groups.lived_over_half_the_turns : groups.shorter).push(
          (cpuCt.get(id) ?? 0) - (base.get(`c:${id}`) ?? 0),
        );
      return Object.fromEntries(
        Object.entries(groups).map(([k, v]) => [
          k,
          {
            count: v.length,
            core_ms_median: Math.round(median(v.length ? v : [0])),
            core_ms_sum: Math.round(v.reduce((a, b) => a + b, 0)),
          },
        ]),
      );
    },
    /** Core-ms since the sampler was made, by process. */
    cpu() {
      scan();
      const self = process.cpuUsage(first.self);
      const tree = treeCpu(ourShim);
      const procs = (pred: (k: Kind) => boolean) =>
        [...cpuProc].reduce((a, [p, v]) => (pred(kindEver.get(p)!) ? a + v - (base.get(`p:${p}`) ?? 0) : a), 0);
      return {
        worker: (procMs(o.workerPid) ?? first.worker) - first.worker,
        // null where the containers' cgroups have no cpuacct (the rootless Podman's wrapper makes
        // memory, pids and cpu ones): their CPU is then in rest_of_machine.
        containers: cpuCt.size ? [...cpuCt].reduce((a, [id, v]) => a + v - (base.get(`c:${id}`) ?? 0), 0) : null,
        shims: procs((k) => k === "shim"),
        conmon_and_podman_service: procs((k) => k === "conmon" || k === "podman_service"),
        engine_dockerd_containerd: engineProcs.reduce(
          (a, p) => a + (procMs(p) ?? base.get(`e:${p}`) ?? 0) - (base.get(`e:${p}`) ?? 0),
          0,
        ),
        bench_model_client_sampler: (self.user + self.system) / 1000,
        redis: tree.redis - first.tree.redis,
        other_processes: tree.other_processes - first.tree.other_processes,
        kernel_threads: tree.kernel_threads - first.tree.kernel_threads,
        machine: machineMs() - first.machine,
        // Not a part: what pid 1 reaped (orphans, removed containers' shims with their CPU, ours too).
        init_reaped: tree.init_reaped - first.tree.init_reaped,
      };
    },
  };
}
