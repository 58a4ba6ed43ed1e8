// Real Redis topologies for tests: Debian's redis-server and redis-sentinel on free loopback ports
// (TLS with a test CA, an ACL user, a Sentinel trio with a replica, a 3-master cluster).
// Every process started here has a temp dir of its own, is ended by its own pid and its dir
// removed on stop; startup is awaited by polling PING or a state, never by a fixed sleep.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { freePort, removeDir } from "./cluster.js";

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** How long a start or a state may take before the helper gives up with the process's log. */
const STARTUP_MS = 20_000;

// ── test CA ──────────────────────────────────────────────────────────────────────────────────────

export interface TestCA {
  dir: string;
  /** The CA that signs the server and client certs. */
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A second, unrelated CA and a server cert/key signed by it: "untrusted certificate" tests. */
  untrustedCa: string;
  untrustedCert: string;
  untrustedKey: string;
  remove(): void;
}

const openssl = (dir: string, ...args: string[]) => run("openssl", args, { cwd: dir });

async function newCa(dir: string, name: string, cn: string): Promise<void> {
  await openssl(
    dir,
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-days",
    "3",
    "-subj",
    `/CN=${cn}`,
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.crt`,
  );
}

/** A leaf cert/key signed by `ca` (SAN IP:127.0.0.1 and DNS:localhost). */
async function newLeaf(dir: string, name: string, ca: string, cn: string): Promise<void> {
  writeFileSync(join(dir, `${name}.ext`), "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n");
  await openssl(
    dir,
    "req",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-subj",
    `/CN=${cn}`,
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.csr`,
  );
  const serial = `0x${Math.floor(Math.random() * 2 ** 48).toString(16)}`;
  await openssl(
    dir,
    "x509",
    "-req",
    "-in",
    `${name}.csr`,
    "-CA",
    `${ca}.crt`,
    "-CAkey",
    `${ca}.key`,
    "-set_serial",
    serial,
    "-days",
    "3",
    "-extfile",
    `${name}.ext`,
    "-out",
    `${name}.crt`,
  );
}

export async function makeTestCA(): Promise<TestCA> {
  const dir = mkdtempSync(join(tmpdir(), "pb-test-ca-"));
  await newCa(dir, "ca", "patchbay test CA");
  await newLeaf(dir, "server", "ca", "localhost");
  await newLeaf(dir, "client", "ca", "patchbay test client");
  await newCa(dir, "untrusted-ca", "some other CA");
  await newLeaf(dir, "untrusted", "untrusted-ca", "localhost");
  const f = (n: string) => join(dir, n);
  return {
    dir,
    ca: f("ca.crt"),
    serverCert: f("server.crt"),
    serverKey: f("server.key"),
    clientCert: f("client.crt"),
    clientKey: f("client.key"),
    untrustedCa: f("untrusted-ca.crt"),
    untrustedCert: f("untrusted.crt"),
    untrustedKey: f("untrusted.key"),
    remove: () => removeDir(dir),
  };
}

// ── one process ──────────────────────────────────────────────────────────────────────────────────

export interface RedisProc {
  port: number;
  pid: number;
  /** redis://127.0.0.1:port or rediss://127.0.0.1:port, never with credentials. */
  url: string;
  /** Its temp dir (config, log, data). */
  dir: string;
  /** Sends the signal (SIGTERM by default) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Ends it if it still runs and removes its dir. */
  stop(): Promise<void>;
  /** The tail of its log file, for error messages. */
  log(): string;
  /** Whether the process still runs. */
  running(): boolean;
}

export interface TlsOpts {
  cert: string;
  key: string;
  ca: string;
  /** --tls-auth-clients yes: a client must show a cert the CA signed. */
  clientAuth?: boolean;
  /** The cert/key this helper shows when it probes (default: cert/key, which the same CA signed). */
  clientCert?: string;
  clientKey?: string;
}

/** How this helper reaches a process: its own probes and admin commands. */
interface Access {
  tls?: TlsOpts;
  username?: string;
  password?: string;
}

// Processes a crashed test file would leave behind: killed by pid when this process exits.
const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const p of live) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
});

function tail(file: string): string {
  try {
    return readFileSync(file, "utf8").split("\n").slice(-30).join("\n");
  } catch {
    return "(no log)";
  }
}

