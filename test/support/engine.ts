// A second Docker engine on this machine, standing in for another host (scripts/engine.sh does the
// work: its own dockerd, data-root, exec-root, pidfile, socket, containerd and cgroup parent). Tests
// point a worker at it with DOCKER_HOST. It never touches the main engine beyond reading the image.
import Docker from "dockerode";
import { execFile } from "node:child_process";

const SCRIPT = new URL("../../scripts/engine.sh", import.meta.url).pathname;

function run(args: string[], env: Record<string, string> = {}, timeoutMs = 180_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      "bash",
      [SCRIPT, ...args],
      { env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 1 << 20 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`scripts/engine.sh ${args.join(" ")}: ${err.message}\n${stderr}`));
        else resolve(stdout);
      },
    );
  });
}

export interface Engine {
  name: string;
  /** DOCKER_HOST for a process that should use this engine. */
  host: string;
  socketPath: string;
  /** With `tlsPort`: the engine also listens there with TLS and client certificates, as a remote engine would. */
  tls?: { host: string; certPath: string };
  /** A dockerode client of this engine (not the process-wide one). */
  docker: Docker;
  /** Starts it if it is not running (idempotent). */
  start(): Promise<void>;
  /** A clean shutdown: dockerd stops its containers. */
  stop(): Promise<void>;
  /** The whole host dies: SIGKILL to dockerd, containerd, shims and container processes; mounts and exec-root cleared as by a reboot. */
  kill(): Promise<void>;
  /** kill() then start(): a host that crashed and came back. */
  restart(): Promise<void>;
  /** Copies the image from the main engine unless this engine has the same image id already. */
  loadImage(image?: string): Promise<void>;
  running(): Promise<boolean>;
}

/** Starts (or reuses) the engine NAME; its data-root persists, so a loaded image stays cached. */
export async function startEngine(name: string, opts: { tlsPort?: number } = {}): Promise<Engine> {
  const socketPath = `/var/run/patchbay-engines/${name}/docker.sock`;
  const env: Record<string, string> = opts.tlsPort ? { ENGINE_TLS_PORT: String(opts.tlsPort) } : {};
  const e: Engine = {
    name,
    host: `unix://${socketPath}`,
    socketPath,
    ...(opts.tlsPort
      ? { tls: { host: `tcp://127.0.0.1:${opts.tlsPort}`, certPath: `/var/lib/patchbay-engines/${name}/tls` } }
      : {}),
    docker: new Docker({ socketPath }),
    start: async () => void (await run(["start", name], env)),
    stop: async () => void (await run(["stop", name])),
    kill: async () => void (await run(["kill", name])),
    restart: async () => (await e.kill(), await e.start()),
    loadImage: async (image) => void (await run(["load-image", name, ...(image ? [image] : [])])),
    running: async () => (await run(["status", name])).startsWith("running"),
  };
  await e.start();
  return e;
}
