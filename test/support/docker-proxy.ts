// A TCP proxy on loopback to this host's Docker engine, so a test can take "Docker" away from one
// worker (DOCKER_HOST=tcp://127.0.0.1:PORT) mid-job and give it back, without touching the engine
// that everyone else on the machine uses. With `holdRemovals`, a container's removal (the request
// `DELETE /containers/…`) is held at the proxy until released, so a test can see what a worker does
// while its sandboxes' removals are under way, or kill it before one reaches the engine.
import { createConnection, createServer, type Socket } from "node:net";

export interface DockerProxy {
  /** tcp://127.0.0.1:PORT */
  url: string;
  /** Drops every connection and refuses new ones (ECONNREFUSED), as an engine that went away. */
  cut(): Promise<void>;
  /** Accepts connections again, on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
  /** Container removals held now (their connections paused at the request; a connection closed meanwhile no longer counts). */
  held(): number;
  /** The most removals held at once so far. */
  maxHeld(): number;
  /** Lets the held removals through, and every later one. */
  releaseRemovals(): void;
}

/** The request line of a container's removal (Docker's API: DELETE /v1.xx/containers/ID?force=…). */
const REMOVAL = /^DELETE \/(v[0-9.]+\/)?containers\/[^\s/]+(\?\S*)? HTTP\/1\.[01]\r\n/;

interface Hold {
  chunks: Buffer[];
  ended: boolean;
  upstream: Socket;
}

function engineAddress(): { path: string } | { host: string; port: number } {
  const h = process.env.DOCKER_HOST;
  if (h?.startsWith("tcp://")) {
    const u = new URL(h.replace(/^tcp:/, "http:"));
    return { host: u.hostname, port: Number(u.port || 2375) };
  }
  return { path: h?.startsWith("unix://") ? h.slice("unix://".length) : "/var/run/docker.sock" };
}

export async function startDockerProxy(opts: { holdRemovals?: boolean } = {}): Promise<DockerProxy> {
  const target = engineAddress();
  const sockets = new Set<Socket>();
  let holding = opts.holdRemovals ?? false;
  const holds = new Set<Hold>();
  let maxHeld = 0;
  const flush = (h: Hold) => {
    for (const c of h.chunks) h.upstream.write(c);
    if (h.ended) h.upstream.end();
  };
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
    if (holding) forward(client, upstream);
    else client.pipe(upstream);
    upstream.pipe(client);
  });
  const listen = (port: number) =>
    new Promise<void>((ok, fail) => {
      server.once("error", fail);
      server.listen(port, "127.0.0.1", () => (server.off("error", fail), ok()));
    });
  /** client → upstream by hand: a removal's request (and all after it on that connection) waits while holding. */
  function forward(client: Socket, upstream: Socket) {
    let hold: Hold | undefined;
    client.on("data", (chunk: Buffer) => {
      if (!hold && holding && REMOVAL.test(chunk.toString("latin1", 0, 256))) {
        holds.add((hold = { chunks: [], ended: false, upstream }));
        maxHeld = Math.max(maxHeld, holds.size);
        client.on("close", () => holds.delete(hold!));
      }
      if (hold && holds.has(hold)) return void hold.chunks.push(chunk);
      if (!upstream.write(chunk)) {
        client.pause();
        upstream.once("drain", () => client.resume());
      }
    });
    client.on("end", () => (hold && holds.has(hold) ? (hold.ended = true) : upstream.end()));
  }
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
    held: () => holds.size,
    maxHeld: () => maxHeld,
    releaseRemovals: () => {
      holding = false;
      for (const h of holds) flush(h);
      holds.clear();
    },
  };
}