function spawnProc(bin: string, args: string[], port: number, dir: string, tls: boolean): RedisProc {
  const logFile = join(dir, "redis.log");
  const proc = spawn(bin, args, { stdio: "ignore" });
  live.add(proc);
  const exited = new Promise<void>((r) => proc.once("exit", () => (live.delete(proc), r())));
  const running = () => proc.exitCode === null && proc.signalCode === null;
  const kill = async (signal: NodeJS.Signals = "SIGTERM") => {
    if (running()) proc.kill(signal);
    await exited;
  };
  return {
    port,
    pid: proc.pid!,
    url: `${tls ? "rediss" : "redis"}://127.0.0.1:${port}`,
    dir,
    kill,
    async stop() {
      await kill("SIGTERM");
      removeDir(dir);
    },
    log: () => tail(logFile),
    running,
  };
}

const isRunning = (p: RedisProc) => p.running();

/** True once the port answers PING with any RESP reply (+PONG, or -NOAUTH when auth is on). */
function probe(port: number, tls?: TlsOpts): Promise<boolean> {
  return new Promise((resolve) => {
    const s: Socket = tls
      ? tlsConnect({
          host: "127.0.0.1",
          port,
          ca: readFileSync(tls.ca),
          cert: readFileSync(tls.clientCert ?? tls.cert),
          key: readFileSync(tls.clientKey ?? tls.key),
        })
      : new Socket().connect(port, "127.0.0.1");
    const done = (ok: boolean) => (s.destroy(), resolve(ok));
    s.setTimeout(1000);
    s.once("error", () => done(false));
    s.once("timeout", () => done(false));
    s.once(tls ? "secureConnect" : "connect", () => s.write("PING\r\n"));
    s.once("data", (d: Buffer) => done(/^[+-]/.test(d.toString())));
  });
}

/** Polls `check` until it holds; throws with the process's log when it exits or does not get there. */
async function until(what: string, check: () => Promise<boolean>, procs: RedisProc[], ms = STARTUP_MS): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const dead = procs.find((p) => !isRunning(p));
    if (dead) throw new Error(`redis on ${dead.port} exited while waiting for ${what}:\n${dead.log()}`);
    if (await check().catch(() => false)) return;
    if (Date.now() - t0 > ms)
      throw new Error(`timed out waiting for ${what}:\n${procs.map((p) => `-- ${p.port}:\n${p.log()}`).join("\n")}`);
    await sleep(50);
  }
}

/** One command on a short-lived ioredis connection (no retries: a refusal is an answer). */
export async function ask(port: number, args: string[], access: Access = {}): Promise<unknown> {
  const t = access.tls;
  const r = new Redis({
    host: "127.0.0.1",
    port,
    username: access.username,
    password: access.password,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    connectTimeout: 2000,
    tls: t
      ? { ca: readFileSync(t.ca), cert: readFileSync(t.clientCert ?? t.cert), key: readFileSync(t.clientKey ?? t.key) }
      : undefined,
  });
  r.on("error", () => {}); // the command's own rejection says it
  try {
    await r.connect();
    return await r.call(args[0]!, ...args.slice(1));
  } finally {
    r.disconnect();
  }
}

const info = async (port: number, section: string, access: Access) =>
  String(await ask(port, ["INFO", section], access));
const field = (text: string, name: string) => text.match(new RegExp(`^${name}:(.*?)\\r?$`, "m"))?.[1];

// ── a server ─────────────────────────────────────────────────────────────────────────────────────

export interface ServerOpts {
  tls?: TlsOpts;
  /** An ACL user (rules default to "~* &* +@all"); the `default` user is turned off. */
  acl?: { user: string; password: string; rules?: string };
  requirePass?: string;
  args?: string[];
  /** A port chosen by the caller (a cluster's, whose bus port must be free too). */
  port?: number;
}

const BASE = ["--bind", "127.0.0.1", "--maxmemory-policy", "noeviction", "--save", "", "--appendonly", "no"];

