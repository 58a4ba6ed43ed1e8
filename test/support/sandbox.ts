// Shared helpers for tests against the real Docker engine. No skipping: a missing engine fails.
import type Docker from "dockerode";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll } from "vitest";
import { docker } from "../../src/backend/docker.js";
import type { BackendKind } from "../../src/backend/index.js";
import { LABEL } from "../../src/backend/owner.js";
import { Sandbox, type SandboxOptions } from "../../src/sandbox/sandbox.js";
import { execIn } from "./backend.js";

/**
 * How long a file waits for its sandbox's removal. The engine goes on removing it either way (the
 * request is sent; the engine finishes it whether or not this process still waits): a busy engine
 * (a gVisor container's removal behind other files' builds and removals on a loaded CI host) once
 * took past the hook's 120 s, after every test of the file had passed.
 */
const REMOVAL_WAIT_MS = 90_000;

/** One sandbox for a test file, destroyed afterwards. */
export function useSandbox(opts: SandboxOptions = {}): () => Sandbox {
  let sb: Sandbox | undefined;
  beforeAll(async () => {
    sb = await Sandbox.create({ labels: { "patchbay.test": "1" }, ...opts });
  });
  afterAll(async () => {
    if (!sb) return;
    const removed = sb.destroy().then(() => true);
    if (!(await Promise.race([removed, sleep(REMOVAL_WAIT_MS, false, { ref: false })])))
      console.error(`sandbox ${sb.name}: its removal still runs after ${REMOVAL_WAIT_MS / 1000} s; left to the engine`);
  });
  return () => {
    if (!sb) throw new Error("sandbox not created (is the Docker engine up? run npm run services)");
    return sb;
  };
}

/**
 * The container of a job, once it exists: by the job's sandbox_ready event when a client is given
 * (a warm pool's sandbox carries no job label), else by its label.
 */
export async function jobContainer(
  jobId: string,
  client?: { watch(id: string): AsyncIterable<{ type: string; container?: string }> },
): Promise<Docker.Container> {
  if (client) {
    for await (const e of client.watch(jobId))
      if (e.type === "sandbox_ready" && e.container) return docker().getContainer(e.container);
    throw new Error(`job ${jobId} ended without a sandbox`);
  }
  for (;;) {
    const [c] = await docker().listContainers({ filters: { label: [`${LABEL.job}=${jobId}`] } });
    if (c) return docker().getContainer(c.Id);
    await sleep(100);
  }
}

/** True while a container or volume of that name exists. */
export async function exists(kind: "container" | "volume", name: string): Promise<boolean> {
  try {
    await (kind === "container" ? docker().getContainer(name).inspect() : docker().getVolume(name).inspect());
    return true;
  } catch {
    return false;
  }
}

/**
 * Prints where a job that runs past `ms` stands (its last events and its sandbox's processes) so a
 * hang seen once under load can be found from the log. Returns the function that disarms it.
 */
export function jobWatchdog(
  label: string,
  events: { type: string; container?: string }[],
  ms: number,
  kind: BackendKind = "docker",
): () => void {
  const t = setTimeout(
    () =>
      void (async () => {
        const ready = events.find((e) => e.type === "sandbox_ready")?.container;
        const ps = "-eo pid,ppid,user,stat,wchan:24,etime,args";
        const top = !ready
          ? "no sandbox yet"
          : kind === "docker"
            ? await docker()
                .getContainer(ready)
                .top({ ps_args: ps })
                .catch((e: Error) => e.message)
            : await execIn(kind, ready, `ps ${ps}`).then(
                (r) => r.output,
                (e: Error) => e.message,
              );
        console.error(
          `${label} still running after ${ms / 1000} s; last events:\n${events
            .slice(-6)
            .map((e) => JSON.stringify(e).slice(0, 400))
            .join("\n")}\nprocesses: ${JSON.stringify(top).slice(0, 4000)}`,
        );
      })(),
    ms,
  );
  return () => clearTimeout(t);
}

/**
 * The limits a sandbox is held to, read from its own cgroups (v1 or v2) as the kernel applies them:
 * the same under Docker and under a rootless Podman (whose own config shows none on cgroup v1,
 * where patchbay's runtime wrapper applies them). `max` reads as Infinity; cpu as a fraction of a core.
 */
export async function cgroupLimits(sb: Sandbox): Promise<{ memory: number; pids: number; cpus: number }> {
  const files = [
    "memory/memory.limit_in_bytes",
    "memory.max",
    "pids/pids.max",
    "pids.max",
    "cpu/cpu.cfs_quota_us",
    "cpu/cpu.cfs_period_us",
    "cpu.max",
  ];
  const script = `for f in ${files.join(" ")}; do [ -r /sys/fs/cgroup/$f ] && echo "$f $(cat /sys/fs/cgroup/$f)"; done; true`;
  const r = await sb.exec(["sh", "-c", script]);
  const v = new Map(
    r.stdout
      .toString()
      .trim()
      .split("\n")
      .map((l) => [l.slice(0, l.indexOf(" ")), l.slice(l.indexOf(" ") + 1)] as const),
  );
  const num = (s: string | undefined) => (s === undefined ? NaN : s === "max" ? Infinity : Number(s));
  const cpuMax = v.get("cpu.max")?.split(" ");
  const cpus = cpuMax
    ? num(cpuMax[0]) / num(cpuMax[1])
    : num(v.get("cpu/cpu.cfs_quota_us")) / num(v.get("cpu/cpu.cfs_period_us"));
  return {
    memory: num(v.get("memory.max") ?? v.get("memory/memory.limit_in_bytes")),
    pids: num(v.get("pids.max") ?? v.get("pids/pids.max")),
    cpus,
  };
}
