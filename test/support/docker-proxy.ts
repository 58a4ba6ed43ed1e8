// A TCP proxy on loopback to this host's Docker engine, so a test can take "Docker" away from one
// worker (DOCKER_HOST=tcp://127.0.0.1:PORT) mid-job and give it back, without touching the engine
// that everyone else on the machine uses.
import { createConnection, createServer, type Socket } from "node:net";

export interface DockerProxy {
  /** tcp://127.0.0.1:PORT */
  url: string;
  /** Drops every connection and refuses new ones (ECONNREFUSED), as an engine that went away. */
  cut(): Promise<void>;
  /** Accepts connections again, on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

function engineAddress(): { path: string } | { host: string; port: number } {
  const h = process.env.DOCKER_HOST;
  if (h?.startsWith("tcp://")) {
    const u = new URL(h.replace(/^tcp:/, "http:"));
    return { host: u.hostname, port: Number(u.port || 2375) };
  }
  return { path: h?.startsWith("unix://") ? h.slice("unix://".length) : "/var/run/docker.sock" };
}

export async function startDockerProxy(): Promise<DockerProxy> {
  const target = engineAddress();
  const sockets = new Set<Socket>();
  // Half-open both ways: an exec's client closes its writing side (stdin's end) and still reads the output.
  const server = createServer({ allowHalfOpen: true }, (client) => {
    const upstream = createConnection({ ...target, allowHalfOpen: true } as never);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {});
    }
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const listen = (port: number) =>
    new Promise<void>((ok, fail) => {
      server.once("error", fail);
      server.listen(port, "127.0.0.1", () => (server.off("error", fail), ok()));
    });
  await listen(0);
  const port = (server.address() as { port: number }).port;
  let listening = true;
  const cut = async () => {
    if (!listening) return;
    listening = false;
    const closed = new Promise<void>((ok) => server.close(() => ok()));
    for (const s of sockets) s.destroy();
    await closed;
  };
  return {
    url: `tcp://127.0.0.1:${port}`,
    cut,
    restore: async () => {
      if (listening) return;
      await listen(port);
      listening = true;
    },
    close: cut,
  };
}