export async function startRedisServer(opts: ServerOpts = {}): Promise<RedisProc> {
  const port = opts.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), "pb-redis-"));
  const args = ["--dir", dir, "--logfile", join(dir, "redis.log"), ...BASE];
  const t = opts.tls;
  if (t) {
    args.push(
      "--port",
      "0",
      "--tls-port",
      String(port),
      "--tls-cert-file",
      t.cert,
      "--tls-key-file",
      t.key,
      "--tls-ca-cert-file",
      t.ca,
      "--tls-auth-clients",
      t.clientAuth ? "yes" : "no",
    );
  } else {
    args.push("--port", String(port));
  }
  if (opts.acl) {
    // ACL rules as a file: the `user` directive is not a command-line option.
    const acl = join(dir, "users.acl");
    writeFileSync(
      acl,
      `user default off\nuser ${opts.acl.user} on >${opts.acl.password} ${opts.acl.rules ?? "~* &* +@all"}\n`,
      { mode: 0o600 },
    );
    args.push("--aclfile", acl);
  }
  if (opts.requirePass) args.push("--requirepass", opts.requirePass, "--masterauth", opts.requirePass);
  args.push(...(opts.args ?? []));
  const proc = spawnProc("redis-server", args, port, dir, !!t);
  try {
    await until(`redis-server on ${port}`, () => probe(port, t), [proc]);
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return proc;
}

// ── Sentinel ─────────────────────────────────────────────────────────────────────────────────────

export interface SentinelGroup {
  masterName: string;
  master: RedisProc;
  replica: RedisProc;
  sentinels: RedisProc[];
  /** redis+sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/<masterName>; with a password redis+sentinel://:PASSWORD@… */
  url: string;
  /** The master's password (sentinels themselves have none), if any. */
  password?: string;
  /** The master's port as a sentinel names it (SENTINEL get-master-addr-by-name). */
  currentMasterPort(): Promise<number>;
  /** The new master's port, once every answering sentinel names another master than fromPort and it answers ROLE as master. */
  waitForFailover(fromPort: number, timeoutMs?: number): Promise<number>;
  stop(): Promise<void>;
}

async function startSentinel(masterName: string, masterPort: number, password?: string): Promise<RedisProc> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "pb-sentinel-"));
  const conf = join(dir, "sentinel.conf"); // sentinel rewrites it: in its own dir
  const lines = [
    `port ${port}`,
    "bind 127.0.0.1",
    `dir ${dir}`,
    `logfile ${join(dir, "redis.log")}`,
    `sentinel monitor ${masterName} 127.0.0.1 ${masterPort} 2`,
    `sentinel down-after-milliseconds ${masterName} 1000`,
    `sentinel failover-timeout ${masterName} 5000`,
    `sentinel parallel-syncs ${masterName} 1`,
    ...(password ? [`sentinel auth-pass ${masterName} ${password}`] : []),
  ];
  writeFileSync(conf, `${lines.join("\n")}\n`, { mode: 0o600 });
  const proc = spawnProc("redis-sentinel", [conf], port, dir, false);
  await until(`redis-sentinel on ${port}`, () => probe(port), [proc]).catch(async (err) => {
    await proc.stop();
    throw err;
  });
  return proc;
}

/** SENTINEL MASTER's flat field/value reply as a record. */
async function sentinelView(port: number, masterName: string): Promise<Record<string, string>> {
  const flat = (await ask(port, ["SENTINEL", "MASTER", masterName])) as string[];
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]!] = flat[i + 1]!;
  return out;
}

export async function startSentinelGroup(
  opts: { masterName?: string; password?: string } = {},
): Promise<SentinelGroup> {
  const masterName = opts.masterName ?? "pbmaster";
  const password = opts.password;
  const access: Access = { password };
  const started: RedisProc[] = [];
  const stopAll = async () => {
    for (const p of started.reverse()) await p.stop();
  };
  try {
    const master = await startRedisServer({ requirePass: password });
    started.push(master);
    const replica = await startRedisServer({
      requirePass: password,
      args: ["--replicaof", "127.0.0.1", String(master.port)],
    });
    started.push(replica);
    await until(
      `replica ${replica.port} in sync`,
      async () => field(await info(replica.port, "replication", access), "master_link_status") === "up",
      [master, replica],
    );
    // Started after the sync, so a sentinel's first INFO of the master already lists the replica.
    const sentinels: RedisProc[] = [];
    for (let i = 0; i < 3; i++) {
      const s = await startSentinel(masterName, master.port, password);
      started.push(s);
      sentinels.push(s);
    }
    for (const s of sentinels) {
      await until(
        `sentinel ${s.port} to see the master, 1 replica and 2 other sentinels`,
        async () => {
          const v = await sentinelView(s.port, masterName);
          return v["port"] === String(master.port) && v["num-slaves"] === "1" && v["num-other-sentinels"] === "2";
        },
        [...started],
      );
    }
    const cred = password ? `:${encodeURIComponent(password)}@` : "";
    const group: SentinelGroup = {
      masterName,
      master,
      replica,
      sentinels,
      password,
      url: `redis+sentinel://${cred}${sentinels.map((s) => `127.0.0.1:${s.port}`).join(",")}/${masterName}`,
      currentMasterPort: () => masterPortFrom(sentinels, masterName),
      waitForFailover: (fromPort, timeoutMs = 30_000) => failover(sentinels, masterName, fromPort, access, timeoutMs),
      stop: stopAll,
    };
    return group;
  } catch (err) {
    await stopAll();
    throw err;
  }
}

async function masterPortFrom(sentinels: RedisProc[], masterName: string): Promise<number> {
  let last: unknown;
  for (const s of sentinels) {
    try {
      const addr = (await ask(s.port, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName])) as [string, string] | null;
      if (addr) return Number(addr[1]);
    } catch (err) {
      last = err; // a sentinel the test killed: ask the next
    }
  }
  throw new Error(`no sentinel names a master ${masterName}: ${String(last)}`);
}

async function failover(
  sentinels: RedisProc[],
  masterName: string,
  fromPort: number,
  access: Access,
  timeoutMs: number,
): Promise<number> {
  let found = 0;
  const alive = sentinels.filter(isRunning);
  await until(
    `a failover away from ${fromPort}`,
    async () => {
      const ports = new Set<number>();
      for (const s of alive) {
        const addr = (await ask(s.port, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName])) as
          [string, string] | null;
        ports.add(addr ? Number(addr[1]) : fromPort);
      }
      const [port] = [...ports];
      if (ports.size !== 1 || port === fromPort) return false;
      const role = (await ask(port!, ["ROLE"], access)) as [string, ...unknown[]];
      found = port!;
      return role[0] === "master";
    },
    alive,
    timeoutMs,
  );
  return found;
}

// ── Cluster ──────────────────────────────────────────────────────────────────────────────────────

export interface RedisClusterProc {
  nodes: RedisProc[];
  /** redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3 (with a password: redis+cluster://:PASSWORD@…) */
  url: string;
  password?: string;
  stop(): Promise<void>;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

/** A free port whose cluster bus port (port + 10000) is free and valid too. */
async function clusterPort(taken: Set<number>): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (p + 10000 < 65536 && !taken.has(p) && !taken.has(p + 10000) && (await portFree(p + 10000))) return p;
  }
}

export async function startRedisCluster(opts: { masters?: number; password?: string } = {}): Promise<RedisClusterProc> {
  const n = opts.masters ?? 3;
  const password = opts.password;
  const nodes: RedisProc[] = [];
  const stop = async () => {
    for (const p of nodes) await p.stop();
  };
  try {
    const taken = new Set<number>();
    for (let i = 0; i < n; i++) {
      const port = await clusterPort(taken);
      taken.add(port).add(port + 10000);
      // --dir comes first and Redis chdirs there: the relative nodes.conf is in the node's own dir.
      nodes.push(
        await startRedisServer({
          port,
          requirePass: password,
          args: ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"],
        }),
      );
    }
    const auth = password ? ["-a", password, "--no-auth-warning"] : [];
    await run("redis-cli", [
      "--cluster",
      "create",
      ...nodes.map((p) => `127.0.0.1:${p.port}`),
      "--cluster-replicas",
      "0",
      "--cluster-yes",
      ...auth,
    ]);
    for (const node of nodes) {
      await until(
        `cluster_state:ok on ${node.port}`,
        async () => {
          const text = String(await ask(node.port, ["CLUSTER", "INFO"], { password }));
          return (
            field(text, "cluster_state") === "ok" &&
            field(text, "cluster_known_nodes") === String(n) &&
            field(text, "cluster_slots_assigned") === "16384"
          );
        },
        nodes,
      );
    }
    const cred = password ? `:${encodeURIComponent(password)}@` : "";
    return {
      nodes,
      password,
      url: `redis+cluster://${cred}${nodes.map((p) => `127.0.0.1:${p.port}`).join(",")}`,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
